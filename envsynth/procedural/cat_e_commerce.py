"""Procedural category: e-commerce (issue 13).

A seeded shop: product categories, sellers (rating, shipping fee, free-shipping threshold,
handling days), products (price in USD with cents, stock, rating), reviews (stars, verified flag)
and seller coupons (percent off a seller's subtotal above a minimum spend). Tasks, by lineage
theme (lineage % 3), levels 1 to 4:

    budget    product under a price cap; + a seller-rating floor (two hops); 2 products from one
              seller with shipping under a budget; 4 products from <= 2 sellers, tier rule, budget
    quality   product above a rating floor; + a strict price cap; 2 products with verified reviews
              from different sellers under a budget; 4 products, tier rule on reviews, budget
    delivery  product above a stock floor; + a handling-days cap (two hops); 2 products from one
              seller + a coupon under a budget; 3 products + a coupon, tier rule, budget

Levels 1 and 2 are one search: find_products lists a category's products cheapest first, with
the seller's rating and handling days in each row, and takes the other bounds (rating, stock,
seller rating, handling days) as filters; the answer is its first row. The quality and delivery
level-3 tasks and every level-4 task need tools outside the base toolset (get_reviews,
list_coupons); search_products is a convenience never required. Budgets are whole dollars set at
or just above the cheapest feasible basket's total (oracle first), so every task is solvable and
few baskets qualify.
"""

import functools
import itertools
import math

import synth_common
from synth_common import insert_rows, object_schema, one_decimal, quoted, rng_for, unique_words

ID = "e_commerce"
TITLE = "E-commerce"
DESCRIPTION = ("Shop in a generated online marketplace with tools over product categories, "
               "products (price in USD, stock, rating), sellers (rating, shipping fee, free-"
               "shipping threshold, handling days), customer reviews and seller coupons; tasks "
               "range from a one-constraint product search to a basket under a budget with "
               "seller, rating, shipping, coupon and price-tier rules.")
MAX_LEVEL = 4

# ---------------------------------------------------------------------------------- tools.py

PREAMBLE = '''"""Online-shop tools over a generated marketplace: categories, products, sellers,
reviews and coupons.

The runtime injects a module global ``db`` before any tool is called:
``db.query(sql, params=()) -> list[dict]``. Public functions are tools; helpers start with ``_``.
Money is in US dollars with cents; ratings use a 1.0-5.0 scale with one decimal. Names and codes
must be given exactly as the tools return them.
"""

''' + synth_common.join_defs(synth_common.TOOL_QUERY, synth_common.TOOL_TEXT, '''
def _near(table, column, name):
    """Up to three existing keys that look like `name` (case-insensitive)."""
    key = " ".join(name.lower().split())
    rows = _q("SELECT %s AS k FROM %s ORDER BY %s" % (column, table, column))
    same = [r["k"] for r in rows if r["k"].lower() == key]
    if same:
        return same[:3]
    return [r["k"] for r in rows if key and key in r["k"].lower()][:3]


def _unknown(kind, table, column, name, how):
    hint = _near(table, column, name)
    msg = "unknown %s %r" % (kind, name)
    if hint:
        msg += "; did you mean " + ", ".join(repr(h) for h in hint) + "?"
    return ValueError(msg + "; " + how)


def _one(table, kind, name, columns, how):
    _text(name, kind)
    rows = _q("SELECT %s FROM %s WHERE name = ?" % (columns, table), (name,))
    if not rows:
        raise _unknown(kind, table, "name", name, how)
    return dict(rows[0])


def _category(name):
    _text(name, "category")
    if not _q("SELECT 1 AS ok FROM categories WHERE name = ?", (name,)):
        raise _unknown("category", "categories", "name", name,
                       "call list_categories() for the valid category names")
    return name


def _seller(name):
    _text(name, "seller")
    if not _q("SELECT 1 AS ok FROM sellers WHERE name = ?", (name,)):
        raise _unknown("seller", "sellers", "name", name,
                       "call list_sellers() for the valid seller names")
    return name


def _product_row(r):
    return {"name": r["name"], "category": r["category"], "seller": r["seller"],
            "price": r["price"], "stock": r["stock"], "rating": r["rating"],
            "review_count": r["review_count"]}


def _bound(value, what, top=None):
    """A search filter: a number >= 0 (0 keeps all), at most `top` when given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or \
            (top is not None and value > top):
        raise ValueError("%s must be a number %s (0 keeps all), got %r"
                         % (what, ">= 0" if top is None else "between 0 and %g" % top, value))


_PRODUCT_SQL = ("SELECT p.name, p.category, p.seller, p.price, p.stock, p.rating, "
                "(SELECT COUNT(*) FROM reviews r WHERE r.product = p.name) AS review_count "
                "FROM products p")
''')

