#!/usr/bin/python3
"""The "interpreter_lab" environment: tasks solved by running code in a sandboxed Jupyter kernel.

    /usr/bin/python3 scripts/interpreter_env.py [--seed S] [--out DIR]

writes one complete environment source directory of kind "interpreter" (env.json, schema.sql,
tools.py, files/*, tasks/<template>_<NN>/{task.json, solution.py, verifier.py}); the defaults
(seed SEED, out data/envs/interpreter_lab) give the committed environment. Pack it with
`envforge env pack DIR -o X.envdb`. Importable: render(seed) -> {relative path: text},
generate(out_dir, seed), TEMPLATES, and make_data(seed) (the rows of the CSV tables).

Three families of tasks (TEMPLATES; knobs.template names the template, knobs.family the family):
  * maths: exact answers that reward computation (sums over primes, totients, partitions, dice
    probabilities as "p/q", ...); the verifier recomputes them with pure Python from constants.
  * logic: puzzles with a unique answer (a zebra puzzle, knights and knaves, seating
    arrangements, blocked n-queens, shortest paths in the text mazes files/maze_*.txt). The
    generator checks uniqueness by brute force; the puzzle parameters are stored in database
    tables and the verifier solves the puzzle again by brute force / BFS from them.
  * data science over CSV: files/sales.csv, files/employees.csv and files/sensors.csv (with
    missing values) hold exactly the rows of the tables sales, employees and sensors of
    schema.sql (a missing value: an empty CSV field, NULL in the table). Verifiers recompute
    with SQL plus Python; floats are compared with the tolerance stated in the prompt.

Interpreter environments: a task's solution.py is notebook code run in the task's kernel (the
files/ tree is its working directory, read-only); it leaves the answer in a variable `answer`.
It uses the standard library and numpy only. Verifiers use only the modules the restricted
worker allows (json, math, itertools, collections, statistics, ...).

The output is a pure function of the seed: only random.Random draws (integers only, no floating
point in the data), no iteration over hash-ordered containers, fixed JSON formatting; the same
seed gives byte-identical files. Python standard library only.
"""

import argparse
import collections
import datetime
import itertools
import json
import math
import os
import random
import shutil
import sys

GENERATOR = "scripts/interpreter_env.py"
NAME = "interpreter_lab"
SEED = 20251125
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEFAULT_OUT = os.path.join(ROOT, "data", "envs", NAME)

Template = collections.namedtuple("Template", "name family tier instances")

# name, family, tier (task.json "difficulty"), instances (tasks of the template).
TEMPLATES = (
    Template("math_prime_sum", "maths", 2, 1),
    Template("math_sigma_sum", "maths", 2, 1),
    Template("math_totient_sum", "maths", 3, 1),
    Template("math_lattice_paths", "maths", 3, 1),
    Template("math_partitions", "maths", 3, 1),
    Template("math_modpow_tower", "maths", 2, 1),
    Template("math_fraction_sum", "maths", 3, 1),
    Template("math_dice_probability", "maths", 4, 1),
    Template("math_diophantine", "maths", 3, 1),
    Template("math_circle_points", "maths", 2, 1),
    Template("math_factorial_digits", "maths", 1, 1),
    Template("math_collatz", "maths", 3, 1),
    Template("math_fibonacci_mod", "maths", 3, 1),
    Template("math_squarefree", "maths", 4, 1),
    Template("logic_zebra", "logic", 4, 2),
    Template("logic_knights_knaves", "logic", 3, 2),
    Template("logic_seating", "logic", 3, 2),
    Template("logic_queens", "logic", 3, 1),
    Template("logic_maze", "logic", 3, 1),
    Template("logic_maze_key", "logic", 4, 1),
    Template("ds_region_revenue", "data", 1, 1),
    Template("ds_count_orders", "data", 1, 1),
    Template("ds_top_products", "data", 2, 1),
    Template("ds_best_month", "data", 2, 1),
    Template("ds_region_product", "data", 2, 1),
    Template("ds_mom_change", "data", 3, 1),
    Template("ds_median_salary", "data", 2, 1),
    Template("ds_above_dept_avg", "data", 2, 1),
    Template("ds_salary_slope", "data", 4, 1),
    Template("ds_missing_count", "data", 1, 1),
    Template("ds_sensor_mean", "data", 2, 1),
    Template("ds_ffill_mean", "data", 3, 1),
    Template("ds_daily_range", "data", 3, 1),
    Template("ds_temp_humidity_corr", "data", 4, 1),
)
TEMPLATE_NAMES = tuple(t.name for t in TEMPLATES)
_BY_NAME = {t.name: t for t in TEMPLATES}

# ---------------------------------------------------------------------------------------------
# The CSV tables (integers only: prices in cents, temperatures and humidities in tenths)

YEAR = 2024
REGIONS = ("East", "North", "South", "West")
REGION_WEIGHTS = (3, 4, 3, 2)
PRODUCTS = (("Doohickey", 4575), ("Gadget", 2499), ("Gizmo", 899), ("Sprocket", 350),
            ("Widget", 1250))                      # base unit price in cents
SEASON = (80, 75, 90, 100, 110, 120, 125, 115, 100, 95, 130, 150)   # units, percent per month
N_SALES = 600

DEPARTMENTS = (("Engineering", 82000), ("Finance", 70000), ("Marketing", 64000),
               ("Sales", 58000), ("Support", 47000))
DEPARTMENT_WEIGHTS = (5, 3, 3, 4, 4)
FIRST_NAMES = ("Ada", "Bela", "Cyril", "Dora", "Emil", "Fern", "Gus", "Hana", "Ivo", "Juno",
               "Kai", "Lena", "Milo", "Nina", "Otto", "Pia", "Quin", "Rosa", "Sven", "Tara")
LAST_NAMES = ("Abbot", "Berg", "Costa", "Dahl", "Eng", "Frost", "Gray", "Holm", "Ibsen",
              "Jung", "Kerr", "Lind", "Moss", "Nash", "Orr")
N_EMPLOYEES = 150

SENSORS = (("S1", 210, 550, 100), ("S2", 185, 620, 140), ("S3", 240, 480, 80),
           ("S4", 150, 700, 120))             # name, base temperature and humidity (tenths), amplitude %
DAILY = (-30, -34, -37, -39, -40, -38, -32, -22, -10, 2, 14, 25, 33, 38, 40, 38, 33, 25, 15, 6,
         -3, -12, -20, -26)                   # temperature offset by hour of day, tenths
SENSOR_START = datetime.date(2024, 3, 1)
SENSOR_DAYS = 7

CSV_COLUMNS = collections.OrderedDict([
    ("sales", ("order_id", "date", "region", "product", "units", "unit_price")),
    ("employees", ("emp_id", "name", "department", "level", "hire_year", "salary")),
    ("sensors", ("reading_id", "ts", "sensor", "temperature", "humidity")),
])


def _weighted(rng, weights):
    r = rng.randrange(sum(weights))
    for i, w in enumerate(weights):
        if r < w:
            return i
        r -= w
    raise AssertionError


