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


def test_rollout_records_routing_and_kept_sets_that_the_token_segments_expose(lab_dir, tmp_path):
    import sqlite3
    import struct
    model = tmp_path / "tiny"
    subprocess.run(["/usr/bin/python3", str(SOURCE_DIR / "scripts" / "make_tiny_model.py"), "--out", str(model),
                    "--preset", "tiny", "--dtype", "fp32"], check=True, capture_output=True)
    config = json.loads((model / "config.json").read_text())
    width = (config["num_hidden_layers"] - config["first_k_dense_replace"]) * config["num_experts_per_tok"]
    store = tmp_path / "rollouts.sqlite"
    common = dict(backend="embedded:" + str(model), max_turns=2, max_tokens_per_turn=6, top_k=4, seed=2,
                  trajectories=str(store))
    on = envforge.rollout(str(lab_dir), "rollout_lab", "vault_code", record_routing=True, record_kept_sets=True,
                          **common)
    off = envforge.rollout(str(lab_dir), "rollout_lab", "vault_code", **common)

    def show(episode_id):
        shown = subprocess.run([str(ENVFORGE), "traj", "show", str(store), episode_id, "--json"], check=True,
                               capture_output=True, text=True)
        return json.loads(shown.stdout)

    episode_id = on["episodes"][0]["id"]
    episode = show(episode_id)
    assert episode["sampling"]["record_routing"] is True
    segment = episode["tokens"][0]
    ids = segment["ids"]
    # Every position but the last (never fed to the model) carries its routed experts.
    assert len(segment["routing"]) == len(ids)
    assert segment["routing"][-1] is None
    assert all(len(experts) == width and all(0 <= e < config["n_routed_experts"] for e in experts)
               for experts in segment["routing"][:-1])
    # Each generated token's kept set: its top_k=4 ids, the token among them; nothing at prompt positions.
    for mask, token, kept in zip(segment["mask"], ids, segment["kept"]):
        if mask:
            assert len(kept) == 4 and token in kept
        else:
            assert kept is None
    first = episode["model_turns"][0]
    assert first["routing_start"] == 0 and first["routing_width"] == width
    # The store's rows themselves: int16 little-endian BLOBs, the view's first positions.
    with sqlite3.connect(str(store)) as db:
        rows = db.execute("SELECT routing_start, routing_width, routing, kept_vocab FROM model_turns "
                          "WHERE episode_id = ? ORDER BY turn", (episode_id,)).fetchall()
        off_rows = db.execute("SELECT routing_start, routing_width, routing, kept_vocab, kept_ids FROM model_turns "
                              "WHERE episode_id = ?", (off["episodes"][0]["id"],)).fetchall()
    start, stored_width, blob, vocab = rows[0]
    assert (start, stored_width, vocab) == (0, width, config["vocab_size"])
    experts = struct.unpack("<%dh" % (len(blob) // 2), blob)
    assert [list(experts[p * width:(p + 1) * width]) for p in range(2)] == segment["routing"][:2]
    # Switches off: NULL columns, and the view leaves both keys out.
    assert off_rows and all(value is None for row in off_rows for value in row)
    plain = show(off["episodes"][0]["id"])["tokens"][0]
    assert "routing" not in plain and "kept" not in plain
