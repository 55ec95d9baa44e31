"""The engine from Python: envforge.Tokenizer against the reference tokenizer script."""
import json
import subprocess
import sys
import threading
import time

import pytest

import envforge
from conftest import SOURCE_DIR

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
