"""The engine from Python: envforge.Tokenizer against the reference tokenizer script, and
envforge.model_logits against the engine's own generation path (`envforge generate`)."""
import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import envforge
from conftest import ENVFORGE, SOURCE_DIR

SCRIPTS = SOURCE_DIR / "scripts"
BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
TEXTS = [
    "Hello, world! The server listens on port 8080 and returns 1234567 items.",
    "We're testing what happens when it's late -- they've gone home.\n\n  indented\tand tabbed\r\n",
    '{"hotel": "Grand Suzhou", "price": 412.5, "rating": 4.7, "tags": ["quiet", "central"]}',
    "中文和日本語のテキスト, émigré café, 🙂🚀 and a lone combining mark e\u0301.",
    "",
]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tokenizer")
    subprocess.run(["/usr/bin/python3", str(SCRIPTS / "make_tiny_tokenizer.py"), "--out", str(directory)], check=True,
                   capture_output=True)
    return directory


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny")
    subprocess.run(["/usr/bin/python3", str(SCRIPTS / "make_tiny_model.py"), "--out", str(directory), "--preset", "tiny",
                    "--dtype", "fp32"], check=True, capture_output=True)
    return directory


def test_tokenizer_matches_the_reference_encoder(tokenizer_dir):
    tokenizer = envforge.Tokenizer(str(tokenizer_dir))
    reference = subprocess.run(["/usr/bin/python3", str(SCRIPTS / "make_tiny_tokenizer.py"), "--encode", TEXTS[0]],
                               check=True, capture_output=True, text=True)
    assert tokenizer.encode(TEXTS[0]) == json.loads(reference.stdout)
    # The rest through the functions --encode calls (training the reference once).
    sys.path.insert(0, str(SCRIPTS))
    try:
        import make_tiny_tokenizer
    finally:
        sys.path.pop(0)
    vocab, merges = make_tiny_tokenizer.train()
    for text in TEXTS:
        assert tokenizer.encode(text) == make_tiny_tokenizer.encode(text, vocab, merges), text


def test_tokenizer_round_trips_and_special_tokens(tokenizer_dir):
    tokenizer = envforge.Tokenizer(str(tokenizer_dir / "tokenizer.json"))  # the file itself works too
    assert tokenizer.vocab_size == 1024
    assert (tokenizer.bos_id, tokenizer.eos_id) == (0, 1)
    assert tokenizer.token_to_id(BOS) == 0 and tokenizer.token_to_id("<｜User｜>") == 1020
    assert tokenizer.token_to_id("no such token") is None
    for text in TEXTS:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    turn = BOS + "<｜User｜>hi<｜Assistant｜></think>Hello!" + EOS
    ids = tokenizer.encode(turn)
    assert ids[0] == 0 and ids[-1] == 1 and 1020 in ids and 1021 in ids
    assert tokenizer.decode(ids) == turn
    assert tokenizer.decode(ids, skip_special=True) == "hi</think>Hello!"  # <think> tokens are not special
    plain = tokenizer.encode(turn, parse_special=False)
    assert 0 not in plain and 1 not in plain and tokenizer.decode(plain) == turn
    # A cut inside a character decodes to U+FFFD instead of failing.
    euro = tokenizer.encode("€")  # three byte tokens in this small vocabulary
    assert len(euro) == 3 and tokenizer.decode(euro[:1]) == "\ufffd" and tokenizer.decode(euro) == "€"


def test_tokenizer_bad_paths_raise_value_error(tmp_path):
    with pytest.raises(ValueError, match="no file .*missing"):
        envforge.Tokenizer(str(tmp_path / "missing"))
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError):
        envforge.Tokenizer(str(tmp_path))


def test_tokenizer_encodes_large_texts_fast_from_threads(tokenizer_dir):
    tokenizer = envforge.Tokenizer(str(tokenizer_dir))
    text = "\n".join(BOS + TEXTS[i % 4] + EOS for i in range(20000))  # ~0.5M tokens
    started = time.time()
    expected = tokenizer.encode(text)
    single = time.time() - started
    assert len(expected) > 400000
    # The requirement is 5M tokens in under a minute; this is ten times looser per token.
    assert single < 60 * len(expected) / 5e6 * 10, single
    results = [None] * 4

    def encode(index):
        results[index] = tokenizer.encode(text)

    threads = [threading.Thread(target=encode, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(result == expected for result in results)


def log_softmax(row):
    row = row.astype(np.float64) - row.max()
    return row - np.log(np.exp(row).sum())


def generate(model_dir, tokens, max_tokens, temperature, seed=0):
    shown = subprocess.run([str(ENVFORGE), "generate", "--model", str(model_dir), "--prompt-tokens",
                            ",".join(map(str, tokens)), "--max-tokens", str(max_tokens), "--temperature",
                            str(temperature), "--seed", str(seed), "--json"], check=True, capture_output=True, text=True)
    return json.loads(shown.stdout)["samples"][0]


PROMPT = [0] + [5 + (7 * i) % 900 for i in range(40)]  # BOS + 40 tokens: past index_topk (16)


def test_model_logits_shape_and_the_generate_path(tiny_model):
    logits = envforge.model_logits(str(tiny_model), PROMPT)
    assert logits.shape == (len(PROMPT), 1024) and logits.dtype == np.float32
    assert np.isfinite(logits).all()
    # Greedy generation takes the argmax of the last row.
    greedy = generate(tiny_model, PROMPT, 1, 0)
    assert greedy["tokens"] == [int(np.argmax(logits[-1]))]
    # Sampling at temperature 1 reports log softmax of the rows: the last row for the first token,
    # the rows of the prompt + generated tokens (decode steps there) for the next ones.
    sampled = generate(tiny_model, PROMPT, 3, 1, seed=5)
    tokens = sampled["tokens"]
    rows = envforge.model_logits(str(tiny_model), PROMPT + tokens[:-1])[len(PROMPT) - 1:]
    expected = [log_softmax(row)[token] for row, token in zip(rows, tokens)]
    assert sampled["logprobs"] == pytest.approx(expected, abs=1e-4)
    # Every row is the last row of the prefix it ends (causality).
    prefix = envforge.model_logits(str(tiny_model), PROMPT[:10])
    np.testing.assert_allclose(prefix, logits[:10], rtol=0, atol=1e-4)


def test_model_logits_dense_equals_dsa_below_index_topk(tiny_model):
    sparse = envforge.model_logits(str(tiny_model), PROMPT)
    dense = envforge.model_logits(str(tiny_model), PROMPT, dense=True)
    # index_topk is 16: up to 16 keys DSA selects every causal key, so it is dense attention.
    np.testing.assert_allclose(sparse[:16], dense[:16], rtol=0, atol=1e-4)
    assert np.abs(sparse[16:] - dense[16:]).max() > 1e-2  # past it the selection matters
    # A numpy array of ids works as a list does (a shorter prefill: same values up to rounding).
    np.testing.assert_allclose(envforge.model_logits(str(tiny_model), np.array(PROMPT[:5])), sparse[:5], rtol=0, atol=1e-4)


def test_model_logits_bad_input_raises_value_error(tiny_model, tmp_path):
    with pytest.raises(ValueError, match="tokens is empty"):
        envforge.model_logits(str(tiny_model), [])
    with pytest.raises(ValueError, match=r"token id 1024 outside \[0, 1024\)"):
        envforge.model_logits(str(tiny_model), [0, 1024])
    with pytest.raises(ValueError, match="config.json"):
        envforge.model_logits(str(tmp_path), [0])
