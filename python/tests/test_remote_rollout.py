"""envforge.rollout(url=...): the model runs here, the sessions on a running `envforge serve`.

The shipped policy (data/models/policy-small) plays a held-out shop task (data/envs/shop_eval_a)
on a real server over HTTP; its episodes, token segments and verdicts are recorded here and match
a local rollout with the same seed. Errors name what is wrong; a session the server loses
mid-episode (expired, the server killed) ends that episode infra_error.
"""
import threading
import time

import pytest

import envforge
from conftest import SOURCE_DIR, start_server, stop_server, write_script

POLICY = str(SOURCE_DIR / "data" / "models" / "policy-small")
TASK = "price_lookup_00"
COMMON = dict(backend="embedded:" + POLICY, n=3, seed=2, max_turns=3, max_tokens_per_turn=96)

LOOKUP = {"tool_calls": [{"name": "lookup", "arguments": {"name": "alpha"}}]}
SUBMIT = {"tool_calls": [{"name": "submit_result", "arguments": {"answer_text": "{\"code\": 4211}"}}]}


@pytest.fixture(scope="module")
def shop_server(shop_dir, tmp_path_factory):
    url, trajectories, process = start_server(shop_dir, tmp_path_factory.mktemp("shop-server"))
    yield url, trajectories, process
    stop_server(process)


def test_policy_episodes_on_a_server_are_recorded_here_with_the_servers_versions(shop_server, shop_dir, tmp_path):
    url, _, _ = shop_server
    store = str(tmp_path / "remote.sqlite")
    figures = envforge.rollout("", "shop_eval_a", TASK, url=url, token="sesame", trajectories=store,
                               record_kept_sets=True, record_routing=True, top_k=8, **COMMON)
    assert figures["task"] == TASK and figures["env"] == "shop_eval_a"
    assert figures["n"] == 3 and figures["scored"] == 3
    described = envforge.Client(url, token="sesame").env("shop_eval_a")
    assert figures["env_id"] == described["id"]
    task = next(t for t in described["tasks"] if t["id"] == TASK)

    ids = [e["id"] for e in figures["episodes"]]
    episodes = envforge.read_episodes(store, ids)
    for episode, summary in zip(episodes, figures["episodes"]):
        assert episode["outcome"] == summary["outcome"] and episode["task_id"] == TASK
        assert episode["kind"] == "rollout" and episode["rollout_id"] == figures["rollout_id"]
        # The versions the server reports (envs/get), not guesses made here.
        assert (episode["env_id"], episode["task_version"], episode["verifier_version"]) == \
            (described["id"], task["task_version"], task["version"])
        assert episode["steps"], "every episode called at least one tool on the server"
        segment = episode["tokens"][0]
        assert segment["consistent"] and len(segment["ids"]) == len(segment["mask"]) == len(segment["logprobs"])
        generated = [t for turn in episode["model_turns"] for t in turn["output_tokens"]]
        assert [i for i, m in zip(segment["ids"], segment["mask"]) if m == 1] == generated
        assert len(segment["routing"]) == len(segment["ids"]) and len(segment["kept"]) == len(segment["ids"])
        if summary["outcome"] == "submitted":
            assert episode["verdict"]["passed"] == summary["passed"]
            assert episode["verdict"]["verifier_version"] == task["version"]

    # The same seed in process: the same episodes, token for token.
    local_store = str(tmp_path / "local.sqlite")
    local = envforge.rollout(str(shop_dir), "shop_eval_a", TASK, trajectories=local_store, record_kept_sets=True,
                             record_routing=True, top_k=8, **COMMON)
    for remote_episode, local_episode in zip(figures["episodes"], local["episodes"]):
        for key in ("outcome", "passed", "score", "turns", "tool_calls", "generated_tokens"):
            assert remote_episode[key] == local_episode[key], key
    local_episodes = envforge.read_episodes(local_store, [e["id"] for e in local["episodes"]])
    for remote_episode, local_episode in zip(episodes, local_episodes):
        assert remote_episode["tokens"][0]["ids"] == local_episode["tokens"][0]["ids"]
        assert remote_episode["verdict"] == local_episode["verdict"]
        assert [(s["tool"], s["arguments"], s["result"]["outcome"], s["result"].get("content"))
                for s in remote_episode["steps"]] == \
            [(s["tool"], s["arguments"], s["result"]["outcome"], s["result"].get("content"))
             for s in local_episode["steps"]]


