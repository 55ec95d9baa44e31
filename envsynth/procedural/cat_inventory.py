"""Procedural category "inventory": warehouses, items, stock levels, suppliers and their offers.

The world: five made-up warehouses, two dozen items in six categories, per-warehouse stock rows
(on hand, reorder point, maximum stock), eight suppliers with a rating, and supplier offers per
item (unit cost in EUR, lead time in days, minimum order quantity). Every warehouse has three or
four items below their reorder point (one of them urgent: under half of it) and one item exactly
at it (not below: a boundary distractor).

Lineages rotate over three themes (lineage % 3): 0 low stock, 1 item sourcing, 2 supplier
catalogues; the level makes the theme harder:
    1  one constraint, answered by one search
    2  two constraints, answered by one search with two filter values
    3  one reorder line (item, supplier, quantity) under lead-time, stock-window and budget
       rules, with the augmented tool get_item_offers
    4  a restocking plan: one line per low item of a warehouse, lead-time limits, a shipping
       fee per supplier waived above a spend threshold, a budget, and a theme-specific
       conditional rule
Levels 1 and 2 are one search (find_stock lists a warehouse's stock furthest below its reorder
point first, by category or supplier; find_warehouses the warehouses of an item with the most
units on hand first; find_offers the offers within a lead-time limit, cheapest first): the answer
is its first row. Levels 3 and 4 scan stock rows and offers with the listing tools.
Every threshold comes from the rows (oracle first), so every task is solvable by construction.
"""

import functools
import itertools

import synth_common
from synth_common import (cents_text, insert_rows, object_schema, quoted, rng_for, string_prop,
                          unique_words)

ID = "inventory"
TITLE = "Warehouse inventory and restocking"
DESCRIPTION = ("Manage stock across made-up warehouses: items by category, on-hand stock with "
               "reorder points and maximum stock, suppliers with ratings, and supplier offers "
               "with a unit cost (EUR), a lead time (days) and a minimum order quantity. Tasks "
               "range from a stock look-up to a restocking plan of several items under a budget, "
               "lead-time limits and conditional shipping fees.")
MAX_LEVEL = 4

# ------------------------------------------------------------------------------------ tools

PREAMBLE = '''"""Inventory tools over a database of warehouses, items, stock levels, suppliers and offers.

The runtime injects a module global ``db`` before any tool is called:
``db.query(sql, params=()) -> list[dict]`` on the session's own copy of the data.
Do not assign ``db`` here.  Public functions are tools; helpers start with ``_``.

Units: stock and quantities in whole units of the item, money in EUR, lead times in days.
Names must be given exactly as the listing tools return them.
"""

''' + synth_common.join_defs(synth_common.TOOL_QUERY, synth_common.TOOL_REQUIRE_STR, '''
def _close(table, value):
    """Up to three existing names that look like `value` (case/space-insensitive)."""
    key = "".join(value.lower().split())
    rows = _q("SELECT name FROM %s ORDER BY name" % table)
    same = [r["name"] for r in rows if "".join(r["name"].lower().split()) == key]
    if same:
        return same[:3]
    return [r["name"] for r in rows if key and key in "".join(r["name"].lower().split())][:3]


def _check(kind, table, value, listing):
    _require_str(value, kind)
    if not _q("SELECT 1 AS ok FROM %s WHERE name = ?" % table, (value,)):
        hint = _close(table, value)
        msg = "unknown %s %r" % (kind, value)
        if hint:
            msg += "; did you mean " + ", ".join(repr(h) for h in hint) + "?"
        raise ValueError(msg + "; call %s for the valid names" % listing)


def _category(category):
    if not isinstance(category, str):
        raise ValueError("category must be a string")
    valid = [r["category"] for r in _q("SELECT DISTINCT category FROM items ORDER BY category")]
    if category not in valid:
        raise ValueError("unknown category %r; valid categories: %s"
                         % (category, ", ".join(valid)))


def _count(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("%s must be a whole number >= 0, got %r" % (what, value))
''')

TOOLS = {
    "list_warehouses": '''
def list_warehouses():
    """List all warehouses sorted by name, as objects {"name", "region"}."""
    return [dict(r) for r in _q("SELECT name, region FROM warehouses ORDER BY name")]
''',
    "list_items": '''
def list_items(category: str = ""):
    """List catalogue items sorted by name, as objects {"name", "category", "unit"}; unit is what one unit of stock is (box, roll, piece, ...).

    Args:
        category: optional exact category name to list only that category's items; "" lists every item.
    """
    if not isinstance(category, str):
        raise ValueError("category must be a string")
    if category.strip():
        valid = [r["category"] for r in _q("SELECT DISTINCT category FROM items ORDER BY category")]
        if category not in valid:
            raise ValueError("unknown category %r; valid categories: %s"
                             % (category, ", ".join(valid)))
        rows = _q("SELECT name, category, unit FROM items WHERE category = ? ORDER BY name",
                  (category,))
    else:
        rows = _q("SELECT name, category, unit FROM items ORDER BY name")
    return [dict(r) for r in rows]
''',
    "get_item": '''
def get_item(item: str):
    """Get one item as {"name", "category", "unit"}.

    Args:
        item: exact item name, as returned by list_items().
    """
    _check("item", "items", item, "list_items()")
    return dict(_q("SELECT name, category, unit FROM items WHERE name = ?", (item,))[0])
''',
    "get_warehouse_stock": '''
def get_warehouse_stock(warehouse: str):
    """List the stock of every item a warehouse carries, sorted by item, as objects {"item", "on_hand" (units in stock now), "reorder_point" (restock when stock falls below this), "max_stock" (most units the warehouse can hold)}. Items not listed are not carried there.

    Args:
        warehouse: exact warehouse name, as returned by list_warehouses().
    """
    _check("warehouse", "warehouses", warehouse, "list_warehouses()")
    rows = _q("SELECT item, on_hand, reorder_point, max_stock FROM stock WHERE warehouse = ? "
              "ORDER BY item", (warehouse,))
    return [dict(r) for r in rows]
''',
    "get_stock": '''
def get_stock(warehouse: str, item: str):
    """Get one stock row as {"warehouse", "item", "on_hand", "reorder_point", "max_stock"}; raises an error when the warehouse does not carry the item.

    Args:
        warehouse: exact warehouse name, as returned by list_warehouses().
        item: exact item name, as returned by list_items().
    """
    _check("warehouse", "warehouses", warehouse, "list_warehouses()")
    _check("item", "items", item, "list_items()")
    rows = _q("SELECT warehouse, item, on_hand, reorder_point, max_stock FROM stock "
              "WHERE warehouse = ? AND item = ?", (warehouse, item))
    if not rows:
        raise ValueError("%s does not carry %s; get_warehouse_stock(%r) lists what it carries"
                         % (warehouse, item, warehouse))
    return dict(rows[0])
''',
    "list_suppliers": '''
def list_suppliers():
    """List all suppliers sorted by name, as objects {"name", "country", "rating" (1.0-5.0, one decimal)}."""
    return [dict(r) for r in _q("SELECT name, country, rating FROM suppliers ORDER BY name")]
''',
    "get_supplier_offers": '''
def get_supplier_offers(supplier: str):
    """List what one supplier sells, sorted by item, as objects {"item", "unit_cost" (EUR per unit), "lead_time_days" (days from order to delivery), "min_order_qty" (smallest quantity it accepts in one order line)}.

    Args:
        supplier: exact supplier name, as returned by list_suppliers().
    """
    _check("supplier", "suppliers", supplier, "list_suppliers()")
    rows = _q("SELECT item, unit_cost, lead_time_days, min_order_qty FROM offers "
              "WHERE supplier = ? ORDER BY item", (supplier,))
    return [dict(r) for r in rows]
''',
    "get_item_offers": '''
def get_item_offers(item: str):
    """List every supplier offer for one item, sorted by supplier, as objects {"supplier", "unit_cost" (EUR per unit), "lead_time_days", "min_order_qty"}.

    Args:
        item: exact item name, as returned by list_items().
    """
    _check("item", "items", item, "list_items()")
    rows = _q("SELECT supplier, unit_cost, lead_time_days, min_order_qty FROM offers "
              "WHERE item = ? ORDER BY supplier", (item,))
    return [dict(r) for r in rows]
''',
    "find_stock": '''
def find_stock(warehouse: str, category: str = "", supplier: str = ""):
    """Search a warehouse's stock, optionally by item category and by a supplier that sells the
    item. Returns a list of objects {"item", "category", "on_hand", "reorder_point",
    "max_stock"} ordered by on_hand minus reorder_point, then item: the item furthest below its
    reorder point first (an item is below it when on_hand < reorder_point).

    Args:
        warehouse: exact warehouse name, as returned by list_warehouses().
        category: keep only items of this exact category (see list_items()); "" keeps all.
        supplier: keep only items this supplier sells (exact name, as returned by
            list_suppliers()); "" keeps all.
    """
    _check("warehouse", "warehouses", warehouse, "list_warehouses()")
    if not isinstance(category, str) or not isinstance(supplier, str):
        raise ValueError("category and supplier must be strings")
    sql = ("SELECT s.item AS item, i.category AS category, s.on_hand AS on_hand, "
           "s.reorder_point AS reorder_point, s.max_stock AS max_stock FROM stock s "
           "JOIN items i ON i.name = s.item WHERE s.warehouse = ?")
    params = [warehouse]
    if category:
        _category(category)
        sql += " AND i.category = ?"
        params.append(category)
    if supplier:
        _check("supplier", "suppliers", supplier, "list_suppliers()")
        sql += " AND s.item IN (SELECT item FROM offers WHERE supplier = ?)"
        params.append(supplier)
    rows = _q(sql + " ORDER BY s.on_hand - s.reorder_point, s.item", tuple(params))
    return [dict(r) for r in rows]
''',
    "find_warehouses": '''
def find_warehouses(item: str, min_on_hand: int = 0):
    """Search the warehouses that carry an item, optionally by a minimum stock. Returns a list of
    objects {"warehouse", "region", "item", "on_hand", "reorder_point", "max_stock"} ordered by
    on_hand, then warehouse: the warehouse with the most units on hand first.

    Args:
        item: exact item name, as returned by list_items().
        min_on_hand: keep only warehouses with at least this many units on hand
            (on_hand >= min_on_hand); 0 keeps every warehouse that carries the item.
    """
    _check("item", "items", item, "list_items()")
    _count(min_on_hand, "min_on_hand")
    rows = _q("SELECT s.warehouse AS warehouse, w.region AS region, s.item AS item, "
              "s.on_hand AS on_hand, s.reorder_point AS reorder_point, s.max_stock AS max_stock "
              "FROM stock s JOIN warehouses w ON w.name = s.warehouse "
              "WHERE s.item = ? AND s.on_hand >= ? ORDER BY s.on_hand DESC, s.warehouse",
              (item, min_on_hand))
    return [dict(r) for r in rows]
''',
    "find_offers": '''
def find_offers(item: str = "", supplier: str = "", max_lead_days: int = 0):
    """Search supplier offers by item, by supplier or both, optionally by a lead-time limit.
    Returns a list of objects {"supplier", "item", "unit_cost" (EUR per unit), "lead_time_days",
    "min_order_qty"} ordered by unit_cost, then lead_time_days, supplier and item: the cheapest
    first.

    Args:
        item: keep only offers of this exact item (see list_items()); "" keeps all.
        supplier: keep only offers of this exact supplier (see list_suppliers()); "" keeps all.
        max_lead_days: keep only offers delivered within this many days
            (lead_time_days <= max_lead_days); 0 means no limit.
    """
    if not isinstance(item, str) or not isinstance(supplier, str):
        raise ValueError("item and supplier must be strings")
    _count(max_lead_days, "max_lead_days")
    sql = ("SELECT supplier, item, unit_cost, lead_time_days, min_order_qty FROM offers "
           "WHERE 1 = 1")
    params = []
    if item:
        _check("item", "items", item, "list_items()")
        sql += " AND item = ?"
        params.append(item)
    if supplier:
        _check("supplier", "suppliers", supplier, "list_suppliers()")
        sql += " AND supplier = ?"
        params.append(supplier)
    if max_lead_days:
        sql += " AND lead_time_days <= ?"
        params.append(max_lead_days)
    rows = _q(sql + " ORDER BY unit_cost, lead_time_days, supplier, item", tuple(params))
    return [dict(r) for r in rows]
''',
}
TOOLS = {name: source.strip("\n") + "\n" for name, source in TOOLS.items()}

