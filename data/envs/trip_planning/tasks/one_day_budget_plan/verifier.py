"""Verifier for one_day_budget_plan.

Checks against the pristine database (never against a stored answer): a JSON object with
exactly the string fields hotel, attraction, lunch_restaurant, dinner_restaurant; every
name exists in its table and is in Chengdu; hotel rating >= 4.0; attraction rating >= 4.0;
both restaurants rated >= 3.5; lunch != dinner; hotel night + ticket + lunch price per
person + dinner price per person <= 700 CNY.
"""

import json
import math
import re

CITY = "Chengdu"
BUDGET = 700.0
# field -> (table, kind, price column, minimum rating)
SLOTS = {
    "hotel": ("hotels", "hotel", "price_per_night", 4.0),
    "attraction": ("attractions", "attraction", "ticket_price", 4.0),
    "lunch_restaurant": ("restaurants", "restaurant", "price_per_person", 3.5),
    "dinner_restaurant": ("restaurants", "restaurant", "price_per_person", 3.5),
}
ORDER = ("hotel", "attraction", "lunch_restaurant", "dinner_restaurant")


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
        return _result(["answer must be a JSON object, got %s" % type(data).__name__])
    reasons = []
    extra = sorted(str(k) for k in data if k not in SLOTS)
    if extra:
        reasons.append("unexpected field(s): %s" % ", ".join(extra))
    for field in ORDER:
        v = data.get(field)
        if not isinstance(v, str) or not v.strip():
            reasons.append("field %r must be a non-empty string" % field)
    if reasons:
        return _result(reasons)

    total = 0.0
    total_known = True
    for field in ORDER:
        table, kind, price_col, min_rating = SLOTS[field]
        name = data[field]
        rows = db.query("SELECT city, %s AS price, rating FROM %s WHERE name = ?"
                        % (price_col, table), (name,))
        if not rows:
            reasons.append("%s: unknown %s %r" % (field, kind, name))
            total_known = False
            continue
        row = rows[0]
        if row.get("city") is None or row.get("city") != CITY:
            reasons.append("%s: %r is in %r, not in %s" % (field, name, row.get("city"), CITY))
        price = _num(row.get("price"))
        if price is None or _num(row.get("rating")) is None:
            reasons.append("%s: %r has no usable price or rating in the database" % (field, name))
            total_known = False
            continue
        if not _at_least(row.get("rating"), min_rating):
            reasons.append("%s: %r is rated %s, below %.1f"
                           % (field, name, row.get("rating"), min_rating))
        total += price
    if data["lunch_restaurant"] == data["dinner_restaurant"]:
        reasons.append("lunch and dinner must be at different restaurants")
    if total_known and total > BUDGET:
        reasons.append("total cost %g CNY exceeds the 700 CNY budget" % total)
    elif not total_known:
        reasons.append("total cost cannot be computed")
    return _result(reasons)


def verify(answer, db):
    try:
        return _verify(answer, db)
    except Exception as exc:  # total: never raise
        return _result(["verifier could not check the answer: %s" % type(exc).__name__])
