"""envsynth/procedural/synth_common.py: the helpers every procedural generator shares.

pick_thresholds draws a task's thresholds from the data itself; these cases pin what it returns
at the edges, where a generator used to crash (trip_planning seed 106: every attraction of a city
free, so "ticket_price < t" with t from the data admitted none).
"""
import json
import os
import random
import re
import sqlite3
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROCEDURAL = os.path.join(ROOT, "envsynth", "procedural")
sys.path.insert(0, PROCEDURAL)

import propose  # noqa: E402
import synth_common  # noqa: E402


def satisfies(row, constraints):
    ops = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
    return all(ops[op](row[key], value) for key, op, value in constraints)


def test_thresholds_come_from_the_data_and_admit_between_lo_and_hi_rows():
    rows = [{"price": p} for p in (10, 20, 30, 40, 50)]
    for seed in range(20):
        (key, op, value), = synth_common.pick_thresholds(random.Random(seed), rows, [("price", "<")], 2, 3,
                                                         satisfies)
        assert (key, op) == ("price", "<") and value in (30, 40)
        assert 2 <= sum(satisfies(r, [(key, op, value)]) for r in rows) <= 3


@pytest.mark.parametrize("op,expected", [("<", 1), ("<=", 0), (">", -1), (">=", 0)])
def test_equal_rows_under_a_strict_bound_get_a_threshold_one_step_past_the_data(op, expected):
    rows = [{"ticket_price": 0} for _ in range(4)]
    cons = synth_common.pick_thresholds(random.Random(1), rows, [("ticket_price", op)], 2, 3, satisfies)
    assert cons == [("ticket_price", op, expected)]
    assert sum(satisfies(r, cons) for r in rows) == 4


def test_no_rows_is_a_named_error():
    with pytest.raises(ValueError, match="no rows"):
        synth_common.pick_thresholds(random.Random(1), [], [("price", "<")], 1, 2, satisfies)


def test_the_seed_that_crashed_builds_a_whole_environment(tmp_path):
    out = tmp_path / "trip"
    done = subprocess.run([sys.executable, os.path.join(PROCEDURAL, "propose.py"), "build", "--category",
                           "trip_planning", "--seed", "106", "--lineages", "3", "--levels", "4", "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(os.listdir(out / "tasks")) == 12


# Words a database may hold that prompts use as ordinary words (a weekday, an equipment item).
PROMPT_WORDS = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}


def database_names(schema_sql):
    """The names a task may have to copy: every text value of the environment's database with a capital
    letter (entity names, codes and ids), fixed vocabulary left out."""
    db = sqlite3.connect(":memory:")
    db.executescript(schema_sql)
    names = set()
    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        for row in db.execute('SELECT * FROM "%s"' % table):
            names.update(v for v in row if isinstance(v, str) and len(v) >= 3 and len(v) <= 40
                         and any(c.isupper() for c in v) and v not in PROMPT_WORDS)
    return names


@pytest.mark.parametrize("category", ["trip_planning", "logistics", "e_commerce", "calendar", "inventory",
                                      "course_planning"])
def test_prompts_write_every_database_name_in_double_quotes(category):
    # A name after a space tokenizes unlike the same name after the quote a call writes, and the
    # policy copies the call's tokens (data/models/policy-small/README.md, session 36).
    module = propose.load(category)
    checked = 0
    for seed in (1, 2, 3):
        names = database_names(propose.environment(module, seed)["schema_sql"])
        for lineage in range(3):
            for level in range(1, 5):
                prompt = propose.task(module, seed, lineage, level, 0)["prompt"]
                outside_quotes = re.sub(r'"[^"]*"', '""', prompt)
                bare = sorted(n for n in names if re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(n), outside_quotes))
                assert not bare, "%s seed %d lineage %d level %d: %s unquoted in: %s" % (
                    category, seed, lineage, level, bare, prompt)
                checked += sum(1 for n in names if '"%s"' % n in prompt)
    assert checked > 0, "no prompt of %s named anything from its database" % category


