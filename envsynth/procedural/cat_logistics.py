"""Procedural category "logistics": freight routes between cities, carriers, depots, shipments.

The world: a dozen made-up cities (three of them hubs), depots in every city, directed freight
routes (road or rail) with a distance and a transit time, carriers with a price per km, a load
limit and an on-time rate, the carriers serving each route, and shipments (origin depot,
destination city, weight, days allowed).

Lineages rotate over three themes (lineage % 3): 0 routes, 1 carriers, 2 shipments; the level
makes the theme harder:
    1  one search or look-up: the first row of find_routes (shortest first) or find_carriers
       (cheapest first, above a load floor), or the shipment's destination
    2  a look-up, then one search with the looked-up value (depot -> find_routes to a hub;
       shipment -> find_routes from its depot to its destination), or a search with two
       constraints (find_carriers: load floor as a filter, price cap by its order)
    3  a route + carrier choice for a shipment on a direct route (weight, deadline, budget),
       with the augmented tool get_route_carriers
    4  a two-leg plan through a hub (four answer fields), weight, deadline with transfer time,
       budget with a conditional transfer fee, plus a theme-specific rule
Levels 1 and 2 are answered by the first row of one search (find_routes, find_carriers: each
orders by the bound the task sets and filters by the others), after at most one look-up.
Every threshold comes from the rows (oracle first), so every task is solvable by construction.
"""

import functools
import itertools
import math

import synth_common
from synth_common import (cents_text, insert_rows, object_schema, quoted, rng_for, string_prop,
                          unique_words)

ID = "logistics"
TITLE = "Freight logistics"
DESCRIPTION = ("Plan freight between made-up cities: depots, directed road and rail routes with "
               "distance (km) and transit days, carriers with a price per km (EUR), a load "
               "limit (kg) and an on-time rate, the carriers serving each route, and shipments "
               "with a weight and the days allowed. Tasks range from a route look-up to a "
               "two-leg plan through a hub under weight, deadline and budget rules.")
MAX_LEVEL = 4

# ------------------------------------------------------------------------------------ tools

PREAMBLE = '''"""Freight logistics tools over a database of cities, depots, routes, carriers and shipments.

The runtime injects a module global ``db`` before any tool is called:
``db.query(sql, params=()) -> list[dict]`` on the session's own copy of the data.
Do not assign ``db`` here.  Public functions are tools; helpers start with ``_``.

Units: distances in km, weights in kg, times in whole days, money in EUR.  Names and codes
must be given exactly as the listing tools return them.
"""

''' + synth_common.join_defs(synth_common.TOOL_QUERY, synth_common.TOOL_REQUIRE_STR, '''
def _close(table, column, value):
    """Up to three existing values that look like `value` (case/space-insensitive)."""
    key = "".join(value.lower().split())
    rows = _q("SELECT %s AS v FROM %s ORDER BY %s" % (column, table, column))
    same = [r["v"] for r in rows if "".join(r["v"].lower().split()) == key]
    if same:
        return same[:3]
    return [r["v"] for r in rows if key and key in "".join(r["v"].lower().split())][:3]


def _unknown(kind, table, column, value, listing):
    hint = _close(table, column, value)
    msg = "unknown %s %r" % (kind, value)
    if hint:
        msg += "; did you mean " + ", ".join(repr(h) for h in hint) + "?"
    return ValueError(msg + "; call %s for the valid values" % listing)


def _check_city(city):
    _require_str(city, "city")
    if not _q("SELECT 1 AS ok FROM cities WHERE name = ?", (city,)):
        raise _unknown("city", "cities", "name", city, "list_cities()")


def _route_dict(r):
    return {"code": r["code"], "origin": r["origin"], "destination": r["destination"],
            "mode": r["mode"], "distance_km": r["distance_km"],
            "transit_days": r["transit_days"]}


def _floor(value, what):
    """A search filter: a whole number >= 0 (0 keeps all)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError("%s must be a number >= 0 (0 keeps all), got %r" % (what, value))
''')

TOOLS = {
    "list_cities": '''
def list_cities(region: str = ""):
    """List the cities of the network sorted by name, as objects {"name", "region", "is_hub"}; is_hub is true for a hub city, where freight can be transferred from one route to another.

    Args:
        region: optional region name to list only that region's cities (regions are "North", "South", "East", "West" and "Central"; not every region has cities); "" lists every city.
    """
    if not isinstance(region, str):
        raise ValueError("region must be a string")
    if region.strip():
        valid = [r["region"] for r in _q("SELECT DISTINCT region FROM cities ORDER BY region")]
        if region.strip() not in valid:
            raise ValueError("unknown region %r; valid regions: %s" % (region, ", ".join(valid)))
        rows = _q("SELECT name, region, is_hub FROM cities WHERE region = ? ORDER BY name",
                  (region.strip(),))
    else:
        rows = _q("SELECT name, region, is_hub FROM cities ORDER BY name")
    return [{"name": r["name"], "region": r["region"], "is_hub": bool(r["is_hub"])} for r in rows]
''',
    "list_depots": '''
def list_depots(city: str = ""):
    """List depots (warehouses and freight terminals) sorted by name, as objects {"name", "city", "kind"}.

    Args:
        city: optional exact city name to list only that city's depots; "" lists every depot.
    """
    if not isinstance(city, str):
        raise ValueError("city must be a string")
    if city.strip():
        _check_city(city)
        rows = _q("SELECT name, city, kind FROM depots WHERE city = ? ORDER BY name", (city,))
    else:
        rows = _q("SELECT name, city, kind FROM depots ORDER BY name")
    return [dict(r) for r in rows]
''',
    "get_depot": '''
def get_depot(depot: str):
    """Get one depot as {"name", "city" (the city it is located in), "kind", "bays" (loading bays)}.

    Args:
        depot: exact depot name, as returned by list_depots().
    """
    _require_str(depot, "depot")
    rows = _q("SELECT name, city, kind, bays FROM depots WHERE name = ?", (depot,))
    if not rows:
        raise _unknown("depot", "depots", "name", depot, "list_depots()")
    return dict(rows[0])
''',
    "get_routes_from": '''
def get_routes_from(city: str):
    """List the freight routes leaving a city, sorted by code, as objects {"code", "origin", "destination", "mode" ("road" or "rail"), "distance_km", "transit_days"}. Routes are directed: a route from A to B does not carry freight from B to A. An empty list means no route leaves the city.

    Args:
        city: exact origin city name, as returned by list_cities().
    """
    _check_city(city)
    rows = _q("SELECT code, origin, destination, mode, distance_km, transit_days FROM routes "
              "WHERE origin = ? ORDER BY code", (city,))
    return [_route_dict(r) for r in rows]
''',
    "get_route": '''
def get_route(code: str):
    """Get one freight route as {"code", "origin", "destination", "mode", "distance_km", "transit_days"}.

    Args:
        code: exact route code such as "RT123", as returned by get_routes_from().
    """
    _require_str(code, "code")
    rows = _q("SELECT code, origin, destination, mode, distance_km, transit_days FROM routes "
              "WHERE code = ?", (code,))
    if not rows:
        raise _unknown("route", "routes", "code", code, "get_routes_from(city)")
    return _route_dict(rows[0])
''',
    "list_carriers": '''
def list_carriers():
    """List the names of all carriers, sorted alphabetically; use get_carrier for their prices and limits."""
    return [r["name"] for r in _q("SELECT name FROM carriers ORDER BY name")]
''',
    "get_carrier": '''
def get_carrier(carrier: str):
    """Get one carrier as {"name", "price_per_km" (EUR charged per km of a route, whatever the load), "max_weight_kg" (heaviest load it accepts), "on_time_pct" (share of deliveries on time, percent)}.

    Args:
        carrier: exact carrier name, as returned by list_carriers().
    """
    _require_str(carrier, "carrier")
    rows = _q("SELECT name, price_per_km, max_weight_kg, on_time_pct FROM carriers WHERE name = ?",
              (carrier,))
    if not rows:
        raise _unknown("carrier", "carriers", "name", carrier, "list_carriers()")
    return dict(rows[0])
''',
    "get_shipment": '''
def get_shipment(shipment_id: str):
    """Get one shipment as {"id", "customer", "origin_depot" (depot it leaves from), "destination_city", "weight_kg", "due_days" (days allowed from pickup to delivery)}.

    Args:
        shipment_id: exact shipment id such as "SH1234".
    """
    _require_str(shipment_id, "shipment_id")
    rows = _q("SELECT id, customer, origin_depot, destination_city, weight_kg, due_days "
              "FROM shipments WHERE id = ?", (shipment_id.strip(),))
    if not rows:
        ids = [r["id"] for r in _q("SELECT id FROM shipments ORDER BY id")]
        raise ValueError("unknown shipment %r; known ids: %s" % (shipment_id, ", ".join(ids)))
    return dict(rows[0])
''',
    "get_route_carriers": '''
def get_route_carriers(code: str):
    """List the names of the carriers that operate a route, sorted alphabetically; only these carriers can move freight on it.

    Args:
        code: exact route code such as "RT123", as returned by get_routes_from().
    """
    _require_str(code, "code")
    if not _q("SELECT 1 AS ok FROM routes WHERE code = ?", (code,)):
        raise _unknown("route", "routes", "code", code, "get_routes_from(city)")
    return [r["carrier"] for r in _q("SELECT carrier FROM carrier_routes WHERE route = ? "
                                     "ORDER BY carrier", (code,))]
''',
    "find_routes": '''
def find_routes(origin: str = "", destination: str = "", origin_depot: str = "",
                to_hub: bool = False, max_km: int = 0):
    """Search the freight routes, shortest first. Returns a list of objects {"code", "origin",
    "destination", "mode", "distance_km", "transit_days"} ordered by distance_km, then code:
    the first row is the shortest route that passes every filter. With no filter it lists every
    route of the network. Routes are directed (origin -> destination).

    Args:
        origin: exact origin city name, as returned by list_cities(); "" for any origin.
        destination: exact destination city name; "" for any destination.
        origin_depot: exact depot name, as returned by list_depots(): keep the routes leaving
            the city that depot is located in; "" for none.
        to_hub: true keeps only the routes that end in a hub city (is_hub in list_cities()).
        max_km: keep only routes with distance_km <= max_km (exactly max_km km qualifies);
            0 keeps all.
    """
    for value, what in ((origin, "origin"), (destination, "destination"),
                        (origin_depot, "origin_depot")):
        if not isinstance(value, str):
            raise ValueError("%s must be a string (an empty one for any)" % what)
    if not isinstance(to_hub, bool):
        raise ValueError("to_hub must be true or false, got %r" % (to_hub,))
    _floor(max_km, "max_km")
    if origin:
        _check_city(origin)
    if destination:
        _check_city(destination)
    if origin_depot:
        depot = _q("SELECT city FROM depots WHERE name = ?", (origin_depot,))
        if not depot:
            raise _unknown("depot", "depots", "name", origin_depot, "list_depots()")
        if origin and origin != depot[0]["city"]:
            raise ValueError("depot %r is in %s, not in origin %r; give one of origin and "
                             "origin_depot" % (origin_depot, depot[0]["city"], origin))
        origin = depot[0]["city"]
    hubs = set(r["name"] for r in _q("SELECT name FROM cities WHERE is_hub = 1"))
    rows = _q("SELECT code, origin, destination, mode, distance_km, transit_days FROM routes "
              "ORDER BY distance_km, code")
    return [_route_dict(r) for r in rows
            if (not origin or r["origin"] == origin)
            and (not destination or r["destination"] == destination)
            and (not to_hub or r["destination"] in hubs)
            and (not max_km or r["distance_km"] <= max_km)]
''',
    "find_carriers": '''
def find_carriers(min_weight_kg: int = 0):
    """Search the carriers, cheapest first. Returns a list of objects {"name", "price_per_km",
    "max_weight_kg", "on_time_pct"} ordered by price_per_km, then name: the first row is the
    cheapest carrier that passes the filter.

    Args:
        min_weight_kg: keep only carriers whose max_weight_kg is at least this (a carrier
            taking exactly min_weight_kg kg qualifies); 0 keeps all.
    """
    _floor(min_weight_kg, "min_weight_kg")
    rows = _q("SELECT name, price_per_km, max_weight_kg, on_time_pct FROM carriers "
              "ORDER BY price_per_km, name")
    return [dict(r) for r in rows if r["max_weight_kg"] >= min_weight_kg]
''',
}
TOOLS = {name: source.strip("\n") + "\n" for name, source in TOOLS.items()}