def test_every_task_over_websocket(shop_server):
    url, _, _ = shop_server
    results = envforge.rollout("", "shop_eval_a", url=url.replace("http://", "ws://") + "/ws",
                               token="sesame", backend="embedded:" + POLICY, n=1, max_turns=2,
                               max_tokens_per_turn=64, seed=1)
    assert isinstance(results, list) and len(results) == len(envforge.Client(url, token="sesame").tasks("shop_eval_a"))
    assert all(r["n"] == 1 and r["episodes"][0]["outcome"] != "infra_error" for r in results)


def test_errors_name_what_is_wrong(shop_server):
    url, _, _ = shop_server
    with pytest.raises(RuntimeError, match="127.0.0.1:1"):
        envforge.rollout("", "shop_eval_a", TASK, url="http://127.0.0.1:1", **COMMON)
    with pytest.raises(ValueError, match="unknown environment 'nowhere'"):
        envforge.rollout("", "nowhere", TASK, url=url, token="sesame", **COMMON)
    with pytest.raises(ValueError, match="no task 'missing'"):
        envforge.rollout("", "shop_eval_a", "missing", url=url, token="sesame", **COMMON)
    with pytest.raises(ValueError, match="unauthorized"):
        envforge.rollout("", "shop_eval_a", TASK, url=url, token="wrong", **COMMON)


def test_a_session_the_server_expires_ends_its_episode_infra_error(lab_dir, tmp_path):
    """The server closes a session idle past its TTL (1 s) while the model takes 2.5 s."""
    url, _, process = start_server(lab_dir, tmp_path, session_ttl=1)
    try:
        slow = dict(LOOKUP, sleep_ms=2500)
        script = write_script(tmp_path / "slow.jsonl", [[LOOKUP, slow, SUBMIT]])
        figures = envforge.rollout("", "rollout_lab", "vault_code", url=url, token="sesame",
                                   backend="scripted:" + script, trajectories=str(tmp_path / "t.sqlite"))
    finally:
        stop_server(process)
    episode = figures["episodes"][0]
    assert episode["outcome"] == "infra_error" and "unknown session" in episode["detail"]
    assert episode["tool_calls"] == 2 and figures["scored"] == 0
    recorded = envforge.read_episodes(str(tmp_path / "t.sqlite"), [episode["id"]])[0]
    assert [s["result"]["outcome"] for s in recorded["steps"]] == ["ok", "infra_error"]


def test_a_server_killed_mid_run_ends_the_episodes_infra_error_and_the_call_returns(lab_dir, tmp_path):
    url, _, process = start_server(lab_dir, tmp_path)
    slow = dict(LOOKUP, sleep_ms=1500)
    script = write_script(tmp_path / "slow.jsonl", [[LOOKUP, slow, SUBMIT]])
    killer = threading.Timer(0.5, process.kill)  # while the first episode's model "thinks"
    killer.start()
    started = time.monotonic()
    try:
        figures = envforge.rollout("", "rollout_lab", "vault_code", url=url, token="sesame",
                                   backend="scripted:" + script, n=3, concurrency=1)
    finally:
        killer.cancel()
        process.kill()
        process.wait()
    assert time.monotonic() - started < 60
    assert figures["outcomes"] == {"infra_error": 3} and figures["scored"] == 0
    assert url in figures["episodes"][0]["detail"]
    assert "could not start" in figures["episodes"][1]["detail"]