def make_sales(rng):
    days = sorted(rng.randrange(366) for _ in range(N_SALES))
    rows = []
    for i, day in enumerate(days):
        date = datetime.date(YEAR, 1, 1) + datetime.timedelta(days=day)
        region = REGIONS[_weighted(rng, REGION_WEIGHTS)]
        product, base = PRODUCTS[rng.randrange(len(PRODUCTS))]
        units = max(1, rng.randint(1, 30) * SEASON[date.month - 1] // 100)
        price = base + rng.randint(-(base // 10), base // 10)
        rows.append(collections.OrderedDict([
            ("order_id", i + 1), ("date", date.isoformat()), ("region", region),
            ("product", product), ("units", units), ("unit_price", price)]))
    return rows


def make_employees(rng):
    names = rng.sample(["%s %s" % (f, l) for f in FIRST_NAMES for l in LAST_NAMES], N_EMPLOYEES)
    rows = []
    for i, name in enumerate(names):
        dept, base = DEPARTMENTS[_weighted(rng, DEPARTMENT_WEIGHTS)]
        level = rng.randint(1, 5)
        hire_year = rng.randint(2008, YEAR)
        salary = (base + level * 8500 + (YEAR - hire_year) * rng.randint(600, 1600)
                  + rng.randint(-60, 60) * 100) // 100 * 100
        rows.append(collections.OrderedDict([
            ("emp_id", i + 1), ("name", name), ("department", dept), ("level", level),
            ("hire_year", hire_year), ("salary", salary)]))
    return rows


def make_sensors(rng):
    drift = {s[0]: [rng.randint(-15, 15) for _ in range(SENSOR_DAYS)] for s in SENSORS}
    rows = []
    for day in range(SENSOR_DAYS):
        date = SENSOR_START + datetime.timedelta(days=day)
        for hour in range(24):
            for name, tbase, hbase, amp in SENSORS:
                temp = tbase + DAILY[hour] * amp // 100 + drift[name][day] + rng.randint(-6, 6)
                hum = hbase - (temp - tbase) * 3 // 2 + rng.randint(-25, 25)
                first = day == 0 and hour == 0
                if not first and rng.randrange(100) < 7:
                    temp = None
                if rng.randrange(100) < 5:
                    hum = None
                rows.append(collections.OrderedDict([
                    ("reading_id", len(rows) + 1), ("ts", "%s %02d:00" % (date.isoformat(), hour)),
                    ("sensor", name), ("temperature", temp), ("humidity", hum)]))
    return rows


def make_data(seed):
    """{"sales": [row...], "employees": [...], "sensors": [...]}: rows as ordered dicts of
    integers and strings (unit_price in cents, temperature and humidity in tenths, None when
    missing)."""
    return collections.OrderedDict([
        ("sales", make_sales(random.Random("%d/sales" % seed))),
        ("employees", make_employees(random.Random("%d/employees" % seed))),
        ("sensors", make_sensors(random.Random("%d/sensors" % seed))),
    ])


def _fixed(value, places):
    """An integer count of 10**-places as decimal text (1234, 2 -> "12.34"); None -> ""."""
    if value is None:
        return ""
    sign = "-" if value < 0 else ""
    q, r = divmod(abs(value), 10 ** places)
    return "%s%d.%0*d" % (sign, q, places, r)


# Columns stored as fixed-point decimals: column -> places.
_DECIMALS = {"unit_price": 2, "temperature": 1, "humidity": 1}


def _cell(column, value):
    if column in _DECIMALS:
        return _fixed(value, _DECIMALS[column])
    return "" if value is None else str(value)


def csv_text(table, rows):
    lines = [",".join(CSV_COLUMNS[table])]
    for r in rows:
        lines.append(",".join(_cell(c, r[c]) for c in CSV_COLUMNS[table]))
    return "\n".join(lines) + "\n"


def _sql_str(s):
    return "'" + s.replace("'", "''") + "'"


def _sql_value(column, value):
    if value is None:
        return "NULL"
    if column in _DECIMALS:
        return _fixed(value, _DECIMALS[column])
    if isinstance(value, str):
        return _sql_str(value)
    return str(value)


SCHEMA = """\
-- interpreter_lab data, generated by scripts/interpreter_env.py --seed %d. Do not edit by hand.
-- sales, employees and sensors hold exactly the rows of files/sales.csv, files/employees.csv and
-- files/sensors.csv (a missing value: an empty CSV field, NULL here). The other tables hold the
-- parameters of the logic puzzles, which the verifiers solve again.
CREATE TABLE sales (
    order_id INTEGER PRIMARY KEY,
    date TEXT NOT NULL,               -- YYYY-MM-DD, 2024
    region TEXT NOT NULL,
    product TEXT NOT NULL,
    units INTEGER NOT NULL,
    unit_price REAL NOT NULL          -- two decimals
);
CREATE TABLE employees (
    emp_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    department TEXT NOT NULL,
    level INTEGER NOT NULL,           -- 1..5
    hire_year INTEGER NOT NULL,
    salary INTEGER NOT NULL
);
CREATE TABLE sensors (
    reading_id INTEGER PRIMARY KEY,
    ts TEXT NOT NULL,                 -- YYYY-MM-DD HH:00, hourly
    sensor TEXT NOT NULL,
    temperature REAL,                 -- one decimal; NULL when missing
    humidity REAL                     -- one decimal; NULL when missing
);
CREATE TABLE zebra_values (puzzle TEXT, attribute TEXT, idx INTEGER, value TEXT);
CREATE TABLE zebra_clues (puzzle TEXT, idx INTEGER, kind TEXT, attr1 TEXT, value1 TEXT,
                          attr2 TEXT, value2 TEXT, position INTEGER);
CREATE TABLE kk_people (puzzle TEXT, idx INTEGER, name TEXT);
CREATE TABLE kk_statements (puzzle TEXT, speaker TEXT, kind TEXT, x TEXT, y TEXT, k INTEGER);
CREATE TABLE seating_people (puzzle TEXT, idx INTEGER, name TEXT);
CREATE TABLE seating_constraints (puzzle TEXT, idx INTEGER, kind TEXT, a TEXT, b TEXT,
                                  seat INTEGER);
CREATE TABLE queens_boards (puzzle TEXT, n INTEGER);
CREATE TABLE queens_blocked (puzzle TEXT, row INTEGER, col INTEGER);
CREATE TABLE mazes (name TEXT, row INTEGER, line TEXT);   -- the text of files/<name>.txt
"""


def _insert(table, values):
    return "INSERT INTO %s VALUES (%s);" % (table, ", ".join(values))


def _lit(v):
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return _sql_str(v)
    return str(v)


def schema_sql(seed, data, puzzle_rows):
    lines = [(SCHEMA % seed).rstrip("\n")]
    for table, rows in data.items():
        for r in rows:
            lines.append(_insert(table, [_sql_value(c, r[c]) for c in CSV_COLUMNS[table]]))
    for table, row in puzzle_rows:
        lines.append(_insert(table, [_lit(v) for v in row]))
    return "\n".join(lines) + "\n"


TOOLS_PY = '''\
"""interpreter_lab has no tools of its own: a session works in its Jupyter kernel through the
runtime's tools (execute, interrupt, restart) and answers with submit_result."""
'''

# ---------------------------------------------------------------------------------------------
# Verifiers: VERIFIER_HEAD + constants + SPEC + the template's _expected(db) + VERIFIER_TAIL.
# SPEC lists the answer's keys as [key, kind, tolerance]; _expected(db) returns {key: value}
# recomputed from the database or by pure computation (never stored).

VERIFIER_HEAD = '''\
"""Verifier for a generated interpreter_lab task (scripts/interpreter_env.py): recomputes the
expected answer from the database or by pure computation, then compares."""

%s
'''

VERIFIER_TAIL = '''

def _no(reason):
    return {"passed": False, "score": 0.0, "reasons": [reason]}


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x):
    return (_is_int(x) or isinstance(x, float)) and math.isfinite(x)


def _digits(s):
    return len(s) > 0 and all(c in "0123456789" for c in s)


def _check(kind, tol, got, want, name):
    """None when got matches want, else the reason."""
    if kind == "int":
        if not _is_int(got):
            return "%s must be an integer" % name
        return None if got == want else "wrong %s" % name
    if kind == "number":
        if not _is_number(got):
            return "%s must be a number" % name
        return None if abs(got - want) <= tol else "wrong %s" % name
    if kind == "string":
        if not isinstance(got, str):
            return "%s must be a string" % name
        return None if got == want else "wrong %s" % name
    if kind == "fraction":
        parts = got.split("/") if isinstance(got, str) else []
        top = parts[0][1:] if parts and parts[0].startswith("-") else (parts[0] if parts else "")
        if len(parts) != 2 or not _digits(top) or not _digits(parts[1]):
            return "%s must be a string \\"p/q\\"" % name
        p, q = int(parts[0]), int(parts[1])
        if q == 0 or math.gcd(p, q) != 1:
            return "%s must be in lowest terms with q > 0" % name
        return None if [p, q] == list(want) else "wrong %s" % name
    if kind == "strings":
        if not isinstance(got, list) or not all(isinstance(x, str) for x in got):
            return "%s must be a list of strings" % name
        return None if got == list(want) else "wrong %s" % name
    if kind == "name_set":
        if not isinstance(got, list) or not all(isinstance(x, str) for x in got):
            return "%s must be a list of strings" % name
        if len(set(got)) != len(got):
            return "%s lists a name twice" % name
        return None if sorted(got) == sorted(want) else "wrong %s" % name
    if kind == "number_map":
        if not isinstance(got, dict):
            return "%s must be an object" % name
        if sorted(got) != sorted(want):
            return "%s must have exactly the keys %s" % (name, ", ".join(sorted(want)))
        for k in sorted(want):
            if not _is_number(got[k]):
                return "%s[%s] must be a number" % (name, json.dumps(k))
            if abs(got[k] - want[k]) > tol:
                return "wrong %s[%s]" % (name, json.dumps(k))
        return None
    raise ValueError("unknown kind %r" % kind)


def verify(answer, db):
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return _no("answer is not JSON")
    if not isinstance(answer, dict):
        return _no("answer is not a JSON object")
    keys = sorted(key for key, _, _ in SPEC)
    if sorted(answer) != keys:
        return _no("answer must have exactly the keys %s" % ", ".join(keys))
    want = _expected(db)
    reasons = []
    for key, kind, tol in SPEC:
        why = _check(kind, tol, answer[key], want[key], key)
        if why is not None:
            reasons.append(why)
    if reasons:
        return {"passed": False, "score": 0.0, "reasons": reasons}
    return {"passed": True, "score": 1.0, "reasons": []}
'''

# Revenue of a sales row in cents, in SQL (exact integers).
_REV = "units * CAST(ROUND(unit_price * 100) AS INTEGER)"

_EXPECTED = {
    # ---- maths ----
    "math_prime_sum": '''
def _expected(db):
    sieve = bytearray([1]) * (HI + 1)
    sieve[0] = sieve[1] = 0
    for i in range(2, math.isqrt(HI) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytes(len(range(i * i, HI + 1, i)))
    return {"value": sum(p for p in range(LO, HI + 1) if sieve[p])}
''',
    "math_sigma_sum": '''
def _expected(db):
    # sum_{n<=N} sigma(n) = sum_{k<=N} k * (N // k), summed over blocks of equal N // k.
    total, k = 0, 1
    while k <= N:
        q = N // k
        last = N // q
        total += q * (k + last) * (last - k + 1) // 2
        k = last + 1
    return {"value": total}
''',
    "math_totient_sum": '''
def _expected(db):
    phi = list(range(N + 1))
    for i in range(2, N + 1):
        if phi[i] == i:
            for j in range(i, N + 1, i):
                phi[j] -= phi[j] // i
    return {"value": sum(phi[1:])}
''',
    "math_lattice_paths": '''
def _expected(db):
    blocked = set((x, y) for x, y in BLOCKED)
    ways = [[0] * (H + 1) for _ in range(W + 1)]
    for x in range(W + 1):
        for y in range(H + 1):
            if (x, y) in blocked:
                continue
            if x == 0 and y == 0:
                ways[x][y] = 1
            else:
                ways[x][y] = (ways[x - 1][y] if x else 0) + (ways[x][y - 1] if y else 0)
    return {"value": ways[W][H]}
''',
    "math_partitions": '''
def _expected(db):
    ways = [1] + [0] * N
    for part in range(1, K + 1):
        for total in range(part, N + 1):
            ways[total] += ways[total - part]
    return {"value": ways[N]}
''',
    "math_modpow_tower": '''
def _expected(db):
    return {"value": pow(A, B ** C, 10 ** DIGITS)}
''',
    "math_fraction_sum": '''
def _expected(db):
    p, q = 0, 1
    for k in range(1, N + 1):
        d = k ** POWER
        p, q = p * d + q, q * d
        g = math.gcd(p, q)
        p, q = p // g, q // g
    return {"value": [p, q]}
''',
    "math_dice_probability": '''
def _expected(db):
    ways = {0: 1}
    for _ in range(DICE):
        nxt = collections.defaultdict(int)
        for s, w in ways.items():
            for face in range(1, SIDES + 1):
                nxt[s + face] += w
        ways = nxt
    p, q = ways.get(TARGET, 0), SIDES ** DICE
    g = math.gcd(p, q)
    return {"value": [p // g, q // g]}
''',
    "math_diophantine": '''
def _expected(db):
    a, b, c = COEFFS
    count = 0
    for x in range(N // a + 1):
        rest = N - a * x
        for y in range(rest // b + 1):
            if (rest - b * y) % c == 0:
                count += 1
    return {"value": count}
''',
    "math_circle_points": '''
def _expected(db):
    return {"value": sum(2 * math.isqrt(R * R - x * x) + 1 for x in range(-R, R + 1))}
''',
    "math_factorial_digits": '''
def _expected(db):
    return {"value": sum(int(d) for d in str(math.factorial(N)))}
''',
    "math_collatz": '''
def _expected(db):
    steps = {1: 0}
    best, best_steps = 1, 0
    for s in range(2, N):
        path, n = [], s
        while n not in steps:
            path.append(n)
            n = n // 2 if n % 2 == 0 else 3 * n + 1
        count = steps[n]
        for m in reversed(path):
            count += 1
            steps[m] = count
        if steps[s] > best_steps:
            best, best_steps = s, steps[s]
    return {"start": best, "steps": best_steps}
''',
    "math_fibonacci_mod": '''
def _expected(db):
    def fib(n):  # (F(n), F(n+1)) mod M, fast doubling
        if n == 0:
            return 0, 1
        a, b = fib(n // 2)
        c = a * ((2 * b - a) % M) % M
        d = (a * a + b * b) % M
        return (d, (c + d) % M) if n % 2 else (c, d)
    return {"value": fib(N)[0]}
''',
    "math_squarefree": '''
def _expected(db):
    root = math.isqrt(N)
    mu = [1] * (root + 1)
    is_composite = bytearray(root + 1)
    for p in range(2, root + 1):
        if not is_composite[p]:
            for m in range(p, root + 1, p):
                if m > p:
                    is_composite[m] = 1
                mu[m] = -mu[m]
            for m in range(p * p, root + 1, p * p):
                mu[m] = 0
    return {"value": sum(mu[d] * (N // (d * d)) for d in range(1, root + 1))}
''',
    # ---- logic ----
    "logic_zebra": '''
def _holds(clue, where):
    kind = clue["kind"]
    p1 = where(clue["attr1"], clue["value1"])
    if kind == "pos":
        return p1 == clue["position"]
    if kind == "notpos":
        return p1 != clue["position"]
    p2 = where(clue["attr2"], clue["value2"])
    if kind == "same":
        return p1 == p2
    if kind == "diff":
        return p1 != p2
    if kind == "left":
        return p1 + 1 == p2
    if kind == "next":
        return abs(p1 - p2) == 1
    if kind == "before":
        return p1 < p2
    raise ValueError("unknown clue kind %r" % kind)


def _expected(db):
    values = collections.defaultdict(list)
    for r in db.query("SELECT attribute, value FROM zebra_values WHERE puzzle = ?"
                      " ORDER BY attribute, idx", (PUZZLE,)):
        values[r["attribute"]].append(r["value"])
    clues = db.query("SELECT kind, attr1, value1, attr2, value2, position FROM zebra_clues"
                     " WHERE puzzle = ? ORDER BY idx", (PUZZLE,))
    attrs = sorted(values)
    found = []
    for combo in itertools.product(*[list(itertools.permutations(values[a])) for a in attrs]):
        houses = dict(zip(attrs, combo))

        def where(attr, value):
            return houses[attr].index(value) + 1
        if all(_holds(c, where) for c in clues):
            found.append(list(houses["name"]))
    if len(found) != 1:
        raise ValueError("puzzle %s has %d solutions" % (PUZZLE, len(found)))
    return {"order": found[0]}
''',
    "logic_knights_knaves": '''
def _says(st, knight):
    kind, x, y = st["kind"], st["x"], st["y"]
    if kind == "knight":
        return knight[x]
    if kind == "knave":
        return not knight[x]
    if kind == "same":
        return knight[x] == knight[y]
    if kind == "diff":
        return knight[x] != knight[y]
    if kind == "count":
        return sum(1 for v in knight.values() if v) == st["k"]
    if kind == "oneknave":
        return not knight[x] or not knight[y]
    raise ValueError("unknown statement kind %r" % kind)


def _expected(db):
    people = [r["name"] for r in db.query("SELECT name FROM kk_people WHERE puzzle = ? ORDER BY idx",
                                          (PUZZLE,))]
    statements = db.query("SELECT speaker, kind, x, y, k FROM kk_statements WHERE puzzle = ?",
                          (PUZZLE,))
    found = []
    for kinds in itertools.product((False, True), repeat=len(people)):
        knight = dict(zip(people, kinds))
        if all(_says(st, knight) == knight[st["speaker"]] for st in statements):
            found.append([p for p in people if knight[p]])
    if len(found) != 1:
        raise ValueError("puzzle %s has %d solutions" % (PUZZLE, len(found)))
    return {"knights": found[0]}
''',
    "logic_seating": '''
def _ok(c, seat, n):
    kind, a, b = c["kind"], c["a"], c["b"]
    if kind == "adjacent":
        return abs(seat[a] - seat[b]) == 1
    if kind == "not_adjacent":
        return abs(seat[a] - seat[b]) != 1
    if kind == "left_of":
        return seat[a] < seat[b]
    if kind == "seat":
        return seat[a] == c["seat"]
    if kind == "not_end":
        return 1 < seat[a] < n
    raise ValueError("unknown constraint kind %r" % kind)


def _expected(db):
    people = [r["name"] for r in db.query("SELECT name FROM seating_people WHERE puzzle = ?"
                                          " ORDER BY idx", (PUZZLE,))]
    constraints = db.query("SELECT kind, a, b, seat FROM seating_constraints WHERE puzzle = ?"
                           " ORDER BY idx", (PUZZLE,))
    n = len(people)
    count = 0
    for order in itertools.permutations(people):
        seat = {p: i + 1 for i, p in enumerate(order)}
        if all(_ok(c, seat, n) for c in constraints):
            count += 1
    return {"value": count}
''',
    "logic_queens": '''
def _expected(db):
    n = db.query("SELECT n FROM queens_boards WHERE puzzle = ?", (PUZZLE,))[0]["n"]
    blocked = set((r["row"] - 1, r["col"] - 1)
                  for r in db.query("SELECT row, col FROM queens_blocked WHERE puzzle = ?", (PUZZLE,)))

    def place(row, cols, d1, d2):
        if row == n:
            return 1
        total = 0
        for col in range(n):
            if (row, col) in blocked or col in cols or row + col in d1 or row - col in d2:
                continue
            total += place(row + 1, cols | {col}, d1 | {row + col}, d2 | {row - col})
        return total
    return {"value": place(0, frozenset(), frozenset(), frozenset())}
''',
    "logic_maze": '''
def _expected(db):
    grid = [r["line"] for r in db.query("SELECT line FROM mazes WHERE name = ? ORDER BY row", (MAZE,))]
    cells = {}
    for r, line in enumerate(grid):
        for c, ch in enumerate(line):
            cells[(r, c)] = ch
    start = [p for p in sorted(cells) if cells[p] == "S"][0]
    dist = {start: 0}
    queue = collections.deque([start])
    while queue:
        r, c = queue.popleft()
        if cells[(r, c)] == "E":
            return {"value": dist[(r, c)]}
        for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if cells.get(nxt, "#") != "#" and nxt not in dist:
                dist[nxt] = dist[(r, c)] + 1
                queue.append(nxt)
    raise ValueError("maze %s has no path" % MAZE)
''',
    "logic_maze_key": '''
def _expected(db):
    grid = [r["line"] for r in db.query("SELECT line FROM mazes WHERE name = ? ORDER BY row", (MAZE,))]
    cells = {}
    for r, line in enumerate(grid):
        for c, ch in enumerate(line):
            cells[(r, c)] = ch
    start = ([p for p in sorted(cells) if cells[p] == "S"][0], False)
    dist = {start: 0}
    queue = collections.deque([start])
    while queue:
        state = queue.popleft()
        (r, c), key = state
        if cells[(r, c)] == "E":
            return {"value": dist[state]}
        for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            ch = cells.get(nxt, "#")
            if ch == "#" or (ch == "D" and not key):
                continue
            s2 = (nxt, key or ch == "K")
            if s2 not in dist:
                dist[s2] = dist[state] + 1
                queue.append(s2)
    raise ValueError("maze %s has no path" % MAZE)
''',
    # ---- data science ----
    "ds_region_revenue": '''
def _expected(db):
    cents = db.query("SELECT SUM(%s) AS c FROM sales WHERE region = ?", (REGION,))[0]["c"]
    return {"value": cents / 100}
''' % _REV,
    "ds_count_orders": '''
def _expected(db):
    return {"value": db.query(
        "SELECT COUNT(*) AS n FROM sales WHERE region IN (?, ?) AND units >= ?"
        " AND CAST(ROUND(unit_price * 100) AS INTEGER) < ?",
        (REGIONS[0], REGIONS[1], MIN_UNITS, MAX_PRICE_CENTS))[0]["n"]}
''',
    "ds_top_products": '''
def _expected(db):
    rows = db.query("SELECT product, SUM(units) AS u FROM sales WHERE date >= ? AND date <= ?"
                    " GROUP BY product ORDER BY u DESC, product", (FIRST_DAY, LAST_DAY))
    return {"products": [r["product"] for r in rows[:TOP]]}
''',
    "ds_best_month": '''
def _expected(db):
    rows = db.query("SELECT substr(date, 1, 7) AS m, SUM(%s) AS c FROM sales WHERE product = ?"
                    " GROUP BY m ORDER BY c DESC, m", (PRODUCT,))
    return {"month": rows[0]["m"]}
''' % _REV,
    "ds_region_product": '''
def _expected(db):
    rows = db.query("SELECT region, product, SUM(%s) AS c FROM sales WHERE date >= ? AND date <= ?"
                    " GROUP BY region, product ORDER BY c DESC, region, product", (FIRST_DAY, LAST_DAY))
    return {"region": rows[0]["region"], "product": rows[0]["product"]}
''' % _REV,
    "ds_mom_change": '''
def _expected(db):
    def revenue(month):
        return db.query("SELECT SUM(%s) AS c FROM sales WHERE region = ? AND substr(date, 1, 7) = ?",
                        (REGION, month))[0]["c"]
    before, after = revenue(MONTH_FROM), revenue(MONTH_TO)
    return {"value": 100.0 * (after - before) / before}
''' % _REV,
    "ds_median_salary": '''
def _expected(db):
    groups = collections.defaultdict(list)
    for r in db.query("SELECT department, salary FROM employees"):
        groups[r["department"]].append(r["salary"])
    return {"medians": {d: statistics.median(v) for d, v in groups.items()}}
''',
    "ds_above_dept_avg": '''
def _expected(db):
    # salary > sum / count, compared exactly as salary * count > sum.
    return {"value": db.query(
        "SELECT COUNT(*) AS n FROM employees e JOIN (SELECT department, COUNT(*) AS n, SUM(salary) AS s"
        " FROM employees GROUP BY department) d ON d.department = e.department"
        " WHERE e.salary * d.n > d.s")[0]["n"]}
''',
    "ds_salary_slope": '''
def _expected(db):
    rows = db.query("SELECT hire_year, salary FROM employees WHERE department = ?", (DEPARTMENT,))
    xs = [YEAR - r["hire_year"] for r in rows]
    ys = [r["salary"] for r in rows]
    n = len(xs)
    sxy = n * sum(x * y for x, y in zip(xs, ys)) - sum(xs) * sum(ys)
    sxx = n * sum(x * x for x in xs) - sum(xs) ** 2
    return {"value": sxy / sxx}
''',
    "ds_missing_count": '''
def _expected(db):
    return {"value": db.query("SELECT COUNT(*) AS n FROM sensors WHERE sensor = ?"
                              " AND (temperature IS NULL OR humidity IS NULL)", (SENSOR,))[0]["n"]}
''',
    "ds_sensor_mean": '''
def _expected(db):
    tenths = [round(r["t"] * 10) for r in db.query(
        "SELECT temperature AS t FROM sensors WHERE sensor = ? AND temperature IS NOT NULL", (SENSOR,))]
    return {"value": sum(tenths) / len(tenths) / 10}
''',
    "ds_ffill_mean": '''
def _expected(db):
    filled, last = [], None
    for r in db.query("SELECT temperature AS t FROM sensors WHERE sensor = ? ORDER BY ts", (SENSOR,)):
        if r["t"] is not None:
            last = round(r["t"] * 10)
        filled.append(last)
    return {"value": sum(filled) / len(filled) / 10}
''',
    "ds_daily_range": '''
def _expected(db):
    rows = db.query("SELECT substr(ts, 1, 10) AS d, MAX(CAST(ROUND(temperature * 10) AS INTEGER))"
                    " - MIN(CAST(ROUND(temperature * 10) AS INTEGER)) AS r FROM sensors"
                    " WHERE sensor = ? AND temperature IS NOT NULL GROUP BY d ORDER BY r DESC, d", (SENSOR,))
    return {"date": rows[0]["d"]}
''',
    "ds_temp_humidity_corr": '''
def _expected(db):
    rows = db.query("SELECT temperature AS t, humidity AS h FROM sensors WHERE sensor = ?"
                    " AND temperature IS NOT NULL AND humidity IS NOT NULL", (SENSOR,))
    xs = [round(r["t"] * 10) for r in rows]
    ys = [round(r["h"] * 10) for r in rows]
    n = len(xs)
    sxy = n * sum(x * y for x, y in zip(xs, ys)) - sum(xs) * sum(ys)
    sxx = n * sum(x * x for x in xs) - sum(xs) ** 2
    syy = n * sum(y * y for y in ys) - sum(ys) ** 2
    return {"value": sxy / math.sqrt(sxx * syy)}
''',
}

# ---------------------------------------------------------------------------------------------
# Task specs. Each builder returns a dict: prompt, schema, knobs, consts (verifier constants),
# spec (verifier SPEC), solution (notebook code leaving `answer`). Prompts quote the values
# they name.

TOL2 = 0.01     # "rounded to 2 decimals"
TOL4 = 0.0001   # "rounded to 4 decimals"
ROUND2 = "rounded to 2 decimals (answers within 0.01 are accepted)"
ROUND4 = "rounded to 4 decimals (answers within 0.0001 are accepted)"


def _obj(props):
    return collections.OrderedDict([
        ("type", "object"),
        ("properties", collections.OrderedDict(props)),
        ("required", [k for k, _ in props]),
        ("additionalProperties", False)])


INT = {"type": "integer"}
NUM = {"type": "number"}
STR = {"type": "string"}
FRACTION = {"type": "string"}   # "p/q"; the verifier checks the form (no "pattern": unsupported)


def _strings(n):
    return collections.OrderedDict([("type", "array"), ("items", STR), ("minItems", n),
                                    ("maxItems", n)])


def _spec(*items):
    return [list(i) for i in items]


def _int_task(prompt, knobs, consts, solution):
    return {"prompt": prompt + ' Submit {"value": <integer>}.', "schema": _obj([("value", INT)]),
            "knobs": knobs, "consts": consts, "spec": _spec(("value", "int", 0)),
            "solution": solution}


def _num_task(prompt, knobs, consts, solution, tol=TOL2):
    return {"prompt": prompt + ' Submit {"value": <number>}.', "schema": _obj([("value", NUM)]),
            "knobs": knobs, "consts": consts, "spec": _spec(("value", "number", tol)),
            "solution": solution}


# ---- maths ----

def t_math_prime_sum(rng):
    lo = rng.randint(100000, 300000)
    hi = lo + rng.randint(100000, 200000)
    return _int_task(
        "What is the sum of all prime numbers p with %d <= p <= %d?" % (lo, hi),
        {"lo": lo, "hi": hi}, {"LO": lo, "HI": hi},
        "import numpy as np\n\n"
        "LO, HI = %d, %d\n"
        "sieve = np.ones(HI + 1, dtype=bool)\n"
        "sieve[:2] = False\n"
        "for i in range(2, int(HI ** 0.5) + 1):\n"
        "    if sieve[i]:\n"
        "        sieve[i * i::i] = False\n"
        "primes = np.nonzero(sieve[LO:])[0] + LO\n"
        "answer = {\"value\": int(primes.astype(np.int64).sum())}\n" % (lo, hi))


def t_math_sigma_sum(rng):
    n = rng.randint(500000, 1000000)
    return _int_task(
        "Let sigma(n) be the sum of all positive divisors of n (sigma(6) = 1 + 2 + 3 + 6 = 12). "
        "What is sigma(1) + sigma(2) + ... + sigma(%d)?" % n,
        {"n": n}, {"N": n},
        "N = %d\n"
        "# each k divides N // k of the numbers 1..N\n"
        "answer = {\"value\": sum(k * (N // k) for k in range(1, N + 1))}\n" % n)


def t_math_totient_sum(rng):
    n = rng.randint(50000, 100000)
    return _int_task(
        "Let phi be Euler's totient function (phi(n) counts the integers 1 <= k <= n with "
        "gcd(k, n) = 1). What is phi(1) + phi(2) + ... + phi(%d)?" % n,
        {"n": n}, {"N": n},
        "import numpy as np\n\n"
        "N = %d\n"
        "phi = np.arange(N + 1, dtype=np.int64)\n"
        "for p in range(2, N + 1):\n"
        "    if phi[p] == p:  # p is prime\n"
        "        phi[p::p] -= phi[p::p] // p\n"
        "answer = {\"value\": int(phi[1:].sum())}\n" % n)


def _lattice_count(w, h, blocked):
    ways = {}
    for x in range(w + 1):
        for y in range(h + 1):
            if (x, y) in blocked:
                ways[(x, y)] = 0
            elif x == 0 and y == 0:
                ways[(x, y)] = 1
            else:
                ways[(x, y)] = ways.get((x - 1, y), 0) + ways.get((x, y - 1), 0)
    return ways[(w, h)]


def t_math_lattice_paths(rng):
    while True:
        w, h = rng.randint(10, 14), rng.randint(10, 14)
        cells = [(x, y) for x in range(w + 1) for y in range(h + 1)
                 if (x, y) not in ((0, 0), (w, h))]
        blocked = sorted(rng.sample(cells, 9))
        if _lattice_count(w, h, set(blocked)) > 0:
            break
    text = ", ".join("(%d, %d)" % p for p in blocked)
    return _int_task(
        "A path goes from (0, 0) to (%d, %d) in unit steps, each step either +1 in x or +1 in y. "
        "How many such paths avoid all of the points %s?" % (w, h, text),
        {"width": w, "height": h, "blocked": [list(p) for p in blocked]},
        {"W": w, "H": h, "BLOCKED": [list(p) for p in blocked]},
        "W, H = %d, %d\n"
        "BLOCKED = {%s}\n"
        "ways = {}\n"
        "for x in range(W + 1):\n"
        "    for y in range(H + 1):\n"
        "        if (x, y) in BLOCKED:\n"
        "            ways[x, y] = 0\n"
        "        elif (x, y) == (0, 0):\n"
        "            ways[x, y] = 1\n"
        "        else:\n"
        "            ways[x, y] = ways.get((x - 1, y), 0) + ways.get((x, y - 1), 0)\n"
        "answer = {\"value\": ways[W, H]}\n" % (w, h, text))


def t_math_partitions(rng):
    n, k = rng.randint(100, 160), rng.randint(8, 20)
    return _int_task(
        "In how many ways can %d be written as a sum of positive integers each at most %d, "
        "where the order of the terms does not matter (e.g. 4 with parts at most 2: 2+2, 2+1+1, "
        "1+1+1+1, so 3 ways)?" % (n, k),
        {"n": n, "max_part": k}, {"N": n, "K": k},
        "N, K = %d, %d\n"
        "ways = [1] + [0] * N\n"
        "for part in range(1, K + 1):\n"
        "    for total in range(part, N + 1):\n"
        "        ways[total] += ways[total - part]\n"
        "answer = {\"value\": ways[N]}\n" % (n, k))


def t_math_modpow_tower(rng):
    a = rng.choice([x for x in range(2, 100) if x % 10])
    b, c = rng.randint(3, 9), rng.randint(20, 60)
    return _int_task(
        "What are the last 12 digits of %d^(%d^%d), i.e. %d^(%d^%d) mod 10^12? (Give them as an "
        "integer, leading zeros dropped.)" % (a, b, c, a, b, c),
        {"base": a, "exponent_base": b, "exponent_power": c, "digits": 12},
        {"A": a, "B": b, "C": c, "DIGITS": 12},
        "answer = {\"value\": pow(%d, %d ** %d, 10 ** 12)}\n" % (a, b, c))


def t_math_fraction_sum(rng):
    n, power = rng.randint(15, 25), rng.choice((2, 3))
    return {
        "prompt": ('What is the exact value of 1/1^%d + 1/2^%d + ... + 1/%d^%d? Submit '
                   '{"value": "<p>/<q>"}: a fraction p/q in lowest terms (q > 0).'
                   % (power, power, n, power)),
        "schema": _obj([("value", FRACTION)]),
        "knobs": {"n": n, "power": power}, "consts": {"N": n, "POWER": power},
        "spec": _spec(("value", "fraction", 0)),
        "solution": ("from fractions import Fraction\n\n"
                     "s = sum(Fraction(1, k ** %d) for k in range(1, %d + 1))\n"
                     "answer = {\"value\": \"%%d/%%d\" %% (s.numerator, s.denominator)}\n"
                     % (power, n)),
    }


def t_math_dice_probability(rng):
    dice, sides = rng.randint(6, 9), rng.choice((6, 8))
    mean2 = dice * (sides + 1)           # twice the mean
    target = mean2 // 2 + rng.randint(-dice, dice)
    return {
        "prompt": ("%d fair %d-sided dice (faces 1..%d) are rolled. What is the exact probability "
                   "that the faces sum to %d? Submit {\"value\": \"<p>/<q>\"}: a fraction p/q in "
                   "lowest terms (q > 0)." % (dice, sides, sides, target)),
        "schema": _obj([("value", FRACTION)]),
        "knobs": {"dice": dice, "sides": sides, "target": target},
        "consts": {"DICE": dice, "SIDES": sides, "TARGET": target},
        "spec": _spec(("value", "fraction", 0)),
        "solution": ("from fractions import Fraction\n\n"
                     "DICE, SIDES, TARGET = %d, %d, %d\n"
                     "ways = [1]  # ways[s]: number of rolls with sum s\n"
                     "for _ in range(DICE):\n"
                     "    nxt = [0] * (len(ways) + SIDES)\n"
                     "    for s, w in enumerate(ways):\n"
                     "        for face in range(1, SIDES + 1):\n"
                     "            nxt[s + face] += w\n"
                     "    ways = nxt\n"
                     "p = Fraction(ways[TARGET], SIDES ** DICE)\n"
                     "answer = {\"value\": \"%%d/%%d\" %% (p.numerator, p.denominator)}\n"
                     % (dice, sides, target)),
    }


def t_math_diophantine(rng):
    while True:
        coeffs = sorted(rng.sample(range(7, 31), 3))
        if math.gcd(math.gcd(coeffs[0], coeffs[1]), coeffs[2]) == 1:
            break
    n = rng.randint(2000, 4000)
    a, b, c = coeffs
    return _int_task(
        "How many triples of non-negative integers (x, y, z) satisfy %d*x + %d*y + %d*z = %d?"
        % (a, b, c, n),
        {"coefficients": coeffs, "n": n}, {"COEFFS": coeffs, "N": n},
        "a, b, c, N = %d, %d, %d, %d\n"
        "count = 0\n"
        "for x in range(N // a + 1):\n"
        "    for y in range((N - a * x) // b + 1):\n"
        "        if (N - a * x - b * y) %% c == 0:\n"
        "            count += 1\n"
        "answer = {\"value\": count}\n" % (a, b, c, n))


def t_math_circle_points(rng):
    r = rng.randint(500, 3000)
    return _int_task(
        "How many points (x, y) with integer coordinates satisfy x^2 + y^2 <= %d^2?" % r,
        {"radius": r}, {"R": r},
        "import math\n\n"
        "R = %d\n"
        "answer = {\"value\": sum(2 * math.isqrt(R * R - x * x) + 1 for x in range(-R, R + 1))}\n" % r)


def t_math_factorial_digits(rng):
    n = rng.randint(500, 2000)
    return _int_task(
        "What is the sum of the decimal digits of %d! (the factorial of %d)?" % (n, n),
        {"n": n}, {"N": n},
        "import math\n\n"
        "answer = {\"value\": sum(int(d) for d in str(math.factorial(%d)))}\n" % n)


def t_math_collatz(rng):
    n = rng.randint(20000, 60000)
    return {
        "prompt": ("The Collatz map sends n to n/2 when n is even and to 3n+1 when n is odd. Among "
                   "the starting values 1 <= s < %d, which one takes the most steps to reach 1 "
                   "(ties: the smallest s), and how many steps does it take? Submit "
                   "{\"start\": <integer>, \"steps\": <integer>}." % n),
        "schema": _obj([("start", INT), ("steps", INT)]),
        "knobs": {"limit": n}, "consts": {"N": n},
        "spec": _spec(("start", "int", 0), ("steps", "int", 0)),
        "solution": ("cache = {1: 0}\n"
                     "def steps(n):\n"
                     "    path = []\n"
                     "    while n not in cache:\n"
                     "        path.append(n)\n"
                     "        n = n // 2 if n %% 2 == 0 else 3 * n + 1\n"
                     "    c = cache[n]\n"
                     "    for m in reversed(path):\n"
                     "        c += 1\n"
                     "        cache[m] = c\n"
                     "    return c\n\n"
                     "best = max(range(1, %d), key=lambda s: (steps(s), -s))\n"
                     "answer = {\"start\": best, \"steps\": steps(best)}\n" % n),
    }


def t_math_fibonacci_mod(rng):
    n = rng.randint(10 ** 15, 10 ** 18)
    m = rng.choice((1000000007, 998244353, 1000000009))
    return _int_task(
        "With F(0) = 0, F(1) = 1 and F(n) = F(n-1) + F(n-2), what is F(%d) mod %d?" % (n, m),
        {"n": n, "modulus": m}, {"N": n, "M": m},
        "M = %d\n"
        "def mat_mult(a, b):\n"
        "    return [[(a[0][0] * b[0][0] + a[0][1] * b[1][0]) %% M, (a[0][0] * b[0][1] + a[0][1] * b[1][1]) %% M],\n"
        "            [(a[1][0] * b[0][0] + a[1][1] * b[1][0]) %% M, (a[1][0] * b[0][1] + a[1][1] * b[1][1]) %% M]]\n"
        "result, base, e = [[1, 0], [0, 1]], [[1, 1], [1, 0]], %d\n"
        "while e:\n"
        "    if e & 1:\n"
        "        result = mat_mult(result, base)\n"
        "    base = mat_mult(base, base)\n"
        "    e >>= 1\n"
        "answer = {\"value\": result[0][1]}\n" % (m, n))


def t_math_squarefree(rng):
    n = rng.randint(10 ** 8, 10 ** 9)
    return _int_task(
        "How many integers 1 <= k <= %d are squarefree (divisible by no perfect square > 1)?" % n,
        {"n": n}, {"N": n},
        "import math\n"
        "import numpy as np\n\n"
        "N = %d\n"
        "root = math.isqrt(N)\n"
        "mu = np.ones(root + 1, dtype=np.int64)\n"
        "is_prime = np.ones(root + 1, dtype=bool)\n"
        "is_prime[:2] = False\n"
        "for p in range(2, root + 1):\n"
        "    if is_prime[p]:\n"
        "        is_prime[2 * p::p] = False\n"
        "        mu[p::p] *= -1\n"
        "        mu[p * p::p * p] = 0\n"
        "d = np.arange(1, root + 1, dtype=np.int64)\n"
        "answer = {\"value\": int((mu[1:] * (N // (d * d))).sum())}\n" % n)


# ---- logic ----

ZEBRA_ATTRS = collections.OrderedDict([
    ("name", ("Alice", "Bruno", "Chen", "Dara")),
    ("color", ("blue", "green", "red", "yellow")),
    ("pet", ("bird", "cat", "dog", "fish")),
])
ZEBRA_KINDS = (("same", 3), ("diff", 2), ("pos", 1), ("notpos", 1), ("left", 2), ("next", 2),
               ("before", 1))


def _zebra_np(attr, value):
    return {"name": "%s", "color": "the person in the %s house",
            "pet": "the %s owner"}[attr] % value


def _zebra_text(c):
    kind = c[0]
    a = _zebra_np(c[1], c[2])
    if kind in ("pos", "notpos"):
        s = "%s %s house %d." % (a, "lives in" if kind == "pos" else "does not live in", c[5])
    else:
        b = _zebra_np(c[3], c[4])
        s = {"same": "%s is %s.", "diff": "%s is not %s.",
             "left": "%s lives immediately to the left of %s.",
             "next": "%s lives next to %s.",
             "before": "%s lives somewhere to the left of %s."}[kind] % (a, b)
    return s[0].upper() + s[1:]


def _zebra_holds(c, where):
    kind = c[0]
    p1 = where[c[1]][c[2]]
    if kind == "pos":
        return p1 == c[5]
    if kind == "notpos":
        return p1 != c[5]
    p2 = where[c[3]][c[4]]
    return {"same": p1 == p2, "diff": p1 != p2, "left": p1 + 1 == p2,
            "next": abs(p1 - p2) == 1, "before": p1 < p2}[kind]


def _zebra_candidates():
    attrs = list(ZEBRA_ATTRS)
    out = []
    for combo in itertools.product(*[list(itertools.permutations(ZEBRA_ATTRS[a])) for a in attrs]):
        out.append({a: {v: i + 1 for i, v in enumerate(perm)} for a, perm in zip(attrs, combo)})
    return out


def _random_clue(rng, where):
    """A random clue [kind, attr1, value1, attr2, value2, position] true of `where`."""
    attrs = list(ZEBRA_ATTRS)
    kind = ZEBRA_KINDS[_weighted(rng, [w for _, w in ZEBRA_KINDS])][0]
    a1 = rng.choice(attrs)
    v1 = rng.choice(ZEBRA_ATTRS[a1])
    p1 = where[a1][v1]
    if kind == "pos":
        return ["pos", a1, v1, "", "", p1]
    if kind == "notpos":
        return ["notpos", a1, v1, "", "", rng.choice([p for p in range(1, 5) if p != p1])]
    a2 = rng.choice([a for a in attrs if a != a1])
    by_pos = {p: v for v, p in where[a2].items()}
    if kind == "same":
        return ["same", a1, v1, a2, by_pos[p1], 0]
    if kind == "diff":
        return ["diff", a1, v1, a2, by_pos[rng.choice([p for p in range(1, 5) if p != p1])], 0]
    if kind == "left":
        return ["left", a1, v1, a2, by_pos[p1 + 1], 0] if p1 < 4 else None
    if kind == "next":
        options = [p for p in (p1 - 1, p1 + 1) if 1 <= p <= 4]
        return ["next", a1, v1, a2, by_pos[rng.choice(options)], 0]
    options = [p for p in range(p1 + 1, 5)]
    return ["before", a1, v1, a2, by_pos[rng.choice(options)], 0] if options else None


def make_zebra(rng, candidates):
    attrs = list(ZEBRA_ATTRS)
    while True:
        solution = {a: {v: i + 1 for i, v in enumerate(rng.sample(ZEBRA_ATTRS[a], 4))}
                    for a in attrs}
        pool, seen = [], set()
        while len(pool) < 40:
            c = _random_clue(rng, solution)
            if c is None or json.dumps(c) in seen:
                continue
            seen.add(json.dumps(c))
            bits = 0
            for i, cand in enumerate(candidates):
                if _zebra_holds(c, cand):
                    bits |= 1 << i
            pool.append((c, bits))
        everything = (1 << len(candidates)) - 1
        chosen, acc = [], everything
        for c, bits in pool:
            if acc & (acc - 1) == 0:
                break
            if acc & bits != acc:
                chosen.append((c, bits))
                acc &= bits
        if acc & (acc - 1):
            continue  # not unique even with the whole pool: draw again
        # Drop clues the others make redundant, in random order.
        order = list(range(len(chosen)))
        rng.shuffle(order)
        keep = set(range(len(chosen)))
        for i in order:
            rest = everything
            for j in sorted(keep - {i}):
                rest &= chosen[j][1]
            if rest & (rest - 1) == 0:
                keep.discard(i)
        clues = [chosen[i][0] for i in sorted(keep)]
        if len(clues) < 7:
            continue
        names = sorted(solution["name"], key=lambda v: solution["name"][v])
        return clues, names


def t_logic_zebra(rng, index, ctx):
    puzzle = "zebra_%s" % "ab"[index]
    clues, _ = make_zebra(rng, ctx["zebra_candidates"])
    for a, values in ZEBRA_ATTRS.items():
        for i, v in enumerate(values):
            ctx["rows"].append(("zebra_values", (puzzle, a, i, v)))
    for i, c in enumerate(clues):
        ctx["rows"].append(("zebra_clues", (puzzle, i, c[0], c[1], c[2], c[3] or None,
                                            c[4] or None, c[5] or None)))
    text = " ".join("(%d) %s" % (i + 1, _zebra_text(c)) for i, c in enumerate(clues))
    prompt = ("Four houses stand in a row, numbered 1 to 4 from left to right. Each is home to one "
              "person (Alice, Bruno, Chen, Dara), painted one color (blue, green, red, yellow) and "
              "has one pet (bird, cat, dog, fish); no two houses share a person, color or pet. "
              "\"Next to\" means in an adjacent house. Clues: %s Exactly one arrangement satisfies "
              "every clue. Submit {\"order\": [<person in house 1>, <house 2>, <house 3>, "
              "<house 4>]}." % text)
    solution = ("import itertools\n\n"
                "ATTRS = %s\n"
                "# [kind, attribute 1, value 1, attribute 2, value 2, house]\n"
                "CLUES = %s\n\n"
                "def holds(c, where):\n"
                "    kind, a1, v1, a2, v2, house = c\n"
                "    p1 = where[a1][v1]\n"
                "    if kind == \"pos\":\n"
                "        return p1 == house\n"
                "    if kind == \"notpos\":\n"
                "        return p1 != house\n"
                "    p2 = where[a2][v2]\n"
                "    return {\"same\": p1 == p2, \"diff\": p1 != p2, \"left\": p1 + 1 == p2,\n"
                "            \"next\": abs(p1 - p2) == 1, \"before\": p1 < p2}[kind]\n\n"
                "solutions = []\n"
                "names = list(ATTRS)\n"
                "for combo in itertools.product(*[itertools.permutations(ATTRS[a]) for a in names]):\n"
                "    where = {a: {v: i + 1 for i, v in enumerate(perm)} for a, perm in zip(names, combo)}\n"
                "    if all(holds(c, where) for c in CLUES):\n"
                "        solutions.append(dict(zip(names, combo)))\n"
                "assert len(solutions) == 1, len(solutions)\n"
                "answer = {\"order\": list(solutions[0][\"name\"])}\n"
                % (json.dumps(ZEBRA_ATTRS), json.dumps(clues)))
    return {"prompt": prompt, "schema": _obj([("order", _strings(4))]),
            "knobs": {"puzzle": puzzle, "clues": len(clues)}, "consts": {"PUZZLE": puzzle},
            "spec": _spec(("order", "strings", 0)), "solution": solution}


KK_PEOPLE = (("Ada", "Ben", "Cal", "Dee", "Eli", "Fay"), ("Gil", "Hal", "Ivy", "Jon", "Kim", "Lou"))
KK_KINDS = (("knight", 2), ("knave", 2), ("same", 2), ("diff", 2), ("count", 1), ("oneknave", 2))


def _kk_says(st, knight):
    kind, x, y, k = st[1], st[2], st[3], st[4]
    if kind == "knight":
        return knight[x]
    if kind == "knave":
        return not knight[x]
    if kind == "same":
        return knight[x] == knight[y]
    if kind == "diff":
        return knight[x] != knight[y]
    if kind == "count":
        return sum(1 for v in knight.values() if v) == k
    return not knight[x] or not knight[y]


def _kk_text(st, n):
    speaker, kind, x, y, k = st
    said = {"knight": "%s is a knight." % x, "knave": "%s is a knave." % x,
            "same": "%s and %s are of the same kind." % (x, y),
            "diff": "%s and %s are of different kinds." % (x, y),
            "count": "Exactly %d of us %d are knights." % (k, n),
            "oneknave": "At least one of %s and %s is a knave." % (x, y)}[kind]
    return "%s says: \"%s\"" % (speaker, said)


def make_knights_knaves(rng, people):
    n = len(people)
    while True:
        truth = {p: rng.randrange(2) == 1 for p in people}
        if not 2 <= sum(truth.values()) <= n - 2:
            continue
        statements = []
        for speaker in people:
            while True:
                kind = KK_KINDS[_weighted(rng, [w for _, w in KK_KINDS])][0]
                others = [p for p in people if p != speaker]
                x, y = rng.sample(others, 2)
                if kind in ("knight", "knave"):
                    y = ""
                k = rng.randint(1, n - 1) if kind == "count" else 0
                if kind != "count":
                    k = 0
                else:
                    x = y = ""
                st = (speaker, kind, x, y, k)
                if _kk_says(st, truth) == truth[speaker]:
                    statements.append(st)
                    break
        found = []
        for kinds in itertools.product((False, True), repeat=n):
            knight = dict(zip(people, kinds))
            if all(_kk_says(st, knight) == knight[st[0]] for st in statements):
                found.append(knight)
        if len(found) == 1:
            return statements, [p for p in people if truth[p]]


def t_logic_knights_knaves(rng, index, ctx):
    puzzle = "kk_%s" % "ab"[index]
    people = KK_PEOPLE[index]
    statements, _ = make_knights_knaves(rng, people)
    for i, p in enumerate(people):
        ctx["rows"].append(("kk_people", (puzzle, i, p)))
    for st in statements:
        ctx["rows"].append(("kk_statements", (puzzle, st[0], st[1], st[2] or None, st[3] or None,
                                              st[4] if st[1] == "count" else None)))
    text = " ".join(_kk_text(st, len(people)) for st in statements)
    prompt = ("On an island every inhabitant is either a knight, who always tells the truth, or a "
              "knave, who always lies. You meet %s. %s Exactly one assignment of knights and knaves "
              "is consistent with these statements. Who are the knights? Submit "
              "{\"knights\": [<name>, ...]} (any order)." % (", ".join(people), text))
    solution = ("import itertools\n\n"
                "PEOPLE = %s\n"
                "# [speaker, kind, x, y, k]\n"
                "STATEMENTS = %s\n\n"
                "def says(st, knight):\n"
                "    _, kind, x, y, k = st\n"
                "    if kind == \"knight\":\n"
                "        return knight[x]\n"
                "    if kind == \"knave\":\n"
                "        return not knight[x]\n"
                "    if kind == \"same\":\n"
                "        return knight[x] == knight[y]\n"
                "    if kind == \"diff\":\n"
                "        return knight[x] != knight[y]\n"
                "    if kind == \"count\":\n"
                "        return sum(knight.values()) == k\n"
                "    return not knight[x] or not knight[y]  # at least one of x, y is a knave\n\n"
                "found = []\n"
                "for kinds in itertools.product([False, True], repeat=len(PEOPLE)):\n"
                "    knight = dict(zip(PEOPLE, kinds))\n"
                "    if all(says(st, knight) == knight[st[0]] for st in STATEMENTS):\n"
                "        found.append([p for p in PEOPLE if knight[p]])\n"
                "assert len(found) == 1, found\n"
                "answer = {\"knights\": found[0]}\n"
                % (json.dumps(list(people)), json.dumps([list(s) for s in statements])))
    schema = _obj([("knights", collections.OrderedDict([("type", "array"), ("items", STR)]))])
    return {"prompt": prompt, "schema": schema, "knobs": {"puzzle": puzzle, "people": len(people)},
            "consts": {"PUZZLE": puzzle}, "spec": _spec(("knights", "name_set", 0)),
            "solution": solution}


SEATING_PEOPLE = (("Amy", "Bob", "Cyd", "Dan", "Eve", "Fox", "Gus"),
                  ("Hank", "Iris", "Jack", "Kate", "Liam", "Mona", "Ned", "Olga"))


def _seat_ok(c, seat, n):
    kind, a, b, s = c
    if kind == "adjacent":
        return abs(seat[a] - seat[b]) == 1
    if kind == "not_adjacent":
        return abs(seat[a] - seat[b]) != 1
    if kind == "left_of":
        return seat[a] < seat[b]
    if kind == "seat":
        return seat[a] == s
    return 1 < seat[a] < n


def _seat_text(c):
    kind, a, b, s = c
    return {"adjacent": "%s sits next to %s." % (a, b),
            "not_adjacent": "%s does not sit next to %s." % (a, b),
            "left_of": "%s sits somewhere to the left of %s." % (a, b),
            "seat": "%s sits in seat %d." % (a, s),
            "not_end": "%s does not sit in an end seat." % a}[kind]


def make_seating(rng, people, n_constraints):
    n = len(people)
    perms = [dict((p, i + 1) for i, p in enumerate(order)) for order in itertools.permutations(people)]
    kinds = ("adjacent", "not_adjacent", "left_of", "seat", "not_end")
    while True:
        constraints = []
        for _ in range(n_constraints):
            kind = rng.choice(kinds)
            a, b = rng.sample(people, 2)
            constraints.append((kind, a, b if kind in ("adjacent", "not_adjacent", "left_of") else "",
                                rng.randint(1, n) if kind == "seat" else 0))
        if len(set(constraints)) < n_constraints or sum(1 for c in constraints if c[0] == "seat") > 1:
            continue
        masks = [[_seat_ok(c, seat, n) for seat in perms] for c in constraints]
        count = sum(1 for i in range(len(perms)) if all(m[i] for m in masks))
        if not 10 <= count <= 800:
            continue
        # Every constraint must matter: without it the count grows.
        if all(sum(1 for i in range(len(perms)) if all(m[i] for j, m in enumerate(masks) if j != k))
               > count for k in range(n_constraints)):
            return constraints, count


def t_logic_seating(rng, index, ctx):
    puzzle = "seating_%s" % "ab"[index]
    people = SEATING_PEOPLE[index]
    constraints, _ = make_seating(rng, people, 5 + index)
    for i, p in enumerate(people):
        ctx["rows"].append(("seating_people", (puzzle, i, p)))
    for i, c in enumerate(constraints):
        ctx["rows"].append(("seating_constraints", (puzzle, i, c[0], c[1], c[2] or None, c[3] or None)))
    n = len(people)
    prompt = ("%s sit in a row of %d seats numbered 1 to %d from left to right, one per seat. "
              "Constraints: %s How many seatings satisfy all the constraints?"
              % (", ".join(people[:-1]) + " and " + people[-1], n, n,
                 " ".join(_seat_text(c) for c in constraints)))
    solution = ("import itertools\n\n"
                "PEOPLE = %s\n"
                "# [kind, a, b, seat]\n"
                "CONSTRAINTS = %s\n"
                "n = len(PEOPLE)\n\n"
                "def ok(c, seat):\n"
                "    kind, a, b, s = c\n"
                "    if kind == \"adjacent\":\n"
                "        return abs(seat[a] - seat[b]) == 1\n"
                "    if kind == \"not_adjacent\":\n"
                "        return abs(seat[a] - seat[b]) != 1\n"
                "    if kind == \"left_of\":\n"
                "        return seat[a] < seat[b]\n"
                "    if kind == \"seat\":\n"
                "        return seat[a] == s\n"
                "    return 1 < seat[a] < n  # not_end\n\n"
                "count = 0\n"
                "for order in itertools.permutations(PEOPLE):\n"
                "    seat = {p: i + 1 for i, p in enumerate(order)}\n"
                "    count += all(ok(c, seat) for c in CONSTRAINTS)\n"
                "answer = {\"value\": count}\n"
                % (json.dumps(list(people)), json.dumps([list(c) for c in constraints])))
    task = _int_task(prompt, {"puzzle": puzzle, "people": n, "constraints": len(constraints)},
                     {"PUZZLE": puzzle}, solution)
    return task


def _queens_count(n, blocked):
    def place(row, cols, d1, d2):
        if row == n:
            return 1
        total = 0
        for col in range(n):
            if (row, col) in blocked or col in cols or row + col in d1 or row - col in d2:
                continue
            total += place(row + 1, cols | {col}, d1 | {row + col}, d2 | {row - col})
        return total
    return place(0, frozenset(), frozenset(), frozenset())


def t_logic_queens(rng, index, ctx):
    puzzle = "queens_a"
    n = 9
    while True:
        blocked = sorted(rng.sample([(r, c) for r in range(n) for c in range(n)], 12))
        count = _queens_count(n, set(blocked))
        if 3 <= count <= 60:
            break
    ctx["rows"].append(("queens_boards", (puzzle, n)))
    for r, c in blocked:
        ctx["rows"].append(("queens_blocked", (puzzle, r + 1, c + 1)))
    text = ", ".join("(%d, %d)" % (r + 1, c + 1) for r, c in blocked)
    prompt = ("On a %dx%d chessboard (rows and columns numbered 1 to %d), the squares %s are "
              "blocked: no queen may stand on them. In how many ways can %d queens be placed on the "
              "other squares so that no two attack each other (same row, column or diagonal)?"
              % (n, n, n, text, n))
    solution = ("N = %d\n"
                "BLOCKED = {%s}  # (row, column), 1-based\n\n"
                "def place(row, cols, d1, d2):\n"
                "    if row > N:\n"
                "        return 1\n"
                "    total = 0\n"
                "    for col in range(1, N + 1):\n"
                "        if (row, col) in BLOCKED or col in cols or row + col in d1 or row - col in d2:\n"
                "            continue\n"
                "        total += place(row + 1, cols | {col}, d1 | {row + col}, d2 | {row - col})\n"
                "    return total\n\n"
                "answer = {\"value\": place(1, frozenset(), frozenset(), frozenset())}\n" % (n, text))
    return _int_task(prompt, {"puzzle": puzzle, "n": n, "blocked": len(blocked)},
                     {"PUZZLE": puzzle}, solution)


def _carve(rng, h, w):
    """A perfect maze of h x w cells as a (2h+1) x (2w+1) grid of '#' and '.'."""
    g = [["#"] * (2 * w + 1) for _ in range(2 * h + 1)]
    g[1][1] = "."
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        r, c = stack[-1]
        nbrs = [(r + dr, c + dc) for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0))
                if 0 <= r + dr < h and 0 <= c + dc < w and (r + dr, c + dc) not in seen]
        if not nbrs:
            stack.pop()
            continue
        nr, nc = nbrs[rng.randrange(len(nbrs))]
        g[r + nr + 1][c + nc + 1] = "."
        g[2 * nr + 1][2 * nc + 1] = "."
        seen.add((nr, nc))
        stack.append((nr, nc))
    return g


def _loop_walls(g):
    """Interior walls between two open cells in a line (opening one makes a loop)."""
    out = []
    for r in range(1, len(g) - 1):
        for c in range(1, len(g[0]) - 1):
            if g[r][c] != "#":
                continue
            if (r % 2 == 1 and c % 2 == 0) or (r % 2 == 0 and c % 2 == 1):
                out.append((r, c))
    return out


def _bfs(g, start, passable):
    dist = {start: 0}
    queue = collections.deque([start])
    while queue:
        r, c = queue.popleft()
        for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nxt[0] < len(g) and 0 <= nxt[1] < len(g[0]) and nxt not in dist \
                    and passable(g[nxt[0]][nxt[1]]):
                dist[nxt] = dist[(r, c)] + 1
                queue.append(nxt)
    return dist


def _key_bfs(g, start):
    """Steps from start to E where D may be entered only after K; None when unreachable."""
    dist = {(start, False): 0}
    queue = collections.deque([(start, False)])
    while queue:
        state = queue.popleft()
        (r, c), key = state
        if g[r][c] == "E":
            return dist[state]
        for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            ch = g[nxt[0]][nxt[1]]
            if ch == "#" or (ch == "D" and not key):
                continue
            s2 = (nxt, key or ch == "K")
            if s2 not in dist:
                dist[s2] = dist[state] + 1
                queue.append(s2)
    return None


def make_maze(rng, h, w, loops):
    g = _carve(rng, h, w)
    for r, c in rng.sample(_loop_walls(g), loops):
        g[r][c] = "."
    sr, er = rng.randrange(h), rng.randrange(h)
    g[2 * sr + 1][1] = "S"
    g[2 * er + 1][2 * w - 1] = "E"
    start = (2 * sr + 1, 1)
    dist = _bfs(g, start, lambda ch: ch != "#")
    return ["".join(row) for row in g], dist[(2 * er + 1, 2 * w - 1)]


def make_key_maze(rng, h, w, loops):
    while True:
        g = _carve(rng, h, w)
        sr, er = rng.randrange(h), rng.randrange(h)
        start, end = (2 * sr + 1, 1), (2 * er + 1, 2 * w - 1)
        g[start[0]][start[1]] = "S"
        g[end[0]][end[1]] = "E"
        # The unique path S -> E of the perfect maze; the door goes on a cell in its middle.
        dist = _bfs(g, end, lambda ch: ch != "#")
        path, cur = [start], start
        while cur != end:
            r, c = cur
            cur = [p for p in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1))
                   if p in dist and dist[p] == dist[cur] - 1][0]
            path.append(cur)
        door = path[len(path) // 2 + rng.randint(-len(path) // 6, len(path) // 6)]
        g[door[0]][door[1]] = "D"
        # The key: a cell reachable from S without the door, off the path, deep in a branch.
        on_path = set(path)
        reach = _bfs(g, start, lambda ch: ch not in "#DE")
        branch = {}
        for cell in sorted(reach):
            if cell in on_path or g[cell[0]][cell[1]] != ".":
                continue
            to_path = _bfs(g, cell, lambda ch: ch not in "#D")
            branch[cell] = min(to_path[p] for p in path if p in to_path)
        far = [cell for cell in sorted(branch) if branch[cell] >= 6]
        if not far:
            continue
        key = rng.choice(far)
        g[key[0]][key[1]] = "K"
        # Loops, only where the door still separates S from E.
        walls = _loop_walls(g)
        rng.shuffle(walls)
        opened = 0
        for r, c in walls:
            if opened == loops:
                break
            g[r][c] = "."
            if end in _bfs(g, start, lambda ch: ch not in "#D"):
                g[r][c] = "#"
            else:
                opened += 1
        steps = _key_bfs(g, start)
        naive = _bfs(g, start, lambda ch: ch != "#")[end]
        if steps is not None and steps > naive:
            return ["".join(row) for row in g], steps


def t_logic_maze(rng, index, ctx):
    return _maze_task(rng, ctx, "maze_a", False)


def t_logic_maze_key(rng, index, ctx):
    return _maze_task(rng, ctx, "maze_b", True)


def _maze_task(rng, ctx, name, keyed):
    if keyed:
        lines, _ = make_key_maze(rng, 12, 18, 14)
    else:
        lines, _ = make_maze(rng, 15, 15, 25)
    ctx["files"]["files/%s.txt" % name] = "\n".join(lines) + "\n"
    for i, line in enumerate(lines):
        ctx["rows"].append(("mazes", (name, i, line)))
    legend = ("'#' is a wall, every other character is an open cell, 'S' is the start and 'E' the "
              "exit")
    if keyed:
        prompt = ("The text file %s.txt in the working directory is a maze of %d rows: %s; 'K' is a "
                  "key and 'D' a door. You move one cell at a time up, down, left or right, never "
                  "onto a wall, and you may step onto a door cell only after you have stepped onto "
                  "the key cell. What is the smallest number of moves from S to E?"
                  % (name, len(lines), legend))
        bfs = ("start = [(r, c) for r, line in enumerate(grid) for c, ch in enumerate(line) if ch == \"S\"][0]\n"
               "dist = {(start, False): 0}\n"
               "queue = deque([(start, False)])\n"
               "while queue:\n"
               "    state = queue.popleft()\n"
               "    (r, c), key = state\n"
               "    if grid[r][c] == \"E\":\n"
               "        answer = {\"value\": dist[state]}\n"
               "        break\n"
               "    for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):\n"
               "        ch = grid[nr][nc]\n"
               "        if ch == \"#\" or (ch == \"D\" and not key):\n"
               "            continue\n"
               "        nxt = ((nr, nc), key or ch == \"K\")\n"
               "        if nxt not in dist:\n"
               "            dist[nxt] = dist[state] + 1\n"
               "            queue.append(nxt)\n")
    else:
        prompt = ("The text file %s.txt in the working directory is a maze of %d rows: %s. You move "
                  "one cell at a time up, down, left or right, never onto a wall. What is the "
                  "smallest number of moves from S to E?" % (name, len(lines), legend))
        bfs = ("start = [(r, c) for r, line in enumerate(grid) for c, ch in enumerate(line) if ch == \"S\"][0]\n"
               "dist = {start: 0}\n"
               "queue = deque([start])\n"
               "while queue:\n"
               "    r, c = queue.popleft()\n"
               "    if grid[r][c] == \"E\":\n"
               "        answer = {\"value\": dist[r, c]}\n"
               "        break\n"
               "    for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):\n"
               "        if grid[nxt[0]][nxt[1]] != \"#\" and nxt not in dist:\n"
               "            dist[nxt] = dist[r, c] + 1\n"
               "            queue.append(nxt)\n")
    solution = ("from collections import deque\n\n"
                "with open(\"%s.txt\") as f:\n"
                "    grid = f.read().split()\n" % name) + bfs
    return _int_task(prompt, {"maze": name, "file": "%s.txt" % name, "rows": len(lines),
                              "columns": len(lines[0])},
                     {"MAZE": name}, solution)


# ---- data science ----

SALES_DESC = ("sales.csv in the working directory has the columns order_id, date (YYYY-MM-DD, "
              "2024), region, product, units and unit_price; the revenue of an order is units * "
              "unit_price.")
EMP_DESC = ("employees.csv in the working directory has the columns emp_id, name, department, "
            "level, hire_year and salary.")
SENSOR_DESC = ("sensors.csv in the working directory holds hourly readings with the columns "
               "reading_id, ts (YYYY-MM-DD HH:00), sensor, temperature and humidity; an empty "
               "field is a missing value.")

LOAD_SALES = ("import csv\n\n"
              "with open(\"sales.csv\", newline=\"\") as f:\n"
              "    rows = list(csv.DictReader(f))\n"
              "for r in rows:\n"
              "    r[\"units\"] = int(r[\"units\"])\n"
              "    r[\"unit_price\"] = float(r[\"unit_price\"])\n"
              "    r[\"revenue\"] = r[\"units\"] * r[\"unit_price\"]\n")
LOAD_EMP = ("import csv\n\n"
            "with open(\"employees.csv\", newline=\"\") as f:\n"
            "    rows = list(csv.DictReader(f))\n"
            "for r in rows:\n"
            "    for k in (\"level\", \"hire_year\", \"salary\"):\n"
            "        r[k] = int(r[k])\n")
LOAD_SENSORS = ("import csv\n\n"
                "with open(\"sensors.csv\", newline=\"\") as f:\n"
                "    rows = list(csv.DictReader(f))\n"
                "for r in rows:\n"
                "    for k in (\"temperature\", \"humidity\"):\n"
                "        r[k] = float(r[k]) if r[k] != \"\" else None\n")


def _revenue(rows, pred):
    return sum(r["units"] * r["unit_price"] for r in rows if pred(r))


def t_ds_region_revenue(rng, data):
    region = rng.choice(REGIONS)
    return _num_task(
        "%s What is the total revenue of region \"%s\", %s?" % (SALES_DESC, region, ROUND2),
        {"region": region}, {"REGION": region},
        LOAD_SALES + "total = sum(r[\"revenue\"] for r in rows if r[\"region\"] == %s)\n"
                     "answer = {\"value\": round(total, 2)}\n" % json.dumps(region))


def t_ds_count_orders(rng, data):
    regions = sorted(rng.sample(REGIONS, 2))
    min_units, max_price = rng.randint(10, 20), rng.choice((1000, 1500, 2000, 3000))
    return _int_task(
        "%s How many orders are from region \"%s\" or \"%s\", have units >= %d and a unit_price "
        "below %d.00?" % (SALES_DESC, regions[0], regions[1], min_units, max_price // 100),
        {"regions": regions, "min_units": min_units, "max_unit_price": max_price // 100},
        {"REGIONS": regions, "MIN_UNITS": min_units, "MAX_PRICE_CENTS": max_price},
        LOAD_SALES + "answer = {\"value\": sum(1 for r in rows if r[\"region\"] in (%s, %s)\n"
                     "                         and r[\"units\"] >= %d and r[\"unit_price\"] < %d)}\n"
        % (json.dumps(regions[0]), json.dumps(regions[1]), min_units, max_price // 100))


QUARTERS = (("2024-01-01", "2024-03-31"), ("2024-04-01", "2024-06-30"),
            ("2024-07-01", "2024-09-30"), ("2024-10-01", "2024-12-31"))


def t_ds_top_products(rng, data):
    options = []
    for q, (first, last) in enumerate(QUARTERS):
        units = collections.Counter()
        for r in data["sales"]:
            if first <= r["date"] <= last:
                units[r["product"]] += r["units"]
        top = sorted(units.values(), reverse=True)
        if len(set(top[:4])) == 4:
            options.append(q)
    q = rng.choice(options)
    first, last = QUARTERS[q]
    task = {
        "prompt": ("%s Which 3 products sold the most units in quarter Q%d of 2024 (%s to %s "
                   "inclusive)? Submit {\"products\": [<most units>, <second>, <third>]}."
                   % (SALES_DESC, q + 1, first, last)),
        "schema": _obj([("products", _strings(3))]),
        "knobs": {"quarter": q + 1, "top": 3},
        "consts": {"FIRST_DAY": first, "LAST_DAY": last, "TOP": 3},
        "spec": _spec(("products", "strings", 0)),
        "solution": (LOAD_SALES + "from collections import Counter\n\n"
                     "units = Counter()\n"
                     "for r in rows:\n"
                     "    if %s <= r[\"date\"] <= %s:\n"
                     "        units[r[\"product\"]] += r[\"units\"]\n"
                     "answer = {\"products\": [p for p, _ in units.most_common(3)]}\n"
                     % (json.dumps(first), json.dumps(last))),
    }
    return task


def _cents_by(data, key, pred=lambda r: True):
    out = collections.Counter()
    for r in data["sales"]:
        if pred(r):
            out[key(r)] += r["units"] * r["unit_price"]
    return out


def t_ds_best_month(rng, data):
    options = []
    for product, _ in PRODUCTS:
        by_month = _cents_by(data, lambda r: r["date"][:7], lambda r, p=product: r["product"] == p)
        top = sorted(by_month.values(), reverse=True)
        if top[0] != top[1]:
            options.append(product)
    product = rng.choice(options)
    return {
        "prompt": ("%s In which month of 2024 was the revenue of product \"%s\" highest? Submit "
                   "{\"month\": \"YYYY-MM\"}." % (SALES_DESC, product)),
        "schema": _obj([("month", STR)]),
        "knobs": {"product": product}, "consts": {"PRODUCT": product},
        "spec": _spec(("month", "string", 0)),
        "solution": (LOAD_SALES + "from collections import defaultdict\n\n"
                     "by_month = defaultdict(float)\n"
                     "for r in rows:\n"
                     "    if r[\"product\"] == %s:\n"
                     "        by_month[r[\"date\"][:7]] += r[\"revenue\"]\n"
                     "answer = {\"month\": max(by_month, key=by_month.get)}\n" % json.dumps(product)),
    }


def t_ds_region_product(rng, data):
    options = []
    for h, (first, last) in enumerate((("2024-01-01", "2024-06-30"), ("2024-07-01", "2024-12-31"))):
        by = _cents_by(data, lambda r: (r["region"], r["product"]),
                       lambda r, a=first, b=last: a <= r["date"] <= b)
        top = sorted(by.values(), reverse=True)
        if top[0] - top[1] >= 100:
            options.append((h, first, last))
    h, first, last = rng.choice(options)
    return {
        "prompt": ("%s In the %s half of 2024 (%s to %s inclusive), which (region, product) pair "
                   "has the highest total revenue? Submit {\"region\": \"<region>\", "
                   "\"product\": \"<product>\"}." % (SALES_DESC, ("first", "second")[h], first, last)),
        "schema": _obj([("region", STR), ("product", STR)]),
        "knobs": {"half": h + 1}, "consts": {"FIRST_DAY": first, "LAST_DAY": last},
        "spec": _spec(("region", "string", 0), ("product", "string", 0)),
        "solution": (LOAD_SALES + "import numpy as np\n\n"
                     "regions = sorted({r[\"region\"] for r in rows})\n"
                     "products = sorted({r[\"product\"] for r in rows})\n"
                     "table = np.zeros((len(regions), len(products)))\n"
                     "for r in rows:\n"
                     "    if %s <= r[\"date\"] <= %s:\n"
                     "        table[regions.index(r[\"region\"]), products.index(r[\"product\"])] += r[\"revenue\"]\n"
                     "i, j = np.unravel_index(np.argmax(table), table.shape)\n"
                     "answer = {\"region\": regions[i], \"product\": products[j]}\n"
                     % (json.dumps(first), json.dumps(last))),
    }


def t_ds_mom_change(rng, data):
    while True:
        region = rng.choice(REGIONS)
        month = rng.randint(1, 11)
        m1, m2 = "2024-%02d" % month, "2024-%02d" % (month + 1)
        if _cents_by(data, lambda r: r["region"], lambda r: r["date"][:7] == m1)[region] > 0:
            break
    return _num_task(
        "%s By what percentage did the revenue of region \"%s\" change from %s to %s, i.e. "
        "100 * (revenue in %s - revenue in %s) / revenue in %s? Give it %s (negative for a drop)."
        % (SALES_DESC, region, m1, m2, m2, m1, m1, ROUND2),
        {"region": region, "from": m1, "to": m2},
        {"REGION": region, "MONTH_FROM": m1, "MONTH_TO": m2},
        LOAD_SALES + "def revenue(month):\n"
                     "    return sum(r[\"revenue\"] for r in rows\n"
                     "               if r[\"region\"] == %s and r[\"date\"].startswith(month))\n\n"
                     "before, after = revenue(%s), revenue(%s)\n"
                     "answer = {\"value\": round(100 * (after - before) / before, 2)}\n"
        % (json.dumps(region), json.dumps(m1), json.dumps(m2)))


def t_ds_median_salary(rng, data):
    depts = [d for d, _ in DEPARTMENTS]
    schema = _obj([("medians", _obj([(d, NUM) for d in depts]))])
    return {
        "prompt": ("%s What is the median salary of each department, %s? Submit {\"medians\": "
                   "{%s}}." % (EMP_DESC, ROUND2, ", ".join("\"%s\": <number>" % d for d in depts))),
        "schema": schema, "knobs": {"departments": depts}, "consts": {},
        "spec": _spec(("medians", "number_map", TOL2)),
        "solution": (LOAD_EMP + "import numpy as np\n\n"
                     "depts = sorted({r[\"department\"] for r in rows})\n"
                     "answer = {\"medians\": {d: round(float(np.median([r[\"salary\"] for r in rows\n"
                     "                                                 if r[\"department\"] == d])), 2)\n"
                     "                        for d in depts}}\n"),
    }


def t_ds_above_dept_avg(rng, data):
    return _int_task(
        "%s How many employees earn strictly more than the average salary of their own department?"
        % EMP_DESC, {}, {},
        LOAD_EMP + "from statistics import mean\n\n"
                   "avg = {d: mean(r[\"salary\"] for r in rows if r[\"department\"] == d)\n"
                   "       for d in {r[\"department\"] for r in rows}}\n"
                   "answer = {\"value\": sum(1 for r in rows if r[\"salary\"] > avg[r[\"department\"]])}\n")


def t_ds_salary_slope(rng, data):
    dept = rng.choice([d for d, _ in DEPARTMENTS])
    return _num_task(
        "%s For the employees of department \"%s\", fit salary = a + b * years_of_service by "
        "ordinary least squares, where years_of_service = 2024 - hire_year. What is the slope b, %s?"
        % (EMP_DESC, dept, ROUND2),
        {"department": dept}, {"DEPARTMENT": dept, "YEAR": YEAR},
        LOAD_EMP + "import numpy as np\n\n"
                   "sel = [r for r in rows if r[\"department\"] == %s]\n"
                   "x = np.array([2024 - r[\"hire_year\"] for r in sel], dtype=float)\n"
                   "y = np.array([r[\"salary\"] for r in sel], dtype=float)\n"
                   "slope, intercept = np.polyfit(x, y, 1)\n"
                   "answer = {\"value\": round(float(slope), 2)}\n" % json.dumps(dept))


def t_ds_missing_count(rng, data):
    sensor = rng.choice([s[0] for s in SENSORS])
    return _int_task(
        "%s How many readings of sensor \"%s\" have a missing temperature or a missing humidity "
        "(or both)?" % (SENSOR_DESC, sensor),
        {"sensor": sensor}, {"SENSOR": sensor},
        LOAD_SENSORS + "answer = {\"value\": sum(1 for r in rows if r[\"sensor\"] == %s\n"
                       "                         and (r[\"temperature\"] is None or r[\"humidity\"] is None))}\n"
        % json.dumps(sensor))


def t_ds_sensor_mean(rng, data):
    sensor = rng.choice([s[0] for s in SENSORS])
    return _num_task(
        "%s What is the mean temperature of sensor \"%s\", ignoring missing values, %s?"
        % (SENSOR_DESC, sensor, ROUND2),
        {"sensor": sensor}, {"SENSOR": sensor},
        LOAD_SENSORS + "import numpy as np\n\n"
                       "t = np.array([r[\"temperature\"] if r[\"temperature\"] is not None else np.nan\n"
                       "              for r in rows if r[\"sensor\"] == %s])\n"
                       "answer = {\"value\": round(float(np.nanmean(t)), 2)}\n" % json.dumps(sensor))


def t_ds_ffill_mean(rng, data):
    sensor = rng.choice([s[0] for s in SENSORS])
    return _num_task(
        "%s Fill each missing temperature of sensor \"%s\" with that sensor's previous reading "
        "(forward fill in time order; its first reading is present). What is the mean of the filled "
        "temperatures of \"%s\", %s?" % (SENSOR_DESC, sensor, sensor, ROUND2),
        {"sensor": sensor}, {"SENSOR": sensor},
        LOAD_SENSORS + "sel = sorted((r for r in rows if r[\"sensor\"] == %s), key=lambda r: r[\"ts\"])\n"
                       "filled, last = [], None\n"
                       "for r in sel:\n"
                       "    if r[\"temperature\"] is not None:\n"
                       "        last = r[\"temperature\"]\n"
                       "    filled.append(last)\n"
                       "answer = {\"value\": round(sum(filled) / len(filled), 2)}\n" % json.dumps(sensor))


def t_ds_daily_range(rng, data):
    options = []
    for name, _, _, _ in SENSORS:
        by_day = collections.defaultdict(list)
        for r in data["sensors"]:
            if r["sensor"] == name and r["temperature"] is not None:
                by_day[r["ts"][:10]].append(r["temperature"])
        ranges = sorted((max(v) - min(v) for v in by_day.values()), reverse=True)
        if ranges[0] != ranges[1]:
            options.append(name)
    sensor = rng.choice(options)
    return {
        "prompt": ("%s On which day is the temperature range (highest minus lowest temperature of "
                   "the day, ignoring missing values) of sensor \"%s\" largest? Submit "
                   "{\"date\": \"YYYY-MM-DD\"}." % (SENSOR_DESC, sensor)),
        "schema": _obj([("date", STR)]),
        "knobs": {"sensor": sensor}, "consts": {"SENSOR": sensor},
        "spec": _spec(("date", "string", 0)),
        "solution": (LOAD_SENSORS + "from collections import defaultdict\n\n"
                     "by_day = defaultdict(list)\n"
                     "for r in rows:\n"
                     "    if r[\"sensor\"] == %s and r[\"temperature\"] is not None:\n"
                     "        by_day[r[\"ts\"][:10]].append(r[\"temperature\"])\n"
                     "answer = {\"date\": max(sorted(by_day), key=lambda d: max(by_day[d]) - min(by_day[d]))}\n"
                     % json.dumps(sensor)),
    }


def t_ds_temp_humidity_corr(rng, data):
    sensor = rng.choice([s[0] for s in SENSORS])
    return _num_task(
        "%s Over the readings of sensor \"%s\" where both temperature and humidity are present, "
        "what is the Pearson correlation coefficient between temperature and humidity, %s?"
        % (SENSOR_DESC, sensor, ROUND4),
        {"sensor": sensor}, {"SENSOR": sensor},
        LOAD_SENSORS + "import numpy as np\n\n"
                       "pairs = [(r[\"temperature\"], r[\"humidity\"]) for r in rows if r[\"sensor\"] == %s\n"
                       "         and r[\"temperature\"] is not None and r[\"humidity\"] is not None]\n"
                       "t, h = np.array(pairs).T\n"
                       "answer = {\"value\": round(float(np.corrcoef(t, h)[0, 1]), 4)}\n"
        % json.dumps(sensor), tol=TOL4)


# ---------------------------------------------------------------------------------------------
# Rendering

def _verifier_py(template, consts, spec):
    lines = ["%s = %s" % (k, json.dumps(consts[k])) for k in sorted(consts)]
    lines.append("SPEC = %s" % json.dumps(spec))
    body = "\n".join(lines) + "\n\n" + _EXPECTED[template] + VERIFIER_TAIL
    modules = [m for m in ("collections", "itertools", "json", "math", "statistics") if m + "." in body]
    return VERIFIER_HEAD % "".join("import %s\n" % m for m in modules) + body


def _dump(obj):
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def make_tasks(seed, data, ctx):
    """[(task_id, template, spec)] in TEMPLATES order; ctx collects puzzle rows and maze files."""
    out = []
    for t in TEMPLATES:
        builder = globals()["t_" + t.name]
        for i in range(t.instances):
            # One stream per (seed, template, instance): changing one task leaves the others alone.
            rng = random.Random("%d/%s/%d" % (seed, t.name, i))
            if t.family == "maths":
                spec = builder(rng)
            elif t.family == "logic":
                spec = builder(rng, i, ctx)
            else:
                spec = builder(rng, data)
            out.append(("%s_%02d" % (t.name, i), t.name, spec))
    return out


def render(seed=SEED, name=NAME):
    """{relative path: file text} of the environment (what generate writes)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError("seed must be a non-negative integer, got %r" % (seed,))
    data = make_data(seed)
    ctx = {"rows": [], "files": collections.OrderedDict(), "zebra_candidates": _zebra_candidates()}
    tasks = make_tasks(seed, data, ctx)
    files = collections.OrderedDict()
    families = collections.Counter(_BY_NAME[t].family for _, t, _ in tasks)
    files["env.json"] = _dump(collections.OrderedDict([
        ("name", name),
        ("kind", "interpreter"),
        ("category", "interpreter"),
        ("description", "Tasks solved by writing and running code in a sandboxed Jupyter kernel "
                        "(Python 3, standard library and numpy): %d maths tasks with exact answers, "
                        "%d logic puzzles (zebra, knights and knaves, seating, n-queens, text "
                        "mazes) and %d data-science questions over the CSV files sales.csv, "
                        "employees.csv and sensors.csv (with missing values) in the kernel's "
                        "working directory." % (families["maths"], families["logic"],
                                                families["data"])),
        ("provenance", collections.OrderedDict([("generator", GENERATOR), ("seed", seed)])),
    ]))
    files["schema.sql"] = schema_sql(seed, data, ctx["rows"])
    files["tools.py"] = TOOLS_PY
    for table, rows in data.items():
        files["files/%s.csv" % table] = csv_text(table, rows)
    for rel in sorted(ctx["files"]):
        files[rel] = ctx["files"][rel]
    for task_id, template, spec in tasks:
        t = _BY_NAME[template]
        knobs = collections.OrderedDict([("template", template), ("family", t.family)])
        knobs.update(sorted(spec["knobs"].items()))
        files["tasks/%s/task.json" % task_id] = _dump(collections.OrderedDict([
            ("prompt", spec["prompt"]),
            ("answer_schema", spec["schema"]),
            ("difficulty", t.tier),
            ("knobs", knobs),
        ]))
        files["tasks/%s/solution.py" % task_id] = spec["solution"]
        files["tasks/%s/verifier.py" % task_id] = _verifier_py(template, spec["consts"], spec["spec"])
    return files


def generate(out_dir=DEFAULT_OUT, seed=SEED, name=NAME):
    """Writes the environment source directory to out_dir; returns the task ids.

    out_dir must be absent, empty, or an earlier output of this generator (its tasks/ and
    files/ are replaced, so no stale task or file survives)."""
    files = render(seed, name)
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        try:
            with open(os.path.join(out_dir, "env.json"), encoding="utf-8") as f:
                ours = json.load(f).get("provenance", {}).get("generator") == GENERATOR
        except (OSError, ValueError, AttributeError):
            ours = False
        if not ours:
            raise ValueError("%s is not empty and not an output of %s; refusing to write there"
                             % (out_dir, GENERATOR))
        for sub in ("tasks", "files"):
            shutil.rmtree(os.path.join(out_dir, sub), ignore_errors=True)
    for rel, text in files.items():
        path = os.path.join(out_dir, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    return sorted({rel.split("/")[1] for rel in files if rel.startswith("tasks/")})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="templates (name family tier instances):\n" + "\n".join(
                                     "  %-24s %-6s %d %d" % t for t in TEMPLATES))
    ap.add_argument("--seed", type=int, default=SEED, help="default %d (the committed one)" % SEED)
    ap.add_argument("--out", default=DEFAULT_OUT,
                    help="environment source directory to write (default data/envs/%s)" % NAME)
    ap.add_argument("--name", default=NAME, help="environment name (default %s)" % NAME)
    args = ap.parse_args(argv)
    try:
        ids = generate(args.out, args.seed, args.name)
    except ValueError as e:
        print("interpreter_env.py: %s" % e, file=sys.stderr)
        return 2
    print("wrote %s: %d tasks" % (args.out, len(ids)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
