"""Verifier for two_day_rail_trip.

Checks against the pristine database (never against a stored answer): a JSON object with
exactly the six string fields; day-1 hotel and attraction exist, are in Shanghai and are
rated >= 4.0; day2_city exists and differs from Shanghai; train_code is an
inter_city_transport row with mode 'train', from Shanghai to day2_city, duration <= 180
minutes; the weather in day2_city on 2025-10-02 is Sunny, Partly Cloudy, Cloudy or
Overcast; day-2 hotel and attraction exist, are in day2_city and are rated >= 4.0; the
two hotel nights + train price + two tickets <= 1000 CNY.
"""

import json
import math
import re

ORIGIN = "Shanghai"
DAY2 = "2025-10-02"
MAX_MINUTES = 180
DRY = ("Sunny", "Partly Cloudy", "Cloudy", "Overcast")
BUDGET = 1000.0
MIN_RATING = 4.0
FIELDS = ("day1_hotel", "day1_attraction", "train_code", "day2_city", "day2_hotel",
          "day2_attraction")


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


def _place(db, reasons, field, table, kind, price_col, name, city):
    """Check one hotel/attraction; return its price or None."""
    rows = db.query("SELECT city, %s AS price, rating FROM %s WHERE name = ?" % (price_col, table),
                    (name,))
    if not rows:
        reasons.append("%s: unknown %s %r" % (field, kind, name))
        return None
    row = rows[0]
    if city is None or row.get("city") is None or row.get("city") != city:
        reasons.append("%s: %r is in %r, not in %r" % (field, name, row.get("city"), city))
    price = _num(row.get("price"))
    if price is None or _num(row.get("rating")) is None:
        reasons.append("%s: %r has no usable price or rating in the database" % (field, name))
        return None
    if not _at_least(row.get("rating"), MIN_RATING):
        reasons.append("%s: %r is rated %s, below 4.0" % (field, name, row.get("rating")))
    return price


def _verify(answer, db):
    data, err = _parse(answer)
    if err:
        return _result([err])
    if not isinstance(data, dict):
        return _result(["answer must be a JSON object, got %s" % type(data).__name__])
    reasons = []
    extra = sorted(str(k) for k in data if k not in FIELDS)
    if extra:
        reasons.append("unexpected field(s): %s" % ", ".join(extra))
    for field in FIELDS:
        v = data.get(field)
        if not isinstance(v, str) or not v.strip():
            reasons.append("field %r must be a non-empty string" % field)
    if reasons:
        return _result(reasons)

    prices = []
    prices.append(_place(db, reasons, "day1_hotel", "hotels", "hotel", "price_per_night",
                         data["day1_hotel"], ORIGIN))
    prices.append(_place(db, reasons, "day1_attraction", "attractions", "attraction",
                         "ticket_price", data["day1_attraction"], ORIGIN))

    city = data["day2_city"]
    if not db.query("SELECT name FROM cities WHERE name = ?", (city,)):
        reasons.append("day2_city: unknown city %r" % city)
        city_ok = False
    elif city == ORIGIN:
        reasons.append("day2_city must differ from %s" % ORIGIN)
        city_ok = False
    else:
        city_ok = True

    code = data["train_code"]
    rows = db.query("SELECT mode, from_city, to_city, duration_minutes, price "
                    "FROM inter_city_transport WHERE code = ?", (code,))
    if not rows:
        reasons.append("train_code: unknown service %r" % code)
        prices.append(None)
    else:
        t = rows[0]
        if t.get("mode") != "train":
            reasons.append("train_code: %r is a %s, not a train" % (code, t.get("mode")))
        if t.get("from_city") != ORIGIN or t.get("to_city") is None or t.get("to_city") != city:
            reasons.append("train_code: %r runs %r -> %r, not %s -> %r"
                           % (code, t.get("from_city"), t.get("to_city"), ORIGIN, city))
        minutes = _num(t.get("duration_minutes"))
        if minutes is None or minutes > MAX_MINUTES:
            reasons.append("train_code: %r takes %s minutes, more than 180"
                           % (code, t.get("duration_minutes")))
        prices.append(_num(t.get("price")))
        if prices[-1] is None:
            reasons.append("train_code: %r has no usable price" % code)

    if city_ok:
        w = db.query("SELECT condition FROM weather WHERE city = ? AND date = ?", (city, DAY2))
        if not w or w[0].get("condition") not in DRY:
            reasons.append("day2_city: weather in %r on %s is %r, not one of %s"
                           % (city, DAY2, w[0].get("condition") if w else None, ", ".join(DRY)))
    day2_city = city if city_ok else None
    prices.append(_place(db, reasons, "day2_hotel", "hotels", "hotel", "price_per_night",
                         data["day2_hotel"], day2_city))
    prices.append(_place(db, reasons, "day2_attraction", "attractions", "attraction",
                         "ticket_price", data["day2_attraction"], day2_city))

    if any(p is None for p in prices):
        reasons.append("total cost cannot be computed")
    else:
        total = sum(prices)
        if total > BUDGET:
            reasons.append("total cost %g CNY exceeds the 1000 CNY budget" % total)
    return _result(reasons)


def verify(answer, db):
    try:
        return _verify(answer, db)
    except Exception as exc:  # total: never raise
        return _result(["verifier could not check the answer: %s" % type(exc).__name__])
