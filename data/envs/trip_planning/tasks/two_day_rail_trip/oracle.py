"""Independent oracle for two_day_rail_trip (written from task.json's prompt and the schema).

Design: load hotels, attractions, the services leaving Shanghai and the 2025-10-02 weather once
into dicts, then evaluate a declarative list of (requirement, predicate) pairs over the answer;
ratings in integer tenths, money and minutes in integers.
"""

import json


ORIGIN = "Shanghai"
DAY2 = "2025-10-02"
DRY = frozenset(["Sunny", "Partly Cloudy", "Cloudy", "Overcast"])
MAX_MINUTES = 180
BUDGET = 1000
KEYS = ("day1_hotel", "day1_attraction", "train_code", "day2_city", "day2_hotel",
        "day2_attraction")


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


def _rated(x):
    return x is not None and int(round(float(x) * 10)) >= 40


def _load(db):
    return {
        "cities": frozenset(r["name"] for r in db.query("SELECT name FROM cities")),
        "hotels": {r["name"]: r for r in db.query(
            "SELECT name, city, price_per_night AS price, rating FROM hotels")},
        "sights": {r["name"]: r for r in db.query(
            "SELECT name, city, ticket_price AS price, rating FROM attractions")},
        "services": {r["code"]: r for r in db.query(
            "SELECT code, mode, from_city, to_city, duration_minutes, price "
            "FROM inter_city_transport WHERE from_city = ?", (ORIGIN,))},
        "weather": {r["city"]: r["condition"] for r in db.query(
            "SELECT city, condition FROM weather WHERE date = ?", (DAY2,))},
    }


def verify(answer, db):
    try:
        answer = _envelope(answer)
        if not isinstance(answer, dict):
            return _no(["answer is not a JSON object"])
        if sorted(answer.keys()) != sorted(KEYS):
            return _no(["the object must have exactly the keys " + ", ".join(KEYS)])
        if not all(isinstance(answer[k], str) for k in KEYS):
            return _no(["every value must be a string"])
        d = _load(db)
        a = answer
        h1 = d["hotels"].get(a["day1_hotel"])
        s1 = d["sights"].get(a["day1_attraction"])
        h2 = d["hotels"].get(a["day2_hotel"])
        s2 = d["sights"].get(a["day2_attraction"])
        tr = d["services"].get(a["train_code"])
        city2 = a["day2_city"]

        def in_city(row, city):
            return row is not None and row["city"] == city

        places = (("day1_hotel", h1), ("day1_attraction", s1), ("day2_hotel", h2),
                  ("day2_attraction", s2))
        requirements = [("%s: unknown name" % k, lambda row=row: row is not None)
                        for k, row in places]
        requirements += [
            ("day1_hotel: not in Shanghai", lambda: h1 is None or in_city(h1, ORIGIN)),
            ("day1_attraction: not in Shanghai", lambda: s1 is None or in_city(s1, ORIGIN)),
            ("day2_city: unknown city or Shanghai",
             lambda: city2 in d["cities"] and city2 != ORIGIN),
            ("day2_hotel: not in the day-2 city", lambda: h2 is None or in_city(h2, city2)),
            ("day2_attraction: not in the day-2 city", lambda: s2 is None or in_city(s2, city2)),
        ]
        requirements += [("%s: rated below 4.0" % k,
                          lambda row=row: row is None or _rated(row["rating"]))
                         for k, row in places]
        requirements += [
            ("train_code: not a service leaving Shanghai",
             lambda: tr is not None and tr["from_city"] == ORIGIN),
            ("train_code: not a train", lambda: tr is None or tr["mode"] == "train"),
            ("train_code: does not go to the day-2 city",
             lambda: tr is None or tr["to_city"] == city2),
            ("train_code: takes more than 180 minutes",
             lambda: tr is None or (tr["duration_minutes"] is not None
                                    and int(tr["duration_minutes"]) <= MAX_MINUTES)),
            ("day2_city: rain or thunderstorm on 2025-10-02 (or no forecast)",
             lambda: d["weather"].get(city2) in DRY),
        ]
        reasons = [text for text, pred in requirements if not pred()]
        parts = [None if r is None else r["price"] for r in (h1, h2, tr, s1, s2)]
        if None in parts:
            if not reasons:
                reasons.append("the total cost cannot be computed")
        elif not sum(int(x) for x in parts) <= BUDGET:
            reasons.append("the total cost exceeds 1000 CNY")
        if reasons:
            return _no(reasons)
        return {"passed": True, "score": 1.0, "reasons": []}
    except Exception as exc:
        return _no(["oracle error: %s" % type(exc).__name__])
