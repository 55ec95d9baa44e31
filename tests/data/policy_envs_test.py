"""Tests of scripts/policy_envs.py, the shop environments of the policy model.

Run by ctest (tests/data/CMakeLists.txt) as `/usr/bin/python3 -m pytest` with ENVFORGE set to the
built CLI; by hand: ENVFORGE=build/bin/envforge /usr/bin/python3 -m pytest tests/data/policy_envs_test.py
(without ENVFORGE, build/bin/envforge is used when it exists, else the envforge tests are skipped).
"""

import json
import os
import sqlite3
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "policy_envs.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import policy_envs  # noqa: E402

SEEDS = (11, 12)
INSTANCES = 2


def _envforge():
    path = os.environ.get("ENVFORGE") or os.path.join(ROOT, "build", "bin", "envforge")
    if not os.access(path, os.X_OK):
        pytest.skip("no built envforge (set ENVFORGE)")
    return path


def _run(*args, check=True):
    proc = subprocess.run([_envforge()] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)
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
                out[os.path.relpath(p, root)] = fh.read()
    return out


@pytest.fixture(scope="module")
def envs(tmp_path_factory):
    """seed -> (source dir, packed bundle path); both seeds generated through the API."""
    base = tmp_path_factory.mktemp("policy_envs")
    out = {}
    for seed in SEEDS:
        src = str(base / ("shop_%d" % seed))
        policy_envs.generate(seed, src, instances=INSTANCES)
        out[seed] = (src, str(base / ("shop_%d.envdb" % seed)))
    return out


@pytest.fixture(scope="module")
def packed(envs):
    for seed, (src, bundle) in envs.items():
        _run("env", "pack", src, "-o", bundle)
    return envs


# ---------------------------------------------------------------------------------------------
# In-process: the generated sources run against sqlite3 with plain Python (no sandbox).


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


class _Tools:
    def __init__(self, tools_ns):
        self._ns = tools_ns
        self.calls = []

    def __getattr__(self, name):
        fn = self._ns[name]

        def call(*args):
            self.calls.append(name)
            return json.loads(json.dumps(fn(*args)))
        return call


def _load(src):
    with open(os.path.join(src, "schema.sql"), encoding="utf-8") as f:
        db = _Db(f.read())
    tools = _module(os.path.join(src, "tools.py"), db=db)
    return db, tools


def _wrong_values(db, key, want):
    """Wrong answers of the right type: a near number, or another real value of the column."""
    if isinstance(want, int):
        return [want + 1, want - 1]
    column = {"city": "SELECT city AS v FROM suppliers", "phone": "SELECT phone AS v FROM suppliers"}[key]
    others = sorted({r["v"] for r in db.query(column)} - {want})
    return others[:2] + [want + " ", " " + want] + ([want.lower()] if want.lower() != want else [])


def _other_products(db, name):
    return sorted({r["v"] for r in db.query("SELECT name AS v FROM products")} - {name})


def _check_object_answer(task, answer, ok, db):
    """{key: value} answers: JSON text of the object passes; wrong values, wrong types, extra keys
    and non-objects fail."""
    assert ok(json.dumps(answer))
    (key, want), = answer.items()
    assert key in task["answer_schema"]["required"] and key in task["prompt"]
    for wrong in _wrong_values(db, key, want):
        assert not ok({key: wrong}), wrong
        assert not ok(json.dumps({key: wrong})), wrong
    assert not ok({key: str(want)} if isinstance(want, int) else {key: 0})
    assert not ok(dict(answer, extra=1))
    assert not ok({}) and not ok([answer]) and not ok("not json") and not ok(json.dumps(want))