TOOLS = {
    "list_categories": '''
def list_categories():
    """List every product category, sorted by name. Returns a list of objects {"name",
    "department", "products" (number of products listed in it)}.
    """
    rows = _q("SELECT c.name, c.department, (SELECT COUNT(*) FROM products p "
              "WHERE p.category = c.name) AS products FROM categories c ORDER BY c.name")
    return [dict(r) for r in rows]
''',
    "list_products": '''
def list_products(category: str):
    """List the names of the products of a category, sorted alphabetically. Use get_product for
    a product's price, stock, rating and seller.

    Args:
        category: exact category name as returned by list_categories().
    """
    _category(category)
    return [r["name"] for r in _q("SELECT name FROM products WHERE category = ? ORDER BY name",
                                  (category,))]
''',
    "get_product": '''
def get_product(name: str):
    """Get the facts of one product: {"name", "category", "seller", "price" (USD), "stock" (units
    available; 0 = out of stock), "rating" (average review stars, one decimal, 1.0-5.0),
    "review_count"}.

    Args:
        name: exact product name as returned by list_products(category).
    """
    _text(name, "product")
    rows = _q(_PRODUCT_SQL + " WHERE p.name = ?", (name,))
    if not rows:
        raise _unknown("product", "products", "name", name,
                       "call list_products(category) for the products of a category")
    return _product_row(rows[0])
''',
    "list_sellers": '''
def list_sellers():
    """List the names of every seller of the marketplace, sorted alphabetically. Use get_seller
    for a seller's rating and shipping terms.
    """
    return [r["name"] for r in _q("SELECT name FROM sellers ORDER BY name")]
''',
    "get_seller": '''
def get_seller(name: str):
    """Get the facts of one seller: {"name", "city", "rating" (1.0-5.0), "shipping_fee" (USD,
    charged once per order from this seller), "free_shipping_over" (USD: the fee is waived when
    the order's subtotal from this seller is at least this amount), "handling_days" (days
    before the seller ships)}.

    Args:
        name: exact seller name, as in a product's "seller" field or list_sellers().
    """
    return _one("sellers", "seller", name,
                "name, city, rating, shipping_fee, free_shipping_over, handling_days",
                "call list_sellers() for the valid seller names")
''',
    "get_reviews": '''
def get_reviews(product: str):
    """List the customer reviews of a product, ordered by review id. Returns a list of objects
    {"id", "stars" (1-5), "verified" (true when the reviewer's purchase was verified),
    "title"}.

    Args:
        product: exact product name as returned by list_products(category).
    """
    _text(product, "product")
    if not _q("SELECT 1 AS ok FROM products WHERE name = ?", (product,)):
        raise _unknown("product", "products", "name", product,
                       "call list_products(category) for the products of a category")
    rows = _q("SELECT id, stars, verified, title FROM reviews WHERE product = ? ORDER BY id",
              (product,))
    return [{"id": r["id"], "stars": r["stars"], "verified": bool(r["verified"]),
             "title": r["title"]} for r in rows]
''',
    "list_coupons": '''
def list_coupons(seller: str):
    """List the coupons a seller offers, ordered by code. Returns a list of objects {"code",
    "seller", "percent_off" (percent taken off the order's subtotal from this seller),
    "min_spend" (USD: the coupon applies only when that subtotal is at least this amount)}.

    Args:
        seller: exact seller name, as in a product's "seller" field or list_sellers().
    """
    _seller(seller)
    rows = _q("SELECT code, seller, percent_off, min_spend FROM coupons WHERE seller = ? "
              "ORDER BY code", (seller,))
    return [dict(r) for r in rows]
''',
    "search_products": '''
def search_products(category: str, max_price: float = 0.0, min_rating: float = 0.0,
                    in_stock_only: bool = False):
    """Search the products of a category by price, rating and stock. Returns a list of product
    objects (as get_product returns them) ordered by price, then name.

    Args:
        category: exact category name as returned by list_categories().
        max_price: keep only products priced at most this (USD); 0 means no limit.
        min_rating: keep only products rated at least this; 0 means no limit.
        in_stock_only: true keeps only products with stock of at least 1.
    """
    _category(category)
    for value, what in ((max_price, "max_price"), (min_rating, "min_rating")):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError("%s must be a number >= 0, got %r" % (what, value))
    rows = _q(_PRODUCT_SQL + " WHERE p.category = ? ORDER BY p.price, p.name", (category,))
    out = []
    for r in rows:
        if max_price and r["price"] > max_price + 1e-9:
            continue
        if min_rating and r["rating"] < min_rating - 1e-9:
            continue
        if in_stock_only and r["stock"] < 1:
            continue
        out.append(_product_row(r))
    return out
''',
    "find_products": '''
def find_products(category: str, max_price: float = 0.0, min_rating: float = 0.0,
                  min_stock: int = 0, min_seller_rating: float = 0.0, max_handling_days: int = 0):
    """Search the products of a category, cheapest first. Returns a list of objects {"name",
    "category", "seller", "price" (USD), "stock" (units available), "rating", "seller_rating"
    (the seller's rating), "handling_days" (days before the seller ships)} ordered by price,
    then name: the first row is the cheapest product that passes every filter.

    Args:
        category: exact category name as returned by list_categories().
        max_price: keep only products priced at most this (USD); 0 keeps all.
        min_rating: keep only products rated at least this (rating >= min_rating); 0 keeps all.
        min_stock: keep only products with at least this many units in stock; 0 keeps all.
        min_seller_rating: keep only products whose seller is rated at least this; 0 keeps all.
        max_handling_days: keep only products whose seller ships within this many handling days
            (handling_days <= max_handling_days); 0 keeps all.
    """
    _category(category)
    _bound(max_price, "max_price")
    _bound(min_rating, "min_rating", 5)
    _bound(min_stock, "min_stock")
    _bound(min_seller_rating, "min_seller_rating", 5)
    _bound(max_handling_days, "max_handling_days")
    rows = _q("SELECT p.name, p.category, p.seller, p.price, p.stock, p.rating, "
              "s.rating AS seller_rating, s.handling_days FROM products p "
              "JOIN sellers s ON s.name = p.seller WHERE p.category = ? ORDER BY p.price, p.name",
              (category,))
    return [dict(r) for r in rows
            if (not max_price or r["price"] <= max_price + 1e-9)
            and r["rating"] >= min_rating - 1e-9 and r["stock"] >= min_stock - 1e-9
            and r["seller_rating"] >= min_seller_rating - 1e-9
            and (not max_handling_days or r["handling_days"] <= max_handling_days + 1e-9)]
''',
}

BASE_TOOLS = ["list_categories", "list_products", "get_product", "list_sellers", "get_seller",
              "find_products"]

# ------------------------------------------------------------------------------------ world

# name, singular noun, department, lowest and highest price (USD)
_CATEGORIES = (
    ("Backpacks", "Backpack", "Outdoors", 20, 160),
    ("Board Games", "Board Game", "Toys & Games", 12, 80),
    ("Coffee Grinders", "Coffee Grinder", "Home & Kitchen", 20, 180),
    ("Desk Lamps", "Desk Lamp", "Home & Office", 12, 110),
    ("Headphones", "Headphones", "Electronics", 18, 220),
    ("Kettles", "Kettle", "Home & Kitchen", 18, 120),
    ("Notebooks", "Notebook", "Home & Office", 3, 30),
    ("Phone Cases", "Phone Case", "Electronics", 6, 45),
    ("Power Banks", "Power Bank", "Electronics", 15, 90),
    ("Running Shoes", "Running Shoes", "Sports", 40, 180),
    ("Water Bottles", "Water Bottle", "Outdoors", 8, 45),
    ("Yoga Mats", "Yoga Mat", "Sports", 12, 90),
)
_SELLER_SUFFIX = ("Outlet", "Goods", "Direct", "Supply", "Store", "Trading")
_TITLES = {1: ("Broke in a week", "Do not buy", "Very disappointed"),
           2: ("Not as described", "Below expectations", "Meh"),
           3: ("Does the job", "Okay for the price", "Average"),
           4: ("Good value", "Works well", "Happy with it"),
           5: ("Excellent", "Love it", "Perfect, would buy again")}