BASE_TOOLS = ["list_cities", "list_depots", "get_depot", "get_routes_from", "get_route",
              "list_carriers", "get_carrier", "get_shipment", "find_routes", "find_carriers"]

# ------------------------------------------------------------------------------------ world

_CAPACITIES = (3500, 7500, 12000, 18000, 24000, 40000)
_CARRIER_SUFFIX = ("Freight", "Haulage", "Logistics", "Cargo", "Transport", "Lines")
_DEPOT_SUFFIX = ("Depot", "Yard", "Terminal", "Freight Park")
_DEPOT_KINDS = ("warehouse", "cross-dock", "cold store")
_CUSTOMER_SUFFIX = ("Foods", "Textiles", "Motors", "Pharma", "Retail", "Steel", "Paper")


def _region(x, y):
    if 230 <= x <= 470 and 230 <= y <= 470:
        return "Central"
    if abs(x - 350) >= abs(y - 350):
        return "East" if x > 350 else "West"
    return "North" if y < 350 else "South"


@functools.lru_cache(maxsize=16)
def _world(seed):
    rng = rng_for(ID, seed, "world")
    names = unique_words(rng, 12)
    cities = []
    for name in names:
        x, y = rng.randint(0, 700), rng.randint(0, 700)
        cities.append({"name": name, "x": x, "y": y, "region": _region(x, y), "is_hub": 0})
    hub_idx = sorted(rng.sample(range(12), 3))
    for i in hub_idx:
        cities[i]["is_hub"] = 1
    others = [i for i in range(12) if i not in hub_idx]

    dist = {}

    def distance(i, j):
        key = (min(i, j), max(i, j))
        if key not in dist:
            a, b = cities[key[0]], cities[key[1]]
            raw = math.hypot(a["x"] - b["x"], a["y"] - b["y"]) * rng.uniform(1.12, 1.32)
            dist[key] = max(60, int(round(raw)))
        return dist[key]

    pairs = []  # (origin index, destination index, mode, distance, days)

    def add(i, j, mode="road"):
        d = distance(i, j)
        if mode == "road":
            days = 1 + d // 400 + (1 if rng.random() < 0.2 else 0)
        else:
            d = int(round(d * rng.uniform(0.92, 1.08)))
            days = 2 + d // 600
        pairs.append((i, j, mode, d, days))

    for a, b in itertools.combinations(hub_idx, 2):
        add(a, b)
        add(b, a)
    for c in others:
        near = sorted(hub_idx, key=lambda h: (distance(c, h), h))[:2]
        for h in near:
            add(c, h)
            add(h, c)
    direct = list(itertools.combinations(others, 2))
    rng.shuffle(direct)
    for a, b in direct[:7]:
        add(a, b)
        add(b, a)
    for k in rng.sample(range(len(pairs)), 10):
        i, j = pairs[k][0], pairs[k][1]
        add(i, j, "rail")
    codes = rng.sample(range(100, 1000), len(pairs))
    routes = []
    for (i, j, mode, d, days), code in zip(pairs, codes):
        routes.append({"code": "RT%d" % code, "origin": cities[i]["name"],
                       "destination": cities[j]["name"], "mode": mode, "distance_km": d,
                       "transit_days": days})
    routes.sort(key=lambda r: r["code"])

    cnames = unique_words(rng, 10, taken=names)
    carriers = []
    for n in cnames:
        cap = rng.choice(_CAPACITIES)
        price = round(0.8 + _CAPACITIES.index(cap) * 0.3 + rng.uniform(0.0, 0.9), 2)
        carriers.append({"name": "%s %s" % (n, rng.choice(_CARRIER_SUFFIX)), "price_per_km": price,
                         "max_weight_kg": cap, "on_time_pct": rng.randint(78, 99)})
    carriers.sort(key=lambda c: c["name"])
    serves = []
    for r in routes:
        for c in sorted(rng.sample(range(len(carriers)), rng.randint(2, 4))):
            serves.append((carriers[c]["name"], r["code"]))

    taken = set(names) | set(cnames)
    depots = []
    for c in cities:
        for n in unique_words(rng, 2 if c["is_hub"] else rng.randint(1, 2), taken=taken):
            taken.add(n)
            depots.append({"name": "%s %s" % (n, rng.choice(_DEPOT_SUFFIX)), "city": c["name"],
                           "kind": rng.choice(_DEPOT_KINDS), "bays": rng.randint(4, 40)})
    depots.sort(key=lambda d: d["name"])

    world = {"cities": cities, "routes": routes, "carriers": carriers, "serves": serves,
             "depots": depots}
    ix = _index(world)
    hubs = [c["name"] for c in cities if c["is_hub"]]
    direct_pairs = sorted({(r["origin"], r["destination"]) for r in routes})
    indirect_pairs = []
    for a in cities:
        for b in cities:
            if a["is_hub"] or b["is_hub"] or a is b:
                continue
            if (a["name"], b["name"]) in ix["pair"]:
                continue
            if any((a["name"], h) in ix["pair"] and (h, b["name"]) in ix["pair"] for h in hubs):
                indirect_pairs.append((a["name"], b["name"]))
    shipments = []
    ids = rng.sample(range(1000, 10000), 24)
    customers = unique_words(rng, 24, taken=taken)
    for k in range(24):
        if k % 2 == 0 or not indirect_pairs:
            origin, dest = rng.choice(direct_pairs)
        else:
            origin, dest = rng.choice(indirect_pairs)
        depot = rng.choice([d["name"] for d in depots if d["city"] == origin])
        weight = 500
        for _ in range(30):
            w = rng.randint(8, 600) * 50
            if _min_days(ix, origin, dest, w, hubs) is not None:
                weight = w
                break
        days = _min_days(ix, origin, dest, weight, hubs)
        shipments.append({"id": "SH%d" % ids[k],
                          "customer": "%s %s" % (customers[k], rng.choice(_CUSTOMER_SUFFIX)),
                          "origin_depot": depot, "destination_city": dest, "weight_kg": weight,
                          "due_days": days + rng.randint(0, 3)})
    shipments.sort(key=lambda s: s["id"])
    world["shipments"] = shipments
    return world


