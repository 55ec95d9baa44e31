"""Procedural category: trip planning (issue 13).

A seeded world of made-up cities, each with hotels, restaurants and attractions, and the direct
trains and flights between cities. Tasks, by lineage theme (lineage % 3), levels 1 to 4:

    stay    hotel under a price cap; + a rating floor; destination reached by a train under a
            duration cap + a hotel there; 2-day plan (train cap, hotel rating floor)
    sights  attraction under a ticket cap; + a rating floor; destination reached by any service
            under a price cap + an attraction there; 2-day plan (trains or flights, rated sights)
    dining  restaurant under a price cap; rating floor + strict price cap; lunch + dinner pair
            under a budget (different cuisines); 3-day plan (lunch and dinner cuisines differ)

Levels 1 and 2 are one search (find_hotels, find_restaurants, find_attractions list a city's places
cheapest first, above a rating floor): the answer is its first row. Level 3 and 4 tasks need a tool
outside the base toolset (get_services) or scan many places. Level 4 plans carry the DeepSeek trip
example's day-2 price-tier rule (a rule for every hotel price, so no loophole) and a total budget
set just above the cheapest feasible plan, so few plans qualify.
Every threshold is derived from the rows (oracle first), so every task is solvable.
"""

import functools
import itertools
import math

import synth_common
from synth_common import insert_rows, object_schema, one_decimal, quoted, rng_for, unique_words

ID = "trip_planning"
TITLE = "Trip planning"
DESCRIPTION = ("Plan trips across generated cities with tools over hotels (nightly price in CNY, "
               "rating, stars), restaurants (cuisine, average price per person, rating), "
               "attractions (category, ticket price, rating) and the direct trains and flights "
               "between cities; tasks range from a one-constraint hotel search to a multi-day "
               "itinerary under a budget and a price-tier rule.")
MAX_LEVEL = 4

# ---------------------------------------------------------------------------------- tools.py

PREAMBLE = '''"""Trip-planning tools over a generated database of cities, hotels, restaurants,
attractions and the direct trains and flights between cities.

The runtime injects a module global ``db`` before any tool is called:
``db.query(sql, params=()) -> list[dict]``. Public functions are tools; helpers start with ``_``.
Money is in CNY (whole yuan); ratings use a 1.0-5.0 scale with one decimal. Names must be given
exactly as the listing tools return them.
"""

''' + synth_common.join_defs(synth_common.TOOL_QUERY, synth_common.TOOL_TEXT, '''
def _near(table, name):
    """Up to three existing names that look like `name` (case-insensitive)."""
    key = " ".join(name.lower().split())
    rows = _q("SELECT name FROM %s ORDER BY name" % table)
    same = [r["name"] for r in rows if r["name"].lower() == key]
    if same:
        return same[:3]
    return [r["name"] for r in rows if key and key in r["name"].lower()][:3]


def _unknown(kind, table, name, how):
    hint = _near(table, name)
    msg = "unknown %s %r" % (kind, name)
    if hint:
        msg += "; did you mean " + ", ".join(repr(h) for h in hint) + "?"
    return ValueError(msg + "; " + how)


def _city(city):
    _text(city, "city")
    if not _q("SELECT 1 AS ok FROM cities WHERE name = ?", (city,)):
        raise _unknown("city", "cities", city, "call list_cities() for the valid city names")
    return city


def _one(table, kind, name, columns, how):
    _text(name, kind)
    rows = _q("SELECT %s FROM %s WHERE name = ?" % (columns, table), (name,))
    if not rows:
        raise _unknown(kind, table, name, how)
    return dict(rows[0])


def _names(table, city):
    _city(city)
    return [r["name"] for r in _q("SELECT name FROM %s WHERE city = ? ORDER BY name" % table,
                                  (city,))]


def _rating_floor(min_rating):
    if isinstance(min_rating, bool) or not isinstance(min_rating, (int, float)):
        raise ValueError("min_rating must be a number between 0 and 5")
    if not 0 <= min_rating <= 5:
        raise ValueError("min_rating must be between 0 and 5, got %r" % (min_rating,))


def _cheapest_first(table, columns, price, city, min_rating):
    """The city's rows of `table` rated at least min_rating, by `price`, then name."""
    _city(city)
    _rating_floor(min_rating)
    rows = _q("SELECT %s FROM %s WHERE city = ? ORDER BY %s, name" % (columns, table, price),
              (city,))
    return [dict(r) for r in rows if r["rating"] >= min_rating - 1e-9]
''')

TOOLS = {
    "list_cities": '''
def list_cities():
    """List every city in the database, sorted by name. Returns a list of objects {"name",
    "region", "has_airport" (true/false)}; use the exact names with the other tools.
    """
    rows = _q("SELECT name, region, has_airport FROM cities ORDER BY name")
    return [{"name": r["name"], "region": r["region"], "has_airport": bool(r["has_airport"])}
            for r in rows]
''',
    "list_hotels": '''
def list_hotels(city: str):
    """List the names of the hotels located in a city, sorted alphabetically. Use get_hotel for
    a hotel's price and rating.

    Args:
        city: exact city name as returned by list_cities().
    """
    return _names("hotels", city)
''',
    "list_restaurants": '''
def list_restaurants(city: str):
    """List the names of the restaurants located in a city, sorted alphabetically. Use
    get_restaurant for a restaurant's cuisine, price per person and rating.

    Args:
        city: exact city name as returned by list_cities().
    """
    return _names("restaurants", city)
''',
    "list_attractions": '''
def list_attractions(city: str):
    """List the names of the tourist attractions located in a city, sorted alphabetically. Use
    get_attraction for an attraction's ticket price and rating.

    Args:
        city: exact city name as returned by list_cities().
    """
    return _names("attractions", city)
''',
    "get_hotel": '''
def get_hotel(name: str):
    """Get the facts of one hotel: {"name", "city", "district", "stars" (1-5),
    "price_per_night" (CNY for one night, integer), "rating" (guest rating 1.0-5.0)}.

    Args:
        name: exact hotel name as returned by list_hotels(city).
    """
    return _one("hotels", "hotel", name, "name, city, district, stars, price_per_night, rating",
                "call list_hotels(city) for the hotels of a city")
''',
    "get_restaurant": '''
def get_restaurant(name: str):
    """Get the facts of one restaurant: {"name", "city", "cuisine", "price_per_person" (average
    spend per person for one meal, CNY, integer), "rating" (guest rating 1.0-5.0)}.

    Args:
        name: exact restaurant name as returned by list_restaurants(city).
    """
    return _one("restaurants", "restaurant", name,
                "name, city, cuisine, price_per_person, rating",
                "call list_restaurants(city) for the restaurants of a city")
''',
    "get_attraction": '''
def get_attraction(name: str):
    """Get the facts of one tourist attraction: {"name", "city", "category", "ticket_price"
    (adult entrance ticket, CNY, integer; 0 means free), "rating" (visitor rating 1.0-5.0)}.

    Args:
        name: exact attraction name as returned by list_attractions(city).
    """
    return _one("attractions", "attraction", name, "name, city, category, ticket_price, rating",
                "call list_attractions(city) for the attractions of a city")
''',
    "get_services": '''
def get_services(from_city: str, to_city: str):
    """List the direct trains and flights from one city to another; each runs every day with
    the same timetable. Returns a list ordered by departure time of objects {"code" (service
    code), "mode" ("train" or "flight"), "from_city", "to_city", "depart_time", "arrive_time"
    (HH:MM), "duration_minutes", "price" (CNY per person)}. An empty list means no direct
    service.

    Args:
        from_city: exact name of the departure city (see list_cities()).
        to_city: exact name of the arrival city; must differ from from_city.
    """
    _city(from_city)
    _city(to_city)
    if from_city == to_city:
        raise ValueError("from_city and to_city must be different cities")
    rows = _q("SELECT code, mode, from_city, to_city, depart_time, arrive_time, "
              "duration_minutes, price FROM services WHERE from_city = ? AND to_city = ? "
              "ORDER BY depart_time, code", (from_city, to_city))
    return [dict(r) for r in rows]
''',
    "find_hotels": '''
def find_hotels(city: str, min_rating: float = 0.0):
    """Search the hotels of a city, optionally by minimum rating. Returns a list of objects
    {"name", "city", "stars", "price_per_night", "rating"} ordered by price for one night, then
    name (the cheapest first).

    Args:
        city: exact city name as returned by list_cities().
        min_rating: keep only hotels rated at least this (rating >= min_rating); 0 keeps all.
    """
    return _cheapest_first("hotels", "name, city, stars, price_per_night, rating",
                           "price_per_night", city, min_rating)
''',
    "find_attractions": '''
def find_attractions(city: str, min_rating: float = 0.0):
    """Search the tourist attractions of a city, optionally by minimum rating. Returns a list of
    objects {"name", "city", "category", "ticket_price", "rating"} ordered by ticket price, then
    name (the cheapest first).

    Args:
        city: exact city name as returned by list_cities().
        min_rating: keep only attractions rated at least this (rating >= min_rating); 0 keeps
            all.
    """
    return _cheapest_first("attractions", "name, city, category, ticket_price, rating",
                           "ticket_price", city, min_rating)
''',
    "find_restaurants": '''
def find_restaurants(city: str, cuisine: str = "", min_rating: float = 0.0):
    """Search the restaurants of a city, optionally by cuisine and minimum rating. Returns a
    list of objects {"name", "city", "cuisine", "price_per_person", "rating"} ordered by price
    per person, then name.

    Args:
        city: exact city name as returned by list_cities().
        cuisine: keep only this cuisine (exact, e.g. "seafood"); "" keeps every cuisine.
        min_rating: keep only restaurants rated at least this (rating >= min_rating); 0 keeps all.
    """
    _city(city)
    if not isinstance(cuisine, str):
        raise ValueError("cuisine must be a string")
    _rating_floor(min_rating)
    if cuisine:
        known = [r["cuisine"] for r in _q("SELECT DISTINCT cuisine FROM restaurants "
                                          "ORDER BY cuisine")]
        if cuisine not in known:
            raise ValueError("unknown cuisine %r; known cuisines: %s" % (cuisine, ", ".join(known)))
    rows = _q("SELECT name, city, cuisine, price_per_person, rating FROM restaurants "
              "WHERE city = ? ORDER BY price_per_person, name", (city,))
    return [dict(r) for r in rows if (not cuisine or r["cuisine"] == cuisine)
            and r["rating"] >= min_rating - 1e-9]
''',
}

