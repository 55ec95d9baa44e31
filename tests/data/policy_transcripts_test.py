"""scripts/policy_transcripts.py: gold solutions played in real sessions become the exact
conversations the rollout loop builds, rendered by the engine's own encoder.

The strongest check replays each transcript's assistant turns through the rollout loop (the
scripted backend) and compares the conversation the loop recorded with the transcript's, message
by message; the episode must pass its verifier.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ENVFORGE = os.environ["ENVFORGE"]
BUILD = os.path.dirname(os.path.dirname(ENVFORGE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(BUILD, "python"))

import envforge  # noqa: E402
import policy_transcripts  # noqa: E402

EOS = "<｜end▁of▁sentence｜>"
BOS = "<｜begin▁of▁sentence｜>"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    work = tmp_path_factory.mktemp("transcripts")
    out = work / "t.jsonl"
    code = policy_transcripts.main(["--out", str(out), "--seeds", "7", "--instances", "1", "--templates", "all",
                                    "--thinking-fraction", "0.5", "--seed", "0", "--work", str(work / "work"),
                                    "--build", BUILD, "--quiet"])
    assert code == 0
    records = [json.loads(line) for line in open(out)]
    return work, records


@pytest.fixture(scope="module")
def recovered(generated):
    """The same tasks with --recovery-fraction 1: each first call mistaken once before the gold's."""
    work, _records = generated
    out = work / "r.jsonl"
    code = policy_transcripts.main(["--out", str(out), "--seeds", "7", "--instances", "1", "--templates", "all",
                                    "--thinking-fraction", "0.5", "--recovery-fraction", "1", "--seed", "0",
                                    "--work", str(work / "work"), "--build", BUILD, "--quiet"])
    assert code == 0
    return work, [json.loads(line) for line in open(out)]


def test_one_transcript_per_task_with_tiers_and_both_modes(generated):
    _work, records = generated
    templates = {record["template"] for record in records}
    assert len(records) == 7 and len(templates) == 7
    assert {record["tier"] for record in records} == {1, 2, 3, 4, 5}
    assert {record["thinking"] for record in records} == {True, False}


def test_spans_are_whole_model_turns_that_parse_into_the_gold_calls(generated):
    _work, records = generated
    for record in records:
        text, spans = record["text"], record["spans"]
        assert text.startswith(BOS) and text.endswith(EOS)
        assistant = [m for m in record["messages"] if m["role"] == "assistant"]
        assert len(spans) == len(assistant) == record["calls"]
        for (start, end), message in zip(spans, assistant):
            turn = text[start:end]
            assert turn.endswith(EOS) and EOS not in turn[:-len(EOS)]
            parsed = envforge.parse_completion(turn, thinking=record["thinking"])
            assert parsed["finished"]
            assert [(c["name"], c["arguments"]) for c in parsed["tool_calls"]] == \
                [(c["name"], c["arguments"]) for c in message["tool_calls"]]
            if record["thinking"]:
                assert parsed["reasoning_content"] == message["reasoning_content"]
        assert assistant[-1]["tool_calls"][0]["name"] == "submit_result"


def test_the_rollout_loop_rebuilds_the_same_conversation_and_passes(generated, tmp_path):
    _replay_and_compare(*generated, tmp_path)


def test_a_recovery_transcript_shows_a_mistaken_first_call_and_its_error_but_trains_on_the_gold_turns(
        generated, recovered, tmp_path):
    plain = {record["task"]: record for record in generated[1]}
    records = recovered[1]
    assert sum(record["recovery"] for record in records) == len(records) == 7
    for record in records:
        gold = plain[record["task"]]
        wrong, error = record["messages"][2], record["messages"][3]
        (wrong_call,), (gold_call,) = wrong["tool_calls"], gold["messages"][2]["tool_calls"]
        assert wrong_call["name"] == gold_call["name"] and wrong_call["arguments"] != gold_call["arguments"]
        assert error["role"] == "tool" and json.loads(error["content"])["outcome"] == "tool_error"
        assert record["messages"][:2] + record["messages"][4:] == gold["messages"]
        # The mistake is context only: the spans are the gold turns', the same text as without it.
        assert record["thinking"] == gold["thinking"] and len(record["spans"]) == len(gold["spans"])
        for (a, b), (c, d) in zip(record["spans"], gold["spans"]):
            assert record["text"][a:b] == gold["text"][c:d]
        mistaken = next(v for k, v in wrong_call["arguments"].items() if gold_call["arguments"][k] != v)
        assert record["text"].index(">%s<" % mistaken) < record["spans"][0][0]
    _replay_and_compare(*recovered, tmp_path)


def _replay_and_compare(work, records, tmp_path):
    envs_dir = str(work / "work" / "envs")
    for record in records:
        script = tmp_path / ("%s.jsonl" % record["task"])
        with open(script, "w") as out:
            for message in record["messages"]:
                if message["role"] == "assistant":
                    line = {"tool_calls": message["tool_calls"]}
                    if message["content"]:  # the list tiers' one-word remark before submitting
                        line["content"] = message["content"]
                    if message.get("reasoning_content"):
                        line["reasoning_content"] = message["reasoning_content"]
                    out.write(json.dumps(line) + "\n")
        store = tmp_path / ("%s.sqlite" % record["task"])
        figures = envforge.rollout(envs_dir, record["env"], record["task"], backend="scripted:" + str(script), n=1,
                                   thinking=record["thinking"], trajectories=str(store))
        assert figures["passed"] == 1, figures
        episode_id = figures["episodes"][0]["id"]
        shown = subprocess.run([ENVFORGE, "traj", "show", str(store), episode_id, "--json"], check=True,
                               capture_output=True, text=True)
        recorded = json.loads(shown.stdout)["messages"]
        # The loop also records the submit_result's tool message, after the transcript ends.
        assert len(recorded) == len(record["messages"]) + 1
        for mine, theirs in zip(record["messages"], recorded):
            assert mine["role"] == theirs["role"]
            assert mine["content"] == theirs["content"]
            assert mine.get("reasoning_content", "") == theirs.get("reasoning_content", "")
            assert [(c["name"], c["arguments"]) for c in mine.get("tool_calls", [])] == \
                [(c["name"], c["arguments"]) for c in theirs.get("tool_calls") or []]