BASE_TOOLS = ["list_warehouses", "list_items", "get_item", "get_warehouse_stock", "get_stock",
              "list_suppliers", "get_supplier_offers", "find_stock", "find_warehouses",
              "find_offers"]

# ------------------------------------------------------------------------------------ world

_CATEGORIES = (
    ("fasteners", (("Bolts", "box"), ("Rivets", "box"), ("Anchors", "box"), ("Washers", "box")),
     (3, 25)),
    ("electrical", (("Cable", "roll"), ("Relays", "piece"), ("Fuses", "pack"),
                    ("Connectors", "pack")), (4, 60)),
    ("packaging", (("Cartons", "bundle"), ("Stretch Film", "roll"), ("Tape", "roll"),
                   ("Labels", "roll")), (2, 30)),
    ("safety", (("Gloves", "pair"), ("Helmets", "piece"), ("Goggles", "piece"),
                ("Vests", "piece")), (3, 45)),
    ("cleaning", (("Degreaser", "can"), ("Wipes", "pack"), ("Detergent", "drum")), (2, 35)),
    ("tools", (("Drill Bits", "set"), ("Blades", "pack"), ("Clamps", "piece")), (5, 80)),
)
_REGIONS = ("North", "South", "East", "West", "Central")
_SUPPLIER_SUFFIX = ("Supply", "Trading", "Industrial", "Wholesale", "Distribution")
_MOQS = (5, 10, 20, 25, 50, 100)