def _index(world):
    ix = {"city": {c["name"]: c for c in world["cities"]},
          "route": {r["code"]: r for r in world["routes"]},
          "carrier": {c["name"]: c for c in world["carriers"]},
          "depot": {d["name"]: d for d in world["depots"]},
          "pair": {}, "from": {}, "on": {}}
    for r in world["routes"]:
        ix["pair"].setdefault((r["origin"], r["destination"]), []).append(r)
        ix["from"].setdefault(r["origin"], []).append(r)
    for carrier, code in world["serves"]:
        ix["on"].setdefault(code, []).append(carrier)
    return ix


def _fits(ix, code, weight):
    return [c for c in ix["on"].get(code, []) if ix["carrier"][c]["max_weight_kg"] >= weight]


def _min_days(ix, origin, dest, weight, hubs):
    """Fewest days to move `weight` from origin to dest: a direct route, else via one hub + 1 day."""
    best = None
    for r in ix["pair"].get((origin, dest), []):
        if _fits(ix, r["code"], weight):
            best = r["transit_days"] if best is None else min(best, r["transit_days"])
    if best is not None:
        return best
    for h in hubs:
        for r1 in ix["pair"].get((origin, h), []):
            for r2 in ix["pair"].get((h, dest), []):
                if _fits(ix, r1["code"], weight) and _fits(ix, r2["code"], weight):
                    days = r1["transit_days"] + r2["transit_days"] + 1
                    best = days if best is None else min(best, days)
    return best


def environment(seed):
    w = _world(seed)
    sql = ["-- Freight logistics world, seed %d (envsynth procedural, category logistics).\n" % seed,
           "CREATE TABLE cities (name TEXT PRIMARY KEY, region TEXT NOT NULL, "
           "is_hub INTEGER NOT NULL);\n",
           "CREATE TABLE depots (name TEXT PRIMARY KEY, city TEXT NOT NULL REFERENCES cities(name), "
           "kind TEXT NOT NULL, bays INTEGER NOT NULL);\n",
           "CREATE TABLE routes (code TEXT PRIMARY KEY, "
           "origin TEXT NOT NULL REFERENCES cities(name), "
           "destination TEXT NOT NULL REFERENCES cities(name), mode TEXT NOT NULL, "
           "distance_km INTEGER NOT NULL, transit_days INTEGER NOT NULL);\n",
           "CREATE TABLE carriers (name TEXT PRIMARY KEY, price_per_km REAL NOT NULL, "
           "max_weight_kg INTEGER NOT NULL, on_time_pct INTEGER NOT NULL);\n",
           "CREATE TABLE carrier_routes (carrier TEXT NOT NULL REFERENCES carriers(name), "
           "route TEXT NOT NULL REFERENCES routes(code), PRIMARY KEY (carrier, route));\n",
           "CREATE TABLE shipments (id TEXT PRIMARY KEY, customer TEXT NOT NULL, "
           "origin_depot TEXT NOT NULL REFERENCES depots(name), "
           "destination_city TEXT NOT NULL REFERENCES cities(name), weight_kg INTEGER NOT NULL, "
           "due_days INTEGER NOT NULL);\n"]
    sql.append(insert_rows("cities", ("name", "region", "is_hub"),
                           [(c["name"], c["region"], c["is_hub"])
                            for c in sorted(w["cities"], key=lambda c: c["name"])]))
    sql.append(insert_rows("depots", ("name", "city", "kind", "bays"),
                           [(d["name"], d["city"], d["kind"], d["bays"]) for d in w["depots"]]))
    sql.append(insert_rows("routes", ("code", "origin", "destination", "mode", "distance_km",
                                      "transit_days"),
                           [(r["code"], r["origin"], r["destination"], r["mode"], r["distance_km"],
                             r["transit_days"]) for r in w["routes"]]))
    sql.append(insert_rows("carriers", ("name", "price_per_km", "max_weight_kg", "on_time_pct"),
                           [(c["name"], c["price_per_km"], c["max_weight_kg"], c["on_time_pct"])
                            for c in w["carriers"]]))
    sql.append(insert_rows("carrier_routes", ("carrier", "route"), sorted(w["serves"])))
    sql.append(insert_rows("shipments", ("id", "customer", "origin_depot", "destination_city",
                                         "weight_kg", "due_days"),
                           [(s["id"], s["customer"], s["origin_depot"], s["destination_city"],
                             s["weight_kg"], s["due_days"]) for s in w["shipments"]]))
    hubs = ", ".join(c["name"] for c in sorted(w["cities"], key=lambda c: c["name"])
                     if c["is_hub"])
    return {"name": "%s_%d" % (ID, seed),
            "description": "Freight logistics over %d made-up cities (hubs: %s): %d depots, %d "
                           "directed road/rail routes, %d carriers and %d shipments. "
                           % (len(w["cities"]), hubs, len(w["depots"]), len(w["routes"]),
                              len(w["carriers"]), len(w["shipments"])) + DESCRIPTION,
            "schema_sql": "".join(sql)}


# ------------------------------------------------------------------------------ judge code

_COMMON = "\n" + synth_common.join_defs(synth_common.VERDICT_RESULT_ITER, '''
def _shape(value, fields):
    """(value, None) when value is an object with exactly the keys of `fields` (key -> "str")."""
    if not isinstance(value, dict):
        return None, "the answer must be a JSON object"
    extra = sorted(str(k) for k in value if k not in fields)
    if extra:
        return None, "unexpected field(s): " + ", ".join(extra)
    for key in sorted(fields):
        if key not in value:
            return None, "missing field %r" % key
        if not isinstance(value[key], str):
            return None, "field %r must be a string" % key
    return value, None
''', synth_common.EUR_CENTS, synth_common.VERIFY_TOTAL)

_ORACLE_COMMON = "\n" + synth_common.join_defs(synth_common.VERDICT_NO_WHY, '''
def _strings(value, keys):
    """True when value is an object whose keys are exactly `keys`, all with string values."""
    return (isinstance(value, dict) and sorted(value) == sorted(keys)
            and all(type(value[k]) is str for k in keys))
''', synth_common.ORACLE_DECODED_JUDGE_TOTAL)


_verifier = functools.partial(synth_common.source_text, helpers=_COMMON)
_oracle = functools.partial(synth_common.source_text, helpers=_ORACLE_COMMON)


def _solution(doc, consts, body):
    return '"""%s"""\n\n' % doc + synth_common.const_lines(consts) + "\n" + body.strip("\n") + "\n"


# ----------------------------------------------------------------------- level 1 templates