@functools.lru_cache(maxsize=8)
def _world(seed):
    rng = rng_for(ID, seed, "world")
    picked = sorted(rng.sample(range(len(_CATEGORIES)), rng.randint(6, 7)))
    cats = [_CATEGORIES[i] for i in picked]
    n_sellers = rng.randint(6, 8)
    words = unique_words(rng, n_sellers + 4 + 24, 2)
    towns = words[n_sellers:n_sellers + 4]
    brands = words[n_sellers + 4:]
    sellers = []
    for i in range(n_sellers):
        sellers.append({"name": "%s %s" % (words[i], rng.choice(_SELLER_SUFFIX)),
                        "city": rng.choice(towns), "rating": one_decimal(rng.uniform(3.0, 4.9)),
                        "shipping_fee": rng.choice((3.99, 4.99, 5.49, 5.99, 6.99, 7.99, 9.99)),
                        "free_shipping_over": rng.choice((25.0, 35.0, 49.0, 50.0, 75.0, 99.0)),
                        "handling_days": rng.randint(1, 5)})
    products, reviews = [], []
    names = set()
    for cname, noun, _dept, lo, hi in cats:
        for _ in range(rng.randint(7, 9)):
            while True:
                name = "%s %s %s%d" % (rng.choice(brands), noun, rng.choice("KXZRMTVQ"),
                                       rng.randint(2, 90))
                if name not in names:
                    names.add(name)
                    break
            price = int(lo + (hi - lo) * rng.random() ** 1.3) + rng.choice((0.99, 0.49, 0.95,
                                                                           0.0))
            quality = rng.uniform(2.6, 4.9)
            stars = []
            for _ in range(rng.randint(2, 7)):
                s = min(5, max(1, int(round(rng.gauss(quality, 0.9)))))
                stars.append(s)
                reviews.append({"id": len(reviews) + 1, "product": name, "stars": s,
                                "verified": 1 if rng.random() < 0.6 else 0,
                                "title": rng.choice(_TITLES[s])})
            products.append({"name": name, "category": cname,
                             "seller": rng.choice(sellers)["name"], "price": round(price, 2),
                             "stock": 0 if rng.random() < 0.15 else rng.randint(1, 80),
                             "rating": one_decimal(sum(stars) / float(len(stars)))})
    coupons = []
    codes = set()
    for s in sellers:
        for k in range(rng.randint(1, 3)):
            pct = rng.choice((5, 10, 15, 20, 25))
            while True:
                code = "%s%d-%d" % (s["name"][:4].upper(), pct, rng.randint(1, 99))
                if code not in codes:
                    codes.add(code)
                    break
            coupons.append({"code": code, "seller": s["name"], "percent_off": pct,
                            "min_spend": rng.choice((15.0, 20.0) if k == 0 else
                                                    (20.0, 30.0, 40.0, 50.0, 75.0))})
    coupons.sort(key=lambda c: c["code"])
    return {"categories": [{"name": c[0], "noun": c[1], "department": c[2]} for c in cats],
            "sellers": sellers, "products": products, "reviews": reviews, "coupons": coupons}


_SCHEMA = """CREATE TABLE categories (
    name TEXT PRIMARY KEY,
    department TEXT NOT NULL
);
CREATE TABLE sellers (
    name TEXT PRIMARY KEY,
    city TEXT NOT NULL,
    rating REAL NOT NULL CHECK (rating BETWEEN 1.0 AND 5.0),
    shipping_fee REAL NOT NULL,          -- USD, once per order from this seller
    free_shipping_over REAL NOT NULL,    -- USD: fee waived when the seller subtotal >= this
    handling_days INTEGER NOT NULL
);
CREATE TABLE products (
    name TEXT PRIMARY KEY,
    category TEXT NOT NULL REFERENCES categories(name),
    seller TEXT NOT NULL REFERENCES sellers(name),
    price REAL NOT NULL CHECK (price >= 0),   -- USD
    stock INTEGER NOT NULL CHECK (stock >= 0),
    rating REAL NOT NULL                      -- average review stars, one decimal
);
CREATE TABLE reviews (
    id INTEGER PRIMARY KEY,
    product TEXT NOT NULL REFERENCES products(name),
    stars INTEGER NOT NULL CHECK (stars BETWEEN 1 AND 5),
    verified INTEGER NOT NULL CHECK (verified IN (0, 1)),
    title TEXT NOT NULL
);
CREATE TABLE coupons (
    code TEXT PRIMARY KEY,
    seller TEXT NOT NULL REFERENCES sellers(name),
    percent_off INTEGER NOT NULL,        -- percent of the seller subtotal
    min_spend REAL NOT NULL              -- USD: applies when the seller subtotal >= this
);
"""


def environment(seed):
    w = _world(seed)
    sql = "-- e_commerce world, generated by envsynth/procedural (seed %d).\n" % seed + _SCHEMA
    sql += insert_rows("categories", ("name", "department"),
                       [(c["name"], c["department"]) for c in w["categories"]])
    cols = ("name", "city", "rating", "shipping_fee", "free_shipping_over", "handling_days")
    sql += insert_rows("sellers", cols, [tuple(s[k] for k in cols) for s in w["sellers"]])
    cols = ("name", "category", "seller", "price", "stock", "rating")
    sql += insert_rows("products", cols, [tuple(p[k] for k in cols) for p in w["products"]])
    cols = ("id", "product", "stars", "verified", "title")
    sql += insert_rows("reviews", cols, [tuple(r[k] for k in cols) for r in w["reviews"]])
    cols = ("code", "seller", "percent_off", "min_spend")
    sql += insert_rows("coupons", cols, [tuple(c[k] for k in cols) for c in w["coupons"]])
    return {"name": "%s_%d" % (ID, seed),
            "description": "An online marketplace (seed %d): %d categories, %d products from %d "
                           "sellers, %d reviews and %d coupons; prices in USD."
                           % (seed, len(w["categories"]), len(w["products"]), len(w["sellers"]),
                              len(w["reviews"]), len(w["coupons"])),
            "schema_sql": sql}


# ------------------------------------------------------------------ generated-source snippets

# Verifiers use math (FLOAT_HOLDS); oracles and solutions name their own imports.
_source = functools.partial(synth_common.source_text, imports=("json", "math"))