@functools.lru_cache(maxsize=16)
def _world(seed):
    rng = rng_for(ID, seed, "world")
    taken = set()
    words = unique_words(rng, 24 + 5 + 8 + 4, taken=taken)
    item_words, wh_words = words[:24], words[24:29]
    sup_words, countries = words[29:37], words[37:41]
    items = []
    base_price = {}
    for k, wd in enumerate(item_words):
        cat, nouns, (lo, hi) = _CATEGORIES[k % len(_CATEGORIES)] if k < 12 else \
            rng.choice(_CATEGORIES)
        noun, unit = rng.choice(nouns)
        name = "%s %s" % (wd, noun)
        items.append({"name": name, "category": cat, "unit": unit})
        base_price[name] = rng.uniform(lo, hi)
    items.sort(key=lambda i: i["name"])
    warehouses = [{"name": "%s Warehouse" % wd, "region": reg}
                  for wd, reg in zip(wh_words, rng.sample(_REGIONS, 5))]
    warehouses.sort(key=lambda w: w["name"])
    suppliers = [{"name": "%s %s" % (wd, rng.choice(_SUPPLIER_SUFFIX)),
                  "country": rng.choice(countries), "rating": round(rng.uniform(2.6, 5.0), 1)}
                 for wd in sup_words]
    suppliers.sort(key=lambda s: s["name"])

    stock = []
    for wh in warehouses:
        carried = sorted(rng.sample([i["name"] for i in items], rng.randint(14, 18)))
        order = list(carried)
        rng.shuffle(order)
        n_low = rng.randint(3, 4)
        for pos, name in enumerate(order):
            rop = rng.randrange(20, 205, 5)
            mx = rop * rng.choice((3, 4, 5))
            if pos == 0:
                on_hand = rng.randint(0, rop // 2 - 1)  # urgent: under half the reorder point
            elif pos < n_low:
                on_hand = rng.randint(0, rop - 1)
            elif pos == n_low:
                on_hand = rop  # exactly at the reorder point: not below it
            else:
                on_hand = rng.randint(rop + 1, mx)
            stock.append({"warehouse": wh["name"], "item": name, "on_hand": on_hand,
                          "reorder_point": rop, "max_stock": mx})
    stock.sort(key=lambda s: (s["warehouse"], s["item"]))

    offers = []
    for it in items:
        chosen = sorted(rng.sample(range(len(suppliers)), rng.randint(2, 4)))
        rows = []
        for si in chosen:
            rows.append({"supplier": suppliers[si]["name"], "item": it["name"],
                         "unit_cost": round(base_price[it["name"]] * rng.uniform(0.85, 1.25), 2),
                         "lead_time_days": rng.randint(2, 21), "min_order_qty": rng.choice(_MOQS)})
        if min(r["min_order_qty"] for r in rows) > 20:
            rows[rng.randrange(len(rows))]["min_order_qty"] = 10
        offers.extend(rows)
    offers.sort(key=lambda o: (o["supplier"], o["item"]))
    return {"items": items, "warehouses": warehouses, "suppliers": suppliers, "stock": stock,
            "offers": offers}


def _index(w):
    ix = {"item": {i["name"]: i for i in w["items"]},
          "supplier": {s["name"]: s for s in w["suppliers"]},
          "stock": {(s["warehouse"], s["item"]): s for s in w["stock"]},
          "at": {}, "offers_of": {}, "sells": {}}
    for s in w["stock"]:
        ix["at"].setdefault(s["warehouse"], []).append(s)
    for o in w["offers"]:
        ix["offers_of"].setdefault(o["item"], []).append(o)
        ix["sells"].setdefault(o["supplier"], []).append(o)
    return ix


def _low(ix, wh):
    return [s for s in ix["at"][wh] if s["on_hand"] < s["reorder_point"]]


def environment(seed):
    w = _world(seed)
    sql = ["-- Inventory world, seed %d (envsynth procedural, category inventory).\n" % seed,
           "CREATE TABLE warehouses (name TEXT PRIMARY KEY, region TEXT NOT NULL);\n",
           "CREATE TABLE items (name TEXT PRIMARY KEY, category TEXT NOT NULL, "
           "unit TEXT NOT NULL);\n",
           "CREATE TABLE suppliers (name TEXT PRIMARY KEY, country TEXT NOT NULL, "
           "rating REAL NOT NULL);\n",
           "CREATE TABLE stock (warehouse TEXT NOT NULL REFERENCES warehouses(name), "
           "item TEXT NOT NULL REFERENCES items(name), on_hand INTEGER NOT NULL, "
           "reorder_point INTEGER NOT NULL, max_stock INTEGER NOT NULL, "
           "PRIMARY KEY (warehouse, item));\n",
           "CREATE TABLE offers (supplier TEXT NOT NULL REFERENCES suppliers(name), "
           "item TEXT NOT NULL REFERENCES items(name), unit_cost REAL NOT NULL, "
           "lead_time_days INTEGER NOT NULL, min_order_qty INTEGER NOT NULL, "
           "PRIMARY KEY (supplier, item));\n"]
    sql.append(insert_rows("warehouses", ("name", "region"),
                           [(x["name"], x["region"]) for x in w["warehouses"]]))
    sql.append(insert_rows("items", ("name", "category", "unit"),
                           [(x["name"], x["category"], x["unit"]) for x in w["items"]]))
    sql.append(insert_rows("suppliers", ("name", "country", "rating"),
                           [(x["name"], x["country"], x["rating"]) for x in w["suppliers"]]))
    sql.append(insert_rows("stock", ("warehouse", "item", "on_hand", "reorder_point", "max_stock"),
                           [(x["warehouse"], x["item"], x["on_hand"], x["reorder_point"],
                             x["max_stock"]) for x in w["stock"]]))
    sql.append(insert_rows("offers", ("supplier", "item", "unit_cost", "lead_time_days",
                                      "min_order_qty"),
                           [(x["supplier"], x["item"], x["unit_cost"], x["lead_time_days"],
                             x["min_order_qty"]) for x in w["offers"]]))
    return {"name": "%s_%d" % (ID, seed),
            "description": "Inventory of %d made-up warehouses: %d items, %d stock rows, %d "
                           "suppliers and %d offers. "
                           % (len(w["warehouses"]), len(w["items"]), len(w["stock"]),
                              len(w["suppliers"]), len(w["offers"])) + DESCRIPTION,
            "schema_sql": "".join(sql)}


# ------------------------------------------------------------------------------ judge code

_COMMON = "\n" + synth_common.join_defs(synth_common.VERDICT_RESULT_ITER, '''
def _shape(value, fields):
    """(value, None) when value is an object with exactly the keys of `fields`, each of the
    declared kind ("str": a string; "int": an integer, not a boolean)."""
    if not isinstance(value, dict):
        return None, "expected a JSON object"
    extra = sorted(str(k) for k in value if k not in fields)
    if extra:
        return None, "unexpected field(s): " + ", ".join(extra)
    for key in sorted(fields):
        if key not in value:
            return None, "missing field %r" % key
        v = value[key]
        if fields[key] == "str" and not isinstance(v, str):
            return None, "field %r must be a string" % key
        if fields[key] == "int" and (isinstance(v, bool) or not isinstance(v, int)):
            return None, "field %r must be an integer" % key
    return value, None
''', synth_common.EUR_CENTS, '''
def _tenths(x):
    return int(round(float(x) * 10))
''', synth_common.VERIFY_TOTAL)

_ORACLE_COMMON = "\n" + synth_common.join_defs(synth_common.VERDICT_NO_WHY, '''
def _record(value, strings, ints=()):
    """True when value is an object with exactly the keys strings + ints, the first ones str,
    the others int (booleans are not integers here)."""
    if not isinstance(value, dict) or sorted(value) != sorted(list(strings) + list(ints)):
        return False
    return (all(type(value[k]) is str for k in strings)
            and all(type(value[k]) is int for k in ints))
''', synth_common.ORACLE_DECODED_JUDGE_TOTAL)


_verifier = functools.partial(synth_common.source_text, helpers=_COMMON)
_oracle = functools.partial(synth_common.source_text, helpers=_ORACLE_COMMON)


def _solution(doc, consts, body, imports=""):
    return ('"""%s"""\n\n%s' % (doc, imports + "\n" if imports else "")
            + synth_common.const_lines(consts) + "\n" + body.strip("\n") + "\n")


def _c(x):
    return int(round(x * 100))


def _tenths(x):
    return int(round(x * 10))


_SUBMIT = ("Submit only a JSON object of the form %s with names spelled exactly as the tools "
           "return them, and nothing else.")

# ----------------------------------------------------------------------- level 1 templates

# Levels 1 and 2 are one search whose first row is an answer: find_stock lists the stock furthest
# below its reorder point first (filtered by category or supplier), find_warehouses the most units
# on hand first (filtered by the floor), find_offers the cheapest first (filtered by item or
# supplier and the lead-time limit). Each constraint is either a filter of the search or the
# bound its order puts first, so the first row holds whenever any row does.
_S_FIRST_LOW = '''
def solve(tools):
    for row in tools.find_stock(%s):
        if row["on_hand"] < row["reorder_point"]:
            return {"item": row["item"]}
    return {"item": ""}
'''


def _t_low_item(w, ix, rng, lineage, level):
    wh = rng.choice(w["warehouses"])["name"]
    low = _low(ix, wh)
    prompt = ("Name any item that %s carries whose on-hand stock is strictly below its reorder "
              "point (on_hand < reorder_point; an item exactly at its reorder point is not "
              "below it). find_stock lists a warehouse's stock, the item furthest below its "
              "reorder point first. Any such item is accepted. " % quoted(wh)
              + _SUBMIT % "{\"item\": \"<item name>\"}")
    consts = [("WAREHOUSE", wh)]
    sol = _solution("One search of the warehouse's stock, the item furthest below its reorder "
                    "point first: the answer is its first row.", consts, _S_FIRST_LOW % "WAREHOUSE")
    ver = _verifier("Verifier: the item exists, the warehouse carries it, on_hand < "
                    "reorder_point.", consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"item": "str"})
    if err:
        return _result([err])
    if not db.query("SELECT 1 AS ok FROM items WHERE name = ?", (value["item"],)):
        return _result(["unknown item %r" % value["item"]])
    rows = db.query("SELECT on_hand, reorder_point FROM stock WHERE warehouse = ? AND item = ?",
                    (WAREHOUSE, value["item"]))
    if not rows:
        return _result(["%s does not carry %s" % (WAREHOUSE, value["item"])])
    r = rows[0]
    if r["on_hand"] is None or r["reorder_point"] is None:
        return _result(["stock data missing"])
    if not r["on_hand"] < r["reorder_point"]:
        return _result(["%s has %s on hand, not below its reorder point %s"
                        % (value["item"], r["on_hand"], r["reorder_point"])])
    return _result([])
''')
    ora = _oracle("Oracle: the low items of the warehouse in one query; membership.", consts, '''
def _judge(value, db):
    if not _record(value, ["item"]):
        return _no("expected exactly {\\"item\\": <string>}")
    low = set(r["item"] for r in db.query(
        "SELECT item FROM stock WHERE warehouse = ? AND on_hand < reorder_point", (WAREHOUSE,)))
    return _YES if value["item"] in low else _no("not an item below its reorder point there")