def _t_short_route(w, ix, rng, lineage, level):
    dists = sorted(r["distance_km"] for r in w["routes"])
    n = len(dists)
    limit = dists[rng.randint(n // 5, n // 2)]
    if not any(d < limit for d in dists):
        limit = dists[-1]
    valid = sum(1 for d in dists if d < limit)
    prompt = ("Name any freight route whose distance is strictly less than %d km "
              "(distance_km < %d; a route of exactly %d km does not qualify). The tool "
              "find_routes() lists every route of the network shortest first (by distance_km). "
              "Any qualifying route is accepted. Submit only a JSON object of the form "
              "{\"route\": \"<route code>\"} with the code spelled exactly as the tools return "
              "it, and nothing else." % (limit, limit, limit))
    consts = [("MAX_KM", limit)]
    # find_routes lists the routes shortest first and some route is under the limit (the limit
    # is drawn from the distances above the shortest), so the first row is an answer.
    sol = _solution("One search: every route, shortest first; the first row is under the limit.",
                    consts, '''
def solve(tools):
    for r in tools.find_routes():
        if r["distance_km"] < MAX_KM:
            return {"route": r["code"]}
    return {"route": ""}
''')
    ver = _verifier("Verifier: the route exists and its distance_km is strictly below MAX_KM.",
                    consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"route": "str"})
    if err:
        return _result([err])
    rows = db.query("SELECT distance_km FROM routes WHERE code = ?", (value["route"],))
    if not rows:
        return _result(["unknown route %r" % value["route"]])
    d = rows[0]["distance_km"]
    if d is None:
        return _result(["route %s has no distance" % value["route"]])
    if not d < MAX_KM:
        return _result(["route %s is %s km long, not under %d km" % (value["route"], d, MAX_KM)])
    return _result([])
''')
    ora = _oracle("Oracle: the set of route codes under MAX_KM in one query; membership.",
                  consts, '''
def _judge(value, db):
    if not _strings(value, ["route"]):
        return _no("expected exactly {\\"route\\": <string>}")
    ok = set(r["code"] for r in db.query(
        "SELECT code FROM routes WHERE distance_km IS NOT NULL AND distance_km < ?", (MAX_KM,)))
    return _YES if value["route"] in ok else _no("not a route shorter than %d km" % MAX_KM)
''')
    schema = object_schema("short_route answer", {
        "route": string_prop("routes.code", "Code of a route under %d km." % limit)})
    knobs = {"template": "short_route", "constraints": 1, "hops": 1, "list_size": n,
             "distractors": n - valid, "hidden_steps": 0, "valid_answers": valid,
             "max_km": limit, "comparison": "<"}
    return ("short_route", prompt, schema, knobs, sol, ver, ora, ["find_routes"])


def _lineage_weight(w, rng):
    """The load threshold of the carrier theme: levels 1 and 2 of a lineage draw it from the
    same lineage rng (see task()), so level 2 adds a price limit to level 1's filter."""
    caps = sorted({c["max_weight_kg"] for c in w["carriers"]})
    n = len(w["carriers"])
    count = {cap: sum(1 for c in w["carriers"] if c["max_weight_kg"] >= cap) for cap in caps}
    options = ([cap for cap in caps if 2 <= count[cap] <= n // 2]
               or [cap for cap in caps if 1 <= count[cap] < n] or caps)
    return rng.choice(options)


def _t_heavy_carrier(w, ix, rng, lineage, level):
    wmin = _lineage_weight(w, rng)
    valid = sum(1 for c in w["carriers"] if c["max_weight_kg"] >= wmin)
    prompt = ("Name any carrier that accepts loads of at least %d kg (max_weight_kg >= %d; "
              "exactly %d kg qualifies). The tool find_carriers lists the carriers cheapest "
              "first, and its argument min_weight_kg keeps only those taking at least that "
              "load. Any such carrier is accepted. Submit only a JSON object of the form "
              "{\"carrier\": \"<carrier name>\"} with the name spelled exactly as the tools "
              "return it, and nothing else." % (wmin, wmin, wmin))
    consts = [("MIN_KG", wmin)]
    sol = _solution("One search: the carriers taking MIN_KG, cheapest first; the first row.",
                    consts, '''
def solve(tools):
    for c in tools.find_carriers(min_weight_kg=MIN_KG):
        if c["max_weight_kg"] >= MIN_KG:
            return {"carrier": c["name"]}
    return {"carrier": ""}
''')
    ver = _verifier("Verifier: the carrier exists and its max_weight_kg is >= MIN_KG.", consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"carrier": "str"})
    if err:
        return _result([err])
    rows = db.query("SELECT max_weight_kg FROM carriers WHERE name = ?", (value["carrier"],))
    if not rows:
        return _result(["unknown carrier %r" % value["carrier"]])
    cap = rows[0]["max_weight_kg"]
    if cap is None or cap < MIN_KG:
        return _result(["%s accepts at most %s kg, below %d kg" % (value["carrier"], cap, MIN_KG)])
    return _result([])
''')
    ora = _oracle("Oracle: the set of carriers with max_weight_kg >= MIN_KG; membership.", consts, '''
def _judge(value, db):
    if not _strings(value, ["carrier"]):
        return _no("expected exactly {\\"carrier\\": <string>}")
    ok = set(r["name"] for r in db.query("SELECT name, max_weight_kg FROM carriers")
             if r["max_weight_kg"] is not None and r["max_weight_kg"] >= MIN_KG)
    return _YES if value["carrier"] in ok else _no("not a carrier taking %d kg" % MIN_KG)
''')
    schema = object_schema("heavy_carrier answer", {
        "carrier": string_prop("carriers.name", "A carrier taking >= %d kg." % wmin)})
    # list_size: the rows of the search, which filters by the load floor
    knobs = {"template": "heavy_carrier", "constraints": 1, "hops": 1,
             "list_size": valid, "distractors": 0,
             "hidden_steps": 0, "valid_answers": valid, "min_kg": wmin, "comparison": ">="}
    return ("heavy_carrier", prompt, schema, knobs, sol, ver, ora, ["find_carriers"])


def _t_shipment_destination(w, ix, rng, lineage, level):
    s = rng.choice(w["shipments"])
    prompt = ("Shipment %s is being delivered to a city. Which city? Submit only a JSON object of "
              "the form {\"city\": \"<city name>\"} with the name spelled exactly as the tools "
              "return it, and nothing else." % quoted(s["id"]))
    consts = [("SHIPMENT", s["id"])]
    sol = _solution("One look-up: the shipment's destination city.", consts, '''
def solve(tools):
    return {"city": tools.get_shipment(SHIPMENT)["destination_city"]}
''')
    ver = _verifier("Verifier: the city is the shipment's destination_city (and a known city).",
                    consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"city": "str"})
    if err:
        return _result([err])
    if not db.query("SELECT 1 AS ok FROM cities WHERE name = ?", (value["city"],)):
        return _result(["unknown city %r" % value["city"]])
    rows = db.query("SELECT destination_city FROM shipments WHERE id = ?", (SHIPMENT,))
    if not rows or rows[0]["destination_city"] is None:
        return _result(["shipment %s has no destination in the database" % SHIPMENT])
    if rows[0]["destination_city"] != value["city"]:
        return _result(["shipment %s does not go to %s" % (SHIPMENT, value["city"])])
    return _result([])
''')
    ora = _oracle("Oracle: join shipments to cities, the one acceptable city; equality.",
                  consts, '''
def _judge(value, db):
    if not _strings(value, ["city"]):
        return _no("expected exactly {\\"city\\": <string>}")
    ok = [r["name"] for r in db.query(
        "SELECT c.name AS name FROM shipments s JOIN cities c ON c.name = s.destination_city "
        "WHERE s.id = ?", (SHIPMENT,))]
    return _YES if value["city"] in ok else _no("wrong destination")
''')
    schema = object_schema("shipment_destination answer", {
        "city": string_prop("cities.name", "Destination city of %s." % s["id"])})
    knobs = {"template": "shipment_destination", "constraints": 1, "hops": 1, "list_size": 1,
             "distractors": 0, "hidden_steps": 0, "valid_answers": 1, "shipment": s["id"]}
    return ("shipment_destination", prompt, schema, knobs, sol, ver, ora, ["get_shipment"])


# ----------------------------------------------------------------------- level 2 templates

def _t_depot_to_hub(w, ix, rng, lineage, level):
    options = []
    for d in w["depots"]:
        hub_routes = [r for r in ix["from"].get(d["city"], [])
                      if ix["city"][r["destination"]]["is_hub"]]
        if len(hub_routes) >= 2:
            options.append((d, hub_routes))
    d, hub_routes = rng.choice(options)
    dists = sorted(r["distance_km"] for r in hub_routes)
    limit = dists[rng.randint(0, len(dists) - 2)]
    valid = sum(1 for x in dists if x <= limit)
    prompt = ("Depot %s ships out of the city it is located in. Name any freight route that "
              "leaves that city, ends in a hub city (is_hub true in list_cities) and is at most "
              "%d km long (distance_km <= %d; exactly %d km qualifies). get_depot gives the "
              "depot's city; find_routes(origin=<that city>, to_hub=true) then lists the routes "
              "from it to hub cities shortest first. Any such route is accepted. Submit only a "
              "JSON object of the form {\"route\": \"<route code>\"} with the code spelled "
              "exactly as the tools return it, and nothing else."
              % (quoted(d["name"]), limit, limit, limit))
    consts = [("DEPOT", d["name"]), ("MAX_KM", limit)]
    # The limit is at least the shortest hub route's distance, so the first row is an answer.
    sol = _solution("Depot -> its city -> one search of that city's routes to hubs, shortest "
                    "first; the first row is within the limit.", consts, '''
def solve(tools):
    city = tools.get_depot(DEPOT)["city"]
    for r in tools.find_routes(origin=city, to_hub=True):
        if r["distance_km"] <= MAX_KM:
            return {"route": r["code"]}
    return {"route": ""}
