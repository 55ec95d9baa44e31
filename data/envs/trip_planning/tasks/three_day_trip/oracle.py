"""Independent oracle for three_day_trip (written from task.json's prompt and the schema only).

Design: check the exact shape first, load the four relevant tables once into dicts, then
evaluate a declarative list of (rule, predicate) pairs (one per rule and day/slot) plus a
first-match table of day-2 tiers; the answer passes only when no rule is broken, and the
reasons list every broken rule. Ratings are compared in integer tenths (the data has one
decimal), money in integer CNY.
"""

import json


FIELDS = ("time", "city", "hotel", "afternoon_restaurant", "afternoon_attraction",
          "evening_restaurant")
DATES = ("2025-10-01", "2025-10-02", "2025-10-03")
START_CITY = "Hangzhou"


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


def _fail(reasons):
    return {"passed": False, "score": 0.0, "reasons": list(reasons)}


def _tenths(x):
    return int(round(float(x) * 10))


def _load(db):
    return {
        "city": {r["name"]: True for r in db.query("SELECT name FROM cities")},
        "hotel": {r["name"]: (r["city"], r["price_per_night"])
                  for r in db.query("SELECT name, city, price_per_night FROM hotels")},
        "rest": {r["name"]: (r["city"], r["price_per_person"], r["rating"])
                 for r in db.query("SELECT name, city, price_per_person, rating FROM restaurants")},
        "attr": {r["name"]: (r["city"], r["ticket_price"])
                 for r in db.query("SELECT name, city, ticket_price FROM attractions")},
    }


def _shape_problems(answer):
    """None when the answer is exactly a list of 3 objects with the 6 string fields."""
    if not isinstance(answer, list):
        return "answer is not a JSON list"
    if len(answer) != 3:
        return "expected exactly 3 day records, got %d" % len(answer)
    for i, rec in enumerate(answer):
        if not isinstance(rec, dict):
            return "record %d is not an object" % (i + 1)
        if sorted(rec.keys()) != sorted(FIELDS):
            return "record %d must have exactly the fields %s" % (i + 1, ", ".join(FIELDS))
        for f in FIELDS:
            v = rec[f]
            if not isinstance(v, str) or v == "":
                return "record %d field %s must be a non-empty string" % (i + 1, f)
    return None


def _day2_broken(t, d):
    """The broken conditions of the day-2 tier rule; d is the day-2 record (entities exist)."""
    p = t["hotel"][d["hotel"]][1]
    lunch = t["rest"][d["afternoon_restaurant"]]
    dinner = t["rest"][d["evening_restaurant"]]
    ticket = t["attr"][d["afternoon_attraction"]][1]
    if p is None or ticket is None or None in (lunch[1], lunch[2], dinner[1], dinner[2]):
        return ["day 2: a price or rating is missing"]
    meal_sum = int(lunch[1]) + int(dinner[1])
    rates = (_tenths(lunch[2]), _tenths(dinner[2]))
    ticket = int(ticket)
    # (tier applies, [(condition, holds)]) - the first tier that applies decides
    tiers = [
        (p >= 800, [("lunch + dinner price is not under 350", meal_sum < 350),
                    ("not both restaurants rated at least 4.0", min(rates) >= 40),
                    ("ticket is not under 120", ticket < 120)]),
        (500 <= p, [("no restaurant rated at least 4.0", max(rates) >= 40),
                    ("ticket is not under 180", ticket < 180)]),
        (200 <= p, [("no restaurant rated at least 3.2", max(rates) >= 32)]),
        (True, [("no restaurant rated at least 3.2 (rule d)", max(rates) >= 32)]),
    ]
    for applies, conditions in tiers:
        if applies:
            return ["day 2 tier rule: " + name for name, holds in conditions if not holds]
    return ["day 2: no tier applies"]


def _evaluate(days, t):
    """The list of broken rules (one entry per rule and day/slot), empty when the plan is valid."""
    slots = (("hotel", "hotel"), ("afternoon_restaurant", "rest"),
             ("afternoon_attraction", "attr"), ("evening_restaurant", "rest"))
    restaurants = [d[f] for d in days for f in ("afternoon_restaurant", "evening_restaurant")]
    rules = [
        ("dates are 2025-10-01, 2025-10-02, 2025-10-03 in order",
         lambda: tuple(d["time"] for d in days) == DATES),
        ("day 1: the city is not Hangzhou", lambda: days[0]["city"] == START_CITY),
        ("the three cities are not pairwise different",
         lambda: len({d["city"] for d in days}) == 3),
        ("a hotel repeats", lambda: len({d["hotel"] for d in days}) == 3),
        ("an attraction repeats", lambda: len({d["afternoon_attraction"] for d in days}) == 3),
        ("a restaurant repeats", lambda: len(set(restaurants)) == 6),
    ]
    for i, d in enumerate(days):
        rules.append(("day %d: unknown city" % (i + 1), lambda d=d: d["city"] in t["city"]))
        for field, table in slots:
            rules.append(("day %d: %s is unknown" % (i + 1, field),
                          lambda d=d, field=field, table=table: d[field] in t[table]))
            rules.append(("day %d: %s is not in the day city" % (i + 1, field),
                          lambda d=d, field=field, table=table:
                          d[field] not in t[table] or t[table][d[field]][0] == d["city"]))
    failed = [name for name, pred in rules if not pred()]
    # The tier rule is judged whenever the four day-2 entities exist (an unknown one already failed).
    d2 = days[1]
    if all(d2[field] in t[table] for field, table in slots):
        failed.extend(_day2_broken(t, d2))
    return failed


def verify(answer, db):
    try:
        answer = _envelope(answer)
        problem = _shape_problems(answer)
        if problem is not None:
            return _fail([problem])
        failed = _evaluate(answer, _load(db))
        if failed:
            return _fail(failed)
        return {"passed": True, "score": 1.0, "reasons": []}
    except Exception as exc:  # total: any unexpected condition is a failure, never a crash
        return _fail(["oracle error: %s" % type(exc).__name__])
