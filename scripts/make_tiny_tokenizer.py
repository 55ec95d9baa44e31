#!/usr/bin/python3
"""Trains a tiny byte-level BPE tokenizer and writes it in Hugging Face format.

The result has DeepSeek-V3's tokenizer structure (the same three Split pre-tokenizer patterns
followed by ByteLevel without regex, a ByteLevel decoder, the DeepSeek special tokens) but only
1024 ids, so tests and the tiny model can use a real tokenizer without downloading one.

Everything is deterministic: the corpus is embedded, ties between equally frequent pairs are broken
by the pair's text, and the JSON is written in a fixed order. Running the script twice gives
identical bytes.

Usage:
  python3 scripts/make_tiny_tokenizer.py --out DIR      writes DIR/tokenizer.json and
                                                        DIR/tokenizer_config.json
  python3 scripts/make_tiny_tokenizer.py --encode TEXT  prints the ids of TEXT (reference encoder,
                                                        used to derive test expectations)
As a module: write_tokenizer(out_dir) -> vocab_size.

Id layout: 0 BOS, 1 EOS, 2..257 the 256 byte tokens (byte b has id 2 + b), 258..1019 merged
tokens in merge order, 1020..1023 <｜User｜>, <｜Assistant｜>, <think>, </think>.
"""

import argparse
import json
import os
import re
import sys
import unicodedata

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
TRAILING_ADDED_TOKENS = [
    # (content, special). <think>/</think> are not special so that decoding with skip_special keeps
    # them, as DeepSeek's own tokenizer does.
    ("<｜User｜>", True),
    ("<｜Assistant｜>", True),
    ("<think>", False),
    ("</think>", False),
]
VOCAB_SIZE = 1024

# DeepSeek-V3's pre-tokenizer: three Split(Isolated) patterns applied in sequence, then ByteLevel
# without its own regex. The strings are the regex texts exactly as tokenizer.json holds them
# (the \r and \n in the third one are literal control characters there, not escapes).
SPLIT_PATTERNS = [
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
]

CORPUS = r'''
The quick brown fox jumps over the lazy dog. The dog does not mind; it is a very lazy dog.
In the beginning there was the byte, and the byte was merged into tokens. Tokens are the units a
language model reads and writes. A tokenizer turns text into a list of integer ids and back again.
We're testing what happens when it's late, they've gone home, and I'll write the tests myself.
Numbers like 1234567, 2026, 3.14159 and 42 are split into groups of at most three digits.
She said: "Hello, world!" -- and then she left. Why? Nobody knows... (maybe the weather).
The server listens on port 8080 and returns a JSON object with the status of the request.
Each environment has a task, a set of tools, and a verifier that checks the final state.
The agent calls a tool, reads the result, thinks about the next step, and calls another tool.
When the task is done, the verifier runs the tests and reports whether the agent succeeded.

def tokenize(text: str) -> list[int]:
    """Returns the ids of the text."""
    ids = []
    for piece in pre_tokenize(text):
        ids.extend(bpe(piece))
    return ids

class Environment:
    def __init__(self, name, tools=None):
        self.name = name
        self.tools = tools or []

    def reset(self):
        return {"observation": "", "done": False}

for (int i = 0; i < n; ++i) {
  if (values[i] > max_value) {
    max_value = values[i];
  }
}
std::vector<int32_t> ids = tokenizer->Encode(text, /*parse_special=*/true);
return Status::InvalidArgument("tokenizer.json: model.type: unsupported");

{"name": "read_file", "description": "Read a file from the workspace", "parameters": {"type":
"object", "properties": {"path": {"type": "string", "description": "The path of the file"}},
"required": ["path"]}}
{"id": 17, "user": "alice", "email": "alice@example.com", "active": true, "score": 98.5}
{"id": 18, "user": "bob", "email": "bob@example.com", "active": false, "score": null}
[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 1000, 10000]

$ ls -la /tmp && cat README.md | grep -n "install"
$ python3 -m pytest tests/ -q
error: expected ';' after expression
warning: unused variable 'result'

<｜User｜>What is the weather in Paris today?<｜Assistant｜><think>The user wants the weather. I
should call the weather tool with the city Paris.</think>

<｜DSML｜function_calls>
<｜DSML｜invoke name="get_weather">
<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
<｜DSML｜parameter name="days" string="false">1</｜DSML｜parameter>
</｜DSML｜invoke>
</｜DSML｜function_calls><｜end▁of▁sentence｜>

<function_results>
<result>{"temperature": 21, "condition": "sunny"}</result>
</function_results>

It is sunny in Paris today, with a temperature of 21 degrees.
The weather is nice, so it is a good day to walk along the river and read a book in the park.
Questions and answers: what, where, when, which, who, why, how. Yes, no, maybe, always, never.
Café, naïve, résumé, Straße, Ελληνικά, русский, 中文分词, 日本語のテキスト, 한국어, 🙂 emoji.
'''


