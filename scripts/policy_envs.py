#!/usr/bin/python3
"""Procedural "shop" environments for training and evaluating the small policy model (issue 12).

    /usr/bin/python3 scripts/policy_envs.py --seed S --out DIR [--instances K]
        [--templates a,b,...] [--name NAME]

writes one complete environment source directory (env.json, schema.sql, tools.py,
tasks/<template>_<NN>/{task.json, solution.py, verifier.py}) for seed S; pack it with
`envforge env pack DIR -o X.envdb`. Importable: generate(seed, out_dir, instances=K,
templates=None, name=None) and the TEMPLATES table.

SEED SPLIT (keep it): training uses seeds 1..N with N < 900000 (TRAIN_SEED_MAX); seeds from
900000 up are held out for evaluation. The committed evaluation environments are
data/envs/shop_eval_a (seed 900001) and data/envs/shop_eval_b (seed 900002), every template,
4 instances each (EVAL_ENVS). TEMPLATE SPLIT: templates with train=False (supplier_phone, a
held-out template; category_stock_value, far beyond training) never appear in training data;
TRAIN_TEMPLATES lists the others.

Each seed gives a different database: 5-6 categories of 3-5 products, 5 suppliers, made-up
lexicon names ("Bito Lamp", "Rasa Co", city "Kelo") so that a model must copy names
rather than memorise them; prices 10..99 (distinct within a category), stock 10..60,
ratings 2.0..5.0 with one decimal. Three tools (get_product, list_products,
get_supplier_by_name). The two getters take an optional `select` (a field name) and then answer
{field: value} alone: the gold solutions of the look-up tiers ask for the one field they need, so
the value to copy sits at a fixed distance from where the next call or the answer writes it
({"price":65} is the result and the answer alike).

WHY THE DETAILS (the shipped policy model, train_policy.py): a small model learns copying at a
fixed distance in tens of steps; copying a value found by its key inside a whole row, or at a
distance that varies (content-addressed look-up, induction), it did not learn in this project's
CPU budget (scripts/policy/data.py, copy_sequences and lookup_sequences; session 13: repeats at
a distance drawn from 34..46 or 38..44 left the copy loss near chance after 200-300 steps). So
every copy of the look-up tiers (tiers 1-2) sits 40 tokens from its source, the distance the copy
stage of train_policy.py teaches (measured with the shipped recipe's tokenizer, non-thinking
transcripts of held-out seeds; thinking mode puts a reasoning line in between):
  - the name in the prompt -> the first call's "name" argument: the parameter is `select`, not
    `field`, because the chat encoder writes arguments in key order and "name" must come first
    (with "field" first names sat 56 tokens away and no run copied one);
  - the value in a result -> the answer: prices and stock have two digits, one token each (the
    recipe's tokenizer merges digits), like a lexicon word (three digits put the answer 42
    tokens away, and tier-1 answers were 2 of 11 right where names were 15 of 15);
  - the supplier in a result -> the next call: the tool is `get_supplier_by_name`, whose
    two extra tokens move that copy from 38 to 40 (at 38: 0 of 4 right).
The list tiers (3-4) follow the same rule as far as a list allows: list_products lists a
category most expensive first, and each row's keys come out sorted (price, rating, stock, title),
so the cheapest product's name is the last thing in the result; the answer is that name as plain
text, after a one-word remark in the gold answer turn (SUBMIT_REMARKS), which puts it 40 tokens
from the last row's title, and the prompts end alike after the category, 40 tokens before the
call's argument. Tier 3 is then two copies at 40 like tier 1. Tier 4's answer is never the last
row (its constraints exclude the cheapest): it sits 19, 38 or more tokens further back, at
distances the copy stage does not teach, so tier 4 needs the content-based choice the model
lacks.
Prompts quote the names and categories they mention ('the price of "Bito Lamp"'): a quoted name
tokenizes the same as the tool-call argument and the JSON string it is copied into or from
(a word after a space is a different token from the same word after a quote or a '>'), so a small
model learns to copy it with one attention pattern.
The price and stock look-ups are worded apart from their first word on (LOOKUP_PROMPTS says why):
the one choice a look-up makes, the field to select, is then told by the prompt's shape.
Everything is kept short on purpose: the tool specs are in every prompt of every episode.

The output is a pure function of the arguments: only random.Random(seed) draws, no iteration
over hash-ordered containers, fixed JSON formatting; the same arguments give byte-identical
files. Python standard library only.
"""

