"""Verifier for three_day_trip (3-day itinerary from Hangzhou, 2025-10-01..2025-10-03).

Checks every stated rule against the pristine database; never compares with a stored
answer. Constraint ids follow the design notes:
  C0 exactly 3 records, each an object with exactly the six fields as non-empty strings,
     time = 2025-10-01, 2025-10-02, 2025-10-03 in order (markdown fences tolerated);
  C1 every city, hotel, restaurant and attraction exists (an unknown name always fails:
     no None == None comparisons);
  C2 hotel, both restaurants and the attraction are in that day's city, every day;
  C3 3 distinct cities, 3 distinct hotels, 3 distinct attractions, 6 distinct restaurants;
  C4 the day-1 city is Hangzhou (pinned by the task text);
  C5 day-2 tier by the day-2 hotel's nightly price p, first match wins:
       p >= 800: lunch + dinner price per person < 350, both rated >= 4.0, ticket < 120;
       500 <= p < 800: max(restaurant rating) >= 4.0, ticket < 180;
       200 <= p < 500: max(restaurant rating) >= 3.2;
       p < 200: same rule as 200 <= p < 500 (stated in the task);
  C6 missing numbers (price, rating, ticket) fail the rule; numeric text is normalised;
  C7 transport and weather are not checked (the task says they are not constraints).
"""

import json
import math
import re

START = "Hangzhou"
DATES = ("2025-10-01", "2025-10-02", "2025-10-03")
FIELDS = ("time", "city", "hotel", "afternoon_restaurant", "afternoon_attraction",
          "evening_restaurant")
# field -> (table, kind, price column)
PLACES = (
    ("hotel", "hotels", "hotel", "price_per_night"),
    ("afternoon_restaurant", "restaurants", "restaurant", "price_per_person"),
    ("afternoon_attraction", "attractions", "attraction", "ticket_price"),
    ("evening_restaurant", "restaurants", "restaurant", "price_per_person"),
)


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
        return None, "answer is a JSON string, expected a list of 3 objects"
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


def _lookup(db, table, price_col, name):
    rows = db.query("SELECT city, %s AS price, rating FROM %s WHERE name = ?" % (price_col, table),
                    (name,))
    return rows[0] if rows else None


def _duplicates(values):
    seen, dups = [], []
    for v in values:
        if v in seen and v not in dups:
            dups.append(v)
        seen.append(v)
    return dups


def _check_day2(rec, rows, reasons):
    hotel = rows.get("hotel")
    lunch = rows.get("afternoon_restaurant")
    dinner = rows.get("evening_restaurant")
    attraction = rows.get("afternoon_attraction")
    if hotel is None or lunch is None or dinner is None or attraction is None:
        reasons.append("day 2: budget rule cannot be checked because a name is unknown")
        return
    p = _num(hotel.get("price"))
    lp, dp = _num(lunch.get("price")), _num(dinner.get("price"))
    ticket = _num(attraction.get("price"))
    lr, dr = lunch.get("rating"), dinner.get("rating")
    if p is None:
        reasons.append("day 2: hotel %r has no usable price" % rec["hotel"])
        return
    if p >= 800:
        if lp is None or dp is None:
            reasons.append("day 2 (hotel %g CNY >= 800): a restaurant has no usable price" % p)
        elif not lp + dp < 350:
            reasons.append("day 2 (hotel %g CNY >= 800): lunch + dinner = %g CNY, must be < 350"
                           % (p, lp + dp))
        for field, r in (("afternoon_restaurant", lr), ("evening_restaurant", dr)):
            if not _at_least(r, 4.0):
                reasons.append("day 2 (hotel %g CNY >= 800): %s %r is rated %r, must be >= 4.0"
                               % (p, field, rec[field], r))
        if ticket is None or not ticket < 120:
            reasons.append("day 2 (hotel %g CNY >= 800): attraction ticket %s CNY, must be < 120"
                           % (p, None if ticket is None else "%g" % ticket))
        return
    if p >= 500:
        if not (_at_least(lr, 4.0) or _at_least(dr, 4.0)):
            reasons.append("day 2 (hotel %g CNY in [500, 800)): no day-2 restaurant rated >= 4.0"
                           % p)
        if ticket is None or not ticket < 180:
            reasons.append("day 2 (hotel %g CNY in [500, 800)): attraction ticket %s CNY, "
                           "must be < 180" % (p, None if ticket is None else "%g" % ticket))
        return
    tier = "[200, 500)" if p >= 200 else "< 200, rule of [200, 500)"
    if not (_at_least(lr, 3.2) or _at_least(dr, 3.2)):
        reasons.append("day 2 (hotel %g CNY %s): no day-2 restaurant rated >= 3.2" % (p, tier))


def _verify(answer, db):
    data, err = _parse(answer)
    if err:
        return _result([err])
    if not isinstance(data, list):
        return _result(["answer must be a JSON list of 3 day records, got %s"
                        % type(data).__name__])
    if len(data) != 3:
        return _result(["answer must contain exactly 3 day records, got %d" % len(data)])

    # C0: structure
    reasons = []
    for i, rec in enumerate(data):
        day = i + 1
        if not isinstance(rec, dict):
            reasons.append("day %d: record must be a JSON object" % day)
            continue
        extra = sorted(str(k) for k in rec if k not in FIELDS)
        if extra:
            reasons.append("day %d: unexpected field(s): %s" % (day, ", ".join(extra)))
        for f in FIELDS:
            v = rec.get(f)
            if not isinstance(v, str) or not v.strip():
                reasons.append("day %d: field %r must be a non-empty string" % (day, f))
    if reasons:
        return _result(reasons)
    for i, rec in enumerate(data):
        if rec["time"] != DATES[i]:
            reasons.append("day %d: time must be %s, got %r" % (i + 1, DATES[i], rec["time"]))

    # C4: pinned start
    if data[0]["city"] != START:
        reasons.append("day 1: city must be %s, got %r" % (START, data[0]["city"]))

    # C1 + C2: existence and city membership
    known = {r["name"] for r in db.query("SELECT name FROM cities")}
    day_rows = []
    for i, rec in enumerate(data):
        day = i + 1
        city = rec["city"]
        city_ok = city in known
        if not city_ok:
            reasons.append("day %d: unknown city %r" % (day, city))
        rows = {}
        for field, table, kind, price_col in PLACES:
            row = _lookup(db, table, price_col, rec[field])
            rows[field] = row
            if row is None:
                reasons.append("day %d: %s: unknown %s %r" % (day, field, kind, rec[field]))
            elif not city_ok or row.get("city") is None or row.get("city") != city:
                reasons.append("day %d: %s %r is in %r, not in the day's city %r"
                               % (day, field, rec[field], row.get("city"), city))
        day_rows.append(rows)

    # C3: distinctness
    for label, values in (
            ("city", [r["city"] for r in data]),
            ("hotel", [r["hotel"] for r in data]),
            ("attraction", [r["afternoon_attraction"] for r in data]),
            ("restaurant", [r[f] for r in data
                            for f in ("afternoon_restaurant", "evening_restaurant")])):
        for dup in _duplicates(values):
            reasons.append("%s %r is used more than once" % (label, dup))

    # C5 + C6: day-2 tier rule
    _check_day2(data[1], day_rows[1], reasons)
    return _result(reasons)


def verify(answer, db):
    try:
        return _verify(answer, db)
    except Exception as exc:  # total: never raise
        return _result(["verifier could not check the answer: %s" % type(exc).__name__])