@pytest.mark.parametrize("seed", [5, 106, 2024])
def test_trip_planning_levels_1_and_2_are_answered_by_the_first_row_of_one_search(tmp_path, seed):
    """The search tools list a city's places cheapest first, above the rating floor; every
    level-1 and level-2 constraint is a price cap or that floor, so the first row meets them all.
    Checked on the database itself, not through the gold solution, which relies on it."""
    out = tmp_path / "trip"
    done = subprocess.run([sys.executable, os.path.join(PROCEDURAL, "propose.py"), "build", "--category",
                           "trip_planning", "--seed", str(seed), "--lineages", "6", "--levels", "2", "--out",
                           str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    db = sqlite3.connect(":memory:")
    db.executescript((out / "schema.sql").read_text())
    ordering = {"hotel": ("hotels", "price_per_night"), "restaurant": ("restaurants", "price_per_person"),
                "attraction": ("attractions", "ticket_price")}
    tools_source = (out / "tools.py").read_text()
    checked = 0
    for task_id in sorted(os.listdir(out / "tasks")):
        knobs = json.loads((out / "tasks" / task_id / "task.json").read_text())["knobs"]
        table, price = ordering[knobs["kind"]]
        floor = [value for key, op, value in knobs["rules"] if key == "rating" and op == ">="]
        assert all(key == price or (key == "rating" and op == ">=") for key, op, _ in knobs["rules"]), knobs
        rows = db.execute("SELECT * FROM %s WHERE city = ? AND rating >= ? ORDER BY %s, name" % (table, price),
                          (knobs["city"], (floor[0] if floor else 0) - 1e-9)).fetchall()
        names = [d[0] for d in db.execute("SELECT * FROM %s LIMIT 0" % table).description]
        first = dict(zip(names, rows[0]))
        assert satisfies(first, [tuple(rule) for rule in knobs["rules"]]), (task_id, first, knobs["rules"])
        solution = (out / "tasks" / task_id / "solution.py").read_text()
        search = "find_" + table
        assert "tools.%s(CITY" % search in solution and "def %s(" % search in tools_source
        if floor:
            assert "min_rating=" in solution
        checked += 1
    assert checked == 12


class CountingTools:
    """The `tools` a gold solution is handed, over an in-memory copy of the environment's data; it
    records the name of every call."""

    def __init__(self, tools_source, schema_sql):
        self.namespace = {}
        exec(compile(tools_source, "tools.py", "exec"), self.namespace)
        self.db = synth_common.MemDb(schema_sql)
        self.namespace["db"] = self.db
        self.calls = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append(name)
            return self.namespace[name](*args, **kwargs)
        return call


@pytest.mark.parametrize("category", ["trip_planning", "logistics", "e_commerce", "calendar", "inventory",
                                      "course_planning"])
def test_levels_1_and_2_are_one_search_or_a_two_call_chain(tmp_path, category):
    """A level-1 gold solution makes one tool call and a level-2 one at most two, whatever the data:
    a scan with one get call per list entry asks a policy to copy an entry from turns back at every
    step (data/models/policy-small/README.md, session 37). Each solution runs on its seed's
    database and its own verifier passes it."""
    checked = 0
    for seed in (1, 2, 3, 106):
        out = tmp_path / ("%s_%d" % (category, seed))
        done = subprocess.run([sys.executable, os.path.join(PROCEDURAL, "propose.py"), "build", "--category",
                               category, "--seed", str(seed), "--lineages", "6", "--levels", "2", "--out",
                               str(out)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        tools_source, schema_sql = (out / "tools.py").read_text(), (out / "schema.sql").read_text()
        for task_id in sorted(os.listdir(out / "tasks")):
            task_dir = out / "tasks" / task_id
            level = json.loads((task_dir / "task.json").read_text())["knobs"]["level"]
            tools = CountingTools(tools_source, schema_sql)
            solution, verifier = {}, {}
            exec(compile((task_dir / "solution.py").read_text(), "solution.py", "exec"), solution)
            exec(compile((task_dir / "verifier.py").read_text(), "verifier.py", "exec"), verifier)
            answer = solution["solve"](tools)
            verdict = verifier["verify"](json.dumps(answer), tools.db)
            assert verdict["passed"], (category, seed, task_id, answer, verdict)
            assert len(tools.calls) <= (1 if level == 1 else 2), (category, seed, task_id, tools.calls)
            checked += 1
    assert checked == 4 * 12


# One bad argument per search: the error a policy reads names the argument (or the unknown value)
# it got wrong, so the next call can fix it.
BAD_SEARCH_CALLS = [
    ("trip_planning", "find_hotels", {"city": "Atlantis"}, "Atlantis"),
    ("logistics", "find_routes", {"max_km": -5}, "max_km"),
    ("logistics", "find_routes", {"origin_depot": "Nowhere Depot"}, "Nowhere Depot"),
    ("logistics", "find_carriers", {"min_weight_kg": "heavy"}, "min_weight_kg"),
    ("e_commerce", "find_products", {"category": "Spaceships"}, "Spaceships"),
    ("calendar", "find_rooms", {"min_capacity": "many"}, "min_capacity"),
    ("calendar", "find_rooms_for_meeting", {"meeting": "no such meeting"}, "no such meeting"),
    ("inventory", "find_stock", {"warehouse": "Moon Base"}, "Moon Base"),
    ("inventory", "find_offers", {"max_lead_days": -1}, "max_lead_days"),
    ("course_planning", "find_sections", {"day": "Caturday"}, "Caturday"),
    ("course_planning", "find_instructors", {"min_rating": 9}, "min_rating"),
]


@pytest.mark.parametrize("category,search,arguments,named", BAD_SEARCH_CALLS)
def test_a_search_given_a_bad_filter_names_it(tmp_path, category, search, arguments, named):
    done = subprocess.run([sys.executable, os.path.join(PROCEDURAL, "propose.py"), "build", "--category",
                           category, "--seed", "1", "--lineages", "1", "--levels", "1", "--out",
                           str(tmp_path / "env")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    tools = CountingTools((tmp_path / "env" / "tools.py").read_text(),
                          (tmp_path / "env" / "schema.sql").read_text())
    with pytest.raises(ValueError) as raised:
        getattr(tools, search)(**arguments)
    assert named in str(raised.value)