''')
    schema = object_schema("low_item answer", {
        "item": string_prop("items.name", "An item below its reorder point at %s." % wh)})
    n = len(ix["at"][wh])
    knobs = {"template": "low_item", "constraints": 1, "hops": 1, "list_size": n,
             "distractors": n - len(low), "hidden_steps": 0, "valid_answers": len(low),
             "warehouse": wh, "comparison": "<"}
    return ("low_item", prompt, schema, knobs, sol, ver, ora, ["find_stock"])


def _t_warehouse_holding(w, ix, rng, lineage, level):
    options = []
    for it in w["items"]:
        rows = [s for s in w["stock"] if s["item"] == it["name"] and s["on_hand"] > 0]
        vals = sorted({s["on_hand"] for s in rows}, reverse=True)
        if len(vals) >= 2:
            options.append((it["name"], vals))
    item, vals = rng.choice(options)
    need = vals[rng.randint(0, len(vals) - 2)]
    valid = sum(1 for s in w["stock"] if s["item"] == item and s["on_hand"] >= need)
    prompt = ("Name any warehouse that carries %s and has at least %d units of it on hand "
              "(on_hand >= %d; exactly %d qualifies). find_warehouses lists the warehouses "
              "that carry an item, the most units on hand first. Any such warehouse is "
              "accepted. " % (quoted(item), need, need, need)
              + _SUBMIT % "{\"warehouse\": \"<warehouse name>\"}")
    consts = [("ITEM", item), ("MIN_UNITS", need)]
    sol = _solution("One search of the warehouses holding the item, the most units on hand "
                    "first: the answer is its first row.", consts, '''
def solve(tools):
    for row in tools.find_warehouses(ITEM, min_on_hand=MIN_UNITS):
        if row["on_hand"] >= MIN_UNITS:
            return {"warehouse": row["warehouse"]}
    return {"warehouse": ""}
''')
    ver = _verifier("Verifier: the warehouse exists, carries the item, on_hand >= MIN_UNITS.",
                    consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"warehouse": "str"})
    if err:
        return _result([err])
    if not db.query("SELECT 1 AS ok FROM warehouses WHERE name = ?", (value["warehouse"],)):
        return _result(["unknown warehouse %r" % value["warehouse"]])
    rows = db.query("SELECT on_hand FROM stock WHERE warehouse = ? AND item = ?",
                    (value["warehouse"], ITEM))
    if not rows:
        return _result(["%s does not carry %s" % (value["warehouse"], ITEM)])
    if rows[0]["on_hand"] is None or rows[0]["on_hand"] < MIN_UNITS:
        return _result(["%s has only %s units" % (value["warehouse"], rows[0]["on_hand"])])
    return _result([])
''')
    ora = _oracle("Oracle: the qualifying warehouses from the item's stock rows; membership.",
                  consts, '''
def _judge(value, db):
    if not _record(value, ["warehouse"]):
        return _no("expected exactly {\\"warehouse\\": <string>}")
    good = [r["warehouse"] for r in db.query("SELECT warehouse, on_hand FROM stock WHERE item = ?",
                                              (ITEM,)) if r["on_hand"] >= MIN_UNITS]
    return _YES if value["warehouse"] in good else _no("warehouse lacks the units")
''')
    schema = object_schema("warehouse_holding answer", {
        "warehouse": string_prop("warehouses.name", "Warehouse with >= %d units of %s."
                                                    % (need, item))})
    # the search returns only the qualifying warehouses
    knobs = {"template": "warehouse_holding", "constraints": 1, "hops": 1, "list_size": valid,
             "distractors": 0, "hidden_steps": 0, "valid_answers": valid, "item": item,
             "min_units": need, "comparison": ">="}
    return ("warehouse_holding", prompt, schema, knobs, sol, ver, ora, ["find_warehouses"])


def _t_supplier_fast_item(w, ix, rng, lineage, level):
    options = []
    for s in w["suppliers"]:
        offers = ix["sells"].get(s["name"], [])
        for lim in sorted({o["lead_time_days"] for o in offers}):
            count = sum(1 for o in offers if o["lead_time_days"] <= lim)
            if 3 <= count < len(offers):
                options.append((s["name"], lim))
    if not options:
        options = [(s["name"], max(o["lead_time_days"] for o in ix["sells"][s["name"]]))
                   for s in w["suppliers"] if ix["sells"].get(s["name"])]
    sup, lim = rng.choice(options)
    valid = sum(1 for o in ix["sells"][sup] if o["lead_time_days"] <= lim)
    prompt = ("Name any item that %s sells with a lead time of at most %d days "
              "(lead_time_days <= %d; exactly %d qualifies). find_offers lists a supplier's "
              "offers within a lead-time limit, the cheapest first. Any such item is accepted. "
              % (quoted(sup), lim, lim, lim) + _SUBMIT % "{\"item\": \"<item name>\"}")
    consts = [("SUPPLIER", sup), ("MAX_LEAD", lim)]
    sol = _solution("One search of the supplier's offers within the lead-time limit: the answer "
                    "is its first row.", consts, '''
def solve(tools):
    for o in tools.find_offers(supplier=SUPPLIER, max_lead_days=MAX_LEAD):
        if o["lead_time_days"] <= MAX_LEAD:
            return {"item": o["item"]}
    return {"item": ""}
''')
    ver = _verifier("Verifier: the item exists, the supplier offers it, lead_time_days <= "
                    "MAX_LEAD.", consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"item": "str"})
    if err:
        return _result([err])
    if not db.query("SELECT 1 AS ok FROM items WHERE name = ?", (value["item"],)):
        return _result(["unknown item %r" % value["item"]])
    rows = db.query("SELECT lead_time_days FROM offers WHERE supplier = ? AND item = ?",
                    (SUPPLIER, value["item"]))
    if not rows:
        return _result(["%s does not sell %s" % (SUPPLIER, value["item"])])
    if rows[0]["lead_time_days"] is None or rows[0]["lead_time_days"] > MAX_LEAD:
        return _result(["lead time %s days is over %d" % (rows[0]["lead_time_days"], MAX_LEAD)])
    return _result([])
''')
    ora = _oracle("Oracle: the supplier's fast items in one query; membership.", consts, '''
def _judge(value, db):
    if not _record(value, ["item"]):
        return _no("expected exactly {\\"item\\": <string>}")
    ok = set(r["item"] for r in db.query(
        "SELECT o.item AS item FROM offers o JOIN items i ON i.name = o.item "
        "WHERE o.supplier = ? AND o.lead_time_days <= ?", (SUPPLIER, MAX_LEAD)))
    return _YES if value["item"] in ok else _no("not a fast enough item of the supplier")
''')
    schema = object_schema("supplier_fast_item answer", {
        "item": string_prop("items.name", "Item %s sells within %d days." % (sup, lim))})
    # the search returns only the offers within the limit
    knobs = {"template": "supplier_fast_item", "constraints": 1, "hops": 1, "list_size": valid,
             "distractors": 0, "hidden_steps": 0, "valid_answers": valid,
             "supplier": sup, "max_lead_days": lim, "comparison": "<="}
    return ("supplier_fast_item", prompt, schema, knobs, sol, ver, ora, ["find_offers"])


# ----------------------------------------------------------------------- level 2 templates

def _t_low_item_category(w, ix, rng, lineage, level):
    options, narrow = [], []
    for wh in w["warehouses"]:
        low = _low(ix, wh["name"])
        for cat in sorted({ix["item"][s["item"]]["category"] for s in low}):
            options.append((wh["name"], cat))
            if sum(1 for s in low if ix["item"][s["item"]]["category"] == cat) < len(low):
                narrow.append((wh["name"], cat))
    wh, cat = rng.choice(narrow or options)
    valid = [s["item"] for s in _low(ix, wh) if ix["item"][s["item"]]["category"] == cat]
    prompt = ("Name any item of category %s that %s carries with its on-hand stock strictly "
              "below its reorder point (on_hand < reorder_point; an item exactly at its reorder "
              "point is not below it). find_stock lists a warehouse's stock of one category, the "
              "item furthest below its reorder point first. Any such item is accepted. "
              % (quoted(cat), quoted(wh)) + _SUBMIT % "{\"item\": \"<item name>\"}")
    consts = [("WAREHOUSE", wh), ("CATEGORY", cat)]
    sol = _solution("One search of the warehouse's stock of the category, the item furthest "
                    "below its reorder point first: the answer is its first row.", consts,
                    _S_FIRST_LOW % "WAREHOUSE, category=CATEGORY")
    ver = _verifier("Verifier: the item exists, is in CATEGORY, is carried by WAREHOUSE and "
                    "is below its reorder point.", consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"item": "str"})
    if err:
        return _result([err])
    it = db.query("SELECT category FROM items WHERE name = ?", (value["item"],))
    if not it:
        return _result(["unknown item %r" % value["item"]])
    reasons = []
    if it[0]["category"] != CATEGORY:
        reasons.append("%s is in category %s, not %s" % (value["item"], it[0]["category"],
                                                          CATEGORY))
    st = db.query("SELECT on_hand, reorder_point FROM stock WHERE warehouse = ? AND item = ?",
                  (WAREHOUSE, value["item"]))
    if not st:
        reasons.append("%s does not carry %s" % (WAREHOUSE, value["item"]))
    elif not st[0]["on_hand"] < st[0]["reorder_point"]:
        reasons.append("%s is not below its reorder point" % value["item"])
    return _result(reasons)
''')
    ora = _oracle("Oracle: one join of items and stock gives the acceptable set.", consts, '''
def _judge(value, db):
    if not _record(value, ["item"]):
        return _no("expected exactly {\\"item\\": <string>}")
    ok = set(r["name"] for r in db.query(
        "SELECT i.name AS name FROM items i JOIN stock s ON s.item = i.name "
        "WHERE s.warehouse = ? AND i.category = ? AND s.on_hand < s.reorder_point",
        (WAREHOUSE, CATEGORY)))
    return _YES if value["item"] in ok else _no("not a low item of that category there")
''')
    schema = object_schema("low_item_category answer", {
        "item": string_prop("items.name", "A %s item below its reorder point at %s."
                                          % (cat, wh))})
    n = sum(1 for s in ix["at"][wh] if ix["item"][s["item"]]["category"] == cat)
    knobs = {"template": "low_item_category", "constraints": 2, "hops": 1, "list_size": n,
             "distractors": n - len(valid), "hidden_steps": 0, "valid_answers": len(valid),
             "warehouse": wh, "category": cat}
    return ("low_item_category", prompt, schema, knobs, sol, ver, ora, ["find_stock"])