def _check_name_answer(task, answer, ok, db):
    """Plain-text name answers (tiers 3-4): surrounding whitespace is no error; another product,
    another case, the name inside JSON and non-strings fail."""
    assert task["answer_schema"]["type"] == "string" and task["prompt"].endswith(policy_envs.NAME_ANSWER)
    assert ok(" %s\n" % answer)
    others = _other_products(db, answer)
    for wrong in others[:2] + [answer.lower(), answer.upper(), json.dumps(answer),
                               json.dumps({"product": answer}), answer + "s", ""]:
        assert not ok(wrong), wrong
    assert not ok({"product": answer}) and not ok([answer]) and not ok(None)


def _tasks(src):
    tasks_dir = os.path.join(src, "tasks")
    return [(t, os.path.join(tasks_dir, t)) for t in sorted(os.listdir(tasks_dir))]


def test_template_table():
    names = [t.name for t in policy_envs.TEMPLATES]
    assert len(set(names)) == len(names) == 7
    by = {t.name: t for t in policy_envs.TEMPLATES}
    assert by["supplier_phone"].held_out and not by["supplier_phone"].train
    assert by["category_stock_value"].tier == 5 and not by["category_stock_value"].train
    assert sorted({t.tier for t in policy_envs.TEMPLATES}) == [1, 2, 3, 4, 5]
    assert "supplier_phone" not in policy_envs.TRAIN_TEMPLATES
    assert all(seed > policy_envs.TRAIN_SEED_MAX for _, seed in policy_envs.EVAL_ENVS)


def test_same_seed_same_bytes(envs, tmp_path):
    src, _ = envs[SEEDS[0]]
    again = str(tmp_path / "again")
    subprocess.run([sys.executable, SCRIPT, "--seed", str(SEEDS[0]), "--out", again,
                    "--instances", str(INSTANCES)], check=True, stdout=subprocess.DEVNULL)
    assert _tree(again) == _tree(src)
    # Regenerating over an earlier output replaces its tasks: no stale task survives.
    policy_envs.generate(SEEDS[0], again, instances=1, templates=["price_lookup"])
    assert sorted(os.listdir(os.path.join(again, "tasks"))) == ["price_lookup_00"]


def test_different_seeds_different_data(envs):
    (a, _), (b, _) = envs[SEEDS[0]], envs[SEEDS[1]]
    da, db_ = _load(a)[0], _load(b)[0]
    names_a = {r["name"] for r in da.query("SELECT name FROM products")}
    names_b = {r["name"] for r in db_.query("SELECT name FROM products")}
    assert names_a != names_b and len(names_a & names_b) <= 2
    ta, tb = _tree(a), _tree(b)
    assert ta["schema.sql"] != tb["schema.sql"]
    assert ta["tools.py"] == tb["tools.py"]
    prompts_a = {json.loads(v)["prompt"] for k, v in ta.items() if k.endswith("task.json")}
    prompts_b = {json.loads(v)["prompt"] for k, v in tb.items() if k.endswith("task.json")}
    assert prompts_a != prompts_b


def test_refuses_foreign_directory(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError):
        policy_envs.generate(1, str(tmp_path))
    assert (tmp_path / "mine.txt").read_text() == "keep me"


@pytest.mark.parametrize("seed", SEEDS)
def test_data_rules(envs, seed):
    db, _ = _load(envs[seed][0])
    cats = [r["category"] for r in db.query("SELECT DISTINCT category FROM products")]
    assert 5 <= len(cats) <= 6
    for c in cats:
        prices = [r["price"] for r in db.query("SELECT price FROM products WHERE category = ?", (c,))]
        assert 3 <= len(prices) <= 5 and len(set(prices)) == len(prices)
    for r in db.query("SELECT * FROM products"):
        assert 10 <= r["price"] <= 99 and 10 <= r["stock"] <= 60 and 2.0 <= r["rating"] <= 5.0
    assert len(db.query("SELECT * FROM suppliers")) == 5
    assert not db.query("SELECT p.name FROM products p LEFT JOIN suppliers s ON s.name = p.supplier"
                        " WHERE s.name IS NULL")


