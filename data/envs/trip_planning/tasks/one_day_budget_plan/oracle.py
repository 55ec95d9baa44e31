"""Independent oracle for one_day_budget_plan (written from task.json's prompt and the schema).

Design: load the three entity tables once (name -> city, cost, rating in integer tenths) and
build, per answer field, the set of admissible choices (Chengdu entities meeting that field's
rating bar); the answer passes when every field is a member of its set, lunch != dinner and the
summed cost is <= 700 CNY. Reasons: one per broken rule.
"""

import json


CITY = "Chengdu"
BUDGET = 700
KEYS = ("hotel", "attraction", "lunch_restaurant", "dinner_restaurant")


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


# field -> (table, cost column, minimum rating in tenths)
SLOTS = {
    "hotel": ("hotels", "price_per_night", 40),
    "attraction": ("attractions", "ticket_price", 40),
    "lunch_restaurant": ("restaurants", "price_per_person", 35),
    "dinner_restaurant": ("restaurants", "price_per_person", 35),
}


def _catalogue(db):
    """table -> {name: (city, cost, rating in tenths or None)}, every city."""
    out = {}
    for table, col, _ in SLOTS.values():
        if table not in out:
            out[table] = {
                r["name"]: (r["city"], r["cost"],
                            None if r["rating"] is None else int(round(float(r["rating"]) * 10)))
                for r in db.query("SELECT name, city, %s AS cost, rating FROM %s" % (col, table))}
    return out


def verify(answer, db):
    try:
        answer = _envelope(answer)
        if not isinstance(answer, dict):
            return _no(["answer is not a JSON object"])
        if set(answer.keys()) != set(KEYS) or len(answer) != len(KEYS):
            return _no(["the object must have exactly the keys " + ", ".join(KEYS)])
        if not all(isinstance(answer[k], str) for k in KEYS):
            return _no(["every value must be a string"])
        cat = _catalogue(db)
        # the admissible choices of every field: Chengdu entities meeting the field's rating bar
        admissible = {k: {n for n, (city, cost, rating) in cat[SLOTS[k][0]].items()
                          if city == CITY and rating is not None and rating >= SLOTS[k][2]
                          and cost is not None}
                      for k in KEYS}
        reasons = []
        for k in KEYS:
            before = len(reasons)
            row = cat[SLOTS[k][0]].get(answer[k])
            if row is None:
                reasons.append("%s: unknown name" % k)
                continue
            if row[0] != CITY:
                reasons.append("%s: not in Chengdu" % k)
            if row[2] is None or row[2] < SLOTS[k][2]:
                reasons.append("%s: rated below its bar" % k)
            if answer[k] not in admissible[k] and len(reasons) == before:
                reasons.append("%s: no usable price or rating" % k)
        if answer["lunch_restaurant"] == answer["dinner_restaurant"]:
            reasons.append("lunch and dinner must be different restaurants")
        rows = [cat[SLOTS[k][0]].get(answer[k]) for k in KEYS]
        if all(r is not None and r[1] is not None for r in rows):
            if not sum(int(r[1]) for r in rows) <= BUDGET:
                reasons.append("the total cost exceeds 700 CNY")
        elif not reasons:
            reasons.append("the total cost cannot be computed")
        if reasons or not all(answer[k] in admissible[k] for k in KEYS):
            return _no(reasons or ["not an admissible plan"])
        return {"passed": True, "score": 1.0, "reasons": []}
    except Exception as exc:
        return _no(["oracle error: %s" % type(exc).__name__])