import argparse
import collections
import json
import os
import random
import shutil
import sys

GENERATOR = "scripts/policy_envs.py"
TRAIN_SEED_MAX = 899999                      # training seeds: 1..N, N <= this
EVAL_ENVS = (("shop_eval_a", 900001), ("shop_eval_b", 900002))
EVAL_INSTANCES = 4

Template = collections.namedtuple("Template", "name tier held_out train")

# name, tier (task.json "difficulty"), held_out (a held-out template: never in training, an
# evaluation of generalisation), train (used for training transcripts).
TEMPLATES = (
    Template("price_lookup", 1, False, True),
    Template("stock_lookup", 1, False, True),
    Template("supplier_city", 2, False, True),
    Template("supplier_phone", 2, True, False),
    Template("cheapest_in_category", 3, False, True),
    Template("cheapest_in_stock_rated", 4, False, True),
    Template("category_stock_value", 5, False, False),
)
TEMPLATE_NAMES = tuple(t.name for t in TEMPLATES)
TRAIN_TEMPLATES = tuple(t.name for t in TEMPLATES if t.train)
_BY_NAME = {t.name: t for t in TEMPLATES}

# ---------------------------------------------------------------------------------------------
# Data

# category -> item nouns (the second word of a product name); distinct across categories.
CATEGORIES = (
    ("kitchen", ("Kettle", "Pan", "Mug", "Toaster", "Bowl", "Grater")),
    ("garden", ("Hose", "Rake", "Shovel", "Planter", "Shears", "Bench")),
    ("office", ("Desk", "Stapler", "Chair", "Folder", "Pen", "Shelf")),
    ("audio", ("Speaker", "Radio", "Headset", "Amp", "Mic", "Player")),
    ("toys", ("Robot", "Puzzle", "Kite", "Yoyo", "Doll", "Blocks")),
    ("tools", ("Drill", "Saw", "Hammer", "Wrench", "Level", "Clamp")),
    ("lighting", ("Lamp", "Bulb", "Lantern", "Torch", "Candle", "Sconce")),
    ("sports", ("Ball", "Racket", "Helmet", "Skates", "Bat", "Glove")),
    ("bath", ("Towel", "Mirror", "Soap", "Sponge", "Mat", "Brush")),
)
# Made-up words (product first words, supplier names, cities) come from a fixed lexicon of 96
# two-syllable words ("Bito", "Kelo"), each used at most once per database. The tokenizer trained
# on the transcripts makes each of them one token, so a name is two tokens ("Bito", " Lamp") drawn
# from a small alphabet, and a small model learns to copy over a small alphabet in far fewer steps
# (a copy task in the shipped architecture: over 100 token ids it learns in ~80 steps, over 900
# not in 120). Which product gets which word is random per seed: a name cannot be memorised.
_SYLLABLES = tuple(o + v for o in "bdklmnprst" for v in "aeio")
LEXICON = tuple(sorted(random.Random("policy-envs-lexicon").sample(
    sorted({(a + b).capitalize() for a in _SYLLABLES for b in _SYLLABLES}), 96)))
_SUPPLIER_SUFFIXES = ("Co", "Ltd", "Inc", "Bros", "Trade")
N_SUPPLIERS = 5
STOCK_STEPS = (15, 20, 25, 30, 35, 40)       # tier 4 thresholds: stock >= N
RATING_STEPS = (30, 35, 40, 45)              # tier 4 thresholds: rating >= R (tenths)


def _unique_words(rng, n, used):
    """n lexicon words not in used (which receives them)."""
    out = rng.sample([w for w in LEXICON if w not in used], n)
    used.update(out)
    return out


