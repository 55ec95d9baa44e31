"""Helpers shared by the procedural category generators (cat_*.py). Standard library only.

Nothing here is imported by the generated environments: verifiers, oracles, solutions and tools
run in the sandbox and may import only pure standard-library modules, so the source snippets
below (ANSWER_ENVELOPE) are pasted into them as text.
"""

import json
import random

# Syllables for made-up names: no real place or brand, so a model has to read them, and no two
# seeds share a world.
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "tr",
           "st", "kl", "gr", "pl", "sh", "ch")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ea")
_CODAS = ("", "", "", "n", "r", "s", "l", "m", "k", "th")


def rng_for(*parts):
    """A random.Random seeded from the parts (ints and strings), stable across Python versions."""
    text = "\x1f".join(str(p) for p in parts)
    seed = 1469598103934665603
    for byte in text.encode("utf-8"):  # FNV-1a, not hash(): hash() of str is salted per process
        seed = ((seed ^ byte) * 1099511628211) & ((1 << 64) - 1)
    return random.Random(seed)


def word(rng, syllables=2):
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                   for _ in range(syllables)).capitalize()


def unique_words(rng, count, syllables=2, taken=None):
    """`count` distinct made-up words (distinct from `taken` too)."""
    seen = set(taken or ())
    out = []
    while len(out) < count:
        w = word(rng, syllables)
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


def sql_literal(value):
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(round(value, 6))
    return "'" + str(value).replace("'", "''") + "'"


def insert_rows(table, columns, rows):
    """INSERT statements for rows (tuples in column order), one per row: schema.sql text."""
    head = "INSERT INTO %s (%s) VALUES " % (table, ", ".join(columns))
    return "".join(head + "(" + ", ".join(sql_literal(v) for v in row) + ");\n" for row in rows)


def py(value):
    """A Python literal for a constant pasted into generated source (JSON-compatible values)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# The answer envelope every generated verifier AND oracle applies, so that the two judges agree on
# what an answer is: the runtime hands verify() the submitted text decoded as JSON when it is JSON,
# else the raw string; a string is decoded once more after stripping one markdown fence.
# Defines _answer(answer) -> (value, None) | (None, reason).
ANSWER_ENVELOPE = '''
def _answer(answer):
    if isinstance(answer, str):
        text = answer.strip()
        if text.startswith("```") and text.endswith("```") and len(text) >= 6:
            text = text[3:-3]
            newline = text.find("\\n")
            if newline >= 0 and text[:newline].strip().isidentifier():
                text = text[newline + 1:]
            text = text.strip()
        try:
            answer = json.loads(text)
        except (ValueError, RecursionError):
            return None, "answer is not valid JSON"
        if isinstance(answer, str):
            return None, "answer is a JSON string, expected an object"
    return answer, None
'''
