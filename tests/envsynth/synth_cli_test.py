"""`envforge synth` end to end through the CLI (issue 13): real generators, real sandbox sessions,
real audits, a scripted policy for the filter, SIGKILL and resume, contained generator faults and
the bad inputs.

Run by ctest (tests/envsynth/CMakeLists.txt) with ENVFORGE set to the built CLI; by hand:
ENVFORGE=build/bin/envforge /usr/bin/python3 -m pytest tests/envsynth/synth_cli_test.py
"""

import glob
import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time

import pytest

ENVFORGE = os.path.abspath(os.environ.get("ENVFORGE", "build/bin/envforge"))
SOURCE = os.environ.get("ENVFORGE_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
CATEGORIES = ["trip_planning", "logistics", "e_commerce", "calendar", "inventory", "course_planning"]


def run(*args, env=None, timeout=900, cwd=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([ENVFORGE, *args], capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd)


def synth(out, *extra, env=None):
    return run("synth", "--out", str(out), "--json", *extra, env=env)


def funnel_rows(funnel):
    return {(r["category"], r["level"]): r for r in funnel["funnel"]}


def bundle_json(path):
    shown = run("env", "show", path, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


@pytest.fixture(scope="module")
def every_category(tmp_path_factory):
    """One environment per category, two lineages, four levels, no filter."""
    out = tmp_path_factory.mktemp("all")
    done = synth(out, "--categories", ",".join(CATEGORIES), "--envs", "6", "--tasks-per-env", "2",
                 "--max-levels", "4", "--no-filter", "--seed", "3")
    assert done.returncode == 0, done.stderr[-4000:]
    return out, json.loads(done.stdout)


def test_every_category_synthesizes_audited_bundles_at_four_levels(every_category):
    out, funnel = every_category
    assert funnel["environments"]["done"] == 6, funnel["environments"]
    rows = funnel_rows(funnel)
    for category in CATEGORIES:
        for level in range(1, 5):
            row = rows[(category, level)]
            assert row["candidates"] == 2, (category, level, row)
            assert row["kept"] >= 1, (category, level, row, funnel["dropped"])
    bundles = sorted(glob.glob(os.path.join(out, "*.envdb")))
    assert len(bundles) == 6
    assert not glob.glob(os.path.join(out, ".synth-work*")), "the work directory is removed"
    assert rows[("all", 0)]["kept"] >= 24


def test_kept_bundles_carry_provenance_and_pass_env_check(every_category):
    out, _ = every_category
    bundles = sorted(glob.glob(os.path.join(out, "*.envdb")))
    augmented = 0
    for path in bundles:
        shown = bundle_json(path)
        provenance = shown["manifest"]["provenance"]
        assert provenance["generator"] == "envsynth procedural"
        assert provenance["category"] in CATEGORIES
        assert isinstance(provenance["seed"], int)
        assert provenance["tasks"], path
        for task_id, info in provenance["tasks"].items():
            assert info["audit"] == "sound"
            assert 1 <= info["level"] <= 4
            assert "knobs" in info
        augmented += len(provenance["augmentations"])
        # Every tool the solutions need is in the shipped toolset.
        assert set(t["name"] for t in shown["tools"]) >= set(provenance["toolset"])
    assert augmented >= 1, "some level needed a tool outside the base toolset"
    checked = run("env", "check", bundles[0])
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_kept_sources_stay_beside_the_bundles_and_pack_to_the_same_version(every_category, tmp_path):
    out, _ = every_category
    for path in sorted(glob.glob(os.path.join(out, "*.envdb"))):
        shown = bundle_json(path)
        name = shown["manifest"]["name"]
        source = shown["manifest"]["provenance"]["source_dir"]
        assert source == os.path.join(os.path.realpath(out), "sources", name), source
        assert os.path.isfile(os.path.join(source, "env.json")), source
        repacked = tmp_path / (name + ".envdb")
        packed = run("env", "pack", source, "-o", str(repacked))
        assert packed.returncode == 0, packed.stderr
        assert bundle_json(str(repacked))["hash"] == shown["hash"], name


def test_valid_answers_get_rarer_as_the_level_rises(every_category):
    _, funnel = every_category
    rows = funnel_rows(funnel)
    first = [rows[(c, 1)]["mean_acceptance_rate"] for c in CATEGORIES if rows[(c, 1)]["mean_acceptance_rate"] is not None]
    last = [rows[(c, 4)]["mean_acceptance_rate"] for c in CATEGORIES if rows[(c, 4)]["mean_acceptance_rate"] is not None]
    assert first and last
    assert sum(last) / len(last) < sum(first) / len(first), (first, last)


def test_report_reads_the_same_funnel_from_the_run_database(every_category):
    out, funnel = every_category
    report = run("synth", "report", os.path.join(out, "run.sqlite"), "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["funnel"] == funnel["funnel"]
    text = run("synth", "report", os.path.join(out, "run.sqlite"))
    assert text.returncode == 0
    assert "candidates" in text.stdout and "cost:" in text.stdout


def _submit(answer_text):
    return {"tool_calls": [{"name": "submit_result", "arguments": {"answer_text": answer_text}}]}


def test_the_filter_keeps_only_tasks_the_policy_solves_sometimes(tmp_path):
    args = ["--categories", "logistics", "--envs", "1", "--tasks-per-env", "2", "--max-levels", "3", "--seed", "5"]
    plain = synth(tmp_path / "plain", *args, "--no-filter")
    assert plain.returncode == 0, plain.stderr[-3000:]
    (bundle,) = glob.glob(str(tmp_path / "plain" / "*.envdb"))
    provenance = bundle_json(bundle)["manifest"]["provenance"]["tasks"]
    by_place = {(info["lineage"], info["level"]): task_id for task_id, info in provenance.items()}
    assert {(0, 1), (1, 1), (0, 2), (1, 2)} <= set(by_place), by_place
    tasks = {task["id"]: task["prompt"] for task in bundle_json(bundle)["tasks"]}
    # The gold answers, as validation recorded them in the run database.
    with sqlite3.connect(str(tmp_path / "plain" / "run.sqlite")) as db:
        gold = {task_id: json.loads(validation)["answer"]
                for task_id, validation in db.execute("SELECT task_id, validation FROM candidates")}
    # Scripted answers per task prompt, served in turn: gold and wrong alternate (in band), gold
    # alone (too easy), wrong alone (too hard); tasks without a line get the default script's "{}".
    lines = ['{"content": "I give up.", "tool_calls": [{"name": "submit_result", "arguments": {"answer_text": "{}"}}]}']
    plan = {(0, 1): ["gold", "wrong"], (1, 1): ["gold"], (0, 2): ["wrong"], (1, 2): ["wrong", "gold"]}
    for place, answers in plan.items():
        task_id = by_place[place]
        answer_text = gold[task_id]
        assert answer_text
        for which in answers:
            line = _submit(answer_text if which == "gold" else "{}")
            line["when"] = tasks[task_id]
            lines.append(json.dumps(line))
    policy = tmp_path / "policy.jsonl"
    policy.write_text("\n".join(lines) + "\n")
    filtered = synth(tmp_path / "filtered", *args, "--policy", "scripted:%s" % policy, "--k", "4", "--early-stop", "0")
    assert filtered.returncode == 0, filtered.stderr[-3000:]
    funnel = json.loads(filtered.stdout)
    reasons = {d["candidate"]: d for d in funnel["dropped"]}
    assert reasons["logistics/0/1/1"]["reason"].startswith("too_easy: 4/4")
    assert reasons["logistics/0/0/2"]["reason"].startswith("too_hard: 0/4")
    assert "logistics/0/0/3" not in reasons, "a too-hard lineage is not escalated further"
    assert reasons["logistics/0/1/3"]["reason"].startswith("too_hard"), "no scripted answer: the default line fails"
    (kept_bundle,) = glob.glob(str(tmp_path / "filtered" / "*.envdb"))
    kept = bundle_json(kept_bundle)["manifest"]["provenance"]
    assert sorted((i["lineage"], i["level"]) for i in kept["tasks"].values()) == [(0, 1), (1, 2)]
    for info in kept["tasks"].values():
        assert info["filter"]["decision"] == "in_band"
        assert info["filter"]["passed"] == 2 and info["filter"]["scored"] == 4
    assert kept["policy"].startswith("scripted:") and kept["k"] == 4
    assert kept["policy_weights_sha256"] is None and kept["policy_attention"] is None, "no weights behind a script"
    assert funnel["cost"]["model_calls"] > 0


def _rows_without_cost(funnel):
    return [{k: v for k, v in row.items()} for row in funnel["funnel"]]


def test_a_run_killed_with_sigkill_resumes_to_the_same_bundles(tmp_path):
    args = ["--categories", "inventory,calendar", "--envs", "2", "--tasks-per-env", "1", "--max-levels", "3",
            "--no-filter", "--seed", "9"]
    out = tmp_path / "killed"
    proc = subprocess.Popen([ENVFORGE, "synth", "--out", str(out), *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    run_db = out / "run.sqlite"
    deadline = time.time() + 300
    audited = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
        if run_db.exists():
            try:
                with sqlite3.connect(str(run_db), timeout=1) as db:
                    audited = db.execute("SELECT count(*) FROM candidates WHERE stage IN ('audited','in_band','kept')").fetchone()[0]
            except sqlite3.Error:
                continue
            if audited >= 2:
                break
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = run("synth", "resume", str(run_db), "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = json.loads(resumed.stdout)
    whole = synth(tmp_path / "whole", *args)
    assert whole.returncode == 0, whole.stderr[-3000:]
    reference = json.loads(whole.stdout)
    assert _rows_without_cost(after) == _rows_without_cost(reference)
    killed_bundles = sorted(os.path.basename(p) for p in glob.glob(str(out / "*.envdb")))
    whole_bundles = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "whole" / "*.envdb")))
    assert killed_bundles == whole_bundles and killed_bundles
    for name in killed_bundles:
        assert bundle_json(str(out / name))["hash"] == bundle_json(str(tmp_path / "whole" / name))["hash"]
    with sqlite3.connect(str(run_db)) as db:
        keys = [r[0] for r in db.execute("SELECT key FROM candidates")]
        resumes = db.execute("SELECT count(*) FROM events WHERE kind = 'resume'").fetchone()[0]
    assert len(keys) == len(set(keys))
    assert resumes == 1
    assert not glob.glob(str(out / ".synth-work*")), "the killed run's work directory is swept"
    assert not glob.glob(str(out / "*.tmp.*"))


def test_hanging_verifiers_and_crashing_generators_are_contained(tmp_path):
    generators = tmp_path / "generators"
    shutil.copytree(os.path.join(SOURCE, "envsynth", "procedural"), generators)
    shutil.copy(os.path.join(SOURCE, "scripts", "policy_envs.py"), generators)  # cat_shop's generator
    with open(generators / "cat_calendar.py", "a") as f:
        f.write('''

_original_task = task


def task(seed, lineage, level, attempt):
    t = _original_task(seed, lineage, level, attempt)
    if lineage == 0:
        t["verifier"] = "def verify(answer, db):\\n    while True:\\n        pass\\n"
    if lineage == 2:
        raise RuntimeError("generator bug for lineage 2")
    return t
''')
    done = synth(tmp_path / "out", "--categories", "calendar", "--envs", "1", "--tasks-per-env", "3",
                 "--max-levels", "1", "--no-filter", "--repairs", "1",
                 env={"ENVFORGE_SYNTH_PROCEDURAL": str(generators)})
    assert done.returncode == 0, done.stderr[-3000:]
    funnel = json.loads(done.stdout)
    reasons = {d["candidate"]: d for d in funnel["dropped"]}
    assert reasons["calendar/0/0/1"]["stage"] == "validation"
    assert reasons["calendar/0/0/1"]["reason"].startswith("verifier:"), reasons["calendar/0/0/1"]
    assert "wall" in reasons["calendar/0/0/1"]["reason"]
    assert reasons["calendar/0/2/1"]["stage"] == "proposal"
    assert "generator bug for lineage 2" in reasons["calendar/0/2/1"]["reason"]
    assert funnel_rows(funnel)[("calendar", 1)]["kept"] == 1
    assert funnel_rows(funnel)[("calendar", 1)]["repairs"] >= 1


@pytest.mark.parametrize("extra,message", [
    (["--categories", "nope", "--no-filter"], "unknown category 'nope'"),
    (["--categories", "calendar", "--policy", "scripted:p.jsonl", "--band", "1,0"], "0 <= lo < hi <= 1"),
    (["--categories", "calendar", "--policy", "scripted:p.jsonl", "--band", "x"], "--band takes LO,HI"),
    (["--categories", "calendar", "--policy", "embedded:/no/such/model"], "policy embedded:/no/such/model"),
    (["--categories", "calendar"], "no policy for the filter"),
    (["--categories", "calendar", "--no-filter", "--shard", "3/2"], "--shard"),
    (["--categories", "calendar", "--no-filter", "--proposer", "llm"], "--proposer llm needs --backend SPEC"),
    (["--categories", "calendar", "--no-filter", "--proposer", "magic"], "unknown --proposer 'magic'"),
    (["--categories", "calendar", "--no-filter", "--tool-choice", "often"],
     "--tool-choice must be auto or required, got 'often'"),
    (["--categories", "calendar", "--policy", "scripted:p.jsonl", "--dense"],
     "--dense applies to an embedded policy only, got 'scripted:p.jsonl'"),
    (["--categories", "calendar", "--policy", "scripted:p.jsonl", "--max-tokens", "100", "--max-tokens-per-turn", "200"],
     "--max-tokens-per-turn must be 1..100 (--max-tokens), got 200"),
    (["--categories", "Bad-Id", "--no-filter", "--proposer", "llm", "--backend", "scripted:/dev/null"],
     "--backend scripted:/dev/null"),
])
def test_bad_input_is_named_with_exit_2(tmp_path, extra, message):
    # From a directory without data/models/policy-small: no default policy there.
    done = run("synth", "--out", str(tmp_path / "o"), "--envs", "1", "--tasks-per-env", "1", *extra, cwd=str(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr


def test_unwritable_out_existing_run_and_foreign_run_files_are_refused(tmp_path):
    done = run("synth", "--out", "/proc/envforge-synth", "--envs", "1", "--tasks-per-env", "1", "--categories",
               "calendar", "--no-filter")
    assert done.returncode == 2 and "--out /proc/envforge-synth" in done.stderr
    existing = tmp_path / "run.sqlite"
    existing.write_text("")
    done = run("synth", "--out", str(tmp_path / "o"), "--run", str(existing), "--envs", "1", "--tasks-per-env", "1",
               "--categories", "calendar", "--no-filter")
    assert done.returncode == 2 and "exists" in done.stderr
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(str(old)) as db:
        db.execute("CREATE TABLE run_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO run_meta VALUES ('format_version', '99'), ('config', '{}')")
    done = run("synth", "resume", str(old))
    assert done.returncode == 2 and "format version '99'" in done.stderr
    assert run("synth", "--help").returncode == 0
    categories = run("synth", "categories", "--json")
    assert categories.returncode == 0
    assert [c["id"] for c in json.loads(categories.stdout)] == CATEGORIES + ["shop"]


def test_shards_merge_into_the_run_a_single_machine_makes(tmp_path):
    args = ["--categories", "logistics,inventory", "--envs", "4", "--tasks-per-env", "1", "--max-levels", "2",
            "--no-filter", "--seed", "11"]
    shards = []
    for i in range(2):
        done = synth(tmp_path / "envs", *args, "--shard", "%d/2" % i, "--run", str(tmp_path / ("shard-%d.sqlite" % i)))
        assert done.returncode == 0, done.stderr[-3000:]
        shards.append(str(tmp_path / ("shard-%d.sqlite" % i)))
    merged = run("synth", "merge", *shards, "--out", str(tmp_path / "run.sqlite"), "--json")
    assert merged.returncode == 0, merged.stderr
    whole = synth(tmp_path / "whole", *args)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert _rows_without_cost(json.loads(merged.stdout)) == _rows_without_cost(json.loads(whole.stdout))
    names = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "envs" / "*.envdb")))
    assert names == sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "whole" / "*.envdb")))
    again = run("synth", "merge", *shards, "--out", str(tmp_path / "run.sqlite"))
    assert again.returncode == 2, "an existing --out is never overwritten"