def _tier4_options(products):
    """Every (stock >= N, rating >= R) pair for which some product qualifies and the
    category's cheapest does not; products sorted by price."""
    cheapest = products[0]
    out = []
    for n in STOCK_STEPS:
        for r in RATING_STEPS:
            ok = [p for p in products if p["stock"] >= n and p["rating10"] >= r]
            if ok and ok[0] is not cheapest:
                out.append((n, r))
    return out


def make_database(seed):
    """{"categories": [name...], "products": [row...], "suppliers": [row...]} for a seed."""
    rng = random.Random(seed)
    while True:  # rejection sampling: every category must allow a tier-4 task
        used = set()
        cats = sorted(rng.sample(CATEGORIES, rng.choice((5, 6))))
        cities = _unique_words(rng, N_SUPPLIERS, used)
        phones = set()
        suppliers = []
        for word, city in zip(_unique_words(rng, N_SUPPLIERS, used), cities):
            phone = None
            while phone is None or phone in phones:
                phone = "%03d-%04d" % (rng.randint(200, 989), rng.randint(0, 9999))
            phones.add(phone)
            suppliers.append({"name": word + " " + rng.choice(_SUPPLIER_SUFFIXES),
                              "city": city, "phone": phone})
        products = []
        for cat, nouns in cats:
            count = rng.randint(3, 5)
            words = _unique_words(rng, count, used)
            items = rng.sample(nouns, count)
            prices = rng.sample(range(10, 100), count)
            for word, item, price in zip(words, items, prices):
                products.append({"name": word + " " + item, "category": cat, "price": price,
                                 "stock": rng.randint(10, 60), "rating10": rng.randint(20, 50),
                                 "supplier": rng.choice(suppliers)["name"]})
        names = [c for c, _ in cats]
        if all(_tier4_options(_in_category(products, c)) for c in names):
            break
    return {"categories": names, "products": products,
            "suppliers": sorted(suppliers, key=lambda s: s["name"])}


def _in_category(products, category):
    return sorted((p for p in products if p["category"] == category), key=lambda p: p["price"])


def _sql_str(s):
    return "'" + s.replace("'", "''") + "'"


