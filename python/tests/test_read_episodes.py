"""envforge.read_episodes: a trajectory store's episodes as dicts, token-exact segments included."""

import os
import shutil
import sqlite3

import pytest

import envforge
from conftest import SOURCE_DIR

POLICY = str(SOURCE_DIR / "data" / "models" / "policy-small")


@pytest.fixture(scope="module")
def store(shop_dir, tmp_path_factory):
    """(store path, rollout figures) of 3 episodes of the shipped policy on a held-out shop task."""
    path = str(tmp_path_factory.mktemp("read-episodes") / "t.db")
    figures = envforge.rollout(str(shop_dir), "shop_eval_a", "price_lookup_00", backend="embedded:" + POLICY, n=3,
                               seed=2, max_turns=3, max_tokens_per_turn=96, trajectories=path)
    return path, figures


def test_episodes_come_back_in_order_with_their_token_segments(store):
    path, figures = store
    ids = [e["id"] for e in figures["episodes"]]
    episodes = envforge.read_episodes(path, list(reversed(ids)))
    assert [e["id"] for e in episodes] == list(reversed(ids))
    for episode, summary in zip(episodes, reversed(figures["episodes"])):
        assert episode["outcome"] == summary["outcome"] and episode["task_id"] == "price_lookup_00"
        segment = episode["tokens"][0]
        assert segment["consistent"] and len(segment["ids"]) == len(segment["mask"]) == len(segment["logprobs"])
        generated = [t for turn in episode["model_turns"] for t in turn["output_tokens"]]
        assert [i for i, m in zip(segment["ids"], segment["mask"]) if m == 1] == generated
    prefix = envforge.read_episodes(path, [ids[0][:12]])
    assert prefix[0]["id"] == ids[0]


def test_unknown_ids_and_bad_stores_name_what_is_wrong(store, tmp_path):
    path, _ = store
    with pytest.raises(ValueError, match="no episode 't-000000000000'"):
        envforge.read_episodes(path, ["t-000000000000"])
    not_a_store = tmp_path / "x.db"
    not_a_store.write_text("hello")
    with pytest.raises((ValueError, RuntimeError), match=str(not_a_store)):
        envforge.read_episodes(str(not_a_store), ["t-0"])


def test_text_that_ends_inside_a_character_still_reads(store, tmp_path):
    """A model can stop after the first byte of a multi-byte character; its raw text is stored as
    generated and comes back with U+FFFD instead of failing the episode."""
    path, figures = store
    copy = str(tmp_path / "copy.db")
    shutil.copy(path, copy)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            shutil.copy(path + suffix, copy + suffix)
    episode_id = figures["episodes"][0]["id"]
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE model_turns SET raw_text = CAST(X'41CB' AS TEXT) WHERE episode_id = ? AND turn = 0",
                   (episode_id,))
    episode = envforge.read_episodes(copy, [episode_id])[0]
    assert episode["model_turns"][0]["raw_text"] == "A\ufffd"