def _t_supplier_offer(w, ix, rng, lineage, level):
    options = []
    for it in w["items"]:
        offers = ix["offers_of"][it["name"]]
        for o in offers:
            ok = [p for p in offers if p["lead_time_days"] <= o["lead_time_days"]
                  and _c(p["unit_cost"]) <= _c(o["unit_cost"])]
            if len(ok) < len(offers):
                options.append((it["name"], o, len(ok), len(offers)))
    options = [x for x in options if x[2] == 1] or options or [
        (it["name"], o, len(ix["offers_of"][it["name"]]), len(ix["offers_of"][it["name"]]))
        for it in w["items"] for o in ix["offers_of"][it["name"]]]
    item, o, valid, n = rng.choice(options)
    lim, price = o["lead_time_days"], _c(o["unit_cost"])
    prompt = ("Name any supplier that sells %s with a lead time of at most %d days "
              "(lead_time_days <= %d) and a unit cost of at most %s EUR (unit_cost <= %s); "
              "both bounds include equality. find_offers lists an item's offers within a "
              "lead-time limit, the cheapest first. Any such supplier is accepted. "
              % (quoted(item), lim, lim, cents_text(price), cents_text(price))
              + _SUBMIT % "{\"supplier\": \"<supplier name>\"}")
    consts = [("ITEM", item), ("MAX_LEAD", lim), ("MAX_COST_CENTS", price)]
    sol = _solution("One search of the item's offers within the lead-time limit, the cheapest "
                    "first: the answer is its first row.", consts, '''
def solve(tools):
    for o in tools.find_offers(item=ITEM, max_lead_days=MAX_LEAD):
        if (o["lead_time_days"] <= MAX_LEAD
                and int(round(o["unit_cost"] * 100)) <= MAX_COST_CENTS):
            return {"supplier": o["supplier"]}
    return {"supplier": ""}
''')
    ver = _verifier("Verifier: the supplier exists, offers ITEM, lead_time_days <= MAX_LEAD and "
                    "unit cost <= MAX_COST_CENTS (compared in cents).", consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"supplier": "str"})
    if err:
        return _result([err])
    if not db.query("SELECT 1 AS ok FROM suppliers WHERE name = ?", (value["supplier"],)):
        return _result(["unknown supplier %r" % value["supplier"]])
    rows = db.query("SELECT unit_cost, lead_time_days FROM offers WHERE supplier = ? AND item = ?",
                    (value["supplier"], ITEM))
    if not rows:
        return _result(["%s does not sell %s" % (value["supplier"], ITEM)])
    o = rows[0]
    reasons = []
    if o["lead_time_days"] > MAX_LEAD:
        reasons.append("lead time %s days is over %d" % (o["lead_time_days"], MAX_LEAD))
    if _cents(o["unit_cost"]) > MAX_COST_CENTS:
        reasons.append("unit cost %s EUR is over the limit" % o["unit_cost"])
    return _result(reasons)
''')
    ora = _oracle("Oracle: the acceptable suppliers of the item from one SQL filter in cents.",
                  consts, '''
def _judge(value, db):
    if not _record(value, ["supplier"]):
        return _no("expected exactly {\\"supplier\\": <string>}")
    ok = set(r["supplier"] for r in db.query(
        "SELECT o.supplier AS supplier FROM offers o JOIN suppliers s ON s.name = o.supplier "
        "WHERE o.item = ? AND o.lead_time_days <= ? "
        "AND CAST(ROUND(o.unit_cost * 100) AS INTEGER) <= ?", (ITEM, MAX_LEAD, MAX_COST_CENTS)))
    return _YES if value["supplier"] in ok else _no("supplier misses a limit")
''')
    schema = object_schema("supplier_offer answer", {
        "supplier": string_prop("suppliers.name", "Supplier of %s within both limits."
                                                  % item)})
    n = sum(1 for p in ix["offers_of"][item] if p["lead_time_days"] <= lim)  # rows it returns
    knobs = {"template": "supplier_offer", "constraints": 2, "hops": 1, "list_size": n,
             "distractors": n - valid, "hidden_steps": 0, "valid_answers": valid, "item": item,
             "max_lead_days": lim, "max_unit_cost": cents_text(price), "comparison": "<=, <="}
    return ("supplier_offer", prompt, schema, knobs, sol, ver, ora, ["find_offers"])


def _t_supplier_low_item(w, ix, rng, lineage, level):
    options = []
    for s in w["suppliers"]:
        sold = {o["item"] for o in ix["sells"].get(s["name"], [])}
        for wh in w["warehouses"]:
            hits = sorted(x["item"] for x in _low(ix, wh["name"]) if x["item"] in sold)
            if hits:
                options.append((s["name"], wh["name"], hits))
    sup, wh, hits = rng.choice([x for x in options if len(x[2]) <= 2] or options)
    prompt = ("Name any item that %s sells AND that %s carries with its on-hand stock strictly "
              "below its reorder point (on_hand < reorder_point). find_stock lists a "
              "warehouse's stock of the items one supplier sells, the item furthest below its "
              "reorder point first. Any such item is accepted. "
              % (quoted(sup), quoted(wh)) + _SUBMIT % "{\"item\": \"<item name>\"}")
    consts = [("SUPPLIER", sup), ("WAREHOUSE", wh)]
    sol = _solution("One search of the warehouse's stock of the supplier's items, the item "
                    "furthest below its reorder point first: the answer is its first row.",
                    consts, _S_FIRST_LOW % "WAREHOUSE, supplier=SUPPLIER")
    ver = _verifier("Verifier: the item exists, SUPPLIER sells it, WAREHOUSE carries it below "
                    "its reorder point.", consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"item": "str"})
    if err:
        return _result([err])
    if not db.query("SELECT 1 AS ok FROM items WHERE name = ?", (value["item"],)):
        return _result(["unknown item %r" % value["item"]])
    reasons = []
    if not db.query("SELECT 1 AS ok FROM offers WHERE supplier = ? AND item = ?",
                    (SUPPLIER, value["item"])):
        reasons.append("%s does not sell %s" % (SUPPLIER, value["item"]))
    st = db.query("SELECT on_hand, reorder_point FROM stock WHERE warehouse = ? AND item = ?",
                  (WAREHOUSE, value["item"]))
    if not st:
        reasons.append("%s does not carry %s" % (WAREHOUSE, value["item"]))
    elif not st[0]["on_hand"] < st[0]["reorder_point"]:
        reasons.append("%s is not below its reorder point at %s" % (value["item"], WAREHOUSE))
    return _result(reasons)
''')
    ora = _oracle("Oracle: intersect the supplier's items with the warehouse's low items.",
                  consts, '''
def _judge(value, db):
    if not _record(value, ["item"]):
        return _no("expected exactly {\\"item\\": <string>}")
    sold = set(r["item"] for r in db.query("SELECT item FROM offers WHERE supplier = ?",
                                           (SUPPLIER,)))
    low = set(r["item"] for r in db.query("SELECT item, on_hand, reorder_point FROM stock "
                                          "WHERE warehouse = ?", (WAREHOUSE,))
              if r["on_hand"] < r["reorder_point"])
    return _YES if value["item"] in (sold & low) else _no("not a low item the supplier sells")
''')
    schema = object_schema("supplier_low_item answer", {
        "item": string_prop("items.name", "Item sold by %s and low at %s." % (sup, wh))})
    sold = {o["item"] for o in ix["sells"][sup]}
    n = sum(1 for s in ix["at"][wh] if s["item"] in sold)  # the rows the search returns
    knobs = {"template": "supplier_low_item", "constraints": 2, "hops": 1, "list_size": n,
             "distractors": n - len(hits), "hidden_steps": 0, "valid_answers": len(hits),
             "supplier": sup, "warehouse": wh}
    return ("supplier_low_item", prompt, schema, knobs, sol, ver, ora, ["find_stock"])


