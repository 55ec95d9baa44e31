"""envforge.rollout: the rollout loop in process, with the scripted backend and the tiny model."""
import json
import subprocess

import pytest

import envforge
from conftest import ENVFORGE, SOURCE_DIR, write_script

LOOKUP = {"tool_calls": [{"name": "lookup", "arguments": {"name": "alpha"}}]}
SUBMIT = {"tool_calls": [{"name": "submit_result", "arguments": {"answer_text": "{\"code\": 4211}"}}]}
WRONG = {"tool_calls": [{"name": "submit_result", "arguments": {"answer_text": "{\"code\": 7}"}}]}


def test_rollout_returns_pass_at_k_and_episode_ids(lab_dir, tmp_path):
    script = write_script(tmp_path / "script.jsonl", [[LOOKUP, SUBMIT], [LOOKUP, WRONG]])
    store = tmp_path / "rollouts.sqlite"
    figures = envforge.rollout(str(lab_dir), "rollout_lab", "vault_code", backend="scripted:" + script, n=4,
                               trajectories=str(store))
    assert figures["task"] == "vault_code"
    assert figures["n"] == 4 and figures["scored"] == 4 and figures["passed"] == 2
    assert figures["pass_at_k"]["1"] == pytest.approx(0.5)
    assert figures["pass_at_k"]["2"] == pytest.approx(1 - 1 / 6)
    assert figures["outcomes"] == {"submitted": 4}
    ids = [episode["id"] for episode in figures["episodes"]]
    assert len(set(ids)) == 4 and all(i.startswith("t-") for i in ids)
    shown = subprocess.run([str(ENVFORGE), "traj", "show", str(store), ids[0], "--json"], check=True,
                           capture_output=True, text=True)
    episode = json.loads(shown.stdout)
    assert episode["kind"] == "rollout" and episode["rollout_id"] == figures["rollout_id"]
    assert [m["role"] for m in episode["messages"]][:2] == ["system", "user"]


def test_rollout_every_task_with_the_tiny_model(lab_dir, tmp_path):
    model = tmp_path / "tiny"
    subprocess.run(["/usr/bin/python3", str(SOURCE_DIR / "scripts" / "make_tiny_model.py"), "--out", str(model),
                    "--preset", "tiny", "--dtype", "fp32"], check=True, capture_output=True)
    results = envforge.rollout(str(lab_dir), "rollout_lab", backend="embedded:" + str(model), n=3, max_turns=2,
                               max_tokens_per_turn=8, seed=4)
    assert isinstance(results, list) and len(results) == 1
    assert results[0]["n"] == 3 and results[0]["scored"] == 3
    assert all(e["turns"] >= 1 and e["generated_tokens"] > 0 for e in results[0]["episodes"])


def test_rollout_bad_input_raises_value_error_naming_it(lab_dir, tmp_path):
    script = write_script(tmp_path / "s.jsonl", [[SUBMIT]])
    with pytest.raises(ValueError, match="unknown backend scheme 'grpc'"):
        envforge.rollout(str(lab_dir), "rollout_lab", "vault_code", backend="grpc:x")
    with pytest.raises(ValueError, match="no environment 'nowhere'"):
        envforge.rollout(str(lab_dir), "nowhere", "vault_code", backend="scripted:" + script)
    with pytest.raises(ValueError, match="no task 'missing'"):
        envforge.rollout(str(lab_dir), "rollout_lab", "missing", backend="scripted:" + script)
    with pytest.raises(ValueError, match="-n must be at least 1"):
        envforge.rollout(str(lab_dir), "rollout_lab", "vault_code", backend="scripted:" + script, n=0)