# Verifier helpers: per-answer look-ups, money compared as floats with a noise tolerance.
_V_COMMON = synth_common.join_defs(
    synth_common.VERDICT_RESULT, synth_common.FLOAT_HOLDS, synth_common.STRING_FIELDS_SHAPE, '''
def _first(db, sql, params):
    rows = db.query(sql, params)
    return rows[0] if rows else None
''', synth_common.VERIFY_TOTAL)

# Oracle helpers: whole tables loaded once, money as integer cents.
_O_COMMON = synth_common.join_defs(synth_common.VERDICT_NO, synth_common.VERDICT_YES, '''
def _c(x):
    """A number in integer hundredths (cents; ratings have one decimal)."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return int(round(float(x) * 100))
''', synth_common.HUNDREDTHS_SAT, synth_common.STRING_FIELDS_DECODED,
    synth_common.ORACLE_JUDGE_TOTAL)

_S_COMMON = synth_common.SOLUTION_HOLDS


def _money(x):
    return "$%.2f" % x


def _fmt(key, v):
    if key in ("price",):
        return _money(v)
    if isinstance(v, float):
        return "%.1f" % v
    return str(v)


# key -> (where, column, phrase)
_KEYS = {"price": ("product", "price", "its price"),
         "rating": ("product", "rating", "its rating"),
         "stock": ("product", "stock", "its stock (units available)"),
         "seller_rating": ("seller", "rating", "its seller's rating"),
         "handling_days": ("seller", "handling_days", "its seller's handling time in days")}


def _phrase(key, op, v):
    where, col, label = _KEYS[key]
    return "%s is %s %s (%s.%s %s %s)" % (
        label, synth_common.OP_WORDS[op], _fmt(key, v), where, col, op,
        ("%.2f" % v) if key == "price" else _fmt(key, v))


def _ok(value, op, bound):
    """Generator-side check, exact in hundredths (a third implementation of the rule)."""
    a, b = int(round(value * 100)), int(round(bound * 100))
    return {"<=": a <= b, "<": a < b, ">=": a >= b, ">": a > b}[op]


def _satisfies(row, cons):
    return all(_ok(row[k], op, v) for k, op, v in cons)


def _pick(rng, rows, dims, lo, hi):
    """pick_thresholds with this module's rule check."""
    return synth_common.pick_thresholds(rng, rows, dims, lo, hi, _satisfies)


def _field(domain, description):
    return {"type": "string", "minLength": 1, "x-domain": domain, "description": description}


def _flat(w):
    """Product rows with their seller's facts and verified-review counts (generator side)."""
    sellers = {s["name"]: s for s in w["sellers"]}
    verified = {}
    for r in w["reviews"]:
        verified[r["product"]] = verified.get(r["product"], 0) + r["verified"]
    out = []
    for p in w["products"]:
        s = sellers[p["seller"]]
        row = dict(p)
        row.update({"seller_rating": s["rating"], "handling_days": s["handling_days"],
                    "shipping_fee": s["shipping_fee"],
                    "free_shipping_over": s["free_shipping_over"],
                    "verified": verified.get(p["name"], 0)})
        out.append(row)
    return out


# ---------------------------------------------------------------------- single-product filter

_V_SINGLE = '''
def _verify(answer, db):
    data, err = _answer(answer)
    if err:
        return _result([err])
    reasons = _shape(data, ["product"])
    if reasons:
        return _result(reasons)
    name = data["product"]
    product = _first(db, "SELECT * FROM products WHERE name = ?", (name,))
    if product is None:
        return _result(["unknown product %r" % name])
    if product.get("category") != CATEGORY:
        reasons.append("%r is in category %r, not %s" % (name, product.get("category"), CATEGORY))
    seller = _first(db, "SELECT * FROM sellers WHERE name = ?", (product.get("seller"),))
    rows = {"product": product, "seller": seller}
    for where, col, op, bound in CONSTRAINTS:
        row = rows[where]
        if row is None:
            reasons.append("%r has no seller in the database" % name)
            continue
        if not _holds(row.get(col), op, bound):
            reasons.append("%s.%s of %r is %r; required %s %r" % (where, col, name, row.get(col),
                                                                 op, bound))
    return _result(reasons)
'''

_O_SINGLE = '''
def _acceptable(db):
    """Every product meeting all the requirements, from one join of products and sellers."""
    sellers = {s["name"]: s for s in db.query("SELECT * FROM sellers")}
    good = set()
    for p in db.query("SELECT * FROM products WHERE category = ?", (CATEGORY,)):
        rows = {"product": p, "seller": sellers.get(p["seller"])}
        if rows["seller"] is None:
            continue
        if all(_sat(rows[where][col], op, bound) for where, col, op, bound in CONSTRAINTS):
            good.add(p["name"])
    return good


def _judge(answer, db):
    value = _decoded(answer, ["product"])
    if value is None:
        return _no(["not an object with exactly the string field product"])
    if value["product"] not in _acceptable(db):
        return _no(["%r is not an acceptable product" % value["product"]])
    return _yes()
'''

# The search lists the category's products cheapest first and filters by every other bound (the
# seller's facts are in each row): every level-1 and level-2 constraint is a price cap or one of
# those filters, so the first row that holds is the first row.
_S_SINGLE = '''
def solve(tools):
    for row in tools.find_products(%s):
        if all(_holds(row.get("seller_rating" if (where, col) == ("seller", "rating") else col),
                      op, b) for where, col, op, b in CONSTRAINTS):
            return {"product": row["name"]}
    return {}
'''

# key -> (find_products argument, what it bounds, as the prompt names it); a price cap is the
# search's order (cheapest first), not a filter.
_FILTERS = {"rating": ("min_rating", "a floor on the product's rating"),
            "stock": ("min_stock", "a floor on its stock"),
            "seller_rating": ("min_seller_rating", "a floor on its seller's rating"),
            "handling_days": ("max_handling_days", "a cap on its seller's handling days")}