# ----------------------------------------------------------------------- level 3: one line

def _lines(ix, wh):
    """Every (stock row, offer, qmin, qmax) for the low items of wh with a non-empty window."""
    out = []
    for s in _low(ix, wh):
        for o in ix["offers_of"].get(s["item"], []):
            qmin = max(s["reorder_point"] - s["on_hand"], o["min_order_qty"])
            qmax = s["max_stock"] - s["on_hand"]
            if qmin <= qmax:
                out.append((s, o, qmin, qmax))
    return out


_QTY_RULES = ("the quantity is a whole number with (i) quantity >= the offer's min_order_qty, "
              "(ii) on_hand + quantity >= reorder_point (the order brings the item back up to at "
              "least its reorder point) and (iii) on_hand + quantity <= max_stock (it fits); the "
              "line's cost is quantity x unit_cost in EUR, exact")


def _t_single_reorder(w, ix, rng, lineage, level):
    fam = lineage % 3
    candidates = []
    for wh in w["warehouses"]:
        lines = _lines(ix, wh["name"])
        if fam == 2:
            for cat in sorted({ix["item"][s["item"]]["category"] for s, _, _, _ in lines}):
                candidates.append((wh["name"], cat, lines))
        elif lines:
            candidates.append((wh["name"], "", lines))
    wh, cat, lines = rng.choice(candidates)
    min_rating = 0
    if fam == 2:
        lines = [x for x in lines if ix["item"][x[0]["item"]]["category"] == cat]
    if fam == 1:
        ratings = sorted({_tenths(ix["supplier"][x[1]["supplier"]]["rating"]) for x in lines})
        min_rating = ratings[rng.randint(0, max(0, len(ratings) - 2))]
        lines = [x for x in lines if _tenths(ix["supplier"][x[1]["supplier"]]["rating"])
                 >= min_rating]
    leads = sorted({x[1]["lead_time_days"] for x in lines})
    lim = leads[rng.randint(len(leads) // 3, len(leads) - 1)]
    lines = [x for x in lines if x[1]["lead_time_days"] <= lim]
    costs = sorted(qmin * _c(o["unit_cost"]) for s, o, qmin, qmax in lines)
    k = rng.randint(0, min(2, len(costs) - 1))
    budget = -(-costs[k] // 100)
    valid = sum(1 for c in costs if c <= budget * 100)
    extra = ""
    if fam == 1:
        extra = "; (e) the supplier's rating is at least %.1f" % (min_rating / 10.0)
    if fam == 2:
        extra = "; (e) the item is in category %s (see list_items)" % quoted(cat)
    prompt = ("Place one restocking order line for %s. Choose an item, a supplier and a "
              "quantity such that: (a) %s carries the item and its on_hand is strictly below its "
              "reorder_point; (b) the supplier sells the item (get_item_offers lists an item's "
              "offers); (c) the offer's lead_time_days is at most %d; (d) %s; and the line's "
              "cost is at most %d EUR (cost <= %d)%s. Any line meeting every rule is accepted. "
              % (quoted(wh), quoted(wh), lim, _QTY_RULES, budget, budget, extra)
              + _SUBMIT % "{\"item\": \"<item name>\", \"supplier\": \"<supplier name>\", "
                          "\"quantity\": <integer>}")
    consts = [("WAREHOUSE", wh), ("MAX_LEAD", lim), ("BUDGET_CENTS", budget * 100),
              ("MIN_RATING_TENTHS", min_rating), ("CATEGORY", cat)]
    sol = _solution("Low items of the warehouse -> their offers; smallest valid quantity; the "
                    "cheapest line within every rule.", consts, '''
def solve(tools):
    rating = {s["name"]: int(round(s["rating"] * 10)) for s in tools.list_suppliers()}
    best = None
    for row in tools.get_warehouse_stock(WAREHOUSE):
        if row["on_hand"] >= row["reorder_point"]:
            continue
        if CATEGORY and tools.get_item(row["item"])["category"] != CATEGORY:
            continue
        for o in tools.get_item_offers(row["item"]):
            if o["lead_time_days"] > MAX_LEAD or rating[o["supplier"]] < MIN_RATING_TENTHS:
                continue
            qty = max(row["reorder_point"] - row["on_hand"], o["min_order_qty"])
            if row["on_hand"] + qty > row["max_stock"]:
                continue
            cost = qty * int(round(o["unit_cost"] * 100))
            key = (cost, row["item"], o["supplier"], qty)
            if cost <= BUDGET_CENTS and (best is None or key < best):
                best = key
    if best is None:
        return {"item": "", "supplier": "", "quantity": 1}
    return {"item": best[1], "supplier": best[2], "quantity": best[3]}
''')
    ver = _verifier("Verifier of single_reorder: every rule checked on the rows of the named "
                    "item, supplier and stock line.", consts, '''
def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"item": "str", "supplier": "str", "quantity": "int"})
    if err:
        return _result([err])
    item, sup, qty = value["item"], value["supplier"], value["quantity"]
    it = db.query("SELECT category FROM items WHERE name = ?", (item,))
    sp = db.query("SELECT rating FROM suppliers WHERE name = ?", (sup,))
    reasons = []
    if not it:
        reasons.append("unknown item %r" % item)
    if not sp:
        reasons.append("unknown supplier %r" % sup)
    if reasons:
        return _result(reasons)
    st = db.query("SELECT on_hand, reorder_point, max_stock FROM stock "
                  "WHERE warehouse = ? AND item = ?", (WAREHOUSE, item))
    if not st:
        return _result(["%s does not carry %s" % (WAREHOUSE, item)])
    st = st[0]
    of = db.query("SELECT unit_cost, lead_time_days, min_order_qty FROM offers "
                  "WHERE supplier = ? AND item = ?", (sup, item))
    if not of:
        return _result(["%s does not sell %s" % (sup, item)])
    of = of[0]
    if not st["on_hand"] < st["reorder_point"]:
        reasons.append("%s is not below its reorder point" % item)
    if of["lead_time_days"] > MAX_LEAD:
        reasons.append("lead time %s days is over %d" % (of["lead_time_days"], MAX_LEAD))
    if qty < of["min_order_qty"]:
        reasons.append("quantity %d is under the minimum order of %s" % (qty, of["min_order_qty"]))
    if st["on_hand"] + qty < st["reorder_point"]:
        reasons.append("quantity %d does not reach the reorder point" % qty)
    if st["on_hand"] + qty > st["max_stock"]:
        reasons.append("quantity %d overflows max_stock" % qty)
    if qty * _cents(of["unit_cost"]) > BUDGET_CENTS:
        reasons.append("cost %.2f EUR is over the budget" % (qty * _cents(of["unit_cost"]) / 100.0))
    if MIN_RATING_TENTHS and _tenths(sp[0]["rating"]) < MIN_RATING_TENTHS:
        reasons.append("%s is rated %s" % (sup, sp[0]["rating"]))
    if CATEGORY and it[0]["category"] != CATEGORY:
        reasons.append("%s is not in category %s" % (item, CATEGORY))
    return _result(reasons)
''')
    ora = _oracle("Oracle of single_reorder: one join lists every admissible (item, supplier) "
                  "with its quantity window and unit price; accept when the answer's pair is "
                  "there and its quantity lies in the window and the budget.", consts, '''
def _judge(value, db):
    if not _record(value, ["item", "supplier"], ["quantity"]):
        return _no("expected exactly item, supplier (strings) and quantity (integer)")
    rows = db.query(
        "SELECT o.item AS item, o.supplier AS supplier, o.unit_cost AS price, "
        "MAX(s.reorder_point - s.on_hand, o.min_order_qty) AS lo, s.max_stock - s.on_hand AS hi "
        "FROM stock s JOIN offers o ON o.item = s.item "
        "JOIN suppliers p ON p.name = o.supplier JOIN items i ON i.name = s.item "
        "WHERE s.warehouse = ? AND s.on_hand < s.reorder_point AND o.lead_time_days <= ? "
        "AND CAST(ROUND(p.rating * 10) AS INTEGER) >= ? AND (? = '' OR i.category = ?)",
        (WAREHOUSE, MAX_LEAD, MIN_RATING_TENTHS, CATEGORY, CATEGORY))
    window = dict(((r["item"], r["supplier"]), (r["lo"], r["hi"], int(round(float(r["price"]) * 100))))
                  for r in rows)
    key = (value["item"], value["supplier"])
    if key not in window:
        return _no("not an admissible item and supplier")
    lo, hi, price = window[key]
    q = value["quantity"]
    if not lo <= q <= hi:
        return _no("quantity outside the window [%d, %d]" % (lo, hi))
    return _YES if q * price <= BUDGET_CENTS else _no("over the budget")
''')
    schema = object_schema("single_reorder answer", {
        "item": string_prop("items.name", "A low item of %s." % wh),
        "supplier": string_prop("suppliers.name", "A supplier selling it."),
        "quantity": {"type": "integer", "minimum": 1, "description": "Units to order."}})
    n_pairs = sum(len(ix["offers_of"].get(s["item"], [])) for s in _low(ix, wh))
    knobs = {"template": "single_reorder",
             "variant": ("budget", "budget+rating", "budget+category")[fam],
             "constraints": 7 + (1 if fam else 0), "hops": 3, "list_size": n_pairs,
             "distractors": n_pairs - valid, "hidden_steps": 2,
             "valid_answers_min_qty": valid, "warehouse": wh, "max_lead_days": lim,
             "budget_eur": budget}
    tools = ["get_warehouse_stock", "get_item_offers", "list_suppliers"]
    if fam == 1:
        knobs["min_rating"] = min_rating / 10.0
    if fam == 2:
        knobs["category"] = cat
        tools.append("get_item")
    return ("single_reorder", prompt, schema, knobs, sol, ver, ora, tools)


# ----------------------------------------------------------------------- level 4: plan

def _plan_total(lines, fee, waive):
    """lines: [(supplier, cost cents)] -> total cents with the per-supplier fee rule."""
    spend = {}
    for sup, cost in lines:
        spend[sup] = spend.get(sup, 0) + cost
    return sum(spend.values()) + sum(fee for s in sorted(spend) if spend[s] < waive)


def _t_restock_plan(w, ix, rng, lineage, level):
    fam = lineage % 3
    fee = rng.choice((25, 40, 60, 80))
    choices = []
    for wh in w["warehouses"]:
        name = wh["name"]
        low = _low(ix, name)
        lines = _lines(ix, name)
        per_item = {s["item"]: [x for x in lines if x[0]["item"] == s["item"]] for s in low}
        if not all(per_item.values()):
            continue
        lim = max(min(x[1]["lead_time_days"] for x in v) for v in per_item.values())
        lim = min(21, lim + rng.randint(0, 3))
        d2, r_min = 0, 0
        urgent = [s["item"] for s in low if 2 * s["on_hand"] < s["reorder_point"]]
        if fam == 1:
            r_min = rng.choice((35, 40, 45))
            d2 = max(1, lim - rng.randint(2, 5))
        if fam == 2:
            if not urgent:
                continue
            need = max(min(x[1]["lead_time_days"] for x in per_item[u]) for u in urgent)
            if need > lim:
                continue
            d2 = need + rng.randint(0, 1) if need < lim else need
            d2 = min(d2, lim)

        def admissible(x, urgent=urgent, lim=lim, d2=d2, r_min=r_min):
            lead = x[1]["lead_time_days"]
            if lead > lim:
                return False
            if fam == 1 and _tenths(ix["supplier"][x[1]["supplier"]]["rating"]) < r_min \
                    and lead > d2:
                return False
            if fam == 2 and x[0]["item"] in urgent and lead > d2:
                return False
            return True

        opts = [[x for x in per_item[s["item"]] if admissible(x)] for s in low]
        if all(opts):
            choices.append((name, low, opts, lim, d2, r_min, urgent))
    if not choices:  # every world has feasible warehouses, but stay total
        return _t_single_reorder(w, ix, rng, lineage, level)
    wh, low, opts, lim, d2, r_min, urgent = rng.choice(choices)
    line_costs = sorted(x[2] * _c(x[1]["unit_cost"]) for o in opts for x in o)
    waive = -(-line_costs[len(line_costs) // 2] // 5000) * 50  # EUR, a multiple of 50
    plans = []
    for combo in itertools.product(*opts):
        total = _plan_total([(x[1]["supplier"], x[2] * _c(x[1]["unit_cost"])) for x in combo],
                            fee * 100, waive * 100)
        plans.append(total)
    plans.sort()
    k = rng.randint(0, min(2, len(plans) - 1))
    budget = -(-plans[k] // 100)
    valid = sum(1 for p in plans if p <= budget * 100)
    n_all = 1
    for s in low:
        n_all *= max(1, len(ix["offers_of"].get(s["item"], [])))
    rule = ""
    if fam == 1:
        rule = (" (f) a supplier rated below %.1f may be used for a line only if that line's "
                "lead_time_days is at most %d." % (r_min / 10.0, d2))
    if fam == 2:
        rule = (" (f) an urgent item -- one whose on_hand is less than half its reorder_point "
                "(2 x on_hand < reorder_point) -- must come from an offer with lead_time_days at "
                "most %d." % d2)
    prompt = ("Write the restocking plan for %s. The plan has exactly one order line for every "
              "item that %s carries with on_hand strictly below its reorder_point, and no other "
              "lines. Each line names the item, a supplier and a quantity such that: (a) the "
              "supplier sells the item (get_item_offers); (b) the offer's lead_time_days is at "
              "most %d; (c) %s. (d) Shipping: every distinct supplier used in the plan charges a "
              "shipping fee of %d EUR once, except that the fee is waived for a supplier whose "
              "lines in the plan cost at least %d EUR together (sum of quantity x unit_cost of "
              "its lines >= %d). (e) The plan's total -- all line costs plus the shipping fees "
              "charged -- is at most %d EUR (total <= %d).%s Lines may be in any order. Any plan "
              "meeting every rule is accepted. "
              % (quoted(wh), quoted(wh), lim, _QTY_RULES, fee, waive, waive, budget, budget,
                 rule)
              + _SUBMIT % "{\"orders\": [{\"item\": \"<item name>\", \"supplier\": \"<supplier "
                          "name>\", \"quantity\": <integer>}, ...]}")
    consts = [("WAREHOUSE", wh), ("MAX_LEAD", lim), ("FEE_CENTS", fee * 100),
              ("WAIVE_CENTS", waive * 100), ("BUDGET_CENTS", budget * 100),
              ("RULE", ("none", "rating", "urgent")[fam]), ("MIN_RATING_TENTHS", r_min),
              ("STRICT_LEAD", d2)]
    sol = _solution("Low items -> admissible offers at their smallest valid quantity; try every "
                    "combination, keep the cheapest plan within the budget.", consts, '''
def _total(lines):
    spend = {}
    for sup, cost in lines:
        spend[sup] = spend.get(sup, 0) + cost
    return sum(spend.values()) + sum(FEE_CENTS for s in sorted(spend) if spend[s] < WAIVE_CENTS)


def solve(tools):
    rating = {s["name"]: int(round(s["rating"] * 10)) for s in tools.list_suppliers()}
    options = []
    for row in tools.get_warehouse_stock(WAREHOUSE):
        if row["on_hand"] >= row["reorder_point"]:
            continue
        urgent = 2 * row["on_hand"] < row["reorder_point"]
        opts = []
        for o in tools.get_item_offers(row["item"]):
            lead = o["lead_time_days"]
            if lead > MAX_LEAD:
                continue
            if RULE == "rating" and rating[o["supplier"]] < MIN_RATING_TENTHS and lead > STRICT_LEAD:
                continue
            if RULE == "urgent" and urgent and lead > STRICT_LEAD:
                continue
            qty = max(row["reorder_point"] - row["on_hand"], o["min_order_qty"])
            if row["on_hand"] + qty > row["max_stock"]:
                continue
            opts.append((row["item"], o["supplier"], qty, qty * int(round(o["unit_cost"] * 100))))
        options.append(opts)
    best = None
    for combo in itertools.product(*options):
        total = _total([(c[1], c[3]) for c in combo])
        key = (total, [c[:3] for c in combo])
        if total <= BUDGET_CENTS and (best is None or key < best):
            best = key
    if best is None:
        return {"orders": []}
    return {"orders": [{"item": i, "supplier": s, "quantity": q} for i, s, q in best[1]]}
''', imports="import itertools\n")
    ver = _verifier("Verifier of restock_plan: shape, then per line the item, supplier, stock "
                    "row and offer from the database, the lead-time and quantity rules, the set "
                    "of items against the warehouse's low items, then fees and the budget.",
                    consts, '''
LINE = {"item": "str", "supplier": "str", "quantity": "int"}


def _verify(answer, db):
    value, err = _answer(answer)
    if err:
        return _result([err])
    value, err = _shape(value, {"orders": "list"})
    if err:
        return _result([err])
    orders = value["orders"]
    if not isinstance(orders, list) or not orders:
        return _result(["orders must be a non-empty list"])
    lines = []
    for n, line in enumerate(orders):
        line, err = _shape(line, LINE)
        if err:
            return _result(["line %d: %s" % (n + 1, err)])
        lines.append(line)
    low = sorted(r["item"] for r in db.query(
        "SELECT item, on_hand, reorder_point FROM stock WHERE warehouse = ?", (WAREHOUSE,))
        if r["on_hand"] < r["reorder_point"])
    reasons = []
    named = sorted(line["item"] for line in lines)
    if named != low:
        reasons.append("the plan must have exactly one line for each of: " + ", ".join(low))
    spend = {}
    for n, line in enumerate(lines):
        item, sup, qty = line["item"], line["supplier"], line["quantity"]
        where = "line %d (%s)" % (n + 1, item)
        if not db.query("SELECT 1 AS ok FROM items WHERE name = ?", (item,)):
            reasons.append("%s: unknown item" % where)
            continue
        sp = db.query("SELECT rating FROM suppliers WHERE name = ?", (sup,))
        if not sp:
            reasons.append("%s: unknown supplier %r" % (where, sup))
            continue
        st = db.query("SELECT on_hand, reorder_point, max_stock FROM stock "
                      "WHERE warehouse = ? AND item = ?", (WAREHOUSE, item))
        of = db.query("SELECT unit_cost, lead_time_days, min_order_qty FROM offers "
                      "WHERE supplier = ? AND item = ?", (sup, item))
        if not st:
            reasons.append("%s: %s does not carry it" % (where, WAREHOUSE))
            continue
        if not of:
            reasons.append("%s: %s does not sell it" % (where, sup))
            continue
        st, of = st[0], of[0]
        lead = of["lead_time_days"]
        if lead > MAX_LEAD:
            reasons.append("%s: lead time %s days is over %d" % (where, lead, MAX_LEAD))
        if RULE == "rating" and _tenths(sp[0]["rating"]) < MIN_RATING_TENTHS and lead > STRICT_LEAD:
            reasons.append("%s: %s is rated %s, so its lead time may be at most %d days"
                           % (where, sup, sp[0]["rating"], STRICT_LEAD))
        if RULE == "urgent" and 2 * st["on_hand"] < st["reorder_point"] and lead > STRICT_LEAD:
            reasons.append("%s: urgent item, lead time must be at most %d days"
                           % (where, STRICT_LEAD))
        if qty < of["min_order_qty"]:
            reasons.append("%s: quantity under the minimum order of %s" % (where,
                                                                          of["min_order_qty"]))
        if st["on_hand"] + qty < st["reorder_point"]:
            reasons.append("%s: quantity does not reach the reorder point" % where)
        if st["on_hand"] + qty > st["max_stock"]:
            reasons.append("%s: quantity overflows max_stock" % where)
        spend[sup] = spend.get(sup, 0) + qty * _cents(of["unit_cost"])
    if reasons:
        return _result(reasons)
    total = 0
    for sup in sorted(spend):
        total += spend[sup]
        if spend[sup] < WAIVE_CENTS:
            total += FEE_CENTS
    if total > BUDGET_CENTS:
        reasons.append("total %.2f EUR is over the budget of %.2f EUR"
                       % (total / 100.0, BUDGET_CENTS / 100.0))
    return _result(reasons)
''')
    ora = _oracle("Oracle of restock_plan: one join lists every admissible (item, supplier) "
                  "offer of a low item with its quantity window and price; the plan passes when "
                  "its items are exactly the low items, every line is admissible with its "
                  "quantity in the window, and the fee-adjusted total fits the budget.", consts, '''
def _judge(value, db):
    if not isinstance(value, dict) or list(value) != ["orders"] or type(value["orders"]) is not list:
        return _no("expected exactly {\\"orders\\": [...]}")
    lines = value["orders"]
    if not lines or not all(_record(x, ["item", "supplier"], ["quantity"]) for x in lines):
        return _no("every line must be {item, supplier, quantity}")
    rows = db.query(
        "SELECT s.item AS item, o.supplier AS supplier, o.unit_cost AS price, "
        "MAX(s.reorder_point - s.on_hand, o.min_order_qty) AS lo, s.max_stock - s.on_hand AS hi, "
        "o.lead_time_days AS lead, p.rating AS rating, "
        "(2 * s.on_hand < s.reorder_point) AS urgent "
        "FROM stock s JOIN offers o ON o.item = s.item JOIN suppliers p ON p.name = o.supplier "
        "WHERE s.warehouse = ? AND s.on_hand < s.reorder_point AND o.lead_time_days <= ?",
        (WAREHOUSE, MAX_LEAD))
    admissible = {}
    for r in rows:
        if RULE == "rating" and int(round(float(r["rating"]) * 10)) < MIN_RATING_TENTHS \\
                and r["lead"] > STRICT_LEAD:
            continue
        if RULE == "urgent" and r["urgent"] and r["lead"] > STRICT_LEAD:
            continue
        admissible[(r["item"], r["supplier"])] = (r["lo"], r["hi"], int(round(float(r["price"]) * 100)))
    low = collections.Counter(r["item"] for r in db.query(
        "SELECT item FROM stock WHERE warehouse = ? AND on_hand < reorder_point", (WAREHOUSE,)))
    if collections.Counter(x["item"] for x in lines) != low:
        return _no("the lines must cover exactly the low items, once each")
    spend = collections.defaultdict(int)
    for x in lines:
        key = (x["item"], x["supplier"])
        if key not in admissible:
            return _no("inadmissible line %s / %s" % key)
        lo, hi, price = admissible[key]
        if not lo <= x["quantity"] <= hi:
            return _no("quantity of %s outside [%d, %d]" % (x["item"], lo, hi))
        spend[x["supplier"]] += x["quantity"] * price
    fees = FEE_CENTS * len([s for s in spend if spend[s] < WAIVE_CENTS])
    return _YES if sum(spend.values()) + fees <= BUDGET_CENTS else _no("over the budget")
''', imports=("collections", "json"))
    line_schema = {"type": "object", "properties": {
        "item": string_prop("items.name", "A low item of %s." % wh),
        "supplier": string_prop("suppliers.name", "Supplier of this line."),
        "quantity": {"type": "integer", "minimum": 1, "description": "Units to order."}},
        "required": ["item", "supplier", "quantity"], "additionalProperties": False}
    schema = {"title": "restock_plan answer", "type": "object",
              "properties": {"orders": {"type": "array", "minItems": len(low),
                                        "maxItems": len(low), "items": line_schema,
                                        "description": "One line per low item of %s." % wh}},
              "required": ["orders"], "additionalProperties": False}
    knobs = {"template": "restock_plan",
             "variant": ("fee", "fee+rating_rule", "fee+urgent_rule")[fam],
             "constraints": 9 + (1 if fam else 0), "hops": 3 + len(low), "list_size": n_all,
             "distractors": n_all - valid, "hidden_steps": 3, "lines": len(low),
             "valid_answers_min_qty": valid, "warehouse": wh, "max_lead_days": lim,
             "fee_eur": fee, "waive_eur": waive, "budget_eur": budget,
             "conditional_rules": 1 + (1 if fam else 0)}
    if fam == 1:
        knobs.update(min_rating=r_min / 10.0, strict_lead_days=d2)
    if fam == 2:
        knobs.update(strict_lead_days=d2, urgent_items=sorted(urgent))
    tools = ["get_warehouse_stock", "get_item_offers", "list_suppliers"]
    return ("restock_plan", prompt, schema, knobs, sol, ver, ora, tools)


# ------------------------------------------------------------------------------------ tasks

_LADDER = {
    0: (_t_low_item, _t_low_item_category, _t_single_reorder, _t_restock_plan),
    1: (_t_warehouse_holding, _t_supplier_offer, _t_single_reorder, _t_restock_plan),
    2: (_t_supplier_fast_item, _t_supplier_low_item, _t_single_reorder, _t_restock_plan),
}


def task(seed, lineage, level, attempt):
    w = _world(seed)
    ix = _index(w)
    rng = rng_for(ID, seed, "task", lineage, level, attempt)
    make = _LADDER[lineage % 3][level - 1]
    template, prompt, schema, knobs, sol, ver, ora, tools = make(w, ix, rng, lineage, level)
    knobs = dict(knobs, level=level, lineage=lineage, attempt=attempt, family=lineage % 3)
    return {"id": "%s_l%d_%d" % (template, level, lineage), "prompt": prompt,
            "answer_schema": schema, "knobs": knobs, "solution": sol, "verifier": ver,
            "oracle": ora, "tools": tools}