''')
    ver = _verifier("Verifier: route exists, starts in the depot's city, ends in a hub city, "
                    "distance_km <= MAX_KM.", consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"route": "str"})
    if err:
        return _result([err])
    rows = db.query("SELECT origin, destination, distance_km FROM routes WHERE code = ?",
                    (value["route"],))
    if not rows:
        return _result(["unknown route %r" % value["route"]])
    route = rows[0]
    depot = db.query("SELECT city FROM depots WHERE name = ?", (DEPOT,))
    if not depot or depot[0]["city"] is None:
        return _result(["depot %s has no city in the database" % DEPOT])
    reasons = []
    if route["origin"] != depot[0]["city"]:
        reasons.append("route %s leaves %s, not the depot's city" % (value["route"], route["origin"]))
    hub = db.query("SELECT is_hub FROM cities WHERE name = ?", (route["destination"],))
    if not hub or hub[0]["is_hub"] != 1:
        reasons.append("route %s does not end in a hub city" % value["route"])
    if route["distance_km"] is None or route["distance_km"] > MAX_KM:
        reasons.append("route %s is longer than %d km" % (value["route"], MAX_KM))
    return _result(reasons)
''')
    ora = _oracle("Oracle: every acceptable route code from one join; membership.", consts, '''
def _judge(value, db):
    if not _strings(value, ["route"]):
        return _no("expected exactly {\\"route\\": <string>}")
    ok = set(r["code"] for r in db.query(
        "SELECT r.code AS code FROM routes r JOIN depots d ON d.city = r.origin "
        "JOIN cities c ON c.name = r.destination "
        "WHERE d.name = ? AND c.is_hub = 1 AND r.distance_km <= ?", (DEPOT, MAX_KM)))
    return _YES if value["route"] in ok else _no("not a short hub route from the depot's city")
''')
    schema = object_schema("depot_to_hub answer", {
        "route": string_prop("routes.code", "Route from %s's city to a hub, <= %d km."
                                            % (d["name"], limit))})
    # list_size: the rows of the search (the city's routes to hubs); hidden step: the city
    knobs = {"template": "depot_to_hub", "constraints": 3, "hops": 3,
             "list_size": len(hub_routes), "distractors": len(hub_routes) - valid,
             "hidden_steps": 1, "valid_answers": valid,
             "depot": d["name"], "max_km": limit, "comparison": "<="}
    return ("depot_to_hub", prompt, schema, knobs, sol, ver, ora, ["get_depot", "find_routes"])


def _t_heavy_cheap_carrier(w, ix, rng, lineage, level):
    cs = w["carriers"]
    wmin = _lineage_weight(w, rng)
    heavy = sorted(c["price_per_km"] for c in cs if c["max_weight_kg"] >= wmin)
    uniq = sorted(set(heavy))
    pmax = uniq[rng.randint(1, len(uniq) - 1)] if len(uniq) >= 2 else round(uniq[0] + 0.01, 2)
    pmax_c = int(round(pmax * 100))
    valid = sum(1 for c in cs if c["max_weight_kg"] >= wmin
                and int(round(c["price_per_km"] * 100)) < pmax_c)
    prompt = ("Name any carrier that accepts loads of at least %d kg (max_weight_kg >= %d) AND "
              "charges strictly less than %s EUR per km (price_per_km < %s; a carrier charging "
              "exactly %s does not qualify). The tool find_carriers lists the carriers cheapest "
              "first, and its argument min_weight_kg keeps only those taking at least that "
              "load. Any such carrier is accepted. Submit only a JSON object of the form "
              "{\"carrier\": \"<carrier name>\"} with the name spelled exactly as the tools "
              "return it, and nothing else."
              % (wmin, wmin, cents_text(pmax_c), cents_text(pmax_c), cents_text(pmax_c)))
    consts = [("MIN_KG", wmin), ("MAX_PRICE_CENTS", pmax_c)]
    # The price limit is above the cheapest heavy carrier's price, so the first row of the
    # search (filtered by the load floor, cheapest first) is an answer.
    sol = _solution("One search: the carriers taking MIN_KG, cheapest first; the first row is "
                    "under the price limit.", consts, '''
def solve(tools):
    for c in tools.find_carriers(min_weight_kg=MIN_KG):
        if c["max_weight_kg"] >= MIN_KG and int(round(c["price_per_km"] * 100)) < MAX_PRICE_CENTS:
            return {"carrier": c["name"]}
    return {"carrier": ""}
''')
    ver = _verifier("Verifier: carrier exists, max_weight_kg >= MIN_KG, price_per_km strictly "
                    "below MAX_PRICE_CENTS / 100 EUR.", consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"carrier": "str"})
    if err:
        return _result([err])
    rows = db.query("SELECT max_weight_kg, price_per_km FROM carriers WHERE name = ?",
                    (value["carrier"],))
    if not rows:
        return _result(["unknown carrier %r" % value["carrier"]])
    c = rows[0]
    if c["max_weight_kg"] is None or c["price_per_km"] is None:
        return _result(["carrier %s lacks data" % value["carrier"]])
    reasons = []
    if c["max_weight_kg"] < MIN_KG:
        reasons.append("%s accepts at most %s kg" % (value["carrier"], c["max_weight_kg"]))
    if not _cents(c["price_per_km"]) < MAX_PRICE_CENTS:
        reasons.append("%s charges %s EUR/km, not under the limit" % (value["carrier"],
                                                                      c["price_per_km"]))
    return _result(reasons)
''')
    ora = _oracle("Oracle: one SQL filter in integer cents; membership.", consts, '''
def _judge(value, db):
    if not _strings(value, ["carrier"]):
        return _no("expected exactly {\\"carrier\\": <string>}")
    ok = set(r["name"] for r in db.query(
        "SELECT name FROM carriers WHERE max_weight_kg >= ? "
        "AND CAST(ROUND(price_per_km * 100) AS INTEGER) < ?", (MIN_KG, MAX_PRICE_CENTS)))
    return _YES if value["carrier"] in ok else _no("carrier fails the weight or price limit")
''')
    schema = object_schema("heavy_cheap_carrier answer", {
        "carrier": string_prop("carriers.name", "Carrier taking >= %d kg at < %s EUR/km."
                                                % (wmin, cents_text(pmax_c)))})
    n_heavy = len(heavy)  # the rows of the search, which filters by the load floor
    knobs = {"template": "heavy_cheap_carrier", "constraints": 2, "hops": 1,
             "list_size": n_heavy, "distractors": n_heavy - valid, "hidden_steps": 0,
             "valid_answers": valid, "min_kg": wmin, "max_price_per_km": cents_text(pmax_c),
             "comparison": ">= weight, < price"}
    return ("heavy_cheap_carrier", prompt, schema, knobs, sol, ver, ora, ["find_carriers"])


def _direct_shipments(w, ix):
    out = []
    for s in w["shipments"]:
        origin = ix["depot"][s["origin_depot"]]["city"]
        if (origin, s["destination_city"]) in ix["pair"]:
            out.append((s, origin))
    return out


def _t_shipment_direct_route(w, ix, rng, lineage, level):
    s, origin = rng.choice(_direct_shipments(w, ix))
    valid_routes = ix["pair"][(origin, s["destination_city"])]
    prompt = ("Shipment %s leaves from a depot and goes to a destination city. Name any freight "
              "route that runs directly (one route, no transfer) from the city where the "
              "shipment's origin depot is located to the shipment's destination city. Load "
              "limits, prices and days do not matter here. get_shipment gives its origin_depot "
              "and destination_city; find_routes(origin_depot=<that depot>, destination=<that "
              "city>) then lists the direct routes between them. Any such route is accepted. "
              "Submit only a JSON object of the form {\"route\": \"<route code>\"} with the "
              "code spelled exactly as the tools return it, and nothing else." % quoted(s["id"]))
    consts = [("SHIPMENT", s["id"])]
    # The shipment is drawn among those with a direct route, so the search has a first row.
    sol = _solution("Shipment -> one search of the routes from its origin depot's city to its "
                    "destination; the first row.", consts, '''
def solve(tools):
    s = tools.get_shipment(SHIPMENT)
    for r in tools.find_routes(origin_depot=s["origin_depot"], destination=s["destination_city"]):
        if r["destination"] == s["destination_city"]:
            return {"route": r["code"]}
    return {"route": ""}
''')
    ver = _verifier("Verifier: the route exists, starts in the origin depot's city and ends in "
                    "the shipment's destination city.", consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"route": "str"})
    if err:
        return _result([err])
    rows = db.query("SELECT origin, destination FROM routes WHERE code = ?", (value["route"],))
    if not rows:
        return _result(["unknown route %r" % value["route"]])
    ship = db.query("SELECT origin_depot, destination_city FROM shipments WHERE id = ?",
                    (SHIPMENT,))
    if not ship:
        return _result(["shipment %s is missing" % SHIPMENT])
    depot = db.query("SELECT city FROM depots WHERE name = ?", (ship[0]["origin_depot"],))
    if not depot or depot[0]["city"] is None or ship[0]["destination_city"] is None:
        return _result(["shipment %s lacks its origin or destination" % SHIPMENT])
    reasons = []
    if rows[0]["origin"] != depot[0]["city"]:
        reasons.append("route %s does not start in %s" % (value["route"], depot[0]["city"]))
    if rows[0]["destination"] != ship[0]["destination_city"]:
        reasons.append("route %s does not end in %s" % (value["route"],
                                                       ship[0]["destination_city"]))
    return _result(reasons)
''')
    ora = _oracle("Oracle: the acceptable route codes from one three-table join; membership.",
                  consts, '''
def _judge(value, db):
    if not _strings(value, ["route"]):
        return _no("expected exactly {\\"route\\": <string>}")
    ok = set(r["code"] for r in db.query(
        "SELECT r.code AS code FROM shipments s JOIN depots d ON d.name = s.origin_depot "
        "JOIN routes r ON r.origin = d.city AND r.destination = s.destination_city "
        "WHERE s.id = ?", (SHIPMENT,)))
    return _YES if value["route"] in ok else _no("not a direct route for the shipment")
''')
    schema = object_schema("shipment_direct_route answer", {
        "route": string_prop("routes.code", "Direct route for %s." % s["id"])})
    # list_size: the rows of the search (the direct routes); hidden step: the depot and city
    knobs = {"template": "shipment_direct_route", "constraints": 2, "hops": 3,
             "list_size": len(valid_routes), "distractors": 0, "hidden_steps": 1,
             "valid_answers": len(valid_routes), "shipment": s["id"]}
    return ("shipment_direct_route", prompt, schema, knobs, sol, ver, ora,
            ["get_shipment", "find_routes"])


