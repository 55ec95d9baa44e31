"""Independent oracle for cheapest_rated_hotel (written from task.json's prompt and the schema).

Design: compute the set of acceptable answers first (the one Suzhou hotel that is minimal by
(price, name) among those rated >= 4.0, ratings compared in integer tenths), then test that the
submission is exactly {"hotel": <that name>}.
"""

import json


CITY = "Suzhou"
MIN_TENTHS = 40


# The prompt says "Submit only a JSON ... and nothing else", so by default the oracle takes the
# answer exactly as the runtime parsed it: a raw string (fenced, prefixed, double-encoded) fails.
# verifier.py is more lenient: it strips one markdown fence and decodes up to two more JSON
# string layers. Set TOLERATE_WRAPPING = True to mirror that policy.
TOLERATE_WRAPPING = False
_TAG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-")
_UNPARSED = object()


def _unfence(text):
    """The text between an opening ```tag line and a closing ```, else the text unchanged."""
    if len(text) < 6 or not (text.startswith("```") and text.endswith("```")):
        return text
    i, j = 3, len(text) - 3
    while i < j and text[i] in _TAG_CHARS:
        i += 1
    while i < j and text[i] in " \t":
        i += 1
    if i < j and text[i] == "\n":
        i += 1
    while j > i and text[j - 1] in " \t":
        j -= 1
    if j > i and text[j - 1] == "\n":
        j -= 1
    return text[i:j].strip()


def _envelope(answer):
    if not TOLERATE_WRAPPING:
        return answer
    for _ in range(2):
        if not isinstance(answer, str):
            return answer
        try:
            answer = json.loads(_unfence(answer.strip()))
        except (ValueError, RecursionError):
            return _UNPARSED
    return _UNPARSED if isinstance(answer, str) else answer


def _no(reasons):
    return {"passed": False, "score": 0.0, "reasons": list(reasons)}


def _tenths(x):
    return int(round(float(x) * 10))


def _acceptable(rows):
    """The set of acceptable names: the minimum (price, name) among Suzhou hotels rated >= 4.0."""
    qualifying = sorted((int(r["price_per_night"]), r["name"]) for r in rows
                        if r["city"] == CITY and r["rating"] is not None
                        and r["price_per_night"] is not None and _tenths(r["rating"]) >= MIN_TENTHS)
    return (frozenset([qualifying[0][1]]) if qualifying else frozenset()), qualifying


def _why_not(name, rows, qualifying):
    """One reason per broken rule, for an answer outside the acceptable set."""
    row = next((r for r in rows if r["name"] == name), None)
    if row is None:
        return ["unknown hotel"]
    reasons = []
    if row["city"] != CITY:
        reasons.append("the hotel is not in Suzhou")
    if row["rating"] is None or _tenths(row["rating"]) < MIN_TENTHS:
        reasons.append("the hotel is rated below 4.0")
    if qualifying and row["price_per_night"] is not None:
        low = qualifying[0][0]
        if int(row["price_per_night"]) > low:
            reasons.append("a cheaper Suzhou hotel is rated at least 4.0")
        elif not reasons:
            reasons.append("tie at the lowest price: another qualifying hotel comes first by name")
    return reasons or ["not the cheapest Suzhou hotel rated at least 4.0"]


def verify(answer, db):
    try:
        answer = _envelope(answer)
        if not isinstance(answer, dict):
            return _no(["answer is not a JSON object"])
        if list(answer.keys()) != ["hotel"]:
            return _no(["the object must have exactly one key, hotel"])
        name = answer["hotel"]
        if not isinstance(name, str):
            return _no(["hotel must be a string"])
        rows = db.query("SELECT name, city, price_per_night, rating FROM hotels")
        acceptable, qualifying = _acceptable(rows)
        if name not in acceptable:
            return _no(_why_not(name, rows, qualifying))
        return {"passed": True, "score": 1.0, "reasons": []}
    except Exception as exc:
        return _no(["oracle error: %s" % type(exc).__name__])
