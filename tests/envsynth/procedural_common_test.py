"""envsynth/procedural/synth_common.py: the helpers every procedural generator shares.

pick_thresholds draws a task's thresholds from the data itself; these cases pin what it returns
at the edges, where a generator used to crash (trip_planning seed 106: every attraction of a city
free, so "ticket_price < t" with t from the data admitted none).
"""
import os
import random
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROCEDURAL = os.path.join(ROOT, "envsynth", "procedural")
sys.path.insert(0, PROCEDURAL)

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