def _single_task(lineage, level, theme, category, cons):
    spec = [[_KEYS[k][0], _KEYS[k][1], op, v] for k, op, v in cons]
    rules = "; ".join(_phrase(k, op, v) for k, op, v in cons)
    filters = [(k, op, v) for k, op, v in cons if k in _FILTERS]
    assert all(k == "price" and op in ("<=", "<") for k, op, _ in cons if k not in _FILTERS), cons
    how = " and ".join("%s (%s)" % _FILTERS[k] for k, _, _ in filters)
    how = (", and its argument%s %s filter%s them" % ("s" if len(filters) > 1 else "", how,
                                                    "" if len(filters) > 1 else "s")
           if filters else "")
    prompt = ("Using the tools, find any product in the category %s that meets %s: %s. "
              "The tool find_products lists a category's products cheapest first%s. "
              "Prices are in US dollars; ratings use the 1.0-5.0 scale. Any product meeting "
              "every requirement is accepted. Submit only a JSON object of the form "
              "{\"product\": \"<product name>\"}, with the name spelled exactly as the tools "
              "return it, and nothing else."
              % (quoted(category), "this requirement" if len(cons) == 1 else
                 "all of these requirements", rules, how))
    consts = [("CATEGORY", category), ("CONSTRAINTS", spec)]
    verifier = _source("Verifier: a product of %s with %s." % (category, rules), consts,
                       _V_COMMON + _V_SINGLE)
    oracle = _source("Oracle: the set of acceptable products from one pass over the category "
                     "joined with the sellers, in integer cents, then membership.", consts,
                     _O_COMMON + _O_SINGLE, imports=("json",))
    arguments = "CATEGORY" + "".join(", %s=%s" % (_FILTERS[k][0], _fmt(k, v))
                                     for k, _, v in filters)
    solution = _source("Gold solution: search the category's products, cheapest first, with the "
                       "filters.", consts, _S_COMMON + _S_SINGLE % arguments, imports=(),
                       envelope=False)
    tools = ["find_products"]
    return {"id": "%s_l%d_%d" % (theme, level, lineage), "prompt": prompt,
            "answer_schema": object_schema("%s answer" % theme, {"product": _field(
                "products.name", "A product of %s meeting the requirements." % category)}),
            "knobs": {"template": "product_filter", "theme": theme, "category": category,
                      "rules": spec, "constraints": 1 + len(spec),
                      "hops": 1, "list_size": None, "distractors": 0,
                      "hidden_steps": 0},
            "solution": solution, "verifier": verifier, "oracle": oracle, "tools": tools}


# ------------------------------------------------------------------------ basket (levels 3-4)

_V_BASKET = '''
def _fields():
    return ["product_%d" % (i + 1) for i in range(len(CATEGORIES))] + (["coupon"] if COUPON else [])


def _verify(answer, db):
    data, err = _answer(answer)
    if err:
        return _result([err])
    reasons = _shape(data, _fields())
    if reasons:
        return _result(reasons)
    items = []
    for i, category in enumerate(CATEGORIES):
        field = "product_%d" % (i + 1)
        name = data[field]
        p = _first(db, "SELECT * FROM products WHERE name = ?", (name,))
        if p is None:
            reasons.append("%s: unknown product %r" % (field, name))
            continue
        if p.get("category") != category:
            reasons.append("%s: %r is in %r, not %s" % (field, name, p.get("category"), category))
        if not _holds(p.get("stock"), ">=", 1):
            reasons.append("%s: %r is out of stock" % (field, name))
        if MIN_RATING and not _holds(p.get("rating"), ">=", MIN_RATING):
            reasons.append("%s: %r is rated %r, below %.1f" % (field, name, p.get("rating"),
                                                              MIN_RATING))
        s = _first(db, "SELECT * FROM sellers WHERE name = ?", (p.get("seller"),))
        if s is None:
            reasons.append("%s: %r has no seller in the database" % (field, name))
            continue
        if MIN_SELLER_RATING and not _holds(s.get("rating"), ">=", MIN_SELLER_RATING):
            reasons.append("%s: seller %r is rated %r, below %.1f" % (field, s.get("name"),
                                                                     s.get("rating"),
                                                                     MIN_SELLER_RATING))
        if MAX_HANDLING and not _holds(s.get("handling_days"), "<=", MAX_HANDLING):
            reasons.append("%s: seller %r needs %r handling days, more than %d"
                           % (field, s.get("name"), s.get("handling_days"), MAX_HANDLING))
        verified = db.query("SELECT COUNT(*) AS n FROM reviews WHERE product = ? AND verified = 1",
                            (name,))[0]["n"]
        if MIN_VERIFIED and verified < MIN_VERIFIED:
            reasons.append("%s: %r has %d verified reviews, fewer than %d" % (field, name, verified,
                                                                             MIN_VERIFIED))
        price = _num(p.get("price"))
        if price is None:
            reasons.append("%s: %r has no usable price" % (field, name))
            continue
        if TIER:
            cut, need_verified, need_seller, need_rating = TIER
            if _holds(price, ">=", cut):
                if verified < need_verified:
                    reasons.append("%s: %r costs >= %.2f but has %d verified reviews (< %d)"
                                   % (field, name, cut, verified, need_verified))
                if not _holds(s.get("rating"), ">=", need_seller):
                    reasons.append("%s: %r costs >= %.2f but its seller is rated %r (< %.1f)"
                                   % (field, name, cut, s.get("rating"), need_seller))
            elif not _holds(p.get("rating"), ">=", need_rating):
                reasons.append("%s: %r costs < %.2f but is rated %r (< %.1f)"
                               % (field, name, cut, p.get("rating"), need_rating))
        items.append((name, price, s))
    if len(items) < len(CATEGORIES):
        reasons.append("the basket total cannot be computed")
        return _result(reasons)
    sellers = [s.get("name") for _, _, s in items]
    distinct = sorted(set(sellers))
    if SELLER_RULE == "same" and len(distinct) != 1:
        reasons.append("all products must come from one seller, got %s" % ", ".join(distinct))
    if SELLER_RULE == "different" and len(distinct) != len(sellers):
        reasons.append("the products must come from different sellers")
    if SELLER_RULE == "max2" and len(distinct) > 2:
        reasons.append("the products come from %d sellers, more than 2" % len(distinct))
    subtotal = {}
    for _, price, s in items:
        subtotal[s.get("name")] = subtotal.get(s.get("name"), 0.0) + price
    total = sum(price for _, price, _ in items)
    for name in distinct:
        s = [x for _, _, x in items if x.get("name") == name][0]
        fee, free = _num(s.get("shipping_fee")), _num(s.get("free_shipping_over"))
        if fee is None or free is None:
            reasons.append("seller %r has no usable shipping terms" % name)
            return _result(reasons)
        if not _holds(subtotal[name], ">=", free):
            total += fee
    if COUPON:
        code = data["coupon"]
        c = _first(db, "SELECT * FROM coupons WHERE code = ?", (code,))
        if c is None:
            reasons.append("unknown coupon %r" % code)
        elif c.get("seller") not in subtotal:
            reasons.append("coupon %r belongs to %r, who sells nothing in the basket"
                           % (code, c.get("seller")))
        elif not _holds(subtotal[c["seller"]], ">=", c.get("min_spend")):
            reasons.append("coupon %r needs a subtotal of %r from %r, got %.2f"
                           % (code, c.get("min_spend"), c["seller"], subtotal[c["seller"]]))
        else:
            pct = _num(c.get("percent_off"))
            if pct is None:
                reasons.append("coupon %r has no usable discount" % code)
            else:
                total -= subtotal[c["seller"]] * pct / 100.0
    if not _holds(total, "<=", BUDGET):
        reasons.append("the basket total is %.4f, more than the budget of %.2f" % (total, BUDGET))
    return _result(reasons)
'''

