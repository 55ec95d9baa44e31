"""A byte-level BPE tokenizer in DeepSeek-V3's structure, trained on a corpus.

The structure is scripts/make_tiny_tokenizer.py's (the same pre-tokenizer patterns, byte
alphabet, special tokens and tokenizer.json layout, imported from there); what changes is that
the merges are learned from the given texts and the vocabulary size is chosen by the caller.

Id layout: 0 BOS, 1 EOS, 2..257 the 256 byte tokens, then the merges in order, then
<｜User｜>, <｜Assistant｜>, <think>, </think>.

Training: special-token strings split the text (they are never merged with their neighbours),
the rest is pre-tokenized, and pairs are merged by count (ties by the pair's text, so the result is
a pure function of the corpus). `split_digits` keeps every digit its own token: numbers then
read as digit strings, which a small model can compare and copy without learning one embedding per
number. Merges stop at the target size or when the best pair occurs fewer than `min_count`
times (a one-off string gains nothing from its own token).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import make_tiny_tokenizer as tiny  # noqa: E402  (scripts/ is not a package)

BOS = tiny.BOS
EOS = tiny.EOS
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK = "<think>"
THINK_END = "</think>"
SPECIAL_STRINGS = [BOS, EOS] + [content for content, _ in tiny.TRAILING_ADDED_TOKENS]


def split_special(text):
    """[(piece, is_special)] with the special-token strings as their own pieces (longest first)."""
    out = []
    i = 0
    start = 0
    ordered = sorted(SPECIAL_STRINGS, key=len, reverse=True)
    while i < len(text):
        if text[i] == "<":
            match = next((s for s in ordered if text.startswith(s, i)), None)
            if match is not None:
                if i > start:
                    out.append((text[start:i], False))
                out.append((match, True))
                i += len(match)
                start = i
                continue
        i += 1
    if start < len(text):
        out.append((text[start:], False))
    return out


def bpe_corpus(texts):
    """The texts BPE is trained on: every distinct system prompt (the text before the first
    <｜User｜>) once, then each text from its first <｜User｜> on. The system prompt and tools
    block open every transcript; counted once per transcript they would take most of the merges
    (a prefix the model never generates and training computes once per batch), leaving the
    names, values and markup of the turns split into many small pieces."""
    prefixes, out = set(), []
    for text in texts:
        cut = text.find(USER)
        if cut <= 0:
            out.append(text)
            continue
        if text[:cut] not in prefixes:
            prefixes.add(text[:cut])
            out.append(text[:cut])
        out.append(text[cut:])
    return out


def _is_digit_symbol(symbol):
    return all(c.isdigit() for c in symbol)


def train_bpe(texts, vocab_size, min_count=2, split_digits=True):
    """(vocab {token: id}, merges [(a, b)]) learned from texts; vocab_size counts every id."""
    word_counts = {}
    for text in texts:
        for piece, special in split_special(text):
            if special:
                continue
            for word in tiny.pre_tokenize(piece):
                word_counts[word] = word_counts.get(word, 0) + 1
    words = []  # [symbols list, count]
    for word in sorted(word_counts):
        words.append([list(tiny._byte_level(word)), word_counts[word]])

    vocab = {BOS: 0, EOS: 1}
    for b in range(256):
        vocab[tiny.BYTE_CHARS[b]] = 2 + b
    target = vocab_size - len(tiny.TRAILING_ADDED_TOKENS)

    def mergeable(a, b):
        return not (split_digits and (_is_digit_symbol(a) or _is_digit_symbol(b)))

    # Pair counts and, per pair, the words it occurs in (updated incrementally per merge).
    pair_counts = {}
    pair_words = {}
    for index, (symbols, count) in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            if mergeable(*pair):
                pair_counts[pair] = pair_counts.get(pair, 0) + count
                pair_words.setdefault(pair, set()).add(index)

    merges = []
    while len(vocab) < target and pair_counts:
        best = min(pair_counts, key=lambda p: (-pair_counts[p], p))
        if pair_counts[best] < min_count:
            break
        merges.append(best)
        merged = best[0] + best[1]
        if merged not in vocab:
            vocab[merged] = len(vocab)
        for index in sorted(pair_words.pop(best, ())):
            symbols, count = words[index]
            for pair in zip(symbols, symbols[1:]):  # retract this word's pairs
                if pair in pair_counts:
                    pair_counts[pair] -= count
                    if pair_counts[pair] <= 0:
                        del pair_counts[pair]
            out = []
            i = 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == best[0] and symbols[i + 1] == best[1]:
                    out.append(merged)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            words[index][0] = out
            for pair in zip(out, out[1:]):
                if mergeable(*pair):
                    pair_counts[pair] = pair_counts.get(pair, 0) + count
                    pair_words.setdefault(pair, set()).add(index)
        pair_counts.pop(best, None)
    for content, _ in tiny.TRAILING_ADDED_TOKENS:
        vocab[content] = len(vocab)
    return vocab, merges


class Tokenizer:
    """Encoder of a trained vocabulary: added tokens first, then pre-tokens through BPE (cached)."""

    def __init__(self, vocab, merges):
        self.vocab = dict(vocab)
        self.merges = [tuple(m) for m in merges]
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.byte_decoder = {c: b for b, c in tiny.BYTE_CHARS.items()}
        self._cache = {}

    @classmethod
    def load(cls, path):
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.json")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        vocab = dict(data["model"]["vocab"])
        for added in data["added_tokens"]:
            vocab[added["content"]] = added["id"]
        merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in data["model"]["merges"]]
        return cls(vocab, merges)

    @property
    def vocab_size(self):
        return max(self.vocab.values()) + 1

    def token_id(self, text):
        return self.vocab[text]

    def _word_ids(self, word):
        ids = self._cache.get(word)
        if ids is None:
            ids = tiny.bpe(word, self.vocab, self.ranks)
            self._cache[word] = ids
        return ids

    def encode(self, text):
        ids = []
        for piece, special in split_special(text):
            if special:
                ids.append(self.vocab[piece])
                continue
            for word in tiny.pre_tokenize(piece):
                ids.extend(self._word_ids(word))
        return ids

    def token_bytes(self, token_id):
        """The UTF-8 bytes token_id stands for."""
        token = self.id_to_token.get(int(token_id), "")
        if token in SPECIAL_STRINGS:
            return token.encode("utf-8")
        return bytes(self.byte_decoder[c] for c in token)

    def decode(self, ids):
        data = bytearray()
        for i in ids:
            token = self.id_to_token.get(int(i), "")
            if token in SPECIAL_STRINGS:
                data.extend(token.encode("utf-8"))
            else:
                data.extend(self.byte_decoder[c] for c in token)
        return data.decode("utf-8", errors="replace")


def tokenizer_json(vocab, merges):
    """(tokenizer.json text, tokenizer_config.json text) in make_tiny_tokenizer's layout."""
    tokenizer, config = tiny.build_documents(vocab, merges)
    dump = lambda obj: json.dumps(obj, ensure_ascii=False, indent=2) + "\n"  # noqa: E731
    return dump(tokenizer), dump(config)


def write_tokenizer(out_dir, vocab, merges):
    tokenizer_text, config_text = tokenizer_json(vocab, merges)
    os.makedirs(out_dir, exist_ok=True)
    for name, text in (("tokenizer.json", tokenizer_text), ("tokenizer_config.json", config_text)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