@pytest.mark.parametrize("seed", SEEDS)
def test_names_copy_as_whole_words(envs, seed):
    """Made-up words come from the lexicon, once per database; prompts quote what they name, so
    the quoted text is what a call or an answer must contain verbatim."""
    src = envs[seed][0]
    db, _ = _load(src)
    words = [r["name"].split(" ")[0] for r in db.query("SELECT name FROM products")]
    words += [r["name"].split(" ")[0] for r in db.query("SELECT name FROM suppliers")]
    words += [r["city"] for r in db.query("SELECT city FROM suppliers")]
    assert set(words) <= set(policy_envs.LEXICON) and len(set(words)) == len(words)
    for _, d in _tasks(src):
        with open(os.path.join(d, "task.json"), encoding="utf-8") as f:
            task = json.load(f)
        for key, value in task["knobs"].items():
            if key == "template":
                continue
            for text in (value if isinstance(value, list) else [value]):
                if isinstance(text, str):
                    assert '"%s"' % text in task["prompt"], (task["prompt"], text)


@pytest.mark.parametrize("seed", SEEDS)
def test_sources_in_process(envs, seed):
    """Every gold solution (run on plain Python tools) passes its verifier; its calls are the
    template's chain; wrong answers, wrong types, extra keys and non-objects fail."""
    src = envs[seed][0]
    db, tools_ns = _load(src)
    chains = {"price_lookup": ["get_product"], "stock_lookup": ["get_product"],
              "supplier_city": ["get_product", "get_supplier_by_name"],
              "supplier_phone": ["get_product", "get_supplier_by_name"],
              "cheapest_in_category": ["list_products"],
              "cheapest_in_stock_rated": ["list_products"],
              "category_stock_value": ["list_products", "list_products"]}
    seen = set()
    for task_id, d in _tasks(src):
        with open(os.path.join(d, "task.json"), encoding="utf-8") as f:
            task = json.load(f)
        template = task["knobs"]["template"]
        seen.add(template)
        assert task["difficulty"] == {t.name: t.tier for t in policy_envs.TEMPLATES}[template]
        tools = _Tools(tools_ns)
        answer = _module(os.path.join(d, "solution.py"))["solve"](tools)
        assert tools.calls == chains[template], task_id
        verify = _module(os.path.join(d, "verifier.py"))["verify"]
        ok = lambda a: verify(a, db)["passed"]  # noqa: E731
        assert ok(answer), task_id
        if isinstance(answer, str):
            _check_name_answer(task, answer, ok, db)
        else:
            _check_object_answer(task, answer, ok, db)
        if template == "cheapest_in_stock_rated":
            # The constraints matter: the category's unconstrained cheapest is not the answer.
            cheapest = db.query("SELECT name FROM products WHERE category = ? ORDER BY price LIMIT 1",
                                (task["knobs"]["category"],))[0]["name"]
            assert cheapest != answer, task_id
            assert not ok(cheapest), task_id
    assert seen == set(policy_envs.TEMPLATE_NAMES)


def test_unknown_names_raise(envs):
    db, tools = _load(envs[SEEDS[0]][0])
    for fn, arg in (("get_product", "Nope Lamp"), ("list_products", "nope"), ("get_supplier_by_name", "Nope Co")):
        with pytest.raises(ValueError):
            tools[fn](arg)
    product = db.query("SELECT name FROM products LIMIT 1")[0]["name"]
    for bad in ("city", "price; DROP TABLE products", "*"):
        with pytest.raises(ValueError, match="unknown field"):
            tools["get_product"](product, bad)


def test_a_field_asked_for_comes_alone(envs):
    """get_product/get_supplier_by_name with `select` answer {field: value}: the look-up tiers' gold
    calls, whose result text is then the answer's text."""
    db, tools = _load(envs[SEEDS[0]][0])
    row = db.query("SELECT * FROM products ORDER BY name LIMIT 1")[0]
    assert tools["get_product"](row["name"]) == row
    for field in ("price", "stock", "supplier", "rating"):
        assert tools["get_product"](row["name"], field) == {field: row[field]}
    supplier = db.query("SELECT * FROM suppliers WHERE name = ?", (row["supplier"],))[0]
    assert tools["get_supplier_by_name"](row["supplier"]) == supplier
    assert tools["get_supplier_by_name"](row["supplier"], "city") == {"city": supplier["city"]}