BASE_TOOLS = ["list_cities", "list_hotels", "list_restaurants", "list_attractions", "get_hotel",
              "get_restaurant", "get_attraction", "find_hotels", "find_restaurants",
              "find_attractions"]

# ------------------------------------------------------------------------------------ world

_REGIONS = ("North", "South", "East", "West", "Central", "Coast", "Highlands")
_HOTEL_SUFFIX = ("Hotel", "Inn", "Lodge", "Suites", "Residence", "Guesthouse")
_RESTAURANT_SUFFIX = ("Kitchen", "Bistro", "Canteen", "Grill", "House", "Table", "Diner")
_CUISINES = (("noodles", 38), ("street food", 30), ("dumplings", 42), ("vegetarian", 62),
             ("hotpot", 108), ("barbecue", 92), ("seafood", 148), ("fusion", 176))
_ATTRACTION_KINDS = (("museum", "Museum", (0, 30, 60)), ("park", "Park", (0, 0, 20)),
                     ("temple", "Temple", (20, 40, 70)), ("garden", "Garden", (30, 50, 90)),
                     ("market", "Market", (0, 0, 10)), ("gallery", "Gallery", (0, 25, 60)),
                     ("tower", "Tower", (80, 120, 190)), ("old town", "Old Town", (0, 20, 50)))
_STAR_PRICE = {2: 170, 3: 300, 4: 500, 5: 820}
_STAR_RATING = {2: 3.3, 3: 3.7, 4: 4.1, 5: 4.4}


