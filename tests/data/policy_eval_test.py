"""Tests of scripts/policy_eval.py, the per-tier measurement of a policy model with `envforge rollout`.

Run by ctest (tests/data/CMakeLists.txt) with ENVFORGE set to the built CLI; by hand:
ENVFORGE=build/bin/envforge /usr/bin/python3 -m pytest tests/data/policy_eval_test.py
"""

import itertools
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import policy_eval  # noqa: E402


def _pass_at_k_by_enumeration(n, c, k):
    """The fraction of k-subsets of n episodes (c of them passed) holding at least one pass."""
    episodes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(episodes[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n,c,k", [(1, 0, 1), (1, 1, 1), (5, 2, 1), (5, 2, 3), (8, 1, 4), (10, 3, 10), (12, 0, 5)])
def test_pass_at_k_is_the_unbiased_estimator(n, c, k):
    assert policy_eval.pass_at_k(n, c, k) == pytest.approx(_pass_at_k_by_enumeration(n, c, k))


def test_pass_at_k_beyond_n_is_absent():
    assert policy_eval.pass_at_k(5, 2, 10) is None
    assert policy_eval.pass_at_k(0, 0, 1) is None


def test_pass_at_10_is_computed_even_where_the_rollout_reports_powers_of_two():
    result = {"env": "e", "task": "t", "scored": 16, "passed": 4, "mean_turns": 2.0, "outcomes": {},
              "pass_at_k": {"1": 0.25, "2": 0.45, "4": 0.73, "8": 0.96, "16": 1.0},
              "episodes": [{"turns": 2, "invalid_calls": 0}] * 16}
    entry, = policy_eval.per_task_entries([result], {"t": (1, "price_lookup", False, "")}, 16)
    assert entry["pass_at_k"]["10"] == pytest.approx(_pass_at_k_by_enumeration(16, 4, 10))
    assert entry["pass_at_k"]["1"] == pytest.approx(0.25)


def test_synth_environments_get_a_row_per_category_and_level_after_the_shop_tiers():
    def entry(tier, category, passed):
        return {"tier": tier, "template": "t", "held_out": False, "category": category, "mean_turns": 2.0,
                "turns": 2, "invalid_calls": 0, "pass_at_k": {"1": passed, "10": passed, "16": passed}}
    entries = [entry(2, "logistics", 0.1), entry(1, "", 0.9), entry(1, "logistics", 0.5), entry(1, "calendar", 0.0),
               entry(1, "logistics", 0.3)]
    rows = policy_eval.summarize(entries, 16)
    assert [r["row"] for r in rows] == ["tier 1", "calendar level 1", "logistics level 1", "logistics level 2"]
    assert rows[2]["tasks"] == 2 and rows[2]["pass@1"] == pytest.approx(0.4)


@pytest.mark.parametrize("n,columns", [(1, ["pass@1"]), (10, ["pass@1", "pass@10"]),
                                       (100, ["pass@1", "pass@10", "pass@100"])])
def test_the_table_has_each_pass_column_once(n, columns):
    row = {"row": "tier 1", "tasks": 2, "pass@1": 0.5, "pass@10": 0.9, "pass@n": 1.0, "mean_turns": 2.0,
           "well_formed_turns": 1.0}
    header = policy_eval.markdown({"dsa": [row]}, n).splitlines()[0]
    assert [c.strip() for c in header.strip("|").split("|")][2:-2] == ["dsa " + c for c in columns]


def test_a_model_measured_end_to_end_by_tier(tmp_path):
    """A tiny random model on one evaluation shop: every tier and the held-out template get a row,
    every task its n episodes, and --json and --readme are written. --strict-tools reaches
    `envforge rollout` and is recorded."""
    envforge = os.environ.get("ENVFORGE") or os.path.join(ROOT, "build", "bin", "envforge")
    if not os.access(envforge, os.X_OK):
        pytest.skip("no built envforge (set ENVFORGE)")
    build = os.path.dirname(os.path.dirname(os.path.abspath(envforge)))
    model = tmp_path / "tiny"
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_tiny_model.py"), "--out", str(model),
                    "--preset", "tiny", "--dtype", "fp32"], check=True, stdout=subprocess.DEVNULL)
    readme = tmp_path / "README.md"
    readme.write_text("# a model\n")
    report = tmp_path / "eval.json"
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "policy_eval.py"), "--model", str(model),
                           "--envs", "data/envs/shop_eval_a", "-n", "2", "--modes", "dsa", "--max-turns", "2",
                           "--max-tokens-per-turn", "16", "--top-p", "0.95", "--strict-tools", "--json", str(report),
                           "--readme", str(readme), "--build", build],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(report.read_text())
    assert figures["top_p"] == 0.95 and "--top-p 0.95" in done.stderr
    assert figures["strict_tools"] is True and " --strict-tools" in done.stderr
    rows = [r["row"] for r in figures["modes"]["dsa"]["rows"]]
    assert rows == ["tier 1", "tier 2", "tier 3", "tier 4", "tier 5", "held-out supplier_phone"]
    tasks = figures["modes"]["dsa"]["tasks"]
    assert len(tasks) == 28 and all(t["scored"] == 2 for t in tasks)
    assert "| tier 1 | 8 |" in done.stdout
    text = readme.read_text()
    assert text.startswith("# a model\n") and policy_eval.BEGIN in text and "| tier 5 | 4 |" in text
    assert "--top-p 0.95 --strict-tools` (temperature 1; modes dsa)" in text
    assert "dsa: " in text and "model turns well-formed" in text