def test_eval_envs_reproducible():
    """The committed evaluation environments are exactly what the generator writes."""
    for name, seed in policy_envs.EVAL_ENVS:
        files = policy_envs.render(seed, policy_envs.EVAL_INSTANCES, None, name)
        on_disk = _tree(os.path.join(ROOT, "data", "envs", name))
        assert sorted(on_disk) == sorted(files), name
        for rel, text in files.items():
            assert on_disk[rel] == text.encode("utf-8"), (name, rel)
        tiers = [json.loads(t)["difficulty"] for rel, t in files.items() if rel.endswith("task.json")]
        assert min(tiers) == 1 and len(tiers) == 4 * len(policy_envs.TEMPLATES)


# ---------------------------------------------------------------------------------------------
# With the built envforge: pack, check, solve in sandbox sessions, judge wrong answers.


def test_pack_is_deterministic(packed, tmp_path):
    src, bundle = packed[SEEDS[0]]
    again = str(tmp_path / "again")
    policy_envs.generate(SEEDS[0], again, instances=INSTANCES)
    h1 = json.loads(_run("env", "pack", src, "-o", str(tmp_path / "a.envdb"), "--json").stdout)["hash"]
    h2 = json.loads(_run("env", "pack", again, "-o", str(tmp_path / "b.envdb"), "--json").stdout)["hash"]
    assert h1 == h2
    other = json.loads(_run("env", "pack", packed[SEEDS[1]][0], "-o", str(tmp_path / "c.envdb"),
                            "--json").stdout)["hash"]
    assert other != h1


@pytest.mark.parametrize("seed", SEEDS)
def test_env_check(packed, seed):
    report = json.loads(_run("env", "check", packed[seed][1], "--json").stdout)
    assert report["ok"], report
    tasks = [c for c in report["checks"] if c["check"].startswith("task ")]
    assert len(tasks) == INSTANCES * len(policy_envs.TEMPLATES)


@pytest.mark.parametrize("seed", SEEDS)
def test_solve_and_wrong_answers_in_sessions(packed, seed, tmp_path):
    src, bundle = packed[seed]
    db, tools_ns = _load(src)
    for task_id, d in _tasks(src):
        if task_id.endswith("_00"):  # env check solved every task already; the CLI path once per template
            verdict = json.loads(_run("session", "solve", bundle, "--task", task_id, "--json").stdout)
            assert verdict["passed"] and verdict["score"] == 1.0, (task_id, verdict)
        answer = _module(os.path.join(d, "solution.py"))["solve"](_Tools(tools_ns))
        # Several submissions in one session: each wrong answer is judged wrong, the gold one right.
        if isinstance(answer, str):  # a plain-text name
            others = _other_products(db, answer)
            texts = others[:2] + [answer.lower(), json.dumps({"product": answer}), answer]
        else:
            (key, want), = answer.items()
            texts = [json.dumps({key: w}) for w in _wrong_values(db, key, want)] + [json.dumps(answer)]
        calls = tmp_path / ("%s.jsonl" % task_id)
        calls.write_text("".join(json.dumps({"name": "submit_result", "arguments": {"answer_text": t}}) + "\n"
                                 for t in texts))
        lines = _run("session", "run", bundle, "--task", task_id, "--calls", str(calls), "--json").stdout
        results = [json.loads(line) for line in lines.strip().splitlines()]
        assert len(results) == len(texts), (task_id, lines)
        for text, result in zip(texts, results):
            assert result["outcome"] == "ok", (task_id, result)
            assert result["content"]["passed"] is (text == texts[-1]), (task_id, text, result)