_O_BASKET = '''
def _slots():
    return ["product_%d" % (i + 1) for i in range(len(CATEGORIES))]


def _candidates(db):
    """Per slot, the products meeting every per-product rule (rows keyed by name)."""
    sellers = {s["name"]: s for s in db.query("SELECT * FROM sellers")}
    verified = {r["product"]: r["n"] for r in db.query(
        "SELECT product, SUM(verified) AS n FROM reviews GROUP BY product")}
    out = []
    for category in CATEGORIES:
        keep = {}
        for p in db.query("SELECT * FROM products WHERE category = ?", (category,)):
            s = sellers.get(p["seller"])
            v = verified.get(p["name"]) or 0
            if s is None or p["stock"] < 1:
                continue
            if MIN_RATING and _c(p["rating"]) < _c(MIN_RATING):
                continue
            if MIN_SELLER_RATING and _c(s["rating"]) < _c(MIN_SELLER_RATING):
                continue
            if MAX_HANDLING and s["handling_days"] > MAX_HANDLING:
                continue
            if MIN_VERIFIED and v < MIN_VERIFIED:
                continue
            if TIER:
                if _c(p["price"]) >= _c(TIER[0]):
                    if v < TIER[1] or _c(s["rating"]) < _c(TIER[2]):
                        continue
                elif _c(p["rating"]) < _c(TIER[3]):
                    continue
            keep[p["name"]] = (p, s)
        out.append(keep)
    return out


def _basket_ok(combo, coupon_code, db):
    """The basket-level rules for one combination of candidate (product, seller) rows."""
    names = [s["name"] for _, s in combo]
    if SELLER_RULE == "same" and len(set(names)) != 1:
        return False
    if SELLER_RULE == "different" and len(set(names)) != len(names):
        return False
    if SELLER_RULE == "max2" and len(set(names)) > 2:
        return False
    sub, terms = {}, {}
    for p, s in combo:
        sub[s["name"]] = sub.get(s["name"], 0) + _c(p["price"])
        terms[s["name"]] = (_c(s["shipping_fee"]), _c(s["free_shipping_over"]))
    total = 100 * sum(sub.values())  # in 1/10000 dollar
    for name in sorted(sub):
        if sub[name] < terms[name][1]:
            total += 100 * terms[name][0]
    if COUPON:
        rows = db.query("SELECT * FROM coupons WHERE code = ?", (coupon_code,))
        if not rows or rows[0]["seller"] not in sub:
            return False
        c = rows[0]
        if sub[c["seller"]] < _c(c["min_spend"]):
            return False
        total -= c["percent_off"] * sub[c["seller"]]
    return total <= 100 * _c(BUDGET)


def _judge(answer, db):
    fields = _slots() + (["coupon"] if COUPON else [])
    value = _decoded(answer, fields)
    if value is None:
        return _no(["not an object with exactly the string fields " + ", ".join(fields)])
    slots = _candidates(db)
    combo = []
    for field, keep in zip(_slots(), slots):
        if value[field] not in keep:
            return _no(["%s is not a product meeting every per-product rule" % field])
        combo.append(keep[value[field]])
    if not _basket_ok(combo, value.get("coupon"), db):
        return _no(["the basket breaks a seller, coupon or budget rule"])
    return _yes()
'''

_S_BASKET = '''
def solve(tools):
    seller_info, coupon_list = {}, {}

    def seller(name):
        if name not in seller_info:
            seller_info[name] = tools.get_seller(name)
        return seller_info[name]

    slots = []
    for category in CATEGORIES:
        keep = []
        for name in tools.list_products(category):
            p = tools.get_product(name)
            s = seller(p["seller"])
            if p["stock"] < 1:
                continue
            if MIN_RATING and not _holds(p["rating"], ">=", MIN_RATING):
                continue
            if MIN_SELLER_RATING and not _holds(s["rating"], ">=", MIN_SELLER_RATING):
                continue
            if MAX_HANDLING and s["handling_days"] > MAX_HANDLING:
                continue
            if MIN_VERIFIED or TIER:
                verified = sum(1 for r in tools.get_reviews(name) if r["verified"])
                if MIN_VERIFIED and verified < MIN_VERIFIED:
                    continue
                if TIER:
                    if _holds(p["price"], ">=", TIER[0]):
                        if verified < TIER[1] or not _holds(s["rating"], ">=", TIER[2]):
                            continue
                    elif not _holds(p["rating"], ">=", TIER[3]):
                        continue
            keep.append(p)
        slots.append(keep)

    best = None
    for combo in itertools.product(*slots):
        names = [p["seller"] for p in combo]
        if SELLER_RULE == "same" and len(set(names)) != 1:
            continue
        if SELLER_RULE == "different" and len(set(names)) != len(names):
            continue
        if SELLER_RULE == "max2" and len(set(names)) > 2:
            continue
        sub = {}
        for p in combo:
            sub[p["seller"]] = sub.get(p["seller"], 0.0) + p["price"]
        total = sum(sub.values())
        for name in sorted(sub):
            if sub[name] < seller(name)["free_shipping_over"] - 1e-9:
                total += seller(name)["shipping_fee"]
        options = [(round(total, 6), "")]
        if COUPON:
            options = []
            for name in sorted(sub):
                if name not in coupon_list:
                    coupon_list[name] = tools.list_coupons(name)
                for c in coupon_list[name]:
                    if sub[name] >= c["min_spend"] - 1e-9:
                        options.append((round(total - sub[name] * c["percent_off"] / 100.0, 6),
                                        c["code"]))
        for cost, code in options:
            key = (cost, [p["name"] for p in combo], code)
            if best is None or key < best:
                best = key
    answer = {"product_%d" % (i + 1): n for i, n in enumerate(best[1])}
    if COUPON:
        answer["coupon"] = best[2]
    return answer
'''


