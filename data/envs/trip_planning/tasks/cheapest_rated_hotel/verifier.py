"""Verifier for cheapest_rated_hotel.

Checks, against the pristine database (never against a stored answer):
  * the answer is a JSON object {"hotel": <string>} (markdown fences tolerated);
  * the hotel exists and is in Suzhou;
  * its rating is >= 4.0;
  * no Suzhou hotel rated >= 4.0 is strictly cheaper;
  * among qualifying Suzhou hotels at the same lowest price, no name sorts before it.
"""

import json
import math
import re

CITY = "Suzhou"
MIN_RATING = 4.0
FIELDS = ("hotel",)


def _result(reasons):
    return {"passed": not reasons, "score": 0.0 if reasons else 1.0, "reasons": list(reasons)}


def _parse(answer):
    """Return (value, error). Strings are parsed as JSON after stripping markdown fences."""
    if isinstance(answer, (bytes, bytearray)):
        try:
            answer = answer.decode("utf-8")
        except UnicodeDecodeError:
            return None, "answer is not valid UTF-8 text"
    for _ in range(2):
        if not isinstance(answer, str):
            return answer, None
        text = answer.strip()
        m = re.match(r"^```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)\n?[ \t]*```$", text, re.S)
        if m:
            text = m.group(1).strip()
        try:
            answer = json.loads(text)
        except (ValueError, RecursionError):
            return None, "answer is not valid JSON"
    if isinstance(answer, str):
        return None, "answer is a JSON string, expected an object"
    return answer, None


def _num(v):
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        x = float(v)
    elif isinstance(v, str):
        try:
            x = float(v.strip())
        except ValueError:
            return None
    else:
        return None
    return x if math.isfinite(x) else None


def _at_least(v, bound):
    """v >= bound for ratings given with one decimal; tolerant of float noise only
    (3.99 is below 4.0, 3.2 stored as 3.2000000000000002 or 3.1999999999999997 is not)."""
    x = _num(v)
    return x is not None and x >= bound - 1e-9


def _verify(answer, db):
    data, err = _parse(answer)
    if err:
        return _result([err])
    if not isinstance(data, dict):
        return _result(["answer must be a JSON object {\"hotel\": ...}, got %s"
                        % type(data).__name__])
    reasons = []
    extra = sorted(str(k) for k in data if k not in FIELDS)
    if extra:
        reasons.append("unexpected field(s): %s" % ", ".join(extra))
    name = data.get("hotel")
    if not isinstance(name, str) or not name.strip():
        reasons.append("field 'hotel' must be a non-empty string")
        return _result(reasons)

    rows = db.query("SELECT name, city, price_per_night, rating FROM hotels WHERE name = ?",
                    (name,))
    if not rows:
        reasons.append("unknown hotel %r" % name)
        return _result(reasons)
    row = rows[0]
    if row.get("city") is None or row.get("city") != CITY:
        reasons.append("hotel %r is in %r, not in %s" % (name, row.get("city"), CITY))
    price = _num(row.get("price_per_night"))
    if price is None or _num(row.get("rating")) is None:
        reasons.append("hotel %r has no usable price or rating in the database" % name)
        return _result(reasons)
    if not _at_least(row.get("rating"), MIN_RATING):
        reasons.append("hotel %r is rated %s, below 4.0" % (name, row.get("rating")))

    qualifying = []
    for r in db.query("SELECT name, price_per_night, rating FROM hotels WHERE city = ?", (CITY,)):
        p = _num(r.get("price_per_night"))
        name_ok = isinstance(r.get("name"), str)
        if p is not None and name_ok and _at_least(r.get("rating"), MIN_RATING):
            qualifying.append((p, r["name"]))
    if not qualifying:
        reasons.append("no hotel in %s is rated >= 4.0 (data problem)" % CITY)
        return _result(reasons)
    low = min(p for p, _ in qualifying)
    if price > low:
        cheaper = sorted(n for p, n in qualifying if p < price)
        reasons.append("hotel %r costs %s CNY but %r rated >= 4.0 costs %s CNY"
                       % (name, row.get("price_per_night"), cheaper[0], low))
    elif price == low:
        first = min(n for p, n in qualifying if p == low)
        if name != first:
            reasons.append("tie at %s CNY: %r comes before %r by name" % (low, first, name))
    return _result(reasons)


def verify(answer, db):
    try:
        return _verify(answer, db)
    except Exception as exc:  # total: never raise
        return _result(["verifier could not check the answer: %s" % type(exc).__name__])
