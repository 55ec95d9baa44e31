"""Verifier for a generated interpreter_lab task (scripts/interpreter_env.py): recomputes the
expected answer from the database or by pure computation, then compares."""

import itertools
import json
import math

PUZZLE = "kk_a"
SPEC = [["knights", "name_set", 0]]


def _says(st, knight):
    kind, x, y = st["kind"], st["x"], st["y"]
    if kind == "knight":
        return knight[x]
    if kind == "knave":
        return not knight[x]
    if kind == "same":
        return knight[x] == knight[y]
    if kind == "diff":
        return knight[x] != knight[y]
    if kind == "count":
        return sum(1 for v in knight.values() if v) == st["k"]
    if kind == "oneknave":
        return not knight[x] or not knight[y]
    raise ValueError("unknown statement kind %r" % kind)


def _expected(db):
    people = [r["name"] for r in db.query("SELECT name FROM kk_people WHERE puzzle = ? ORDER BY idx",
                                          (PUZZLE,))]
    statements = db.query("SELECT speaker, kind, x, y, k FROM kk_statements WHERE puzzle = ?",
                          (PUZZLE,))
    found = []
    for kinds in itertools.product((False, True), repeat=len(people)):
        knight = dict(zip(people, kinds))
        if all(_says(st, knight) == knight[st["speaker"]] for st in statements):
            found.append([p for p in people if knight[p]])
    if len(found) != 1:
        raise ValueError("puzzle %s has %d solutions" % (PUZZLE, len(found)))
    return {"knights": found[0]}


def _no(reason):
    return {"passed": False, "score": 0.0, "reasons": [reason]}


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x):
    return (_is_int(x) or isinstance(x, float)) and math.isfinite(x)


def _digits(s):
    return len(s) > 0 and all(c in "0123456789" for c in s)


def _check(kind, tol, got, want, name):
    """None when got matches want, else the reason."""
    if kind == "int":
        if not _is_int(got):
            return "%s must be an integer" % name
        return None if got == want else "wrong %s" % name
    if kind == "number":
        if not _is_number(got):
            return "%s must be a number" % name
        return None if abs(got - want) <= tol else "wrong %s" % name
    if kind == "string":
        if not isinstance(got, str):
            return "%s must be a string" % name
        return None if got == want else "wrong %s" % name
    if kind == "fraction":
        parts = got.split("/") if isinstance(got, str) else []
        top = parts[0][1:] if parts and parts[0].startswith("-") else (parts[0] if parts else "")
        if len(parts) != 2 or not _digits(top) or not _digits(parts[1]):
            return "%s must be a string \"p/q\"" % name
        p, q = int(parts[0]), int(parts[1])
        if q == 0 or math.gcd(p, q) != 1:
            return "%s must be in lowest terms with q > 0" % name
        return None if [p, q] == list(want) else "wrong %s" % name
    if kind == "strings":
        if not isinstance(got, list) or not all(isinstance(x, str) for x in got):
            return "%s must be a list of strings" % name
        return None if got == list(want) else "wrong %s" % name
    if kind == "name_set":
        if not isinstance(got, list) or not all(isinstance(x, str) for x in got):
            return "%s must be a list of strings" % name
        if len(set(got)) != len(got):
            return "%s lists a name twice" % name
        return None if sorted(got) == sorted(want) else "wrong %s" % name
    if kind == "number_map":
        if not isinstance(got, dict):
            return "%s must be an object" % name
        if sorted(got) != sorted(want):
            return "%s must have exactly the keys %s" % (name, ", ".join(sorted(want)))
        for k in sorted(want):
            if not _is_number(got[k]):
                return "%s[%s] must be a number" % (name, json.dumps(k))
            if abs(got[k] - want[k]) > tol:
                return "wrong %s[%s]" % (name, json.dumps(k))
        return None
    raise ValueError("unknown kind %r" % kind)


def verify(answer, db):
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return _no("answer is not JSON")
    if not isinstance(answer, dict):
        return _no("answer is not a JSON object")
    keys = sorted(key for key, _, _ in SPEC)
    if sorted(answer) != keys:
        return _no("answer must have exactly the keys %s" % ", ".join(keys))
    want = _expected(db)
    reasons = []
    for key, kind, tol in SPEC:
        why = _check(kind, tol, answer[key], want[key], key)
        if why is not None:
            reasons.append(why)
    if reasons:
        return {"passed": False, "score": 0.0, "reasons": reasons}
    return {"passed": True, "score": 1.0, "reasons": []}