def _baskets(w, flat, p):
    """Every acceptable answer of a basket task with its total in 1/10000 dollars (generator)."""
    slots = []
    for cat in p["CATEGORIES"]:
        keep = []
        for r in flat:
            if r["category"] != cat or r["stock"] < 1:
                continue
            if p["MIN_RATING"] and not _ok(r["rating"], ">=", p["MIN_RATING"]):
                continue
            if p["MIN_SELLER_RATING"] and not _ok(r["seller_rating"], ">=",
                                                  p["MIN_SELLER_RATING"]):
                continue
            if p["MAX_HANDLING"] and r["handling_days"] > p["MAX_HANDLING"]:
                continue
            if p["MIN_VERIFIED"] and r["verified"] < p["MIN_VERIFIED"]:
                continue
            if p["TIER"]:
                cut, nv, sr, pr = p["TIER"]
                if _ok(r["price"], ">=", cut):
                    if r["verified"] < nv or not _ok(r["seller_rating"], ">=", sr):
                        continue
                elif not _ok(r["rating"], ">=", pr):
                    continue
            keep.append(r)
        slots.append(keep)
    out = []
    for combo in itertools.product(*slots):
        names = [r["seller"] for r in combo]
        rule = p["SELLER_RULE"]
        if (rule == "same" and len(set(names)) != 1) or \
           (rule == "different" and len(set(names)) != len(names)) or \
           (rule == "max2" and len(set(names)) > 2):
            continue
        sub, terms = {}, {}
        for r in combo:
            sub[r["seller"]] = sub.get(r["seller"], 0) + int(round(r["price"] * 100))
            terms[r["seller"]] = (int(round(r["shipping_fee"] * 100)),
                                  int(round(r["free_shipping_over"] * 100)))
        total = 100 * sum(sub.values())
        for s in sorted(sub):
            if sub[s] < terms[s][1]:
                total += 100 * terms[s][0]
        key = tuple(r["name"] for r in combo)
        if not p["COUPON"]:
            out.append((total, key))
            continue
        for c in w["coupons"]:
            if c["seller"] in sub and sub[c["seller"]] >= int(round(c["min_spend"] * 100)):
                out.append((total - c["percent_off"] * sub[c["seller"]], key + (c["code"],)))
    out.sort()
    return out