def _category_ranges(predicate):
    """Code point ranges [lo, hi] for which predicate(code point) holds."""
    ranges = []
    start = None
    for cp in range(0x110000 + 1):
        inside = cp < 0x110000 and predicate(cp)
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            ranges.append((start, cp - 1))
            start = None
    return ranges


def _is_white_space(cp):
    # Oniguruma's Unicode \s: TAB..CR, NEL and the separator categories (Zs, Zl, Zp).
    return 0x09 <= cp <= 0x0D or cp == 0x85 or unicodedata.category(chr(cp)) in ("Zs", "Zl", "Zp")


_CLASS_BODY_CACHE = {}


def _class_body(name):
    """The body (no brackets) of a Python re character class for \\p{name} or \\s."""
    if name not in _CLASS_BODY_CACHE:
        if name == "s":
            ranges = _category_ranges(_is_white_space)
        else:
            ranges = _category_ranges(lambda cp: unicodedata.category(chr(cp)).startswith(name))
        _CLASS_BODY_CACHE[name] = "".join(
            "\\U%08x" % lo if lo == hi else "\\U%08x-\\U%08x" % (lo, hi) for lo, hi in ranges)
    return _CLASS_BODY_CACHE[name]


def _to_python_regex(pattern):
    """Rewrites the \\p{X}, \\s and \\S of the DeepSeek patterns into explicit Python classes.

    Python's re has the same leftmost-first backtracking semantics as Oniguruma for the constructs
    these patterns use; only the Unicode classes need spelling out (Python's \\s also matches
    U+001C..U+001F, Oniguruma's does not).
    """
    out = []
    in_class = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt == "p" and pattern[i + 2] == "{":
                end = pattern.index("}", i)
                body = _class_body(pattern[i + 3:end])
                out.append(body if in_class else "[" + body + "]")
                i = end + 1
                continue
            if nxt == "s":
                out.append(_class_body("s") if in_class else "[" + _class_body("s") + "]")
                i += 2
                continue
            if nxt == "S":
                assert not in_class, "\\S inside a class is not used by the DeepSeek patterns"
                out.append("[^" + _class_body("s") + "]")
                i += 2
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            # A leading ^ or ] belongs to the class syntax, not its end.
            if pattern[i + 1] == "^":
                out.append("^")
                i += 1
            i += 1
            continue
        if c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


_COMPILED = None


def _compiled_patterns():
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = [re.compile(_to_python_regex(p)) for p in SPLIT_PATTERNS]
    return _COMPILED


def pre_tokenize(text):
    """Splits text the way the Sequence of Split(Isolated) pre-tokenizers does."""
    pieces = [text]
    for regex in _compiled_patterns():
        next_pieces = []
        for piece in pieces:
            last = 0
            for m in regex.finditer(piece):
                if m.start() > last:
                    next_pieces.append(piece[last:m.start()])
                if m.end() > m.start():
                    next_pieces.append(m.group())
                last = m.end()
            if last < len(piece):
                next_pieces.append(piece[last:])
        pieces = next_pieces
    return pieces


