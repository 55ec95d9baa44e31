"""scripts/train_grpo.py: a smoke GRPO run (the shipped policy, 2 steps, a few episodes, real
sandbox sessions and verifiers), plus the pieces it rests on: token-exact re-scoring of the
engine's sampled tokens, group advantages, and each stabiliser's code path.

Re-scoring tolerance: the engine's recorded logprob of each sampled token against the training
forward of the exported weights (bf16-rounded, eval mode). Measured on policy-small: mean
|difference| ~1e-5, max ~3e-3 when the trainer routes by itself (an expert choice that flips
between the engine's and the trainer's arithmetic moves one token), so mean < 1e-4 and
max < 2e-2 here; a wrong token alignment or temperature moves the mean by more than 0.1.
"""

import json
import os
import pathlib
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/setup.sh installs it)")
torch.set_num_threads(1)  # ctest runs this beside another test on a 2-core machine

SOURCE_DIR = pathlib.Path(os.environ.get("ENVFORGE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("ENVFORGE_BUILD_DIR", SOURCE_DIR / "build"))
SCRIPT = SOURCE_DIR / "scripts" / "train_grpo.py"
POLICY = SOURCE_DIR / "data" / "models" / "policy-small"
sys.path.insert(0, str(SOURCE_DIR / "scripts"))
sys.path.insert(0, str(BUILD_DIR / "python"))

import envforge  # noqa: E402
import policy_envs  # noqa: E402
from policy import export, grpo, grpo_loop, rollouts  # noqa: E402

# The easy templates and the list with constraints: the shipped policy passes the first nearly always
# and the last rarely. At temperature 1.3 and seed 3 (both fixed: sampling is deterministic by seed),
# two of step 1's three groups of 4 have a reward spread to train on.
TRAIN_TEMPLATES = "price_lookup,stock_lookup,supplier_city,cheapest_in_stock_rated"


@pytest.fixture(scope="module")
def envs(tmp_path_factory):
    """(training environment sources dir, evaluation dir): one training shop of seed 301 (the
    easy templates), the committed held-out shop_eval_a."""
    work = tmp_path_factory.mktemp("grpo-envs")
    policy_envs.generate(301, str(work / "train" / "shop_301"), instances=2, templates=TRAIN_TEMPLATES.split(","))
    (work / "eval").mkdir()
    (work / "eval" / "shop_eval_a").symlink_to(SOURCE_DIR / "data" / "envs" / "shop_eval_a")
    return work / "train", work / "eval"


@pytest.fixture(scope="module")
def smoke_run(envs, tmp_path_factory):
    out = tmp_path_factory.mktemp("grpo-run") / "run"
    train, evaluation = envs
    done = subprocess.run([sys.executable, str(SCRIPT), "--policy", str(POLICY), "--train-envs", str(train),
                           "--eval-envs", str(evaluation), "--out", str(out), "--steps", "2", "--group", "4",
                           "--tasks-per-step", "3", "--eval-n", "1", "--lr", "2e-3", "--threads", "1", "--temperature", "1.3", "--seed", "3",
                           "--save-every", "1", "--build", str(BUILD_DIR), "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out, json.loads(done.stdout), done.stderr


def test_the_loop_runs_and_writes_its_files(smoke_run):
    out, summary, stderr = smoke_run
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2]
    for m in lines:
        assert m["episodes"] == 12 and m["scored"] + sum(m["dropped"].values()) == 12
        for key in ("mean_reward", "pass@1", "kl", "tokens", "skipped_groups", "masked_sequences", "seconds"):
            assert key in m, key
    assert "rescore" in lines[0] or lines[0]["trained_episodes"] == 0
    assert stderr.count("[grpo] step") == 2
    for row in ("reward", "pass@1", "kl", "tokens", "rollout"):
        assert row in stderr
    assert summary["episodes"] == 24 and summary["stabilisers"] == {name: True for name in grpo.STABILISERS}
    evaluation = json.loads((out / "eval.json").read_text())
    assert {r["row"] for r in evaluation["before"]["rows"]} == {r["row"] for r in evaluation["after"]["rows"]}
    assert any(r["row"].startswith("held-out") for r in evaluation["before"]["rows"])  # templates it never trains on
    assert "pass@1 before" in (out / "eval.md").read_text()


def test_weights_change_and_the_checkpoint_rolls_out(smoke_run, envs):
    out, summary, _ = smoke_run
    assert summary["trained_tokens"] > 0, "no group had a reward spread: nothing was trained"
    start, trained = export.load(str(POLICY)).state_dict(), export.load(str(out / "checkpoints" / "step-2")).state_dict()
    changed = [name for name in start if not torch.equal(start[name], trained[name])]
    assert changed, "the exported weights equal the starting policy's"
    figures = envforge.rollout(str(out / "envs" / "eval"), "shop_eval_a", "price_lookup_00",
                               backend="embedded:" + str(out / "checkpoints" / "step-2"), n=2, seed=3,
                               max_turns=4, max_tokens_per_turn=128)
    assert figures["scored"] + figures["outcomes"].get("infra_error", 0) == 2
    assert figures["outcomes"].get("infra_error", 0) == 0


def test_the_loop_trains_on_a_served_environment_over_rpc(envs, tmp_path):
    """--url: the training tasks, sessions, tools and verifiers are a running `envforge serve`'s,
    reached over JSON-RPC; the model, the recorded episodes and the update stay here."""
    train, evaluation = envs
    packed = rollouts.pack_sources(str(BUILD_DIR / "bin" / "envforge"), str(train), str(tmp_path / "served"))
    port_file = tmp_path / "port"
    server = subprocess.Popen([str(BUILD_DIR / "bin" / "envforge"), "serve", "--envs", packed, "--port", "0",
                               "--port-file", str(port_file), "--token", "sesame"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            assert server.poll() is None, server.stderr.read().decode()
            assert time.time() < deadline, "envforge serve did not report its port"
            time.sleep(0.05)
        url = "http://127.0.0.1:%s" % port_file.read_text().strip()
        out = tmp_path / "run"
        done = subprocess.run([sys.executable, str(SCRIPT), "--policy", str(POLICY), "--url", url, "--token", "sesame",
                               "--eval-envs", str(evaluation), "--out", str(out), "--steps", "1", "--group", "4",
                               "--tasks-per-step", "3", "--eval-n", "0", "--lr", "2e-3", "--threads", "1",
                               "--build", str(BUILD_DIR), "--json"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert server.poll() is None
    finally:
        server.terminate()
        server.wait(timeout=30)
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 1 and metrics[0]["episodes"] == 12 and not metrics[0]["dropped"]
    summary = json.loads(done.stdout)
    assert summary["args"]["url"] == url and summary["episodes"] == 12
    assert "sesame" not in (out / "run.json").read_text()  # the token is not written down
    with sqlite3.connect(str(out / "trajectories.db")) as db:
        rows = db.execute("SELECT env_name, count(*) FROM episodes GROUP BY env_name").fetchall()
        routed = db.execute("SELECT count(*) FROM model_turns WHERE routing IS NOT NULL").fetchone()[0]
    assert rows == [("shop_301", 12)] and routed > 0


@pytest.fixture(scope="module")
def recorded(envs, tmp_path_factory):
    """Episodes of the shipped policy on the training shop, top_p 0.9 (kept sets smaller than the
    vocabulary), routing and kept sets recorded when the module can."""
    work = tmp_path_factory.mktemp("grpo-recorded")
    train, _ = envs
    packed = rollouts.pack_sources(str(BUILD_DIR / "bin" / "envforge"), str(train), str(work / "envs"))
    options = dict(n=3, seed=5, top_p=0.9, max_turns=4, max_tokens_per_turn=128, trajectories=str(work / "t.db"))
    figures = envforge.rollout(packed, "shop_301", "price_lookup_00", backend="embedded:" + str(POLICY),
                               record_routing=True, record_kept_sets=True, **options)
    episodes = envforge.read_episodes(str(work / "t.db"), [e["id"] for e in figures["episodes"]])
    samples = [s for s in (grpo.sample_from_episode(e)[0] for e in episodes) if s is not None]
    assert samples
    return samples


class Switches:
    lr, clip, beta, delta, temperature, minibatches, micro_batch = 1e-4, 0.2, 0.01, 0.5, 1.0, 1, 8

    def __init__(self, **on):
        for name in grpo.STABILISERS:
            setattr(self, name, on.get(name, True))


def test_rescoring_the_sampled_tokens_gives_the_engine_logprobs(recorded):
    assert all(s.segments[0].routing is not None for s in recorded), "routing was not recorded"
    assert any(s.segments[0].kept for s in recorded), "no kept set was recorded at top_p 0.9"
    kept_and_routed = grpo_loop.Trainer(str(POLICY), Switches()).rescore(recorded)
    assert kept_and_routed["tokens"] > 20
    assert kept_and_routed["mean_abs"] < 1e-4 and kept_and_routed["max_abs"] < 2e-2, kept_and_routed
    # without the kept set the trainer's distribution is the full softmax: top_p's renormalisation
    # (log 1/0.9 at most) shows up, which is what keep_sampling_mask removes
    full = grpo_loop.Trainer(str(POLICY), Switches(keep_sampling_mask=False)).rescore(recorded)
    assert full["mean_abs"] > 10 * kept_and_routed["mean_abs"]


def test_episodes_decoded_under_the_tool_call_grammar_rescore_exactly_with_their_kept_sets(envs, tmp_path):
    """tool_choice "required": the engine samples from the grammar-masked distribution and records
    each draw's allowed set as its kept set, so the trainer's masked softmax reproduces the
    engine's logprobs; the full softmax does not."""
    train, _ = envs
    packed = rollouts.pack_sources(str(BUILD_DIR / "bin" / "envforge"), str(train), str(tmp_path / "envs"))
    figures = envforge.rollout(packed, "shop_301", "price_lookup_00", backend="embedded:" + str(POLICY), n=3,
                               seed=6, max_turns=4, max_tokens_per_turn=128, trajectories=str(tmp_path / "t.db"),
                               record_routing=True, record_kept_sets=True, tool_choice="required")
    assert all(e["invalid_calls"] == 0 for e in figures["episodes"]), figures["episodes"]
    episodes = envforge.read_episodes(str(tmp_path / "t.db"), [e["id"] for e in figures["episodes"]])
    samples = [s for s in (grpo.sample_from_episode(e)[0] for e in episodes) if s is not None]
    assert samples and all(any(s.segments[0].kept) for s in samples)
    masked = grpo_loop.Trainer(str(POLICY), Switches()).rescore(samples)
    assert masked["tokens"] > 20
    assert masked["mean_abs"] < 1e-4 and masked["max_abs"] < 2e-2, masked
    full = grpo_loop.Trainer(str(POLICY), Switches(keep_sampling_mask=False)).rescore(samples)
    assert full["mean_abs"] > 10 * masked["mean_abs"], (full, masked)
    with pytest.raises(Exception, match="--tool-choice must be auto or required"):
        envforge.rollout(packed, "shop_301", "price_lookup_00", backend="embedded:" + str(POLICY), tool_choice="often")


def test_keep_routing_enforces_the_recorded_experts(recorded):
    trainer = grpo_loop.Trainer(str(POLICY), Switches())
    packed = trainer._pack(recorded, [0])
    routing = packed.routing.clone()
    recorded_rows = routing[:, 0, 0] >= 0
    assert recorded_rows.float().mean() > 0.9
    swapped = torch.where(routing >= 0, (routing + 1) % trainer.policy.config["n_routed_experts"], routing)
    packed.routing = swapped
    with torch.no_grad():
        grpo.token_logprobs(trainer.policy, packed, 1.0, True, False)
    moe = trainer.policy.moe_layers()[0]
    assert torch.equal(moe.gate.last_chosen[recorded_rows], swapped[recorded_rows, 0])


def test_group_advantages_skip_equal_groups_and_drop_infra_errors():
    def episode(i, task, outcome, passed):
        return {"id": "t-%d" % i, "env_name": "e", "task_id": task, "outcome": outcome,
                "verdict": {"passed": passed} if outcome == "submitted" else None,
                "tokens": [{"ids": [1, 2, 3], "mask": [0, 1, 1], "logprobs": [None, -0.5, -0.1], "consistent": True}],
                "model_turns": [{"output_tokens": [2, 3]}]}
    episodes = [episode(0, "a", "submitted", True), episode(1, "a", "submitted", False),
                episode(2, "a", "max_turns", False), episode(3, "a", "infra_error", False),
                episode(4, "b", "submitted", False), episode(5, "b", "invalid_calls", False)]
    samples, dropped = [], {}
    for e in episodes:
        sample, why = grpo.sample_from_episode(e)
        if sample:
            samples.append(sample)
        else:
            dropped[why] = dropped.get(why, 0) + 1
    assert dropped == {"infra_error": 1}  # dropped, never scored 0
    trainable, groups, skipped = grpo.assign_advantages(samples)
    assert (groups, skipped) == (2, 1)  # task b: every reward 0
    assert [round(s.advantage, 4) for s in trainable] == [0.6667, -0.3333, -0.3333]
    normalized, _, _ = grpo.assign_advantages(samples, std_normalize=True)
    assert normalized[0].advantage == pytest.approx(0.6667 / np.std([1, 0, 0]), rel=1e-4)


def test_each_stabiliser_changes_the_loss_as_documented():
    owner = torch.tensor([0, 0, 1, 1])
    advantages = torch.tensor([0.5, -0.5], dtype=torch.float64)
    old = torch.log(torch.tensor([0.5, 0.5, 0.9, 0.9], dtype=torch.float64))
    new = torch.log(torch.tensor([0.5, 0.5, 0.2, 0.2], dtype=torch.float64))  # sample 1 drifted: log(0.9/0.2) = 1.5
    ref = torch.log(torch.tensor([0.4, 0.4, 0.3, 0.3], dtype=torch.float64))
    config = grpo.LossConfig(delta=0.5)
    _, figures = grpo.grpo_loss(new, old, ref, owner, advantages, config)
    assert figures["masked_sequences"] == 1  # the negative, drifted one
    config.off_policy_mask = False
    _, figures = grpo.grpo_loss(new, old, ref, owner, advantages, config)
    assert figures["masked_sequences"] == 0
    # a positive sample that drifted as far is never masked
    _, figures = grpo.grpo_loss(new, old, ref, owner, -advantages, grpo.LossConfig(delta=0.5))
    assert figures["masked_sequences"] == 0
    ratio = torch.exp(new - old)
    k3 = torch.exp(ref - new) - (ref - new) - 1
    per_sample = lambda v: ((v[0] + v[1]) / 2 + (v[2] + v[3]) / 2) / 2  # noqa: E731
    _, unbiased = grpo.grpo_loss(new, old, ref, owner, advantages, grpo.LossConfig())
    _, plain = grpo.grpo_loss(new, old, ref, owner, advantages, grpo.LossConfig(unbiased_kl=False))
    assert unbiased["kl"] == pytest.approx(float(per_sample(ratio * k3)))
    assert plain["kl"] == pytest.approx(float(per_sample(k3)))


def test_bad_arguments_name_what_is_wrong(tmp_path, envs):
    train, evaluation = envs
    base = [sys.executable, str(SCRIPT), "--train-envs", str(train), "--eval-envs", str(evaluation), "--out",
            str(tmp_path / "run"), "--build", str(BUILD_DIR)]
    done = subprocess.run(base + ["--group", "1"], capture_output=True, text=True)
    assert done.returncode == 2 and "--group must be at least 2" in done.stderr
    done = subprocess.run(base + ["--url", "http://127.0.0.1:9"], capture_output=True, text=True)
    assert done.returncode == 2 and "exactly one of --train-envs DIR and --url URL" in done.stderr
    done = subprocess.run(base + ["--policy", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "holds no config.json" in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run(base[:3] + [str(empty)] + base[4:] + ["--steps", "1"], capture_output=True, text=True)
    assert done.returncode == 2 and "holds no environment" in done.stderr


def test_the_reward_is_the_verdict_less_the_optional_length_penalty():
    def episode(outcome, passed, generated):
        return {"outcome": outcome, "verdict": {"passed": passed} if outcome == "submitted" else None,
                "model_turns": [{"output_tokens": [7] * generated}]}
    assert grpo.reward_of(episode("submitted", True, 500)) == 1.0
    assert grpo.reward_of(episode("submitted", False, 10)) == 0.0
    assert grpo.reward_of(episode("max_turns", False, 10)) == 0.0
    assert grpo.reward_of(episode("submitted", True, 200), length_penalty=0.5, length_free=256) == 1.0
    assert grpo.reward_of(episode("submitted", True, 384), length_penalty=0.5, length_free=256) == pytest.approx(0.75)
    assert grpo.reward_of(episode("submitted", False, 100000), length_penalty=0.5, length_free=256) == -1.0


def test_evaluation_rows_are_tiers_and_templates_never_trained_on():
    per_task = [{"env": "a", "task": "p0", "difficulty": 1, "template": "price", "scored": 10, "passed": 3},
                {"env": "a", "task": "p1", "difficulty": 1, "template": "price", "scored": 10, "passed": 5},
                {"env": "a", "task": "s0", "difficulty": 2, "template": "phone", "scored": 10, "passed": 1},
                {"env": "a", "task": "x0", "difficulty": 3, "template": "cheap", "scored": 0, "passed": 0}]
    result = rollouts.summarize(per_task, {"price", "cheap"})
    rows = {r["row"]: r for r in result["rows"]}
    assert list(rows) == ["tier 1", "tier 3", "held-out phone"]
    assert rows["tier 1"]["pass@1"] == pytest.approx(0.4) and rows["tier 1"]["tasks"] == 2
    assert rows["held-out phone"]["pass@10"] == pytest.approx(1.0)
    assert rows["tier 3"]["pass@1"] is None  # every episode an infra_error: no figure, not 0