def _basket_task(seed, lineage, level, attempt, rng, w, theme, category):
    flat = _flat(w)
    cats = [c["name"] for c in w["categories"]]
    # Level 4: four answer slots (4 products, or 3 products + a coupon).
    n_items = 2 if level == 3 else (3 if theme == "delivery" else 4)
    ratings = sorted(r["rating"] for r in flat)
    found = None
    for _ in range(80):
        others = [c for c in cats if c != category]
        chosen = [category] + rng.sample(others, n_items - 1)
        p = {"CATEGORIES": chosen, "MIN_RATING": 0, "MIN_SELLER_RATING": 0, "MAX_HANDLING": 0,
             "MIN_VERIFIED": 0, "SELLER_RULE": "any", "COUPON": 0, "TIER": []}
        if theme == "budget":
            if level == 3:
                p["SELLER_RULE"] = "same"
                p["MIN_SELLER_RATING"] = rng.choice((3.5, 3.8, 4.0, 4.2))
            else:
                p["SELLER_RULE"] = "max2"
                p["MIN_RATING"] = rng.choice((3.0, 3.3, 3.5))
        elif theme == "quality":
            p["MIN_RATING"] = ratings[len(ratings) * rng.randint(35, 60) // 100]
            if level == 3:
                p["SELLER_RULE"] = "different"
                p["MIN_VERIFIED"] = rng.choice((2, 3))
            else:
                p["MIN_SELLER_RATING"] = rng.choice((3.3, 3.5, 3.8))
        else:
            p["COUPON"] = 1
            p["MAX_HANDLING"] = rng.choice((3, 4))
            if level == 3:
                p["SELLER_RULE"] = "same"
            else:
                p["SELLER_RULE"] = "max2"
        if level == 4:
            prices = sorted(r["price"] for r in flat if r["category"] in chosen)
            cut = float(int(prices[len(prices) * rng.randint(40, 70) // 100]))
            p["TIER"] = [cut, rng.choice((2, 3)), rng.choice((3.8, 4.0, 4.2)),
                         rng.choice((3.5, 3.8, 4.0))]
        options = _baskets(w, flat, p)
        if options and len(options) >= 2:
            found = (p, options)
            break
        if options and found is None:
            found = (p, options)
    if found is None:  # relax everything but the theme's coupon; one product per category
        p = {"CATEGORIES": [category] + [c for c in cats if c != category][:n_items - 1],
             "MIN_RATING": 0, "MIN_SELLER_RATING": 0, "MAX_HANDLING": 0, "MIN_VERIFIED": 0,
             "SELLER_RULE": "any", "COUPON": 1 if theme == "delivery" else 0, "TIER": []}
        options = _baskets(w, flat, p)
        if not options:
            raise ValueError("no feasible basket for %s (seed %d)" % (category, seed))
        found = (p, options)
    p, options = found
    idx = min(len(options) - 1, rng.choice((0, 1, 2)))
    budget = float(int(math.ceil(options[idx][0] / 10000.0 - 1e-9)))
    p["BUDGET"] = budget
    accepted = sum(1 for t, _ in options if t <= int(budget * 10000))
    fields = ["product_%d" % (i + 1) for i in range(n_items)] + (["coupon"] if p["COUPON"] else [])
    rules = []
    rules.append("Buy exactly one product from each of these categories, in this order: %s "
                 "(product_1 from \"%s\"%s)." % (
                     ", ".join("\"%s\"" % c for c in p["CATEGORIES"]), p["CATEGORIES"][0],
                     "".join(", product_%d from \"%s\"" % (i + 1, c)
                             for i, c in enumerate(p["CATEGORIES"]) if i)))
    rules.append("Every product is in stock (stock >= 1).")
    if p["MIN_RATING"]:
        rules.append("Every product is rated at least %.1f (rating >= %.1f)." % (p["MIN_RATING"],
                                                                             p["MIN_RATING"]))
    if p["MIN_SELLER_RATING"]:
        rules.append("Every product's seller is rated at least %.1f (seller rating >= %.1f)."
                     % (p["MIN_SELLER_RATING"], p["MIN_SELLER_RATING"]))
    if p["MAX_HANDLING"]:
        rules.append("Every product's seller ships within %d handling days (handling_days <= %d)."
                     % (p["MAX_HANDLING"], p["MAX_HANDLING"]))
    if p["MIN_VERIFIED"]:
        rules.append("Every product has at least %d verified reviews (reviews whose \"verified\" "
                     "flag is true)." % p["MIN_VERIFIED"])
    rules.append({"same": "All products come from one and the same seller.",
                  "different": "The products come from pairwise different sellers.",
                  "max2": "The products come from at most 2 different sellers.",
                  "any": "Products may come from any sellers."}[p["SELLER_RULE"]])
    if p["TIER"]:
        cut, nv, sr, pr = p["TIER"]
        rules.append("Price-tier rule, for each product: if its price is at least %s (price >= "
                     "%.2f), it must have at least %d verified reviews and its seller must be "
                     "rated at least %.1f; otherwise (price < %.2f) the product itself must be "
                     "rated at least %.1f." % (_money(cut), cut, nv, sr, cut, pr))
    if p["COUPON"]:
        rules.append("Apply exactly one coupon (see the sellers' coupons). It must belong to a "
                     "seller of at least one product in the basket, and that seller's subtotal "
                     "(the sum of the prices of the basket's products from that seller) must be "
                     "at least the coupon's min_spend; it takes percent_off percent off that "
                     "seller's subtotal.")
    rules.append("Total cost: the sum of the product prices, plus, for each distinct seller in "
                 "the basket, that seller's shipping_fee once unless the seller's subtotal (before "
                 "any coupon) is at least its free_shipping_over amount%s. The total must be at "
                 "most %s (total <= %.2f), computed exactly (no rounding)."
                 % (", minus the coupon's discount" if p["COUPON"] else "", _money(budget),
                    budget))
    shape = "{" + ", ".join("\"%s\": \"<%s>\"" % (f, "coupon code" if f == "coupon" else
                                                  "product name") for f in fields) + "}"
    prompt = ("Assemble a shopping basket in the marketplace. Prices are in US dollars; ratings "
              "use the 1.0-5.0 scale and \"at least\" includes equality.\n\nRules:\n%s\n\nAny "
              "basket meeting every rule is accepted. Submit only a JSON object of the form %s, "
              "with names and codes spelled exactly as the tools return them, and nothing else."
              % ("\n".join("%d. %s" % (i + 1, r) for i, r in enumerate(rules)), shape))
    consts = [(k, p[k]) for k in ("CATEGORIES", "MIN_RATING", "MIN_SELLER_RATING", "MAX_HANDLING",
                                  "MIN_VERIFIED", "SELLER_RULE", "COUPON", "TIER", "BUDGET")]
    verifier = _source("Verifier: a basket of one product per category of %s; checks stock, "
                       "ratings, sellers, reviews, the tier rule, the coupon and the total cost "
                       "against the database." % ", ".join(p["CATEGORIES"]), consts,
                       _V_COMMON + _V_BASKET)
    oracle = _source("Oracle: per-slot candidate sets from whole-table passes (membership), "
                     "then the basket rules in integer 1/10000 dollars.", consts,
                     _O_COMMON + _O_BASKET, imports=("json",))
    solution = _source("Gold solution: filter each category with the tools, then take the "
                       "cheapest basket (and coupon).", consts, _S_COMMON + _S_BASKET,
                       imports=("itertools",), envelope=False)
    props = {f: (_field("coupons.code", "Code of the coupon applied.") if f == "coupon" else
                 _field("products.name", "The product from \"%s\"."
                        % p["CATEGORIES"][int(f.split("_")[1]) - 1])) for f in fields}
    tools = ["list_categories", "list_products", "get_product", "get_seller"]
    if p["MIN_VERIFIED"] or p["TIER"]:
        tools.append("get_reviews")
    if p["COUPON"]:
        tools.append("list_coupons")
    return {"id": "%s_l%d_%d" % (theme, level, lineage), "prompt": prompt,
            "answer_schema": object_schema("%s basket" % theme, props, fields),
            "knobs": {"template": "basket", "theme": theme, "params": p,
                      "cheapest_total": options[0][0] / 10000.0, "accepted_answers": accepted,
                      "constraints": len(rules), "conditional_rules": 2 if p["TIER"] else 0,
                      "hops": 3 + (1 if len(tools) > 4 else 0), "list_size": n_items,
                      "distractors": len(flat) - n_items, "hidden_steps": 1 + len(tools) - 4},
            "solution": solution, "verifier": verifier, "oracle": oracle, "tools": tools}


# ------------------------------------------------------------------------------------ tasks

_THEMES = ("budget", "quality", "delivery")


def task(seed, lineage, level, attempt):
    w = _world(seed)
    theme = _THEMES[lineage % len(_THEMES)]
    lrng = rng_for(ID, seed, "lineage", lineage, attempt)
    category = lrng.choice([c["name"] for c in w["categories"]])
    rng = rng_for(ID, seed, "task", lineage, level, attempt)
    if level >= 3:
        return _basket_task(seed, lineage, level, attempt, rng, w, theme, category)
    rows = [r for r in _flat(w) if r["category"] == category]
    dim = {"budget": [("price", "<=")], "quality": [("rating", ">=")],
           "delivery": [("stock", ">=")]}[theme]
    n = len(rows)
    l1rng = rng_for(ID, seed, "task", lineage, 1, attempt)
    cons = _pick(l1rng, rows, dim, max(1, n // 2), max(1, n - 2))
    if level == 2:
        l1_count = sum(1 for r in rows if _satisfies(r, cons))
        dims = {"budget": [("price", "<="), ("seller_rating", ">=")],
                "quality": [("rating", ">="), ("price", "<")],
                "delivery": [("stock", ">="), ("handling_days", "<=")]}[theme]
        cons = _pick(rng, rows, dims, 1, max(1, min(2, l1_count - 1)))
    return _single_task(lineage, level, theme, category, cons)
