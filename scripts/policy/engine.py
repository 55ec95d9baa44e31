"""The engine's view of an exported model, to check it against the training forward.

engine_logits: every position's logits of one prefill from the embedded engine
(envforge.model_logits, from the built Python module) or None when the module lacks it;
reference_logits: the same from tests/inference/reference_model.py, the independent numpy oracle
the engine itself is tested against; engine_greedy: `envforge generate` greedy tokens;
agreement: the figures the logits test states.
"""

import json
import os
import subprocess
import sys

import numpy as np

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def engine_logits(model_dir, ids, dense=False):
    try:
        import envforge
    except ImportError:
        return None
    if not hasattr(envforge, "model_logits"):
        return None
    return np.asarray(envforge.model_logits(str(model_dir), [int(i) for i in ids], dense=dense), dtype=np.float32)


def reference_logits(model_dir, ids, dense=False):
    command = [sys.executable, os.path.join(SOURCE_DIR, "tests", "inference", "reference_model.py"),
               "--model", str(model_dir), "--tokens", ",".join(str(int(i)) for i in ids)]
    if dense:
        command.append("--dense")
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return np.asarray(json.loads(done.stdout)["logits"], dtype=np.float64)


def engine_greedy(envforge_bin, model_dir, ids, count):
    done = subprocess.run([str(envforge_bin), "generate", "--model", str(model_dir), "--prompt-tokens",
                           ",".join(str(int(i)) for i in ids), "--max-tokens", str(count), "--temperature", "0",
                           "--json"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["samples"][0]["tokens"]


def agreement(ours, theirs):
    """max and median over positions of max |ours - theirs| / max |theirs|, and the fraction of
    positions with the same argmax."""
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    scale = float(np.abs(theirs).max())
    per_position = np.abs(ours - theirs).max(axis=1) / scale
    return {"relative_max": float(per_position.max()), "relative_median": float(np.median(per_position)),
            "argmax_agreement": float((ours.argmax(1) == theirs.argmax(1)).mean()), "scale": scale,
            "positions": int(len(per_position))}