@functools.lru_cache(maxsize=8)
def _world(seed):
    rng = rng_for(ID, seed, "world")
    n_cities = rng.randint(6, 8)
    city_names = sorted(unique_words(rng, n_cities, 2))
    taken = set(city_names)
    cities = []
    for name in city_names:
        cities.append({"name": name, "region": rng.choice(_REGIONS),
                       "has_airport": 1 if rng.random() < 0.7 else 0,
                       "x": rng.uniform(0, 900), "y": rng.uniform(0, 900),
                       "mult": rng.uniform(0.75, 1.35)})
    hotels, restaurants, attractions = [], [], []
    for c in cities:
        m = c["mult"]
        districts = unique_words(rng, 3, 2, taken)
        taken.update(districts)
        words = unique_words(rng, 22, 2, taken)
        taken.update(words)
        for i in range(rng.randint(5, 7)):
            stars = rng.choice((2, 3, 3, 4, 4, 5))
            raw = _STAR_PRICE[stars] * m * rng.uniform(0.8, 1.25)
            price = max(90, int(raw) // 10 * 10 + rng.choice((0, 8, 8, 9)))
            rating = one_decimal(min(4.9, max(2.6, rng.gauss(_STAR_RATING[stars], 0.3))))
            hotels.append({"name": "%s %s" % (words[i], rng.choice(_HOTEL_SUFFIX)),
                           "city": c["name"], "district": rng.choice(districts), "stars": stars,
                           "price_per_night": price, "rating": rating})
        for i in range(rng.randint(6, 8)):
            cuisine, base = rng.choice(_CUISINES)
            price = max(15, int(base * m * rng.uniform(0.7, 1.4)))
            rating = one_decimal(rng.uniform(3.0, 4.9))
            restaurants.append({"name": "%s %s" % (words[7 + i], rng.choice(_RESTAURANT_SUFFIX)),
                                "city": c["name"], "cuisine": cuisine,
                                "price_per_person": price, "rating": rating})
        for i in range(rng.randint(4, 6)):
            category, suffix, tickets = rng.choice(_ATTRACTION_KINDS)
            base = rng.choice(tickets)
            ticket = 0 if base == 0 else int(base * m * rng.uniform(0.8, 1.3))
            attractions.append({"name": "%s %s" % (words[15 + i], suffix), "city": c["name"],
                                "category": category, "ticket_price": ticket,
                                "rating": one_decimal(rng.uniform(3.2, 4.9))})
    services = []
    codes = set()

    def new_code(prefix):
        while True:
            code = "%s%d" % (prefix, rng.randint(100, 9999))
            if code not in codes:
                codes.add(code)
                return code

    def add_train(a, b):
        d = math.hypot(a["x"] - b["x"], a["y"] - b["y"]) + 60
        minutes = int(d / rng.uniform(150, 250) * 60) + 20
        services.append(_service(rng, new_code("G"), "train", a, b, minutes,
                                 int(d * 0.42) + rng.randint(5, 40)))

    for a in cities:
        for b in cities:
            if a is b:
                continue
            if rng.random() < 0.5:
                for _ in range(rng.randint(1, 2)):
                    add_train(a, b)
            if a["has_airport"] and b["has_airport"] and rng.random() < 0.35:
                d = math.hypot(a["x"] - b["x"], a["y"] - b["y"]) + 60
                services.append(_service(rng, new_code(rng.choice(("ZK", "MX", "QL", "VR"))),
                                         "flight", a, b, int(d / 600 * 60) + 50,
                                         int(220 + d * 0.5) + rng.randint(0, 220)))
    for a in cities:  # every city has trains to at least three others
        while len({s["to_city"] for s in services
                   if s["from_city"] == a["name"] and s["mode"] == "train"}) < 3:
            b = rng.choice([c for c in cities if c is not a])
            add_train(a, b)
    services.sort(key=lambda s: s["code"])
    return {"cities": cities, "hotels": hotels, "restaurants": restaurants,
            "attractions": attractions, "services": services}


def _service(rng, code, mode, a, b, minutes, price):
    dep = rng.randrange(6 * 60, 20 * 60, 5)
    arr = (dep + minutes) % (24 * 60)
    return {"code": code, "mode": mode, "from_city": a["name"], "to_city": b["name"],
            "depart_time": "%02d:%02d" % divmod(dep, 60),
            "arrive_time": "%02d:%02d" % divmod(arr, 60),
            "duration_minutes": minutes, "price": price}


_SCHEMA = """CREATE TABLE cities (
    name TEXT PRIMARY KEY,
    region TEXT NOT NULL,
    has_airport INTEGER NOT NULL CHECK (has_airport IN (0, 1))
);
CREATE TABLE hotels (
    name TEXT PRIMARY KEY,
    city TEXT NOT NULL REFERENCES cities(name),
    district TEXT NOT NULL,
    stars INTEGER NOT NULL CHECK (stars BETWEEN 1 AND 5),
    price_per_night INTEGER NOT NULL CHECK (price_per_night >= 0),  -- CNY for one night
    rating REAL NOT NULL CHECK (rating BETWEEN 1.0 AND 5.0)
);
CREATE TABLE restaurants (
    name TEXT PRIMARY KEY,
    city TEXT NOT NULL REFERENCES cities(name),
    cuisine TEXT NOT NULL,
    price_per_person INTEGER NOT NULL CHECK (price_per_person >= 0), -- CNY, one meal
    rating REAL NOT NULL CHECK (rating BETWEEN 1.0 AND 5.0)
);
CREATE TABLE attractions (
    name TEXT PRIMARY KEY,
    city TEXT NOT NULL REFERENCES cities(name),
    category TEXT NOT NULL,
    ticket_price INTEGER NOT NULL CHECK (ticket_price >= 0),         -- CNY, 0 = free
    rating REAL NOT NULL CHECK (rating BETWEEN 1.0 AND 5.0)
);
CREATE TABLE services (
    code TEXT PRIMARY KEY,
    mode TEXT NOT NULL CHECK (mode IN ('train', 'flight')),
    from_city TEXT NOT NULL REFERENCES cities(name),
    to_city TEXT NOT NULL REFERENCES cities(name),
    depart_time TEXT NOT NULL,
    arrive_time TEXT NOT NULL,
    duration_minutes INTEGER NOT NULL,
    price INTEGER NOT NULL                                            -- CNY per person
);
"""


def environment(seed):
    w = _world(seed)
    sql = "-- trip_planning world, generated by envsynth/procedural (seed %d).\n" % seed + _SCHEMA
    sql += insert_rows("cities", ("name", "region", "has_airport"),
                       [(c["name"], c["region"], c["has_airport"]) for c in w["cities"]])
    sql += insert_rows("hotels", ("name", "city", "district", "stars", "price_per_night", "rating"),
                       [(h["name"], h["city"], h["district"], h["stars"], h["price_per_night"],
                         h["rating"]) for h in w["hotels"]])
    sql += insert_rows("restaurants", ("name", "city", "cuisine", "price_per_person", "rating"),
                       [(r["name"], r["city"], r["cuisine"], r["price_per_person"], r["rating"])
                        for r in w["restaurants"]])
    sql += insert_rows("attractions", ("name", "city", "category", "ticket_price", "rating"),
                       [(a["name"], a["city"], a["category"], a["ticket_price"], a["rating"])
                        for a in w["attractions"]])
    cols = ("code", "mode", "from_city", "to_city", "depart_time", "arrive_time",
            "duration_minutes", "price")
    sql += insert_rows("services", cols, [tuple(s[k] for k in cols) for s in w["services"]])
    return {"name": "%s_%d" % (ID, seed),
            "description": "Trip planning over %d generated cities (seed %d): %d hotels, %d "
                           "restaurants, %d attractions and %d direct trains and flights; money "
                           "in CNY, ratings 1.0-5.0." % (len(w["cities"]), seed, len(w["hotels"]),
                                                        len(w["restaurants"]),
                                                        len(w["attractions"]),
                                                        len(w["services"])),
            "schema_sql": sql}


# ------------------------------------------------------------------ generated-source snippets

# Verifiers use math (FLOAT_HOLDS); oracles and solutions name their own imports.
_source = functools.partial(synth_common.source_text, imports=("json", "math"))


# Verifier helpers: per-answer look-ups, numbers compared as floats with a noise tolerance.
_V_COMMON = synth_common.join_defs(
    synth_common.VERDICT_RESULT, synth_common.FLOAT_HOLDS, synth_common.STRING_FIELDS_SHAPE, '''
def _row(db, table, name):
    rows = db.query("SELECT * FROM %s WHERE name = ?" % table, (name,))
    return rows[0] if rows else None
''', synth_common.VERIFY_TOTAL)

# Oracle helpers: whole tables loaded once, numbers compared as integers in hundredths.
_O_COMMON = synth_common.join_defs(synth_common.VERDICT_NO, synth_common.VERDICT_YES, '''
def _c(x):
    """A number in integer hundredths (prices are whole, ratings have one decimal)."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return int(round(float(x) * 100))
''', synth_common.HUNDREDTHS_SAT, '''
def _table(db, table):
    return {r["name"]: r for r in db.query("SELECT * FROM %s" % table)}
''', synth_common.STRING_FIELDS_DECODED, synth_common.ORACLE_JUDGE_TOTAL)

_S_COMMON = synth_common.SOLUTION_HOLDS

_KINDS = {
    "hotel": {"table": "hotels", "list": "list_hotels", "get": "get_hotel", "find": "find_hotels",
              "price": "price_per_night", "noun": "hotel", "plural": "hotels"},
    "restaurant": {"table": "restaurants", "list": "list_restaurants", "get": "get_restaurant",
                   "find": "find_restaurants",
                   "price": "price_per_person", "noun": "restaurant", "plural": "restaurants"},
    "attraction": {"table": "attractions", "list": "list_attractions", "get": "get_attraction",
                   "find": "find_attractions",
                   "price": "ticket_price", "noun": "attraction", "plural": "attractions"},
}
_LABELS = {"price_per_night": ("price for one night", " CNY"),
           "price_per_person": ("average price per person", " CNY"),
           "ticket_price": ("ticket price", " CNY"), "rating": ("rating", ""),
           "stars": ("star class", ""), "cuisine": ("cuisine", ""), "category": ("category", "")}


def _fmt(v):
    return ("%.1f" % v) if isinstance(v, float) else str(v)


def _phrase(col, op, value):
    label, unit = _LABELS[col]
    if col == "ticket_price" and op == "<=" and value == 0:
        return "its entry is free (ticket_price <= 0)"
    if op == "==":
        return "its %s is \"%s\"" % (label, value)
    return "its %s is %s %s%s (%s %s %s)" % (label, synth_common.OP_WORDS[op], _fmt(value), unit,
                                            col, op, _fmt(value))


def _ok(value, op, bound):
    """Generator-side check, exact in hundredths (a third implementation of the rule)."""
    if op == "==":
        return value == bound
    a, b = int(round(value * 100)), int(round(bound * 100))
    return {"<=": a <= b, "<": a < b, ">=": a >= b, ">": a > b}[op]


def _satisfies(row, constraints):
    return all(_ok(row[c], op, v) for c, op, v in constraints)


def _field(domain, description):
    return {"type": "string", "minLength": 1, "x-domain": domain, "description": description}


def _pick(rng, rows, dims, lo, hi):
    """pick_thresholds with this module's rule check; also returns the qualifying rows."""
    cons = synth_common.pick_thresholds(rng, rows, dims, lo, hi, _satisfies)
    return cons, [r for r in rows if _satisfies(r, cons)]


# ---------------------------------------------------------------------- single-entity filter

_V_SINGLE = '''
def _verify(answer, db):
    data, err = _answer(answer)
    if err:
        return _result([err])
    reasons = _shape(data, [FIELD])
    if reasons:
        return _result(reasons)
    name = data[FIELD]
    row = _row(db, TABLE, name)
    if row is None:
        return _result(["unknown %s %r" % (FIELD, name)])
    if row.get("city") != CITY:
        reasons.append("%r is in %r, not in %s" % (name, row.get("city"), CITY))
    for col, op, bound in CONSTRAINTS:
        if not _holds(row.get(col), op, bound):
            reasons.append("%r has %s = %r; required %s %s %r" % (name, col, row.get(col), col,
                                                                 op, bound))
    return _result(reasons)
'''

_O_SINGLE = '''
def _acceptable(db):
    """Every name that meets all the task's requirements."""
    return sorted(name for name, row in _table(db, TABLE).items()
                  if row["city"] == CITY and all(_sat(row[c], op, b) for c, op, b in CONSTRAINTS))


def _judge(answer, db):
    value = _decoded(answer, [FIELD])
    if value is None:
        return _no(["not an object with exactly the string field " + FIELD])
    if value[FIELD] not in _acceptable(db):
        return _no(["%r is not among the acceptable %s" % (value[FIELD], TABLE)])
    return _yes()
'''

# The search lists the city's places cheapest first, above the rating floor when there is one:
# every constraint of levels 1 and 2 is a price cap or that floor, so the first row that holds is
# the first row.
_S_SINGLE = '''
def solve(tools):
    for row in tools.%(find)s(%(arguments)s):
        if all(_holds(row.get(c), op, b) for c, op, b in CONSTRAINTS):
            return {FIELD: row["name"]}
    return {}
'''


def _single_task(seed, lineage, level, attempt, kind, city, cons, theme):
    k = _KINDS[kind]
    rules = "; ".join(_phrase(c, op, v) for c, op, v in cons)
    prompt = ("Using the tools, find any %s located in %s that meets %s: %s. Ratings use the "
              "1.0-5.0 scale; money is in CNY. Any %s meeting every requirement is accepted. "
              "Submit only a JSON object of the form {\"%s\": \"<%s name>\"}, with the name "
              "spelled exactly as the tools return it, and nothing else."
              % (k["noun"], quoted(city), "this requirement" if len(cons) == 1 else
                 "all of these requirements", rules, k["noun"], kind, k["noun"]))
    consts = [("FIELD", kind), ("TABLE", k["table"]), ("CITY", city),
              ("CONSTRAINTS", [list(c) for c in cons])]
    doc = "Verifier: a %s in %s with %s." % (k["noun"], city, rules)
    verifier = _source(doc, consts, _V_COMMON + _V_SINGLE)
    oracle = _source("Oracle: the set of acceptable %s, computed from the whole table in integer "
                     "hundredths, then membership." % k["plural"], consts,
                     _O_COMMON + _O_SINGLE, imports=("json",))
    floors = [v for c, op, v in cons if c == "rating" and op == ">="]
    arguments = "CITY" + (", min_rating=%s" % _fmt(floors[0]) if floors else "")
    solution = _source("Gold solution: search the city's %s, cheapest first." % k["plural"], consts,
                       _S_COMMON + _S_SINGLE % {"find": k["find"], "arguments": arguments},
                       imports=(), envelope=False)
    schema = object_schema("%s answer" % theme, {kind: _field("%s.name" % k["table"],
                                                              "A %s in %s meeting the requirements."
                                                              % (k["noun"], city))})
    return {"id": "%s_l%d_%d" % (theme, level, lineage), "prompt": prompt,
            "answer_schema": schema,
            "knobs": {"template": "single_filter", "theme": theme, "kind": kind, "city": city,
                      "constraints": len(cons), "rules": [list(c) for c in cons], "hops": 1,
                      "list_size": None, "distractors": 0, "hidden_steps": 0},
            "solution": solution, "verifier": verifier, "oracle": oracle,
            "tools": [k["find"]]}


# ------------------------------------------------------------ destination (level 3: services)

_V_DEST = '''
def _verify(answer, db):
    data, err = _answer(answer)
    if err:
        return _result([err])
    reasons = _shape(data, ["city", "service", FIELD])
    if reasons:
        return _result(reasons)
    city, code, name = data["city"], data["service"], data[FIELD]
    if not db.query("SELECT name FROM cities WHERE name = ?", (city,)):
        reasons.append("unknown city %r" % city)
    elif city == ORIGIN:
        reasons.append("the destination must differ from %s" % ORIGIN)
    rows = db.query("SELECT * FROM services WHERE code = ?", (code,))
    if not rows:
        reasons.append("unknown service %r" % code)
    else:
        s = rows[0]
        if s.get("from_city") != ORIGIN:
            reasons.append("service %r leaves from %r, not %s" % (code, s.get("from_city"), ORIGIN))
        if s.get("to_city") != city:
            reasons.append("service %r goes to %r, not %r" % (code, s.get("to_city"), city))
        if s.get("mode") not in MODES:
            reasons.append("service %r is a %s; allowed: %s" % (code, s.get("mode"),
                                                               ", ".join(MODES)))
        if MAX_MINUTES and not _holds(s.get("duration_minutes"), "<=", MAX_MINUTES):
            reasons.append("service %r takes %r minutes, more than %d"
                           % (code, s.get("duration_minutes"), MAX_MINUTES))
        if MAX_PRICE and not _holds(s.get("price"), "<=", MAX_PRICE):
            reasons.append("service %r costs %r CNY, more than %d" % (code, s.get("price"),
                                                                      MAX_PRICE))
    row = _row(db, TABLE, name)
    if row is None:
        reasons.append("unknown %s %r" % (FIELD, name))
        return _result(reasons)
    if row.get("city") != city:
        reasons.append("%r is in %r, not in the destination %r" % (name, row.get("city"), city))
    for col, op, bound in CONSTRAINTS:
        if not _holds(row.get(col), op, bound):
            reasons.append("%r has %s = %r; required %s %s %r" % (name, col, row.get(col), col,
                                                                 op, bound))
    return _result(reasons)
'''

_O_DEST = '''
def _acceptable(db):
    """Every (city, service, place) triple meeting all the requirements."""
    places = _table(db, TABLE)
    out = set()
    for s in db.query("SELECT * FROM services WHERE from_city = ?", (ORIGIN,)):
        if s["to_city"] == ORIGIN or s["mode"] not in MODES:
            continue
        if MAX_MINUTES and not _sat(s["duration_minutes"], "<=", MAX_MINUTES):
            continue
        if MAX_PRICE and not _sat(s["price"], "<=", MAX_PRICE):
            continue
        for name, row in places.items():
            if row["city"] == s["to_city"] and all(_sat(row[c], op, b)
                                                   for c, op, b in CONSTRAINTS):
                out.add((s["to_city"], s["code"], name))
    return out


def _judge(answer, db):
    value = _decoded(answer, ["city", "service", FIELD])
    if value is None:
        return _no(["not an object with exactly the string fields city, service, " + FIELD])
    if (value["city"], value["service"], value[FIELD]) not in _acceptable(db):
        return _no(["not an acceptable (city, service, %s) combination" % FIELD])
    return _yes()
'''

_S_DEST = '''
def solve(tools):
    for c in tools.list_cities():
        city = c["name"]
        if city == ORIGIN:
            continue
        ok = [s for s in tools.get_services(ORIGIN, city) if s["mode"] in MODES
              and (not MAX_MINUTES or s["duration_minutes"] <= MAX_MINUTES)
              and (not MAX_PRICE or s["price"] <= MAX_PRICE)]
        if not ok:
            continue
        for name in tools.%(list)s(city):
            info = tools.%(get)s(name)
            if all(_holds(info.get(col), op, b) for col, op, b in CONSTRAINTS):
                return {"city": city, "service": ok[0]["code"], FIELD: name}
    return {}
'''


def _reachable(w, origin, modes, max_minutes, max_price):
    return [s for s in w["services"] if s["from_city"] == origin and s["mode"] in modes
            and (not max_minutes or s["duration_minutes"] <= max_minutes)
            and (not max_price or s["price"] <= max_price)]


def _dest_task(seed, lineage, level, attempt, rng, w, origin, theme):
    kind = "hotel" if theme == "stay" else "attraction"
    k = _KINDS[kind]
    out = [s for s in w["services"] if s["from_city"] == origin]
    if theme == "stay":
        modes = ["train"]
        minutes = sorted(set(s["duration_minutes"] for s in out if s["mode"] == "train"))
        max_minutes = minutes[min(len(minutes) - 1, max(0, len(minutes) // 2 + rng.randint(-1, 1)))]
        max_price = 0
        dims = [("rating", ">="), ("price_per_night", "<=")]
    else:
        modes = ["flight", "train"]
        prices = sorted(set(s["price"] for s in out))
        max_price = prices[min(len(prices) - 1, max(0, len(prices) // 2 + rng.randint(-1, 1)))]
        max_minutes = 0
        dims = [("rating", ">="), ("ticket_price", "<=")]
    svc = _reachable(w, origin, modes, max_minutes, max_price)
    dests = sorted(set(s["to_city"] for s in svc))
    rows = [r for r in w[k["plural"]] if r["city"] in dests]
    per_city = {c: sum(1 for s in svc if s["to_city"] == c) for c in dests}
    # Triples count once per service: weight rows by their city's service count.
    weighted = [r for r in rows for _ in range(per_city[r["city"]])]
    cons, _ = _pick(rng, weighted, dims, 1, 3)
    rules = "; ".join(_phrase(c, op, v) for c, op, v in cons)
    if theme == "stay":
        how = ("by a direct train (mode \"train\"; flights do not count) whose duration is at most "
               "%d minutes (duration_minutes <= %d)" % (max_minutes, max_minutes))
    else:
        how = ("by a direct train or flight whose price is at most %d CNY per person (price <= "
               "%d)" % (max_price, max_price))
    prompt = ("A traveller in %s wants a one-night trip. Choose a destination city other than "
              "%s that can be reached from %s %s, the service (its code) taken from %s to that "
              "city, and %s located in the destination city such that %s. Ratings use the "
              "1.0-5.0 scale; money is in CNY. Any combination meeting every requirement is "
              "accepted. Submit only a JSON object of the form {\"city\": \"<destination>\", "
              "\"service\": \"<service code>\", \"%s\": \"<%s name>\"}, with names and codes "
              "spelled exactly as the tools return them, and nothing else."
              % (quoted(origin), quoted(origin), quoted(origin), how, quoted(origin),
                 ("an " if k["noun"][0] in "aeiou" else "a ") + k["noun"], rules, kind,
                 k["noun"]))
    consts = [("ORIGIN", origin), ("MODES", modes), ("MAX_MINUTES", max_minutes),
              ("MAX_PRICE", max_price), ("FIELD", kind), ("TABLE", k["table"]),
              ("CONSTRAINTS", [list(c) for c in cons])]
    verifier = _source("Verifier: a destination reached from %s, the service taken, and a %s "
                       "there with %s." % (origin, k["noun"], rules), consts,
                       _V_COMMON + _V_DEST)
    oracle = _source("Oracle: enumerate every acceptable (city, service, %s) triple from the "
                     "services leaving %s, then membership." % (kind, origin), consts,
                     _O_COMMON + _O_DEST, imports=("json",))
    solution = _source("Gold solution: try each city's services from %s, then its %s."
                       % (origin, k["plural"]), consts,
                       _S_COMMON + _S_DEST % {"list": k["list"], "get": k["get"]}, imports=(),
                       envelope=False)
    props = {"city": _field("cities.name", "Destination city, not %s." % origin),
             "service": _field("services.code", "Code of the service from %s to the city."
                               % origin),
             kind: _field("%s.name" % k["table"], "A %s in the destination city." % k["noun"])}
    return {"id": "%s_l%d_%d" % (theme, level, lineage), "prompt": prompt,
            "answer_schema": object_schema("%s answer" % theme, props, ["city", "service", kind]),
            "knobs": {"template": "destination", "theme": theme, "origin": origin,
                      "modes": modes, "max_minutes": max_minutes, "max_price": max_price,
                      "rules": [list(c) for c in cons], "constraints": 4 + len(cons),
                      "hops": 3, "list_size": len(w["cities"]) - 1,
                      "distractors": len(out) - len(svc), "hidden_steps": 1},
            "solution": solution, "verifier": verifier, "oracle": oracle,
            "tools": ["list_cities", "get_services", k["list"], k["get"]]}


# ------------------------------------------------------------- dining pair (level 3, dining)

_V_PAIR = '''
def _verify(answer, db):
    data, err = _answer(answer)
    if err:
        return _result([err])
    reasons = _shape(data, ["lunch", "dinner"])
    if reasons:
        return _result(reasons)
    rows = {}
    for slot in ("lunch", "dinner"):
        row = _row(db, "restaurants", data[slot])
        if row is None:
            reasons.append("%s: unknown restaurant %r" % (slot, data[slot]))
            continue
        rows[slot] = row
        if row.get("city") != CITY:
            reasons.append("%s: %r is in %r, not in %s" % (slot, data[slot], row.get("city"), CITY))
        if not _holds(row.get("rating"), ">=", MIN_RATING):
            reasons.append("%s: %r is rated %r, below %.1f" % (slot, data[slot], row.get("rating"),
                                                              MIN_RATING))
    if data["lunch"] == data["dinner"]:
        reasons.append("lunch and dinner must be at two different restaurants")
    if len(rows) < 2:
        return _result(reasons)
    cuisine = rows["lunch"].get("cuisine")
    if cuisine is None or cuisine == rows["dinner"].get("cuisine"):
        reasons.append("lunch and dinner must serve different cuisines")
    a, b = _num(rows["lunch"].get("price_per_person")), _num(rows["dinner"].get("price_per_person"))
    if a is None or b is None:
        reasons.append("a price per person is missing")
    elif not _holds(a + b, "<=", BUDGET):
        reasons.append("lunch + dinner cost %g CNY, more than %d" % (a + b, BUDGET))
    return _result(reasons)
'''

_O_PAIR = '''
def _acceptable(db):
    """Every ordered (lunch, dinner) pair meeting all the requirements."""
    good = [r for r in db.query("SELECT * FROM restaurants WHERE city = ?", (CITY,))
            if _sat(r["rating"], ">=", MIN_RATING)]
    out = set()
    for lunch in good:
        for dinner in good:
            if lunch["name"] == dinner["name"] or lunch["cuisine"] == dinner["cuisine"]:
                continue
            if _c(lunch["price_per_person"]) + _c(dinner["price_per_person"]) <= _c(BUDGET):
                out.add((lunch["name"], dinner["name"]))
    return out


def _judge(answer, db):
    value = _decoded(answer, ["lunch", "dinner"])
    if value is None:
        return _no(["not an object with exactly the string fields lunch and dinner"])
    if (value["lunch"], value["dinner"]) not in _acceptable(db):
        return _no(["not an acceptable (lunch, dinner) pair"])
    return _yes()
'''

_S_PAIR = '''
def solve(tools):
    good = tools.find_restaurants(CITY, "", MIN_RATING)
    best = None
    for lunch in good:
        for dinner in good:
            if lunch["name"] == dinner["name"] or lunch["cuisine"] == dinner["cuisine"]:
                continue
            key = (lunch["price_per_person"] + dinner["price_per_person"], lunch["name"],
                   dinner["name"])
            if best is None or key < best:
                best = key
    return {"lunch": best[1], "dinner": best[2]}
'''


def _pair_task(seed, lineage, level, attempt, rng, w, city, theme):
    rests = [r for r in w["restaurants"] if r["city"] == city]
    options = []
    for rating in sorted(set(r["rating"] for r in rests)):
        good = [r for r in rests if _ok(r["rating"], ">=", rating)]
        pairs = sorted(a["price_per_person"] + b["price_per_person"] for a in good for b in good
                       if a["name"] != b["name"] and a["cuisine"] != b["cuisine"])
        if len(good) >= 3 and pairs:
            options.append((rating, pairs))
    if not options:  # every city has at least two cuisines in practice; keep a safe fallback
        rating = min(r["rating"] for r in rests)
        good = rests
        pairs = sorted(a["price_per_person"] + b["price_per_person"] for a in good for b in good
                       if a["name"] != b["name"] and a["cuisine"] != b["cuisine"])
        options = [(rating, pairs)]
    rating, pairs = options[rng.randrange(len(options))] if len(options) < 3 else \
        options[len(options) // 2 + rng.randint(-1, 0)]
    budget = pairs[min(len(pairs) - 1, rng.choice((0, 1, 2, 3)))]
    prompt = ("Pick a lunch restaurant and a dinner restaurant for one day in %s. Requirements: "
              "both are located in %s; each is rated at least %.1f (rating >= %.1f, 1.0-5.0 "
              "scale); lunch and dinner are at two different restaurants serving different "
              "cuisines; the lunch restaurant's average price per person plus the dinner "
              "restaurant's average price per person is at most %d CNY (sum <= %d). Any pair "
              "meeting every requirement is accepted. Submit only a JSON object of the form "
              "{\"lunch\": \"<restaurant name>\", \"dinner\": \"<restaurant name>\"}, with names "
              "spelled exactly as the tools return them, and nothing else."
              % (quoted(city), quoted(city), rating, rating, budget, budget))
    consts = [("CITY", city), ("MIN_RATING", rating), ("BUDGET", budget)]
    verifier = _source("Verifier: lunch and dinner in %s, both rated >= %.1f, different "
                       "restaurants and cuisines, prices sum <= %d CNY." % (city, rating, budget),
                       consts, _V_COMMON + _V_PAIR)
    oracle = _source("Oracle: enumerate every acceptable ordered (lunch, dinner) pair, then "
                     "membership.", consts, _O_COMMON + _O_PAIR,
                     imports=("json",))
    solution = _source("Gold solution: search the rated restaurants for the cheapest pair.",
                       consts, _S_PAIR, imports=(), envelope=False)
    props = {"lunch": _field("restaurants.name", "Lunch restaurant in %s." % city),
             "dinner": _field("restaurants.name", "Dinner restaurant in %s." % city)}
    return {"id": "%s_l%d_%d" % (theme, level, lineage), "prompt": prompt,
            "answer_schema": object_schema("%s answer" % theme, props, ["lunch", "dinner"]),
            "knobs": {"template": "meal_pair", "theme": theme, "city": city,
                      "min_rating": rating, "budget": budget, "constraints": 5, "hops": 2,
                      "list_size": len(rests), "distractors": len(rests) - 2,
                      "hidden_steps": 1},
            "solution": solution, "verifier": verifier, "oracle": oracle,
            "tools": ["find_restaurants"]}


# -------------------------------------------------------------------- multi-day plan (level 4)

_V_PLAN = '''
SLOTS = (("hotel", "hotels", "price_per_night"),
         ("attraction", "attractions", "ticket_price"),
         ("lunch", "restaurants", "price_per_person"),
         ("dinner", "restaurants", "price_per_person"))


def _fields():
    out = []
    for d in range(1, DAYS + 1):
        if d > 1:
            out += ["day%d_city" % d, "day%d_service" % d]
        out += ["day%d_%s" % (d, s) for s, _, _ in SLOTS]
    return out


def _tier(rows, reasons):
    """The day-2 price-tier rule; rows are the day-2 hotel, attraction, lunch and dinner."""
    p = _num(rows["hotel"].get("price_per_night"))
    lr, dr = _num(rows["lunch"].get("rating")), _num(rows["dinner"].get("rating"))
    lp = _num(rows["lunch"].get("price_per_person"))
    dp = _num(rows["dinner"].get("price_per_person"))
    t = _num(rows["attraction"].get("ticket_price"))
    if None in (p, lr, dr, lp, dp, t):
        reasons.append("day 2: a price or rating needed by the tier rule is missing")
        return
    if _holds(p, ">=", HIGH):
        if not _holds(lp + dp, "<", PAIR_CAP):
            reasons.append("day 2 (hotel >= %d): lunch + dinner = %g, not < %d" % (HIGH, lp + dp,
                                                                                  PAIR_CAP))
        if not (_holds(lr, ">=", BOTH_MIN) and _holds(dr, ">=", BOTH_MIN)):
            reasons.append("day 2 (hotel >= %d): both restaurants must be rated >= %.1f"
                           % (HIGH, BOTH_MIN))
        if not _holds(t, "<", TICKET_HIGH):
            reasons.append("day 2 (hotel >= %d): ticket %g, not < %d" % (HIGH, t, TICKET_HIGH))
    elif _holds(p, ">=", MID):
        if not (_holds(lr, ">=", ONE_MIN_MID) or _holds(dr, ">=", ONE_MIN_MID)):
            reasons.append("day 2 (%d <= hotel < %d): no restaurant rated >= %.1f"
                           % (MID, HIGH, ONE_MIN_MID))
        if not _holds(t, "<", TICKET_MID):
            reasons.append("day 2 (%d <= hotel < %d): ticket %g, not < %d" % (MID, HIGH, t,
                                                                              TICKET_MID))
    elif not (_holds(lr, ">=", ONE_MIN_LOW) or _holds(dr, ">=", ONE_MIN_LOW)):
        reasons.append("day 2 (hotel < %d): no restaurant rated >= %.1f" % (MID, ONE_MIN_LOW))


def _verify(answer, db):
    data, err = _answer(answer)
    if err:
        return _result([err])
    reasons = _shape(data, _fields())
    if reasons:
        return _result(reasons)
    cities = [ORIGIN] + [data["day%d_city" % d] for d in range(2, DAYS + 1)]
    for d in range(2, DAYS + 1):
        if not db.query("SELECT name FROM cities WHERE name = ?", (cities[d - 1],)):
            reasons.append("day%d_city: unknown city %r" % (d, cities[d - 1]))
    if len(set(cities)) != len(cities):
        reasons.append("every day must be in a different city (day 1 is %s)" % ORIGIN)
    total = 0.0
    complete = True
    seen = {}
    for d in range(1, DAYS + 1):
        city = cities[d - 1]
        rows = {}
        for slot, table, price_col in SLOTS:
            field = "day%d_%s" % (d, slot)
            name = data[field]
            row = _row(db, table, name)
            if row is None:
                reasons.append("%s: unknown %s %r" % (field, table[:-1], name))
                complete = False
                continue
            rows[slot] = row
            if row.get("city") != city:
                reasons.append("%s: %r is in %r, not in %r" % (field, name, row.get("city"), city))
            price = _num(row.get(price_col))
            if price is None:
                reasons.append("%s: %r has no usable price" % (field, name))
                complete = False
            else:
                total += price
            key = (table, name)
            if key in seen:
                reasons.append("%s repeats %r (also %s)" % (field, name, seen[key]))
            seen[key] = field
        if ("hotel" in rows and HOTEL_MIN
                and not _holds(rows["hotel"].get("rating"), ">=", HOTEL_MIN)):
            reasons.append("day %d: hotel rated %r, below %.1f" % (d, rows["hotel"].get("rating"),
                                                                  HOTEL_MIN))
        if "attraction" in rows and ATTR_MIN and not _holds(rows["attraction"].get("rating"), ">=",
                                                              ATTR_MIN):
            reasons.append("day %d: attraction rated %r, below %.1f"
                           % (d, rows["attraction"].get("rating"), ATTR_MIN))
        if CUISINE_DIFF and "lunch" in rows and "dinner" in rows:
            lc = rows["lunch"].get("cuisine")
            if lc is None or lc == rows["dinner"].get("cuisine"):
                reasons.append("day %d: lunch and dinner serve the same cuisine" % d)
        if d == 2 and len(rows) == 4:
            _tier(rows, reasons)
        if d > 1:
            field = "day%d_service" % d
            code = data[field]
            found = db.query("SELECT * FROM services WHERE code = ?", (code,))
            if not found:
                reasons.append("%s: unknown service %r" % (field, code))
                complete = False
                continue
            s = found[0]
            if s.get("from_city") != cities[d - 2] or s.get("to_city") != city:
                reasons.append("%s: %r runs %r -> %r, not %r -> %r" % (
                    field, code, s.get("from_city"), s.get("to_city"), cities[d - 2], city))
            if s.get("mode") not in MODES:
                reasons.append("%s: %r is a %s; allowed: %s" % (field, code, s.get("mode"),
                                                               ", ".join(MODES)))
            if MAX_MINUTES and not _holds(s.get("duration_minutes"), "<=", MAX_MINUTES):
                reasons.append("%s: %r takes %r minutes, more than %d" % (
                    field, code, s.get("duration_minutes"), MAX_MINUTES))
            price = _num(s.get("price"))
            if price is None:
                reasons.append("%s: %r has no usable price" % (field, code))
                complete = False
            else:
                total += price
    if not complete:
        reasons.append("the total cost cannot be computed")
    elif not _holds(total, "<=", BUDGET):
        reasons.append("the total cost %g CNY exceeds the budget of %d CNY" % (total, BUDGET))
    return _result(reasons)
'''

_O_PLAN = '''
def _keys():
    keys = []
    for d in range(1, DAYS + 1):
        if d > 1:
            keys += ["day%d_city" % d, "day%d_service" % d]
        keys += ["day%d_hotel" % d, "day%d_attraction" % d, "day%d_lunch" % d, "day%d_dinner" % d]
    return keys


def _tier_ok(h, a, l, n):
    p = _c(h["price_per_night"])
    if p >= _c(HIGH):
        return (_c(l["price_per_person"]) + _c(n["price_per_person"]) < _c(PAIR_CAP)
                and min(_c(l["rating"]), _c(n["rating"])) >= _c(BOTH_MIN)
                and _c(a["ticket_price"]) < _c(TICKET_HIGH))
    if p >= _c(MID):
        return (max(_c(l["rating"]), _c(n["rating"])) >= _c(ONE_MIN_MID)
                and _c(a["ticket_price"]) < _c(TICKET_MID))
    return max(_c(l["rating"]), _c(n["rating"])) >= _c(ONE_MIN_LOW)


def _judge(answer, db):
    a = _decoded(answer, _keys())
    if a is None:
        return _no(["not an object with exactly the plan's string fields"])
    city_names = set(r["name"] for r in db.query("SELECT name FROM cities"))
    hotels, sights = _table(db, "hotels"), _table(db, "attractions")
    meals = _table(db, "restaurants")
    services = {r["code"]: r for r in db.query("SELECT * FROM services")}
    route = [ORIGIN] + [a["day%d_city" % d] for d in range(2, DAYS + 1)]
    days = []
    for d in range(1, DAYS + 1):
        days.append((hotels.get(a["day%d_hotel" % d]), sights.get(a["day%d_attraction" % d]),
                     meals.get(a["day%d_lunch" % d]), meals.get(a["day%d_dinner" % d])))
    legs = [services.get(a["day%d_service" % d]) for d in range(2, DAYS + 1)]
    broken = []
    if not all(c in city_names for c in route) or len(set(route)) != DAYS:
        broken.append("the cities are unknown or repeat")
    for i, (h, s, l, n) in enumerate(days):
        if None in (h, s, l, n):
            broken.append("day %d names an unknown place" % (i + 1))
            continue
        if any(x["city"] != route[i] for x in (h, s, l, n)):
            broken.append("day %d has a place outside the day's city" % (i + 1))
        if l["name"] == n["name"]:
            broken.append("day %d has lunch and dinner at the same restaurant" % (i + 1))
        if HOTEL_MIN and _c(h["rating"]) < _c(HOTEL_MIN):
            broken.append("day %d hotel rated too low" % (i + 1))
        if ATTR_MIN and _c(s["rating"]) < _c(ATTR_MIN):
            broken.append("day %d attraction rated too low" % (i + 1))
        if CUISINE_DIFF and l["cuisine"] == n["cuisine"]:
            broken.append("day %d meals share a cuisine" % (i + 1))
        if i == 1 and not _tier_ok(h, s, l, n):
            broken.append("day 2 breaks the price-tier rule")
    for i, leg in enumerate(legs):
        if leg is None:
            broken.append("leg %d: unknown service" % (i + 2))
            continue
        if (leg["from_city"], leg["to_city"]) != (route[i], route[i + 1]):
            broken.append("leg %d does not join the two days' cities" % (i + 2))
        if leg["mode"] not in MODES:
            broken.append("leg %d uses a mode that is not allowed" % (i + 2))
        if MAX_MINUTES and leg["duration_minutes"] > MAX_MINUTES:
            broken.append("leg %d is too long" % (i + 2))
    every = [x for day in days for x in day if x is not None]
    for label, group in (("hotel", [x[0] for x in days]), ("attraction", [x[1] for x in days]),
                         ("restaurant", [x[2] for x in days] + [x[3] for x in days])):
        names = [x["name"] for x in group if x is not None]
        if len(names) != len(set(names)):
            broken.append("a %s repeats" % label)
    if broken:
        return _no(broken)
    cost = sum(_c(h["price_per_night"]) + _c(s["ticket_price"]) + _c(l["price_per_person"])
               + _c(n["price_per_person"]) for h, s, l, n in days)
    cost += sum(_c(leg["price"]) for leg in legs)
    if len(every) != 4 * DAYS or cost > _c(BUDGET):
        return _no(["the total cost is over budget"])
    return _yes()
'''

_S_PLAN = '''
def _tier_ok(h, a, l, n):
    p = h["price_per_night"]
    if p >= HIGH:
        return (l["price_per_person"] + n["price_per_person"] < PAIR_CAP
                and min(l["rating"], n["rating"]) >= BOTH_MIN - 1e-9
                and a["ticket_price"] < TICKET_HIGH)
    if p >= MID:
        return (max(l["rating"], n["rating"]) >= ONE_MIN_MID - 1e-9
                and a["ticket_price"] < TICKET_MID)
    return max(l["rating"], n["rating"]) >= ONE_MIN_LOW - 1e-9


def solve(tools):
    cache = {}

    def places(city):
        if city not in cache:
            cache[city] = ([tools.get_hotel(x) for x in tools.list_hotels(city)],
                           [tools.get_attraction(x) for x in tools.list_attractions(city)],
                           [tools.get_restaurant(x) for x in tools.list_restaurants(city)])
        return cache[city]

    memo = {}

    def best_day(city, day):
        key = (city, day == 2)
        if key not in memo:
            memo[key] = _day(city, day)
        return memo[key]

    def _day(city, day):
        hotels, sights, meals = places(city)
        best = None
        for h in hotels:
            if HOTEL_MIN and h["rating"] < HOTEL_MIN - 1e-9:
                continue
            for a in sights:
                if ATTR_MIN and a["rating"] < ATTR_MIN - 1e-9:
                    continue
                for l in meals:
                    for n in meals:
                        if l["name"] == n["name"]:
                            continue
                        if CUISINE_DIFF and l["cuisine"] == n["cuisine"]:
                            continue
                        if day == 2 and not _tier_ok(h, a, l, n):
                            continue
                        cost = (h["price_per_night"] + a["ticket_price"] + l["price_per_person"]
                                + n["price_per_person"])
                        key = (cost, h["name"], a["name"], l["name"], n["name"])
                        if best is None or key < best:
                            best = key
        return best

    legs_seen = {}

    def leg(a, b):
        if (a, b) not in legs_seen:
            ok = [(s["price"], s["code"]) for s in tools.get_services(a, b) if s["mode"] in MODES
                  and (not MAX_MINUTES or s["duration_minutes"] <= MAX_MINUTES)]
            legs_seen[(a, b)] = min(ok) if ok else None
        return legs_seen[(a, b)]

    cities = [c["name"] for c in tools.list_cities() if c["name"] != ORIGIN]
    first = best_day(ORIGIN, 1)
    best = None
    for route in itertools.permutations(cities, DAYS - 1):
        full = [ORIGIN] + list(route)
        legs = [leg(full[i], full[i + 1]) for i in range(DAYS - 1)]
        if None in legs:
            continue
        days = [first] + [best_day(full[i], i + 1) for i in range(1, DAYS)]
        if None in days:
            continue
        total = sum(x[0] for x in days) + sum(x[0] for x in legs)
        key = (total, full, legs, days)
        if best is None or key < best:
            best = key
    _, full, legs, days = best
    out = {}
    for d in range(1, DAYS + 1):
        if d > 1:
            out["day%d_city" % d] = full[d - 1]
            out["day%d_service" % d] = legs[d - 2][1]
        day = days[d - 1]
        out["day%d_hotel" % d] = day[1]
        out["day%d_attraction" % d] = day[2]
        out["day%d_lunch" % d] = day[3]
        out["day%d_dinner" % d] = day[4]
    return out
'''


def _tier_ok(p, h, a, l, n):
    if _ok(h["price_per_night"], ">=", p["HIGH"]):
        return (_ok(l["price_per_person"] + n["price_per_person"], "<", p["PAIR_CAP"])
                and _ok(min(l["rating"], n["rating"]), ">=", p["BOTH_MIN"])
                and _ok(a["ticket_price"], "<", p["TICKET_HIGH"]))
    if _ok(h["price_per_night"], ">=", p["MID"]):
        return (_ok(max(l["rating"], n["rating"]), ">=", p["ONE_MIN_MID"])
                and _ok(a["ticket_price"], "<", p["TICKET_MID"]))
    return _ok(max(l["rating"], n["rating"]), ">=", p["ONE_MIN_LOW"])


def _best_day(w, p, city, day):
    hotels = [h for h in w["hotels"] if h["city"] == city
              and (not p["HOTEL_MIN"] or _ok(h["rating"], ">=", p["HOTEL_MIN"]))]
    sights = [a for a in w["attractions"] if a["city"] == city
              and (not p["ATTR_MIN"] or _ok(a["rating"], ">=", p["ATTR_MIN"]))]
    meals = [r for r in w["restaurants"] if r["city"] == city]
    best = None
    for h in hotels:
        for a in sights:
            for l in meals:
                for n in meals:
                    if l["name"] == n["name"]:
                        continue
                    if p["CUISINE_DIFF"] and l["cuisine"] == n["cuisine"]:
                        continue
                    if day == 2 and not _tier_ok(p, h, a, l, n):
                        continue
                    cost = (h["price_per_night"] + a["ticket_price"] + l["price_per_person"]
                            + n["price_per_person"])
                    if best is None or cost < best:
                        best = cost
    return best


def _best_plan(w, p):
    """The cheapest feasible plan's total cost, or None."""
    names = [c["name"] for c in w["cities"] if c["name"] != p["ORIGIN"]]
    memo = {}

    def day(city, d):
        key = (city, d if d == 2 else 0)
        if key not in memo:
            memo[key] = _best_day(w, p, city, d)
        return memo[key]

    def leg(a, b):
        ok = [s["price"] for s in w["services"] if s["from_city"] == a and s["to_city"] == b
              and s["mode"] in p["MODES"]
              and (not p["MAX_MINUTES"] or s["duration_minutes"] <= p["MAX_MINUTES"])]
        return min(ok) if ok else None

    first = day(p["ORIGIN"], 1)
    if first is None:
        return None
    best = None
    for route in itertools.permutations(names, p["DAYS"] - 1):
        full = [p["ORIGIN"]] + list(route)
        legs = [leg(full[i], full[i + 1]) for i in range(p["DAYS"] - 1)]
        days = [day(full[i], i + 1) for i in range(1, p["DAYS"])]
        if None in legs or None in days:
            continue
        total = first + sum(legs) + sum(days)
        if best is None or total < best:
            best = total
    return best


def _round_to(x, step):
    return int(round(x / float(step))) * step


def _plan_task(seed, lineage, level, attempt, rng, w, origin, theme):
    days = 3 if theme == "dining" else 2
    prices = sorted(h["price_per_night"] for h in w["hotels"])
    best, p = None, None
    for _ in range(40):
        mid = _round_to(prices[len(prices) * rng.randint(30, 45) // 100], 50)
        high = max(mid + 100, _round_to(prices[len(prices) * rng.randint(70, 85) // 100], 50))
        p = {"ORIGIN": origin, "DAYS": days, "MODES": ["train"], "MAX_MINUTES": 0,
             "HOTEL_MIN": 0, "ATTR_MIN": 0, "CUISINE_DIFF": 0, "HIGH": high, "MID": mid,
             "PAIR_CAP": rng.choice((160, 180, 200, 220, 250, 280)),
             "TICKET_HIGH": rng.choice((60, 80, 100, 120)),
             "TICKET_MID": rng.choice((120, 150, 180)),
             "BOTH_MIN": 4.0, "ONE_MIN_MID": rng.choice((3.8, 4.0, 4.2)),
             "ONE_MIN_LOW": rng.choice((3.2, 3.5))}
        if theme == "stay":
            trains = sorted(s["duration_minutes"] for s in w["services"] if s["mode"] == "train")
            p["MAX_MINUTES"] = _round_to(trains[len(trains) * rng.randint(40, 70) // 100], 10)
            p["HOTEL_MIN"] = rng.choice((3.5, 3.8, 4.0))
        elif theme == "sights":
            p["MODES"] = ["flight", "train"]
            p["ATTR_MIN"] = rng.choice((3.8, 4.0, 4.2))
        else:
            p["CUISINE_DIFF"] = 1
            p["HOTEL_MIN"] = rng.choice((0, 3.5))
        best = _best_plan(w, p)
        if best is not None:
            break
    if best is None:
        raise ValueError("no feasible %d-day plan from %s (seed %d)" % (days, origin, seed))
    budget = best + rng.choice((0, 5, 10, 15, 20, 30))
    p["BUDGET"] = budget
    lines = []
    lines.append("1. Day 1 is spent in %s; %s, so all %d cities of the trip are pairwise "
                 "different." % (quoted(origin), "day 2 is spent in another city" if days == 2 else
                                 "days 2 and 3 are each spent in another city", days))
    lines.append("2. Each day has a hotel for that night, one attraction, a lunch restaurant and "
                 "a dinner restaurant, all located in that day's city (as the tools report it).")
    lines.append("3. Nothing repeats over the trip: the hotels, the attractions and the %d "
                 "restaurants are all different (lunch and dinner of the same day too)."
                 % (2 * days))
    travel = "a direct %s" % ("train (mode \"train\"; flights do not count)"
                              if p["MODES"] == ["train"] else "train or flight")
    if p["MAX_MINUTES"]:
        travel += " whose duration is at most %d minutes (duration_minutes <= %d)" % (
            p["MAX_MINUTES"], p["MAX_MINUTES"])
    lines.append("4. On the morning of each day after the first, the traveller takes %s from "
                 "the previous day's city to that day's city; give its code." % travel)
    extra = []
    if p["HOTEL_MIN"]:
        extra.append("every hotel is rated at least %.1f (rating >= %.1f)" % (p["HOTEL_MIN"],
                                                                              p["HOTEL_MIN"]))
    if p["ATTR_MIN"]:
        extra.append("every attraction is rated at least %.1f (rating >= %.1f)"
                     % (p["ATTR_MIN"], p["ATTR_MIN"]))
    if p["CUISINE_DIFF"]:
        extra.append("on every day, lunch and dinner serve different cuisines")
    n = 5
    if extra:
        lines.append("5. Quality: %s." % "; ".join(extra))
        n = 6
    lines.append(
        "%d. Day-2 price-tier rule, decided by p = the day-2 hotel's price for one night (CNY); "
        "use the first case that applies: (a) p >= %d: the day-2 lunch price per person plus "
        "the day-2 dinner price per person is strictly less than %d CNY (sum < %d), both day-2 "
        "restaurants are rated at least %.1f, and the day-2 attraction's ticket is strictly less "
        "than %d CNY; (b) %d <= p < %d: at least one of the two day-2 restaurants is rated at "
        "least %.1f and the day-2 attraction's ticket is strictly less than %d CNY; (c) p < %d: "
        "at least one of the two day-2 restaurants is rated at least %.1f. Other days have no "
        "tier rule." % (n, p["HIGH"], p["PAIR_CAP"], p["PAIR_CAP"], p["BOTH_MIN"],
                        p["TICKET_HIGH"], p["MID"], p["HIGH"], p["ONE_MIN_MID"],
                        p["TICKET_MID"], p["MID"], p["ONE_MIN_LOW"]))
    lines.append(
        "%d. Budget: the total cost is at most %d CNY (total <= %d), where total = the sum over "
        "all days of the hotel's price for one night + the attraction's ticket price + the lunch "
        "restaurant's average price per person + the dinner restaurant's average price per "
        "person, plus the price of every service taken." % (n + 1, budget, budget))
    fields = []
    for d in range(1, days + 1):
        if d > 1:
            fields += ["day%d_city" % d, "day%d_service" % d]
        fields += ["day%d_hotel" % d, "day%d_attraction" % d, "day%d_lunch" % d,
                   "day%d_dinner" % d]
    shape = "{" + ", ".join("\"%s\": \"...\"" % f for f in fields) + "}"
    prompt = ("Plan a %d-day trip for a single traveller starting in %s. Ratings use the 1.0-5.0 "
              "scale and \"at least\" includes equality; money is in CNY (whole yuan).\n\n"
              "Rules:\n%s\n\nAny plan meeting every rule is accepted. Submit only a JSON object "
              "of the form %s (dayN_city: the city of day N; dayN_service: the code of the "
              "service taken on the morning of day N), with every name and code spelled exactly "
              "as the tools return it, and nothing else."
              % (days, quoted(origin), "\n".join(lines), shape))
    consts = [(k, p[k]) for k in ("ORIGIN", "DAYS", "MODES", "MAX_MINUTES", "HOTEL_MIN",
                                  "ATTR_MIN", "CUISINE_DIFF", "HIGH", "MID", "PAIR_CAP",
                                  "TICKET_HIGH", "TICKET_MID", "BOTH_MIN", "ONE_MIN_MID",
                                  "ONE_MIN_LOW", "BUDGET")]
    verifier = _source("Verifier: a %d-day plan from %s; checks every rule of the prompt against "
                       "the database (cities, places per day, repeats, services, quality bars, "
                       "the day-2 price tier and the budget)." % (days, origin), consts,
                       _V_COMMON + _V_PLAN)
    oracle = _source("Oracle: load every table once, evaluate the rules as a list of broken "
                     "requirements with money and ratings in integer hundredths.", consts,
                     _O_COMMON + _O_PLAN, imports=("json",))
    solution = _source("Gold solution: fetch every city's places with the tools and take the "
                       "cheapest feasible plan (each day's cheapest valid choice, every route).",
                       consts, _S_PLAN, imports=("itertools",), envelope=False)
    props = {}
    for f in fields:
        slot = f.split("_", 1)[1]
        domain = {"city": "cities.name", "service": "services.code", "hotel": "hotels.name",
                  "attraction": "attractions.name", "lunch": "restaurants.name",
                  "dinner": "restaurants.name"}[slot]
        props[f] = _field(domain, "%s of day %s." % (slot, f[3]))
    tools = ["list_cities", "list_hotels", "list_restaurants", "list_attractions", "get_hotel",
             "get_restaurant", "get_attraction", "get_services"]
    return {"id": "%s_l%d_%d" % (theme, level, lineage), "prompt": prompt,
            "answer_schema": object_schema("%s plan" % theme, props, fields),
            "knobs": {"template": "multi_day_plan", "theme": theme, "origin": origin,
                      "days": days, "params": p, "cheapest_plan": best,
                      "budget_slack": budget - best, "constraints": len(lines) + len(extra),
                      "conditional_rules": 3, "hops": 4, "list_size": len(w["cities"]),
                      "distractors": len(w["cities"]) - days, "hidden_steps": 2},
            "solution": solution, "verifier": verifier, "oracle": oracle, "tools": tools}


# ------------------------------------------------------------------------------------ tasks

_THEMES = ("stay", "sights", "dining")


def task(seed, lineage, level, attempt):
    w = _world(seed)
    theme = _THEMES[lineage % len(_THEMES)]
    # The lineage's city: same across the lineage's levels (the theme made harder).
    lrng = rng_for(ID, seed, "lineage", lineage, attempt)
    city = lrng.choice([c["name"] for c in w["cities"]])
    rng = rng_for(ID, seed, "task", lineage, level, attempt)
    if level <= 2:
        kind = {"stay": "hotel", "sights": "attraction", "dining": "restaurant"}[theme]
        rows = [r for r in w[_KINDS[kind]["plural"]] if r["city"] == city]
        dim = {"stay": [("price_per_night", "<=")], "sights": [("ticket_price", "<")],
               "dining": [("price_per_person", "<=")]}[theme]
        n = len(rows)
        # Level 1: about half of the city's places qualify; level 2: fewer than level 1 did.
        l1rng = rng_for(ID, seed, "task", lineage, 1, attempt)
        cons, ok = _pick(l1rng, rows, dim, max(1, n // 2), max(1, n - 1))
        if level == 2:
            dims = {"stay": [("price_per_night", "<="), ("rating", ">=")],
                    "sights": [("ticket_price", "<="), ("rating", ">=")],
                    "dining": [("rating", ">="), ("price_per_person", "<")]}[theme]
            cons, _ = _pick(rng, rows, dims, 1, max(1, min(2, len(ok) - 1)))
        return _single_task(seed, lineage, level, attempt, kind, city, cons, theme)
    if level == 3:
        if theme == "dining":
            return _pair_task(seed, lineage, level, attempt, rng, w, city, theme)
        return _dest_task(seed, lineage, level, attempt, rng, w, city, theme)
    return _plan_task(seed, lineage, level, attempt, rng, w, city, theme)