def bytes_to_unicode():
    """GPT-2's byte alphabet: printable Latin-1 bytes map to themselves, the rest to U+0100 up."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
                 list(range(ord("®"), ord("ÿ") + 1)))
    mapping = {}
    extra = 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


BYTE_CHARS = bytes_to_unicode()


def _byte_level(piece):
    return "".join(BYTE_CHARS[b] for b in piece.encode("utf-8"))


def train():
    """Returns (vocab dict token -> id, merges list of (a, b)) learned from CORPUS."""
    vocab = {BOS: 0, EOS: 1}
    for b in range(256):
        vocab[BYTE_CHARS[b]] = 2 + b
    word_counts = {}
    for piece in pre_tokenize(CORPUS):
        word = tuple(_byte_level(piece))
        word_counts[word] = word_counts.get(word, 0) + 1
    words = sorted(word_counts.items())
    merges = []
    target = VOCAB_SIZE - len(TRAILING_ADDED_TOKENS)
    while len(vocab) < target:
        pair_counts = {}
        for word, count in words:
            for pair in zip(word, word[1:]):
                pair_counts[pair] = pair_counts.get(pair, 0) + count
        if not pair_counts:
            raise RuntimeError("corpus too small for %d tokens" % target)
        best = min(pair_counts, key=lambda p: (-pair_counts[p], p))
        merges.append(best)
        merged = best[0] + best[1]
        if merged not in vocab:
            vocab[merged] = len(vocab)
        new_words = []
        for word, count in words:
            out = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words.append((tuple(out), count))
        words = new_words
    return vocab, merges


def bpe(piece, vocab, ranks):
    """Ids of one pre-token: repeatedly merges the lowest-ranked adjacent pair (leftmost first)."""
    symbols = list(_byte_level(piece))
    while len(symbols) > 1:
        best_index = None
        best_rank = None
        for i in range(len(symbols) - 1):
            rank = ranks.get((symbols[i], symbols[i + 1]))
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank = rank
                best_index = i
        if best_index is None:
            break
        symbols[best_index:best_index + 2] = [symbols[best_index] + symbols[best_index + 1]]
    return [vocab[s] for s in symbols]


def encode(text, vocab, merges):
    """Reference encoder for ordinary text (no added-token matching)."""
    ranks = {pair: rank for rank, pair in enumerate(merges)}
    ids = []
    for piece in pre_tokenize(text):
        ids.extend(bpe(piece, vocab, ranks))
    return ids


def _added_token(token_id, content, special):
    return {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": special,
    }


def build_json():
    """Returns (tokenizer.json text, tokenizer_config.json text, vocab size)."""
    vocab, merges = train()
    for content, _ in TRAILING_ADDED_TOKENS:
        vocab[content] = len(vocab)
    tokenizer, config = build_documents(vocab, merges)
    dump = lambda obj: json.dumps(obj, ensure_ascii=False, indent=2) + "\n"
    return dump(tokenizer), dump(config), len(vocab)


def build_documents(vocab, merges):
    """(tokenizer.json, tokenizer_config.json) objects for a vocab (BOS 0, EOS 1, the trailing
    added tokens included) and its merges (pairs). Also used by scripts/policy/tokenizer.py."""
    added = [_added_token(0, BOS, True), _added_token(1, EOS, True)]
    for content, special in TRAILING_ADDED_TOKENS:
        added.append(_added_token(vocab[content], content, special))
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": []},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False}
                for p in SPLIT_PATTERNS
            ] + [{"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": False}],
        },
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": vocab,
            "merges": ["%s %s" % pair for pair in merges],
        },
    }
    config = {
        "add_bos_token": False,
        "add_eos_token": False,
        "bos_token": {"__type": "AddedToken", "content": BOS, "lstrip": False,
                      "normalized": True, "rstrip": False, "single_word": False},
        "clean_up_tokenization_spaces": False,
        "eos_token": {"__type": "AddedToken", "content": EOS, "lstrip": False,
                      "normalized": True, "rstrip": False, "single_word": False},
        "legacy": True,
        "model_max_length": 131072,
        "pad_token": {"__type": "AddedToken", "content": EOS, "lstrip": False,
                      "normalized": True, "rstrip": False, "single_word": False},
        "sp_model_kwargs": {},
        "unk_token": None,
        "tokenizer_class": "LlamaTokenizerFast",
    }
    return tokenizer, config


def write_tokenizer(out_dir):
    """Writes out_dir/tokenizer.json and out_dir/tokenizer_config.json; returns the vocab size."""
    tokenizer_text, config_text, vocab_size = build_json()
    os.makedirs(out_dir, exist_ok=True)
    for name, text in (("tokenizer.json", tokenizer_text), ("tokenizer_config.json", config_text)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    return vocab_size


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="directory to write tokenizer.json and tokenizer_config.json")
    group.add_argument("--encode", help="print the ids of this text (no special tokens)")
    group.add_argument("--pre-tokenize", dest="pre_tokenize",
                       help="print the pre-tokens of this text as a JSON list")
    args = parser.parse_args()
    if args.out:
        vocab_size = write_tokenizer(args.out)
        print("wrote %s (vocab size %d)" % (args.out, vocab_size))
    elif args.encode is not None:
        vocab, merges = train()
        print(json.dumps(encode(args.encode, vocab, merges)))
    else:
        print(json.dumps(pre_tokenize(args.pre_tokenize), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