def _rating(r10):
    return "%d.%d" % (r10 // 10, r10 % 10)


SCHEMA = """\
CREATE TABLE suppliers (
    name TEXT PRIMARY KEY,
    city TEXT NOT NULL,
    phone TEXT NOT NULL
);
CREATE TABLE products (
    name TEXT PRIMARY KEY,
    category TEXT NOT NULL,
    price INTEGER NOT NULL,           -- 10..99, distinct within a category
    stock INTEGER NOT NULL,           -- units in stock, 10..60
    rating REAL NOT NULL,             -- 2.0..5.0, one decimal
    supplier TEXT NOT NULL REFERENCES suppliers(name)
);
CREATE INDEX products_category ON products(category);
"""


def schema_sql(seed, data):
    lines = ["-- shop data, generated by %s --seed %d. Do not edit by hand." % (GENERATOR, seed),
             SCHEMA.rstrip("\n")]
    for s in data["suppliers"]:
        lines.append("INSERT INTO suppliers VALUES (%s, %s, %s);"
                     % (_sql_str(s["name"]), _sql_str(s["city"]), _sql_str(s["phone"])))
    for p in sorted(data["products"], key=lambda p: p["name"]):
        lines.append("INSERT INTO products VALUES (%s, %s, %d, %d, %s, %s);"
                     % (_sql_str(p["name"]), _sql_str(p["category"]), p["price"], p["stock"],
                        _rating(p["rating10"]), _sql_str(p["supplier"])))
    return "\n".join(lines) + "\n"


# The tools are the same for every seed. Short docstrings on purpose (see the module comment).
TOOLS_PY = '''\
"""Shop tools. The runtime injects the module global ``db`` (db.query(sql, params))."""


PRODUCT_FIELDS = ("name", "category", "price", "stock", "rating", "supplier")
SUPPLIER_FIELDS = ("name", "city", "phone")


def _one(table, fields, name, select, what):
    """The row named `name`: every field, or {select: value} when a field is selected."""
    if select and select not in fields:
        raise ValueError("unknown field %r; one of %s" % (select, ", ".join(fields)))
    columns = select or ", ".join(fields)
    rows = db.query("SELECT %s FROM %s WHERE name = ?" % (columns, table), (name,))  # noqa: F821
    if not rows:
        raise ValueError("unknown %s %r" % (what, name))
    return rows[0]


def get_product(name: str, select: str = "") -> dict:
    """Get a product by name; with select, only that field."""
    return _one("products", PRODUCT_FIELDS, name, select, "product")


def list_products(category: str) -> list:
    """List a category's products, most expensive first; title is the product's name."""
    rows = db.query("SELECT name AS title, price, stock, rating FROM products"  # noqa: F821
                    " WHERE category = ? ORDER BY price DESC, name", (category,))
    if not rows:
        raise ValueError("unknown category %r" % (category,))
    return rows


def get_supplier_by_name(name: str, select: str = "") -> dict:
    """Get a supplier by name; with select, only that field."""
    return _one("suppliers", SUPPLIER_FIELDS, name, select, "supplier")
'''

# ---------------------------------------------------------------------------------------------
# Verifiers: each task's verifier is VERIFIER_HEAD + its constants + its EXPECTED_* SQL +
# VERIFIER_TAIL. It recomputes the expected answer from the database (never from the solution).

VERIFIER_HEAD = '''\
"""Verifier for a generated shop task (scripts/policy_envs.py): recomputes the answer with SQL."""

import json

'''

VERIFIER_TAIL = '''

def _no(reason):
    return {"passed": False, "score": 0.0, "reasons": [reason]}


def verify(answer, db):
    if KEY is None:  # the answer is a name, as plain text
        if not isinstance(answer, str):
            return _no("answer must be the name as plain text")
        if answer.strip() != _expected(db):
            return _no("wrong name")
        return {"passed": True, "score": 1.0, "reasons": []}
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return _no("answer is not JSON")
    if not isinstance(answer, dict):
        return _no("answer is not a JSON object")
    if sorted(answer) != [KEY]:
        return _no("answer must have exactly the key %r" % KEY)
    got = answer[KEY]
    want = _expected(db)
    if isinstance(want, str):
        if not isinstance(got, str):
            return _no("%s must be a string" % KEY)
    elif isinstance(got, bool) or not isinstance(got, int):
        return _no("%s must be an integer" % KEY)
    if got != want:
        return _no("wrong %s" % KEY)
    return {"passed": True, "score": 1.0, "reasons": []}
'''

_EXPECTED = {
    "price_lookup": '''
def _expected(db):
    return db.query("SELECT price FROM products WHERE name = ?", (PRODUCT,))[0]["price"]
''',
    "stock_lookup": '''
def _expected(db):
    return db.query("SELECT stock FROM products WHERE name = ?", (PRODUCT,))[0]["stock"]
''',
    "supplier_city": '''
def _expected(db):
    return db.query("SELECT s.city AS v FROM products p JOIN suppliers s ON s.name = p.supplier"
                    " WHERE p.name = ?", (PRODUCT,))[0]["v"]
''',
    "supplier_phone": '''
def _expected(db):
    return db.query("SELECT s.phone AS v FROM products p JOIN suppliers s ON s.name = p.supplier"
                    " WHERE p.name = ?", (PRODUCT,))[0]["v"]
''',
    "cheapest_in_category": '''
def _expected(db):
    return db.query("SELECT name FROM products WHERE category = ? ORDER BY price, name LIMIT 1",
                    (CATEGORY,))[0]["name"]
''',
    "cheapest_in_stock_rated": '''
def _expected(db):
    return db.query("SELECT name FROM products WHERE category = ? AND stock >= ?"
                    " AND CAST(ROUND(rating * 10) AS INTEGER) >= ? ORDER BY price, name LIMIT 1",
                    (CATEGORY, MIN_STOCK, MIN_RATING_TENTHS))[0]["name"]
''',
    "category_stock_value": '''
def _expected(db):
    return db.query("SELECT SUM(price * stock) AS v FROM products WHERE category IN (?, ?)",
                    tuple(CATEGORIES))[0]["v"]
''',
}

# ---------------------------------------------------------------------------------------------
# Tasks


def _schema(key, kind):
    return {"type": "object", "properties": {key: {"type": kind}}, "required": [key],
            "additionalProperties": False}


def _pick(rng, pool, k):
    """k items of pool: without repetition while the pool lasts, then again from a new shuffle."""
    out = []
    while len(out) < k:
        batch = list(pool)
        rng.shuffle(batch)
        out.extend(batch[:k - len(out)])
    return out


# The two look-up prompts differ from their first word and in length, and end alike (the name
# 10 tokens before the assistant turn, where the copy at 40 needs it). With one wording a word
# apart ("What is the price/stock of ...") the previous checkpoint chose the field by a coin flip:
# P("price") 0.47-0.49 for price and stock questions alike, on training and held-out transcripts;
# the gradient from that choice to the prompt's field word was ~1e-3 of the gradient to the
# tokens it does attend to, and 60 more steps on look-ups alone moved nothing. With these
# wordings 100 more steps of that model took it to 0.7, and the retrained model passes 89% of
# held-out tier-1 episodes.
LOOKUP_PROMPTS = {
    "price_lookup": ("price", 'What is the price of "%s"? Submit {"price": <integer>}.'),
    "stock_lookup": ("stock", 'Stock check: how many units of "%s"? Submit {"stock": <integer>}.'),
}


def _task_lookup(template, product):
    x = product["name"]
    key, prompt = LOOKUP_PROMPTS[template]
    return {
        "prompt": prompt % x,
        "schema": _schema(key, "integer"),
        "knobs": {"product": x},
        "consts": {"KEY": key, "PRODUCT": x},
        "solution": 'def solve(tools):\n    p = tools.get_product(%s, %s)\n    return {%s: p[%s]}\n'
                    % (json.dumps(x), json.dumps(key), json.dumps(key), json.dumps(key)),
    }


def _task_supplier(template, product):
    x = product["name"]
    if template == "supplier_city":
        key, prompt = "city", 'In which city is the supplier of "%s"? Submit {"city": "<city>"}.'
    else:
        key, prompt = "phone", ('What is the phone number of the supplier of "%s"? '
                                'Submit {"phone": "<phone>"}.')
    return {
        "prompt": prompt % x,
        "schema": _schema(key, "string"),
        "knobs": {"product": x},
        "consts": {"KEY": key, "PRODUCT": x},
        "solution": ('def solve(tools):\n    p = tools.get_product(%s, "supplier")\n'
                     '    s = tools.get_supplier_by_name(p["supplier"], %s)\n    return {%s: s[%s]}\n'
                     % (json.dumps(x), json.dumps(key), json.dumps(key), json.dumps(key))),
    }


# The list tiers' prompts end alike, after the category, so that the category sits 40 tokens
# before the list_products call's argument; their answer is the name as plain text, and the gold
# answer turn says one word first (SUBMIT_REMARKS): together they put the last row's title 40 tokens
# before the answer (a JSON object or a quoted string costs 2 or 0 tokens: the recipe's tokenizer
# merges any constant punctuation into the '">' before it, but not a word).
NAME_ANSWER = "Submit the name alone, as text."
SUBMIT_REMARKS = {"cheapest_in_category": "Cheapest", "cheapest_in_stock_rated": "Cheapest"}


def _name_schema():
    return {"type": "string", "description": "the product's name alone, as plain text"}


def _task_cheapest(category):
    return {
        "prompt": 'Which is the cheapest product in category "%s"? %s' % (category, NAME_ANSWER),
        "schema": _name_schema(),
        "knobs": {"category": category},
        "consts": {"KEY": None, "CATEGORY": category},
        "solution": ('def solve(tools):\n    rows = tools.list_products(%s)\n'
                     '    best = min(rows, key=lambda r: (r["price"], r["title"]))\n'
                     '    return best["title"]\n' % json.dumps(category)),
    }


def _task_cheapest_rated(category, min_stock, min_r10):
    r = _rating(min_r10)
    return {
        "prompt": ('With stock >= %d and rating >= %s, which is the cheapest product in category "%s"? %s'
                   % (min_stock, r, category, NAME_ANSWER)),
        "schema": _name_schema(),
        "knobs": {"category": category, "min_stock": min_stock, "min_rating": float(r)},
        "consts": {"KEY": None, "CATEGORY": category, "MIN_STOCK": min_stock,
                   "MIN_RATING_TENTHS": min_r10},
        "solution": ('def solve(tools):\n    rows = tools.list_products(%s)\n'
                     '    ok = [r for r in rows if r["stock"] >= %d and round(r["rating"] * 10) >= %d]\n'
                     '    best = min(ok, key=lambda r: (r["price"], r["title"]))\n'
                     '    return best["title"]\n' % (json.dumps(category), min_stock, min_r10)),
    }


def _task_stock_value(pair):
    a, b = pair
    return {
        "prompt": ('What is the sum of price * stock over all products in categories "%s" and "%s"? '
                   'Submit {"total": <integer>}.' % (a, b)),
        "schema": _schema("total", "integer"),
        "knobs": {"categories": [a, b]},
        "consts": {"KEY": "total", "CATEGORIES": [a, b]},
        "solution": ('def solve(tools):\n    total = 0\n    for c in (%s, %s):\n'
                     '        for r in tools.list_products(c):\n'
                     '            total += r["price"] * r["stock"]\n'
                     '    return {"total": total}\n' % (json.dumps(a), json.dumps(b))),
    }


def _tier4_pick(rng, data, k):
    """k (category, min_stock, min_rating10) options, balanced over the answer's price rank in
    its category (2nd cheapest, 3rd, ...), so that "take the second cheapest" is no shortcut."""
    by_rank = {}
    for c in data["categories"]:
        products = _in_category(data["products"], c)
        for n, r in _tier4_options(products):
            rank = next(i for i, p in enumerate(products) if p["stock"] >= n and p["rating10"] >= r)
            by_rank.setdefault(rank, []).append((c, n, r))
    lanes = [by_rank[rank] for rank in sorted(by_rank)]
    for lane in lanes:
        rng.shuffle(lane)
    rng.shuffle(lanes)
    order = [lane[i] for i in range(max(len(lane) for lane in lanes)) for lane in lanes if i < len(lane)]
    return [order[i % len(order)] for i in range(k)]


def make_tasks(seed, data, instances, templates):
    """[(task_id, template, spec)] for the templates, in the order given."""
    out = []
    products = sorted(data["products"], key=lambda p: p["name"])
    cats = data["categories"]
    for name in templates:
        # One stream per (seed, template): adding a template leaves the others' tasks unchanged.
        rng = random.Random("%d/%s" % (seed, name))
        if name in ("price_lookup", "stock_lookup"):
            specs = [_task_lookup(name, p) for p in _pick(rng, products, instances)]
        elif name in ("supplier_city", "supplier_phone"):
            specs = [_task_supplier(name, p) for p in _pick(rng, products, instances)]
        elif name == "cheapest_in_category":
            specs = [_task_cheapest(c) for c in _pick(rng, cats, instances)]
        elif name == "cheapest_in_stock_rated":
            specs = [_task_cheapest_rated(*o) for o in _tier4_pick(rng, data, instances)]
        elif name == "category_stock_value":
            pairs = [(a, b) for i, a in enumerate(cats) for b in cats[i + 1:]]
            specs = [_task_stock_value(p) for p in _pick(rng, pairs, instances)]
        else:
            raise ValueError("unknown template %r" % name)
        for i, spec in enumerate(specs):
            out.append(("%s_%02d" % (name, i), name, spec))
    return out


def _verifier_py(template, consts):
    # JSON literals are Python literals, except null
    lines = ["%s = %s" % (k, "None" if consts[k] is None else json.dumps(consts[k])) for k in sorted(consts)]
    return VERIFIER_HEAD + "\n".join(lines) + "\n\n" + _EXPECTED[template] + VERIFIER_TAIL


def _dump(obj):
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def _write(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def render(seed, instances=2, templates=None, name=None):
    """{relative path: file text} of the environment (what generate writes)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError("seed must be a non-negative integer, got %r" % (seed,))
    if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
        raise ValueError("instances must be a positive integer, got %r" % (instances,))
    templates = list(TEMPLATE_NAMES if templates is None else templates)
    unknown = [t for t in templates if t not in _BY_NAME]
    if unknown or not templates or len(set(templates)) != len(templates):
        raise ValueError("templates must be distinct names from %s, got %r"
                         % (", ".join(TEMPLATE_NAMES), templates))
    name = name or "shop_%d" % seed
    data = make_database(seed)
    files = collections.OrderedDict()
    files["env.json"] = _dump(collections.OrderedDict([
        ("name", name),
        ("kind", "general"),
        ("category", "shop"),
        ("description", "A small shop (seed %d): products with price, stock, rating and supplier; "
                        "suppliers with city and phone. Tasks range from one look-up (tier 1) to "
                        "arithmetic over two categories (tier 5)." % seed),
        ("provenance", collections.OrderedDict([("generator", GENERATOR), ("seed", seed)])),
    ]))
    files["schema.sql"] = schema_sql(seed, data)
    files["tools.py"] = TOOLS_PY
    for task_id, template, spec in make_tasks(seed, data, instances, templates):
        knobs = collections.OrderedDict([("template", template)])
        knobs.update(spec["knobs"])
        files["tasks/%s/task.json" % task_id] = _dump(collections.OrderedDict([
            ("prompt", spec["prompt"]),
            ("answer_schema", spec["schema"]),
            ("difficulty", _BY_NAME[template].tier),
            ("knobs", knobs),
        ]))
        files["tasks/%s/solution.py" % task_id] = spec["solution"]
        files["tasks/%s/verifier.py" % task_id] = _verifier_py(template, spec["consts"])
    return files


def generate(seed, out_dir, instances=2, templates=None, name=None):
    """Writes the environment source directory for `seed` to out_dir; returns the task ids.

    out_dir must be absent, empty, or an earlier output of this generator (its tasks/ is
    replaced, so no stale task survives)."""
    files = render(seed, instances, templates, name)
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        try:
            with open(os.path.join(out_dir, "env.json"), encoding="utf-8") as f:
                ours = json.load(f).get("provenance", {}).get("generator") == GENERATOR
        except (OSError, ValueError, AttributeError):
            ours = False
        if not ours:
            raise ValueError("%s is not empty and not an output of %s; refusing to write there"
                             % (out_dir, GENERATOR))
        shutil.rmtree(os.path.join(out_dir, "tasks"), ignore_errors=True)
    for rel, text in files.items():
        path = os.path.join(out_dir, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _write(path, text)
    return sorted({rel.split("/")[1] for rel in files if rel.startswith("tasks/")})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="templates (name tier held_out train):\n" + "\n".join(
                                     "  %-24s %d %-5s %s" % t for t in TEMPLATES))
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True, help="environment source directory to write")
    ap.add_argument("--instances", type=int, default=2, help="tasks per template (default 2)")
    ap.add_argument("--templates", default=None,
                    help="comma-separated template names (default: all); 'train' = the training ones")
    ap.add_argument("--name", default=None, help="environment name (default shop_<seed>)")
    args = ap.parse_args(argv)
    templates = None
    if args.templates:
        templates = []
        for t in args.templates.split(","):
            templates.extend(TRAIN_TEMPLATES if t.strip() == "train" else [t.strip()])
    try:
        ids = generate(args.seed, args.out, args.instances, templates, args.name)
    except ValueError as e:
        print("policy_envs.py: %s" % e, file=sys.stderr)
        return 2
    print("wrote %s: %d tasks" % (args.out, len(ids)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
