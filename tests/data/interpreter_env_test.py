"""Tests of scripts/interpreter_env.py, the "interpreter_lab" environment (kind "interpreter").

Run by ctest (tests/data/CMakeLists.txt) as `/usr/bin/python3 -m pytest` with ENVFORGE set to the
built CLI; by hand: ENVFORGE=build/bin/envforge /usr/bin/python3 -m pytest tests/data/interpreter_env_test.py
(without ENVFORGE, build/bin/envforge is used when it exists, else the envforge tests are skipped;
without numpy, the in-process run of the gold solutions is skipped).
"""

import ast
import csv
import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "interpreter_env.py")
COMMITTED = os.path.join(ROOT, "data", "envs", "interpreter_lab")
ANALYZE = os.path.join(ROOT, "sandbox", "worker", "python", "analyze.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import interpreter_env  # noqa: E402

# What a gold solution may import: the standard library modules it uses, and numpy (pandas is
# not guaranteed in the kernel).
SOLUTION_MODULES = {"collections", "csv", "fractions", "functools", "itertools", "math", "numpy",
                    "statistics"}


# Absolute: some tests change the working directory (the gold solutions read ./sales.csv).
ENVFORGE = os.path.abspath(os.environ.get("ENVFORGE") or os.path.join(ROOT, "build", "bin", "envforge"))


def _envforge():
    path = ENVFORGE
    if not os.access(path, os.X_OK):
        pytest.skip("no built envforge (set ENVFORGE)")
    return path


def _run(*args, check=True, timeout=600):
    proc = subprocess.run([_envforge()] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError("envforge %s: rc %d\n%s\n%s" % (" ".join(args), proc.returncode,
                                                             proc.stdout, proc.stderr))
    return proc


def _tree(root):
    """{relative path: bytes} of every file under root."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root).replace(os.sep, "/")] = fh.read()
    return out


class _Db:
    def __init__(self, schema):
        self.conn = sqlite3.connect(":memory:")
        self.conn.row_factory = sqlite3.Row
        self.conn.executescript(schema)

    def query(self, sql, params=()):
        return [dict(r) for r in self.conn.execute(sql, tuple(params))]


def _module(path, **injected):
    ns = dict(injected)
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), path, "exec"), ns)
    return ns


def _tasks(src):
    tasks_dir = os.path.join(src, "tasks")
    return [(t, os.path.join(tasks_dir, t)) for t in sorted(os.listdir(tasks_dir))]


def _task_json(d):
    with open(os.path.join(d, "task.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def db():
    with open(os.path.join(COMMITTED, "schema.sql"), encoding="utf-8") as f:
        return _Db(f.read())


# ---------------------------------------------------------------------------------------------
# Determinism and the committed environment


def test_template_table():
    names = [t.name for t in interpreter_env.TEMPLATES]
    assert len(set(names)) == len(names)
    count = {}
    for t in interpreter_env.TEMPLATES:
        assert t.name.startswith({"maths": "math_", "logic": "logic_", "data": "ds_"}[t.family])
        assert 1 <= t.tier <= 5 and t.instances >= 1
        count[t.family] = count.get(t.family, 0) + t.instances
    assert count["maths"] >= 10 and count["logic"] >= 8 and count["data"] >= 12
    assert sum(count.values()) >= 32


def test_committed_env_reproducible():
    """data/envs/interpreter_lab is exactly what the generator writes (no hand edits)."""
    files = interpreter_env.render()
    on_disk = _tree(COMMITTED)
    assert sorted(on_disk) == sorted(files)
    for rel, text in files.items():
        assert on_disk[rel] == text.encode("utf-8"), rel


def test_cli_regenerates_same_bytes(tmp_path):
    out = str(tmp_path / "again")
    subprocess.run([sys.executable, SCRIPT, "--out", out], check=True, stdout=subprocess.DEVNULL)
    assert _tree(out) == _tree(COMMITTED)
    # Regenerating over an earlier output replaces tasks/ and files/: nothing stale survives.
    os.makedirs(os.path.join(out, "tasks", "stale_00"))
    with open(os.path.join(out, "files", "stale.csv"), "w") as f:
        f.write("x\n")
    interpreter_env.generate(out)
    assert _tree(out) == _tree(COMMITTED)


def test_other_seed_other_data(tmp_path):
    a, b = interpreter_env.render(), interpreter_env.render(seed=7)
    assert a["files/sales.csv"] != b["files/sales.csv"]
    assert a["schema.sql"] != b["schema.sql"]
    assert sorted(a) == sorted(b)


def test_refuses_foreign_directory(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError):
        interpreter_env.generate(str(tmp_path))
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_env_json():
    with open(os.path.join(COMMITTED, "env.json"), encoding="utf-8") as f:
        env = json.load(f)
    assert env["name"] == "interpreter_lab" and env["kind"] == "interpreter"
    assert env["category"] == "interpreter" and env["description"]
    assert env["provenance"] == {"generator": "scripts/interpreter_env.py", "seed": interpreter_env.SEED}


# ---------------------------------------------------------------------------------------------
# The data: every CSV holds exactly its table's rows; the maze files are the mazes table


def _typed(column, text):
    if text == "":
        return None
    if column in ("unit_price", "temperature", "humidity"):
        return float(text)
    if column in ("order_id", "units", "emp_id", "level", "hire_year", "salary", "reading_id"):
        return int(text)
    return text


@pytest.mark.parametrize("table", list(interpreter_env.CSV_COLUMNS))
def test_csv_equals_table(db, table):
    with open(os.path.join(COMMITTED, "files", table + ".csv"), encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        csv_rows = [tuple(_typed(c, v) for c, v in zip(header, row)) for row in reader]
    columns = [r["name"] for r in db.query("SELECT name FROM pragma_table_info(?) ORDER BY cid", (table,))]
    assert header == columns == list(interpreter_env.CSV_COLUMNS[table])
    key = columns[0]
    rows = [tuple(r[c] for c in columns) for r in db.query("SELECT * FROM %s ORDER BY %s" % (table, key))]
    assert csv_rows == rows
    assert len(rows) > 100
    # SQLite's types are the CSV's: REAL for decimals (NULL when the field is empty).
    for r in rows:
        for c, v in zip(columns, r):
            assert v is None or isinstance(v, type(_typed(c, "1"))), (table, c, v)


def test_sensors_have_missing_values(db):
    n = db.query("SELECT SUM(temperature IS NULL) AS t, SUM(humidity IS NULL) AS h FROM sensors")[0]
    assert n["t"] > 10 and n["h"] > 10


@pytest.mark.parametrize("maze", ["maze_a", "maze_b"])
def test_maze_file_equals_table(db, maze):
    with open(os.path.join(COMMITTED, "files", maze + ".txt"), encoding="utf-8") as f:
        text = f.read()
    lines = [r["line"] for r in db.query("SELECT line FROM mazes WHERE name = ? ORDER BY row", (maze,))]
    assert text == "\n".join(lines) + "\n"
    assert sum(line.count("S") for line in lines) == 1 and sum(line.count("E") for line in lines) == 1
    if maze == "maze_b":
        assert sum(line.count("K") for line in lines) == 1 and sum(line.count("D") for line in lines) >= 1


# ---------------------------------------------------------------------------------------------
# Sources: prompts, schemas, imports


def _imports(source):
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module.split(".")[0])
    return names


def _allowed_verifier_modules():
    with open(ANALYZE, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "ALLOWED_MODULES":
            return set(ast.literal_eval(node.value.args[0]))
    raise AssertionError("no ALLOWED_MODULES in analyze.py")


def test_sources():
    allowed = _allowed_verifier_modules()
    families = {}
    for task_id, d in _tasks(COMMITTED):
        task = _task_json(d)
        assert sorted(task) == ["answer_schema", "difficulty", "knobs", "prompt"]
        template = task["knobs"]["template"]
        t = {t.name: t for t in interpreter_env.TEMPLATES}[template]
        assert task_id.startswith(template + "_") and task["difficulty"] == t.tier
        assert task["knobs"]["family"] == t.family
        families[t.family] = families.get(t.family, 0) + 1
        schema = task["answer_schema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert sorted(schema["required"]) == sorted(schema["properties"])
        assert "Submit {" in task["prompt"], task_id
        for key in schema["properties"]:
            assert '"%s"' % key in task["prompt"], (task_id, key)
        with open(os.path.join(d, "solution.py"), encoding="utf-8") as f:
            solution = f.read()
        assert "def solve" not in solution and "answer = " in solution
        assert _imports(solution) <= SOLUTION_MODULES, (task_id, _imports(solution))
        with open(os.path.join(d, "verifier.py"), encoding="utf-8") as f:
            verifier = f.read()
        assert _imports(verifier) <= allowed, (task_id, _imports(verifier))
    assert families["maths"] >= 10 and families["logic"] >= 8 and families["data"] >= 12


# ---------------------------------------------------------------------------------------------
# In process: each gold solution (run in a copy of files/ with plain Python and numpy) passes its
# verifier (run on sqlite3); wrong answers, wrong types, extra keys and non-objects fail.


def _fraction_wrongs(text):
    p, q = (int(x) for x in text.split("/"))
    return ["%d/%d" % (p + 1, q), "%d/%d" % (p, q + 1), "%d/%d" % (2 * p, 2 * q), str(p / q), "%d" % p]


def _wrong_values(value, ordered):
    """Wrong answers of the right type for one answer field."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1, -value - 1]
    if isinstance(value, float):
        return [value + 0.05, value - 0.05, value * 2 + 1]
    if isinstance(value, str):
        if "/" in value:
            return _fraction_wrongs(value)
        return [value + "x", " " + value, ""] + [v for v in (value.lower(), value.upper()) if v != value][:1]
    if isinstance(value, list):
        out = [value[:-1], value + ["Nobody"]]
        if ordered and list(reversed(value)) != value:
            out.append(list(reversed(value)))
        return out
    if isinstance(value, dict):
        out = []
        for k in sorted(value):
            for wrong in _wrong_values(value[k], ordered):
                out.append(dict(value, **{k: wrong}))
            break
        rest = dict(value)
        rest.pop(sorted(value)[0])
        return out + [rest, dict(value, Other=1.0)]
    raise AssertionError(value)


def _wrong_type(value):
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return 0
    if isinstance(value, list):
        return ",".join(value)
    return list(value)


def test_gold_solutions_in_process(db, tmp_path, monkeypatch):
    pytest.importorskip("numpy")
    work = tmp_path / "kernel"
    shutil.copytree(os.path.join(COMMITTED, "files"), str(work))
    monkeypatch.chdir(str(work))
    for task_id, d in _tasks(COMMITTED):
        task = _task_json(d)
        answer = json.loads(json.dumps(_module(os.path.join(d, "solution.py"),
                                               __name__="__main__")["answer"]))
        assert sorted(answer) == sorted(task["answer_schema"]["properties"]), task_id
        verify = _module(os.path.join(d, "verifier.py"))["verify"]
        ok = lambda a: verify(a, db)["passed"]  # noqa: E731
        assert verify(answer, db) == {"passed": True, "score": 1.0, "reasons": []}, task_id
        assert ok(json.dumps(answer)), task_id
        ordered = task["knobs"]["template"] != "logic_knights_knaves"
        for key, value in sorted(answer.items()):
            for wrong in _wrong_values(value, ordered):
                assert not ok(dict(answer, **{key: wrong})), (task_id, key, wrong)
                assert not ok(json.dumps(dict(answer, **{key: wrong}))), (task_id, key, wrong)
            assert not ok(dict(answer, **{key: _wrong_type(value)})), (task_id, key)
            if isinstance(value, int):
                assert not ok(dict(answer, **{key: True})), task_id
            if isinstance(value, float):  # the stated tolerance: within it passes
                tol = 0.0001 if "4 decimals" in task["prompt"] else 0.01
                assert ok(dict(answer, **{key: value + tol * 0.4})), task_id
        if not ordered:  # a set of names: any order
            assert ok({"knights": list(reversed(answer["knights"]))}), task_id
        assert not ok(dict(answer, extra=1)), task_id
        assert not ok({}) and not ok([answer]) and not ok("not json") and not ok(json.dumps([answer]))


# ---------------------------------------------------------------------------------------------
# With the built envforge: pack, check (every gold solution in a real kernel), wrong answers.


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("interpreter_lab") / "interpreter_lab.envdb")
    _run("env", "pack", COMMITTED, "-o", out)
    return out


def test_env_check(bundle):
    report = json.loads(_run("env", "check", bundle, "--json").stdout)
    assert report["ok"], report
    tasks = [c for c in report["checks"] if c["check"].startswith("task ")]
    assert len(tasks) == len(os.listdir(os.path.join(COMMITTED, "tasks")))


@pytest.mark.parametrize("task_id", ["math_fraction_sum_00", "logic_maze_key_00", "ds_sensor_mean_00"])
def test_wrong_answers_in_session(bundle, db, task_id, tmp_path, monkeypatch):
    """In a session of the bundle: wrong submissions are judged wrong, the gold one right."""
    pytest.importorskip("numpy")
    d = os.path.join(COMMITTED, "tasks", task_id)
    shutil.copytree(os.path.join(COMMITTED, "files"), str(tmp_path / "kernel"))
    monkeypatch.chdir(str(tmp_path / "kernel"))
    answer = json.loads(json.dumps(_module(os.path.join(d, "solution.py"), __name__="__main__")["answer"]))
    (key, value), = answer.items()
    texts = [json.dumps({key: w}) for w in _wrong_values(value, True)[:3]] + [json.dumps(answer)]
    calls = tmp_path / "calls.jsonl"
    calls.write_text("".join(json.dumps({"name": "submit_result", "arguments": {"answer_text": t}}) + "\n"
                             for t in texts))
    lines = _run("session", "run", bundle, "--task", task_id, "--calls", str(calls), "--json").stdout
    results = [json.loads(line) for line in lines.strip().splitlines()]
    assert len(results) == len(texts), lines
    for text, result in zip(texts, results):
        assert result["outcome"] == "ok", result
        assert result["content"]["passed"] is (text == texts[-1]), (text, result)