def test_a_top_p_outside_the_unit_interval_is_refused():
    for bad in ("0", "1.5"):
        done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "policy_eval.py"), "--model", "m",
                               "--top-p", bad], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "--top-p must be in (0, 1]" in done.stderr


def _report(mode, **settings):
    report = {"model": "m", "n": 4, "seed": 1, "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto",
              "strict_tools": False}
    report.update(settings)

    def task(tier, held_out, category, turns, invalid):
        return {"tier": tier, "template": "t", "held_out": held_out, "category": category, "turns": turns,
                "invalid_calls": invalid, "mean_turns": 2.0, "pass_at_k": {"1": 0.5, "4": 1.0}}
    tasks = [task(1, False, "", 10, 1), task(2, False, "", 10, 0), task(5, True, "", 20, 10),
             task(1, False, "logistics", 10, 10)]
    report["modes"] = {mode: {"seconds": 1.0, "rows": policy_eval.summarize(tasks, 4), "tasks": tasks}}
    return report


def test_reports_of_two_commands_join_into_one_table(tmp_path):
    dsa, dense = tmp_path / "dsa.json", tmp_path / "dense.json"
    dsa.write_text(json.dumps(_report("dsa")))
    dense.write_text(json.dumps(_report("dense")))
    readme = tmp_path / "README.md"
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "policy_eval.py"), "--from-json",
                           "%s,%s" % (dsa, dense), "--readme", str(readme)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0]
    assert "dsa pass@1" in header and "dense pass@1" in header
    # 21 of 50 turns invalid over all rows
    assert "dsa: 58.0% of all 50 model turns well-formed." in done.stdout
    assert "dense: 58.0% of all 50" in done.stdout
    assert "(temperature 1; modes dsa, dense)" in readme.read_text()


@pytest.mark.parametrize("second,message", [(_report("dense", seed=2), "seed is 2, the first report's is 1"),
                                            (_report("dsa"), "mode dsa is in an earlier report too")])
def test_reports_that_disagree_are_not_joined(tmp_path, second, message):
    first, other = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(_report("dsa")))
    other.write_text(json.dumps(second))
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "policy_eval.py"), "--from-json",
                           "%s,%s" % (first, other)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr


def test_without_a_model_or_reports_it_says_so():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "policy_eval.py")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--model is required (or --from-json)" in done.stderr