def test_the_shop_category_gives_the_policy_the_tools_and_prompts_it_was_trained_on(tmp_path):
    done = synth(tmp_path / "shop", "--categories", "shop", "--envs", "1", "--tasks-per-env", "2", "--max-levels", "5",
                 "--no-filter", "--seed", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    funnel = json.loads(done.stdout)
    assert [r["level"] for r in funnel["funnel"] if r["category"] == "shop"] == [1, 2, 3, 4, 5]
    (bundle,) = glob.glob(str(tmp_path / "shop" / "*.envdb"))
    packed = tmp_path / "shop_eval_a.envdb"
    assert run("env", "pack", os.path.join(SOURCE, "data", "envs", "shop_eval_a"), "-o", str(packed)).returncode == 0
    assert bundle_json(bundle)["tools"] == bundle_json(str(packed))["tools"]
    eval_prompts = {_template_of(t["prompt"]) for t in bundle_json(str(packed))["tasks"]}
    for task in bundle_json(bundle)["tasks"]:
        assert _template_of(task["prompt"]) in eval_prompts, task["prompt"]


def _template_of(prompt):
    """The prompt with its quoted names and its numbers masked: the wording a template gives."""
    return re.sub(r'"[^"]*"|\d+(\.\d+)?', "#", prompt)


def test_the_shipped_policy_is_the_default_filter_from_the_source_tree(tmp_path):
    if not os.path.isfile(os.path.join(SOURCE, "data", "models", "policy-small", "model.safetensors")):
        pytest.skip("data/models/policy-small is not in this checkout")
    done = run("synth", "--categories", "shop", "--envs", "1", "--tasks-per-env", "1", "--max-levels", "4",
               "--k", "4", "--max-turns", "8", "--seed", "4", "--strict-tools", "--dense", "--max-tokens-per-turn", "256",
               "--out", str(tmp_path / "o"), "--json", cwd=SOURCE)
    assert done.returncode == 0, done.stderr[-3000:]
    funnel = json.loads(done.stdout)
    assert funnel["config"]["policy"] == "embedded:" + os.path.join(SOURCE, "data", "models", "policy-small")
    assert funnel["config"]["strict_tools"] is True
    assert funnel["config"]["dense_policy"] is True
    assert funnel["config"]["max_tokens_per_turn"] == 256 and funnel["config"]["max_tokens"] == 4096
    rows = [r for r in funnel["funnel"] if r["category"] == "shop"]
    assert [r["level"] for r in rows] == [1, 2, 3, 4] and all(r["filtered"] == 1 for r in rows)
    assert funnel["cost"]["model_calls"] >= 16
    # A kept bundle names the weights that filtered it: the checkpoint's content hash (the formula of
    # inference/safetensors.h, Checkpoint::ContentSha256) and the attention they played with.
    (bundle,) = glob.glob(str(tmp_path / "o" / "*.envdb"))
    provenance = bundle_json(bundle)["manifest"]["provenance"]
    weights = os.path.join(SOURCE, "data", "models", "policy-small", "model.safetensors")
    digest = hashlib.sha256()
    digest.update(len(b"model.safetensors").to_bytes(8, "little") + b"model.safetensors")
    with open(weights, "rb") as f:
        digest.update(f.read())
    assert provenance["policy_weights_sha256"] == digest.hexdigest()
    assert provenance["policy_attention"] == "dense"