# ----------------------------------------------------------------------- level 3: direct leg

def _cost(ix, code, carrier):
    return ix["route"][code]["distance_km"] * int(round(ix["carrier"][carrier]["price_per_km"] * 100))


def _t_direct_carrier(w, ix, rng, lineage, level):
    fam = lineage % 3
    candidates = []
    for s, origin in _direct_shipments(w, ix):
        pairs = []
        for r in ix["pair"][(origin, s["destination_city"])]:
            if r["transit_days"] > s["due_days"]:
                continue
            for c in ix["on"].get(r["code"], []):
                if ix["carrier"][c]["max_weight_kg"] >= s["weight_kg"]:
                    pairs.append((_cost(ix, r["code"], c), c, r["code"]))
        if pairs:
            candidates.append((s, origin, sorted(pairs)))
    s, origin, pairs = rng.choice(candidates)
    routes_all = ix["pair"][(origin, s["destination_city"])]
    n_pairs = sum(len(ix["on"].get(r["code"], [])) for r in routes_all)
    rules = ("(a) the route runs directly from the city of the shipment's origin depot to its "
             "destination city; (b) the carrier operates that route (get_route_carriers); "
             "(c) the carrier's max_weight_kg is at least the shipment's weight_kg; (d) the "
             "route's transit_days is at most the shipment's due_days")
    cost_rule = ("The cost of a pair is the route's distance_km multiplied by the carrier's "
                 "price_per_km, in EUR, exact (no rounding).")
    fields = "{\"route\": \"<route code>\", \"carrier\": \"<carrier name>\"}"
    consts = [("SHIPMENT", s["id"])]
    if fam == 1:
        mode = "cheapest"
        best = pairs[0]
        valid = 1
        prompt = ("Shipment %s needs one carrier on one direct route. A pair (route, carrier) is "
                  "feasible when %s. %s Among the feasible pairs choose the cheapest; if several "
                  "tie at the lowest cost, take the one whose carrier name comes first in plain "
                  "character-code order, then the lowest route code in the same order. Submit "
                  "only a JSON object of the form %s with names spelled exactly as the tools "
                  "return them, and nothing else." % (quoted(s["id"]), rules, cost_rule, fields))
        consts += [("MODE", mode), ("BUDGET_CENTS", 0), ("MIN_ON_TIME", 0)]
        extra = {"objective": "min cost, ties by carrier then route",
                 "cheapest": cents_text(best[0])}
    elif fam == 0:
        mode = "budget"
        k = rng.randint(0, min(2, len(pairs) - 1))
        budget = -(-pairs[k][0] // 100)
        valid = sum(1 for p in pairs if p[0] <= budget * 100)
        prompt = ("Shipment %s needs one carrier on one direct route. Choose a pair (route, "
                  "carrier) such that %s; and (e) the cost is at most %d EUR (cost <= %d). %s "
                  "Any pair meeting all five rules is accepted. Submit only a JSON object of the "
                  "form %s with names spelled exactly as the tools return them, and nothing else."
                  % (quoted(s["id"]), rules, budget, budget, cost_rule, fields))
        consts += [("MODE", mode), ("BUDGET_CENTS", budget * 100), ("MIN_ON_TIME", 0)]
        extra = {"budget_eur": budget, "comparison": "<="}
    else:
        mode = "reliable"
        ontimes = sorted({ix["carrier"][p[1]]["on_time_pct"] for p in pairs})
        q = ontimes[rng.randint(0, len(ontimes) - 1)]
        kept = [p for p in pairs if ix["carrier"][p[1]]["on_time_pct"] >= q]
        k = rng.randint(0, min(2, len(kept) - 1))
        budget = kept[k][0] // 100 + 1
        valid = sum(1 for p in kept if p[0] < budget * 100)
        prompt = ("Shipment %s needs one carrier on one direct route. Choose a pair (route, "
                  "carrier) such that %s; (e) the carrier's on_time_pct is at least %d; and (f) "
                  "the cost is strictly less than %d EUR (cost < %d). %s Any pair meeting all six "
                  "rules is accepted. Submit only a JSON object of the form %s with names "
                  "spelled exactly as the tools return them, and nothing else."
                  % (quoted(s["id"]), rules, q, budget, budget, cost_rule, fields))
        consts += [("MODE", mode), ("BUDGET_CENTS", budget * 100), ("MIN_ON_TIME", q)]
        extra = {"budget_eur": budget, "comparison": "<", "min_on_time_pct": q}
    sol = _solution("Shipment -> depot city -> direct routes -> their carriers; keep feasible "
                    "pairs and return the cheapest (ties by carrier, route).", consts, '''
def solve(tools):
    s = tools.get_shipment(SHIPMENT)
    city = tools.get_depot(s["origin_depot"])["city"]
    best = None
    for r in tools.get_routes_from(city):
        if r["destination"] != s["destination_city"] or r["transit_days"] > s["due_days"]:
            continue
        for name in tools.get_route_carriers(r["code"]):
            c = tools.get_carrier(name)
            if c["max_weight_kg"] < s["weight_kg"] or c["on_time_pct"] < MIN_ON_TIME:
                continue
            cost = r["distance_km"] * int(round(c["price_per_km"] * 100))
            if MODE == "budget" and cost > BUDGET_CENTS:
                continue
            if MODE == "reliable" and cost >= BUDGET_CENTS:
                continue
            key = (cost, name, r["code"])
            if best is None or key < best:
                best = key
    if best is None:
        return {"route": "", "carrier": ""}
    return {"route": best[2], "carrier": best[1]}
''')
    ver = _verifier("Verifier of direct_carrier: checks each rule against the database one by "
                    "one (route, service, weight, days, and the mode's budget / on-time / "
                    "cheapest rule).", consts, '''
def _pair_cost(db, code, carrier):
    rows = db.query("SELECT r.distance_km AS d, c.price_per_km AS p FROM routes r, carriers c "
                    "WHERE r.code = ? AND c.name = ?", (code, carrier))
    return rows[0]["d"] * _cents(rows[0]["p"])


def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"route": "str", "carrier": "str"})
    if err:
        return _result([err])
    code, carrier = value["route"], value["carrier"]
    route = db.query("SELECT origin, destination, distance_km, transit_days FROM routes "
                     "WHERE code = ?", (code,))
    car = db.query("SELECT price_per_km, max_weight_kg, on_time_pct FROM carriers WHERE name = ?",
                   (carrier,))
    reasons = []
    if not route:
        reasons.append("unknown route %r" % code)
    if not car:
        reasons.append("unknown carrier %r" % carrier)
    if reasons:
        return _result(reasons)
    route, car = route[0], car[0]
    ship = db.query("SELECT s.weight_kg AS weight, s.due_days AS due, s.destination_city AS dest, "
                    "d.city AS origin FROM shipments s JOIN depots d ON d.name = s.origin_depot "
                    "WHERE s.id = ?", (SHIPMENT,))
    if not ship:
        return _result(["shipment %s is missing" % SHIPMENT])
    ship = ship[0]
    if route["origin"] != ship["origin"] or route["destination"] != ship["dest"]:
        reasons.append("route %s is not a direct route from %s to %s"
                       % (code, ship["origin"], ship["dest"]))
    if not db.query("SELECT 1 AS ok FROM carrier_routes WHERE carrier = ? AND route = ?",
                    (carrier, code)):
        reasons.append("%s does not operate route %s" % (carrier, code))
    if car["max_weight_kg"] < ship["weight"]:
        reasons.append("%s takes at most %s kg; the shipment weighs %s kg"
                       % (carrier, car["max_weight_kg"], ship["weight"]))
    if route["transit_days"] > ship["due"]:
        reasons.append("route %s takes %s days; only %s allowed"
                       % (code, route["transit_days"], ship["due"]))
    cost = route["distance_km"] * _cents(car["price_per_km"])
    if MODE == "budget" and cost > BUDGET_CENTS:
        reasons.append("cost %.2f EUR is over the budget" % (cost / 100.0))
    if MODE == "reliable":
        if car["on_time_pct"] < MIN_ON_TIME:
            reasons.append("%s is on time %s%%, below %d%%" % (carrier, car["on_time_pct"],
                                                              MIN_ON_TIME))
        if cost >= BUDGET_CENTS:
            reasons.append("cost %.2f EUR is not under the budget" % (cost / 100.0))
    if MODE == "cheapest" and not reasons:
        for other in db.query(
                "SELECT r.code AS code, cr.carrier AS carrier FROM routes r "
                "JOIN carrier_routes cr ON cr.route = r.code "
                "JOIN carriers c ON c.name = cr.carrier "
                "WHERE r.origin = ? AND r.destination = ? AND r.transit_days <= ? "
                "AND c.max_weight_kg >= ?", (ship["origin"], ship["dest"], ship["due"],
                                             ship["weight"])):
            other_cost = _pair_cost(db, other["code"], other["carrier"])
            if (other_cost, other["carrier"], other["code"]) < (cost, carrier, code):
                reasons.append("route %s with %s is cheaper or wins the tie-break"
                               % (other["code"], other["carrier"]))
                break
    return _result(reasons)
''')
    ora = _oracle("Oracle of direct_carrier: list every feasible (route, carrier) pair in one "
                  "join, derive the acceptable set for the mode, test membership.", consts, '''
def _judge(value, db):
    if not _strings(value, ["route", "carrier"]):
        return _no("expected exactly the string fields route and carrier")
    rows = db.query(
        "SELECT r.code AS code, c.name AS carrier, r.distance_km AS d, c.price_per_km AS p, "
        "c.on_time_pct AS ot FROM shipments s "
        "JOIN depots dp ON dp.name = s.origin_depot "
        "JOIN routes r ON r.origin = dp.city AND r.destination = s.destination_city "
        "JOIN carrier_routes cr ON cr.route = r.code "
        "JOIN carriers c ON c.name = cr.carrier "
        "WHERE s.id = ? AND r.transit_days <= s.due_days AND c.max_weight_kg >= s.weight_kg",
        (SHIPMENT,))
    feasible = sorted((int(round(float(r["p"]) * 100)) * r["d"], r["carrier"], r["code"], r["ot"])
                      for r in rows)
    if MODE == "cheapest":
        ok = set([(f[2], f[1]) for f in feasible[:1]])
    elif MODE == "budget":
        ok = set((f[2], f[1]) for f in feasible if f[0] <= BUDGET_CENTS)
    else:
        ok = set((f[2], f[1]) for f in feasible if f[0] < BUDGET_CENTS and f[3] >= MIN_ON_TIME)
    if (value["route"], value["carrier"]) in ok:
        return _YES
    return _no("not an acceptable (route, carrier) pair")
''')
    schema = object_schema("direct_carrier answer", {
        "route": string_prop("routes.code", "Direct route for %s." % s["id"]),
        "carrier": string_prop("carriers.name", "Carrier operating that route.")})
    knobs = {"template": "direct_carrier", "variant": mode,
             "constraints": {"budget": 5, "cheapest": 5, "reliable": 6}[mode], "hops": 5,
             "list_size": n_pairs, "distractors": n_pairs - valid, "hidden_steps": 2,
             "valid_answers": valid, "shipment": s["id"]}
    knobs.update(extra)
    return ("direct_carrier", prompt, schema, knobs, sol, ver, ora,
            ["get_shipment", "get_depot", "get_routes_from", "get_route_carriers", "get_carrier"])


# ----------------------------------------------------------------------- level 4: hub plan

def _hub_plans(w, ix, s, origin, fam, min_on_time):
    plans = []
    dest = s["destination_city"]
    for r1 in ix["from"].get(origin, []):
        if not ix["city"][r1["destination"]]["is_hub"]:
            continue
        for r2 in ix["pair"].get((r1["destination"], dest), []):
            transfer = 2 if fam == 2 and "rail" in (r1["mode"], r2["mode"]) else 1
            if r1["transit_days"] + r2["transit_days"] + transfer > s["due_days"]:
                continue
            c1s = [c for c in _fits(ix, r1["code"], s["weight_kg"])
                   if ix["carrier"][c]["on_time_pct"] >= min_on_time]
            c2s = [c for c in _fits(ix, r2["code"], s["weight_kg"])
                   if ix["carrier"][c]["on_time_pct"] >= min_on_time]
            for c1 in c1s:
                for c2 in c2s:
                    base = _cost(ix, r1["code"], c1) + _cost(ix, r2["code"], c2)
                    plans.append((base, r1["code"], c1, r2["code"], c2))
    return plans


def _t_hub_plan(w, ix, rng, lineage, level):
    fam = lineage % 3
    fee = rng.choice((90, 120, 150, 200))
    candidates = []
    for s in w["shipments"]:
        origin = ix["depot"][s["origin_depot"]]["city"]
        if ix["city"][origin]["is_hub"] or ix["city"][s["destination_city"]]["is_hub"]:
            continue
        if (origin, s["destination_city"]) in ix["pair"]:
            continue
        q = 0
        if fam == 1:
            base = _hub_plans(w, ix, s, origin, fam, 0)
            ots = sorted({min(ix["carrier"][p[2]]["on_time_pct"], ix["carrier"][p[4]]["on_time_pct"])
                          for p in base})
            if not ots:
                continue
            q = ots[len(ots) // 2]
        plans = _hub_plans(w, ix, s, origin, fam, q)
        if plans:
            candidates.append((s, origin, q, plans))
    if not candidates:  # the world always has indirect shipments, but stay total
        return _t_direct_carrier(w, ix, rng, lineage, level)
    s, origin, q, plans = rng.choice(candidates)
    priced = sorted((base + (fee * 100 if p1 != p2 else 0), r1, p1, r2, p2)
                    for base, r1, p1, r2, p2 in plans)
    k = rng.randint(0, min(2, len(priced) - 1))
    budget = -(-priced[k][0] // 100)
    valid = sum(1 for p in priced if p[0] <= budget * 100)
    all_plans = _hub_plans(w, ix, dict(s, due_days=10 ** 6, weight_kg=0), origin, fam, 0)
    transfer_rule = ("the hub transfer adds 2 days when either leg is a rail route and 1 day "
                     "otherwise" if fam == 2 else "the hub transfer adds 1 day")
    extra_rule = ""
    if fam == 1:
        extra_rule = " (g) both carriers have on_time_pct of at least %d." % q
    prompt = ("Shipment %s has no direct route, so it must travel in exactly two legs through one "
              "hub city (is_hub true in list_cities). Leg 1 is a route from the city of the "
              "shipment's origin depot to a hub city; leg 2 is a route from that same hub city to "
              "the shipment's destination city. Choose a route and a carrier for each leg so that: "
              "(a) each carrier operates its leg's route (get_route_carriers); (b) each carrier's "
              "max_weight_kg is at least the shipment's weight_kg; (c) leg 1's transit_days + "
              "leg 2's transit_days + the transfer time is at most the shipment's due_days, where "
              "%s; (d) the total cost is at most %d EUR (total <= %d), where a leg costs its "
              "route's distance_km multiplied by its carrier's price_per_km (EUR, exact, no "
              "rounding) and the total is the two leg costs plus a transfer fee of %d EUR that is "
              "charged only when the two legs use different carriers (no fee when one carrier "
              "runs both legs).%s Any plan meeting every rule is accepted. Submit only a JSON "
              "object of the form {\"leg1_route\": \"<code>\", \"leg1_carrier\": \"<name>\", "
              "\"leg2_route\": \"<code>\", \"leg2_carrier\": \"<name>\"} with names spelled exactly "
              "as the tools return them, and nothing else."
              % (quoted(s["id"]), transfer_rule, budget, budget, fee, extra_rule))
    consts = [("SHIPMENT", s["id"]), ("BUDGET_CENTS", budget * 100), ("FEE_CENTS", fee * 100),
              ("RAIL_TRANSFER_DAYS", 2 if fam == 2 else 1), ("MIN_ON_TIME", q)]
    sol = _solution("Enumerate hub routes out of the origin city and on to the destination, their "
                    "carriers, and return the cheapest plan within every rule.", consts, '''
def solve(tools):
    s = tools.get_shipment(SHIPMENT)
    origin = tools.get_depot(s["origin_depot"])["city"]
    hubs = [c["name"] for c in tools.list_cities() if c["is_hub"]]
    info = {}

    def carriers(code):
        out = []
        for name in tools.get_route_carriers(code):
            if name not in info:
                info[name] = tools.get_carrier(name)
            c = info[name]
            if c["max_weight_kg"] >= s["weight_kg"] and c["on_time_pct"] >= MIN_ON_TIME:
                out.append(c)
        return out

    best = None
    for r1 in tools.get_routes_from(origin):
        if r1["destination"] not in hubs:
            continue
        for r2 in tools.get_routes_from(r1["destination"]):
            if r2["destination"] != s["destination_city"]:
                continue
            rail = r1["mode"] == "rail" or r2["mode"] == "rail"
            transfer = RAIL_TRANSFER_DAYS if rail else 1
            if r1["transit_days"] + r2["transit_days"] + transfer > s["due_days"]:
                continue
            for c1 in carriers(r1["code"]):
                for c2 in carriers(r2["code"]):
                    cost = (r1["distance_km"] * int(round(c1["price_per_km"] * 100))
                            + r2["distance_km"] * int(round(c2["price_per_km"] * 100)))
                    if c1["name"] != c2["name"]:
                        cost += FEE_CENTS
                    key = (cost, r1["code"], c1["name"], r2["code"], c2["name"])
                    if cost <= BUDGET_CENTS and (best is None or key < best):
                        best = key
    if best is None:
        return {"leg1_route": "", "leg1_carrier": "", "leg2_route": "", "leg2_carrier": ""}
    return {"leg1_route": best[1], "leg1_carrier": best[2], "leg2_route": best[3],
            "leg2_carrier": best[4]}
''')
    ver = _verifier("Verifier of hub_plan: every rule checked against the database, one reason "
                    "per broken rule (unknown names fail).", consts, '''
KEYS = {"leg1_route": "str", "leg1_carrier": "str", "leg2_route": "str", "leg2_carrier": "str"}


def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, KEYS)
    if err:
        return _result([err])
    reasons = []
    legs = []
    for n in (1, 2):
        code, carrier = value["leg%d_route" % n], value["leg%d_carrier" % n]
        r = db.query("SELECT origin, destination, mode, distance_km, transit_days FROM routes "
                     "WHERE code = ?", (code,))
        c = db.query("SELECT name, price_per_km, max_weight_kg, on_time_pct FROM carriers "
                     "WHERE name = ?", (carrier,))
        if not r:
            reasons.append("leg %d: unknown route %r" % (n, code))
        if not c:
            reasons.append("leg %d: unknown carrier %r" % (n, carrier))
        if r and c:
            legs.append((code, r[0], c[0]))
    if reasons:
        return _result(reasons)
    ship = db.query("SELECT s.weight_kg AS weight, s.due_days AS due, s.destination_city AS dest, "
                    "d.city AS origin FROM shipments s JOIN depots d ON d.name = s.origin_depot "
                    "WHERE s.id = ?", (SHIPMENT,))
    if not ship:
        return _result(["shipment %s is missing" % SHIPMENT])
    ship = ship[0]
    (code1, r1, c1), (code2, r2, c2) = legs
    if r1["origin"] != ship["origin"]:
        reasons.append("leg 1 must start in %s" % ship["origin"])
    hub = db.query("SELECT is_hub FROM cities WHERE name = ?", (r1["destination"],))
    if not hub or hub[0]["is_hub"] != 1:
        reasons.append("leg 1 must end in a hub city, %s is not one" % r1["destination"])
    if r2["origin"] != r1["destination"]:
        reasons.append("leg 2 must start where leg 1 ends (%s)" % r1["destination"])
    if r2["destination"] != ship["dest"]:
        reasons.append("leg 2 must end in %s" % ship["dest"])
    for n, code, c in ((1, code1, c1), (2, code2, c2)):
        if not db.query("SELECT 1 AS ok FROM carrier_routes WHERE carrier = ? AND route = ?",
                        (c["name"], code)):
            reasons.append("leg %d: %s does not operate route %s" % (n, c["name"], code))
        if c["max_weight_kg"] < ship["weight"]:
            reasons.append("leg %d: %s takes at most %s kg" % (n, c["name"], c["max_weight_kg"]))
        if c["on_time_pct"] < MIN_ON_TIME:
            reasons.append("leg %d: %s is on time only %s%%" % (n, c["name"], c["on_time_pct"]))
    transfer = 1
    if r1["mode"] == "rail" or r2["mode"] == "rail":
        transfer = RAIL_TRANSFER_DAYS
    days = r1["transit_days"] + r2["transit_days"] + transfer
    if days > ship["due"]:
        reasons.append("the plan takes %d days; only %s allowed" % (days, ship["due"]))
    total = r1["distance_km"] * _cents(c1["price_per_km"]) + r2["distance_km"] * _cents(
        c2["price_per_km"])
    if c1["name"] != c2["name"]:
        total += FEE_CENTS
    if total > BUDGET_CENTS:
        reasons.append("total %.2f EUR is over the budget of %.2f EUR"
                       % (total / 100.0, BUDGET_CENTS / 100.0))
    return _result(reasons)
''')
    ora = _oracle("Oracle of hub_plan: build every acceptable plan (a join of the shipment, its "
                  "two candidate legs and their carriers), then test membership.", consts, '''
KEYS = ["leg1_route", "leg1_carrier", "leg2_route", "leg2_carrier"]


def _judge(value, db):
    if not _strings(value, KEYS):
        return _no("expected exactly the string fields " + ", ".join(KEYS))
    ship = db.query("SELECT s.weight_kg AS w, s.due_days AS due, s.destination_city AS dest, "
                    "d.city AS origin FROM shipments s JOIN depots d ON d.name = s.origin_depot "
                    "WHERE s.id = ?", (SHIPMENT,))[0]
    svc = {}
    for r in db.query("SELECT cr.route AS route, c.name AS name, c.price_per_km AS p "
                      "FROM carrier_routes cr JOIN carriers c ON c.name = cr.carrier "
                      "WHERE c.max_weight_kg >= ? AND c.on_time_pct >= ?", (ship["w"], MIN_ON_TIME)):
        svc.setdefault(r["route"], []).append((r["name"], int(round(float(r["p"]) * 100))))
    legs = db.query("SELECT a.code AS a, b.code AS b, a.distance_km AS da, b.distance_km AS dbk, "
                    "a.transit_days + b.transit_days + CASE WHEN a.mode = 'rail' OR b.mode = 'rail' "
                    "THEN ? ELSE 1 END AS days "
                    "FROM routes a JOIN cities h ON h.name = a.destination AND h.is_hub = 1 "
                    "JOIN routes b ON b.origin = a.destination "
                    "WHERE a.origin = ? AND b.destination = ?",
                    (RAIL_TRANSFER_DAYS, ship["origin"], ship["dest"]))
    ok = set()
    for leg in legs:
        if leg["days"] > ship["due"]:
            continue
        for n1, p1 in svc.get(leg["a"], []):
            for n2, p2 in svc.get(leg["b"], []):
                total = leg["da"] * p1 + leg["dbk"] * p2 + (0 if n1 == n2 else FEE_CENTS)
                if total <= BUDGET_CENTS:
                    ok.add((leg["a"], n1, leg["b"], n2))
    key = (value["leg1_route"], value["leg1_carrier"], value["leg2_route"], value["leg2_carrier"])
    return _YES if key in ok else _no("not an acceptable two-leg plan")
''')
    schema = object_schema("hub_plan answer", {
        "leg1_route": string_prop("routes.code", "Route from the origin depot's city to a hub."),
        "leg1_carrier": string_prop("carriers.name", "Carrier operating leg 1."),
        "leg2_route": string_prop("routes.code", "Route from that hub to the destination city."),
        "leg2_carrier": string_prop("carriers.name", "Carrier operating leg 2.")})
    knobs = {"template": "hub_plan", "variant": ("fee", "fee+on_time", "fee+rail_transfer")[fam],
             "constraints": 8 + (1 if fam == 1 else 0), "hops": 8,
             "list_size": len(all_plans), "distractors": len(all_plans) - valid,
             "hidden_steps": 3, "valid_answers": valid, "shipment": s["id"],
             "budget_eur": budget, "transfer_fee_eur": fee, "conditional_rules": 1 + (fam == 2)}
    if fam == 1:
        knobs["min_on_time_pct"] = q
    return ("hub_plan", prompt, schema, knobs, sol, ver, ora,
            ["get_shipment", "get_depot", "list_cities", "get_routes_from", "get_route_carriers",
             "get_carrier"])


# ------------------------------------------------------------------------------------ tasks

_LADDER = {
    0: (_t_short_route, _t_depot_to_hub, _t_direct_carrier, _t_hub_plan),
    1: (_t_heavy_carrier, _t_heavy_cheap_carrier, _t_direct_carrier, _t_hub_plan),
    2: (_t_shipment_destination, _t_shipment_direct_route, _t_direct_carrier, _t_hub_plan),
}


def task(seed, lineage, level, attempt):
    w = _world(seed)
    ix = _index(w)
    make = _LADDER[lineage % 3][level - 1]
    if make in (_t_heavy_carrier, _t_heavy_cheap_carrier):
        rng = rng_for(ID, seed, "lineage", lineage, attempt)  # shared by levels 1 and 2
    else:
        rng = rng_for(ID, seed, "task", lineage, level, attempt)
    template, prompt, schema, knobs, sol, ver, ora, tools = make(w, ix, rng, lineage, level)
    knobs = dict(knobs, level=level, lineage=lineage, attempt=attempt, family=lineage % 3)
    return {"id": "%s_l%d_%d" % (template, level, lineage), "prompt": prompt,
            "answer_schema": schema, "knobs": knobs, "solution": sol, "verifier": ver,
            "oracle": ora, "tools": tools}