def test_bad_arguments_are_refused_with_a_message(tmp_path, capsys):
    assert policy_transcripts.main(["--out", str(tmp_path / "x.jsonl"), "--seeds", "1", "--templates", "no_such",
                                    "--build", BUILD, "--quiet"]) == 2
    assert "unknown template(s) no_such" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        policy_transcripts.main(["--out", str(tmp_path / "x.jsonl"), "--seeds", "1", "--instances", "0"])
    assert not (tmp_path / "x.jsonl").exists()


def test_synth_categories_give_transcripts_by_level_that_replay_and_pass(tmp_path):
    """--categories: the procedural synth generators' environments (envsynth/procedural), one per
    seed and category, lineages x levels tasks each, replayed through the rollout loop."""
    out = tmp_path / "s.jsonl"
    code = policy_transcripts.main(["--out", str(out), "--seeds", "3", "--categories", "e_commerce,inventory",
                                    "--lineages", "2", "--levels", "2", "--thinking-fraction", "0.5",
                                    "--work", str(tmp_path / "work"), "--build", BUILD, "--quiet"])
    assert code == 0
    records = [json.loads(line) for line in open(out)]
    assert sorted({record["env"] for record in records}) == ["e_commerce_3", "inventory_3"]
    assert len(records) == 8 and {record["tier"] for record in records} == {1, 2}
    assert all(record["template"].split("/")[0] == record["env"].rsplit("_", 1)[0] for record in records)
    for record in records:
        assistant = [m for m in record["messages"] if m["role"] == "assistant"]
        assert len(record["spans"]) == len(assistant) == record["calls"]
        assert assistant[-1]["tool_calls"][0]["name"] == "submit_result"
    _replay_and_compare(tmp_path, records, tmp_path)


def test_an_unknown_synth_category_is_refused_with_its_name(tmp_path, capsys):
    assert policy_transcripts.main(["--out", str(tmp_path / "x.jsonl"), "--seeds", "1", "--categories", "no_such",
                                    "--work", str(tmp_path / "work"), "--build", BUILD, "--quiet"]) == 2
    assert "--category no_such" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_synth_data_writes_a_held_out_eval_and_a_train_mix_with_shop_rows_reusing_its_parts(tmp_path, capsys):
    """scripts/policy_synth_data.py: the training mix and the held-out set of the synth policy in
    one command; its parts are kept and reused, and the mix is the same for the same seed."""
    import policy_synth_data

    arguments = ["--out", str(tmp_path / "data"), "--categories", "calendar", "--train-seeds", "1",
                 "--eval-seeds", "2", "--shop-seeds", "1", "--shop-rows", "2", "--lineages", "1", "--levels", "2",
                 "--build", BUILD]
    assert policy_synth_data.main(arguments) == 0
    train = open(tmp_path / "data" / "train.jsonl").read()
    records = [json.loads(line) for line in train.splitlines()]
    evaluation = [json.loads(line) for line in open(tmp_path / "data" / "eval.jsonl")]
    report = json.load(open(tmp_path / "data" / "data.json"))
    synth_envs = [record["env"] for record in records if record["env"].startswith("calendar_")]
    assert set(synth_envs) == {"calendar_1"} and len(synth_envs) == 2
    assert len(records) == 4 and {record["tier"] for record in records if record["env"] == "calendar_1"} == {1, 2}
    assert {record["env"] for record in evaluation} == {"calendar_2"} and len(evaluation) == 2
    assert (report["train"], report["train_synth"], report["train_shop"], report["eval"]) == (4, 2, 2, 2)
    capsys.readouterr()
    assert policy_synth_data.main(arguments) == 0
    assert capsys.readouterr().err.count("reusing") == 3
    assert open(tmp_path / "data" / "train.jsonl").read() == train
    # Another shop seed: that part alone is played again, and its rows come from the new seed.
    arguments[arguments.index("--shop-seeds") + 1] = "3"
    assert policy_synth_data.main(arguments) == 0
    log = capsys.readouterr().err
    assert log.count("reusing") == 2 and "made with other arguments" in log
    shop_envs = {json.loads(line)["env"] for line in open(tmp_path / "data" / "parts" / "shop.jsonl")}
    assert shop_envs == {"shop_000003"}, shop_envs


def test_synth_data_refuses_eval_seeds_that_are_trained_on(tmp_path, capsys):
    import policy_synth_data

    with pytest.raises(SystemExit) as exit_info:
        policy_synth_data.main(["--out", str(tmp_path / "d"), "--train-seeds", "1-10", "--eval-seeds", "10-12"])
    assert exit_info.value.code == 2
    assert "seed 10 is in --train-seeds too" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
