"""Verifier for a generated shop task (scripts/policy_envs.py): recomputes the answer with SQL."""

import json

CATEGORY = "office"
KEY = None


def _expected(db):
    return db.query("SELECT name FROM products WHERE category = ? ORDER BY price, name LIMIT 1",
                    (CATEGORY,))[0]["name"]


def _no(reason):
    return {"passed": False, "score": 0.0, "reasons": [reason]}


def verify(answer, db):
    if KEY is None:  # the answer is a name, as plain text
        if not isinstance(answer, str):
            return _no("answer must be the name as plain text")
        if answer.strip() != _expected(db):
            return _no("wrong name")
        return {"passed": True, "score": 1.0, "reasons": []}
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return _no("answer is not JSON")
    if not isinstance(answer, dict):
        return _no("answer is not a JSON object")
    if sorted(answer) != [KEY]:
        return _no("answer must have exactly the key %r" % KEY)
    got = answer[KEY]
    want = _expected(db)
    if isinstance(want, str):
        if not isinstance(got, str):
            return _no("%s must be a string" % KEY)
    elif isinstance(got, bool) or not isinstance(got, int):
        return _no("%s must be an integer" % KEY)
    if got != want:
        return _no("wrong %s" % KEY)
    return {"passed": True, "score": 1.0, "reasons": []}
