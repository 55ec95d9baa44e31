#!/usr/bin/python3
"""The training and evaluation transcripts of the policy for the synth categories, in one command.

    policy_synth_data.py --out DIR [--categories C1,C2,...] [--train-seeds 1-120]
                         [--eval-seeds 900001-900004] [--shop-seeds 1-100] [--shop-rows 1000]
                         [--lineages 3] [--levels 2] [--thinking-fraction 0.1] [--mix-seed 0]
                         [--build DIR]

Writes into DIR:
  train.jsonl  the synth categories' transcripts of --train-seeds, with --shop-rows transcripts of
               the shop environments (--shop-seeds) drawn among them so that the shop tiers are
               kept while the categories train; shuffled by --mix-seed.
  eval.jsonl   the synth categories' transcripts of --eval-seeds (held out: no seed in common with
               --train-seeds), what train_policy.py --eval-transcripts takes.
  data.json    the counts and the arguments, so that a checkpoint's README can name its data.

Each part is scripts/policy_transcripts.py (gold solutions played in real sandbox sessions); the
training parts are kept in DIR/parts/ and, with eval.jsonl, reused when present and made with the
same arguments (recorded beside each as PART.args.json), so a stopped run starts again where it was
and a changed argument (more shop seeds, say) makes its part again.
Every file is written to a temporary name and renamed: whole or absent.

Then, for example:
    train_policy.py --out NEXT --init data/models/policy-synth-wip --transcripts DIR/train.jsonl
                    --eval-transcripts DIR/eval.jsonl --copy-mix 0.3 --share-prefix ...
"""

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import policy_transcripts  # noqa: E402

SIX_CATEGORIES = "trip_planning,logistics,e_commerce,calendar,inventory,course_planning"


def write_atomically(path, lines):
    directory = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, suffix=".tmp") as out:
        try:
            out.writelines(lines)
            out.flush()
            os.fsync(out.fileno())
            os.fchmod(out.fileno(), 0o644)
        except BaseException:
            os.unlink(out.name)
            raise
    os.replace(out.name, path)


def read_lines(path):
    with open(path, encoding="utf-8") as source:
        return [line if line.endswith("\n") else line + "\n" for line in source if line.strip()]


def mixed(synth_lines, shop_lines, shop_rows, seed):
    """synth_lines with shop_rows of shop_lines drawn among them, shuffled; the same for one seed."""
    if shop_rows > len(shop_lines):
        raise ValueError("--shop-rows %d: the shop part has only %d transcripts" % (shop_rows, len(shop_lines)))
    rng = random.Random(seed)
    lines = list(synth_lines) + rng.sample(list(shop_lines), shop_rows)
    rng.shuffle(lines)
    return lines


def part_arguments_path(path):
    return path + ".args.json"


def made_with(path, transcript_args):
    """Whether the part at `path` exists and was made with `transcript_args` (its .args.json says
    so); a part without that record, or with other arguments, is not reused."""
    if not os.path.exists(path):
        return False
    try:
        with open(part_arguments_path(path), encoding="utf-8") as record:
            return json.load(record).get("arguments") == transcript_args
    except (OSError, ValueError):
        return False


def make_part(name, transcript_args, path, build):
    """Runs policy_transcripts.py for one part into `path` unless that part is already there, made
    with the same arguments (whole: policy_transcripts writes atomically, and the arguments are
    recorded after it)."""
    if made_with(path, transcript_args):
        print("policy_synth_data: %s: reusing %s" % (name, path), file=sys.stderr, flush=True)
        return path
    if os.path.exists(path):
        print("policy_synth_data: %s: %s was made with other arguments (or none recorded), playing again"
              % (name, path), file=sys.stderr, flush=True)
    print("policy_synth_data: %s: playing the gold solutions" % name, file=sys.stderr, flush=True)
    # The old record goes first: a run stopped between the new part and its record must not leave
    # the old arguments vouching for the new part.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(part_arguments_path(path))
    code = policy_transcripts.main(["--out", path, "--build", build] + transcript_args)
    if code != 0:
        raise RuntimeError("the %s part failed (policy_transcripts.py exit %d)" % (name, code))
    write_atomically(part_arguments_path(path), [json.dumps({"arguments": transcript_args}) + "\n"])
    return path


def write_data(args):
    parts = os.path.join(args.out, "parts")
    os.makedirs(parts, exist_ok=True)
    synth = ["--categories", args.categories, "--lineages", str(args.lineages), "--levels", str(args.levels),
             "--thinking-fraction", str(args.thinking_fraction)]
    train_part = make_part("synth-train", ["--seeds", args.train_seeds] + synth,
                           os.path.join(parts, "synth-train.jsonl"), args.build)
    eval_lines = read_lines(make_part("synth-eval", ["--seeds", args.eval_seeds] + synth,
                                      os.path.join(args.out, "eval.jsonl"), args.build))
    train_lines = read_lines(train_part)
    shop_lines = []
    if args.shop_rows > 0:
        shop_lines = read_lines(make_part("shop", ["--seeds", args.shop_seeds], os.path.join(parts, "shop.jsonl"),
                                          args.build))
    mix = mixed(train_lines, shop_lines, args.shop_rows, args.mix_seed)
    write_atomically(os.path.join(args.out, "train.jsonl"), mix)
    report = {"train": len(mix), "train_synth": len(train_lines), "train_shop": args.shop_rows,
              "eval": len(eval_lines), "categories": args.categories.split(","), "train_seeds": args.train_seeds,
              "eval_seeds": args.eval_seeds, "shop_seeds": args.shop_seeds, "lineages": args.lineages,
              "levels": args.levels, "thinking_fraction": args.thinking_fraction, "mix_seed": args.mix_seed}
    write_atomically(os.path.join(args.out, "data.json"), [json.dumps(report, indent=2) + "\n"])
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for train.jsonl, eval.jsonl and data.json")
    parser.add_argument("--categories", default=SIX_CATEGORIES, help="synth categories (envsynth/procedural)")
    parser.add_argument("--train-seeds", default="1-120", help="environment seeds of the training part")
    parser.add_argument("--eval-seeds", default="900001-900004", help="held-out environment seeds")
    parser.add_argument("--shop-seeds", default="1-100", help="shop environment seeds the shop rows are drawn from")
    parser.add_argument("--shop-rows", type=int, default=1000, help="shop transcripts mixed in (0: none)")
    parser.add_argument("--lineages", type=int, default=3, help="lineages per environment")
    parser.add_argument("--levels", type=int, default=2, help="levels 1..L of each lineage")
    parser.add_argument("--thinking-fraction", type=float, default=0.1)
    parser.add_argument("--mix-seed", type=int, default=0, help="seed of the shop draw and the shuffle")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="the CMake build directory")
    args = parser.parse_args(argv)
    if args.shop_rows < 0:
        parser.error("--shop-rows must be at least 0")
    try:
        train_seeds = set(policy_transcripts.parse_seeds(args.train_seeds))
        eval_seeds = set(policy_transcripts.parse_seeds(args.eval_seeds))
    except ValueError as error:
        parser.error("a seed list: %s" % error)
    overlap = train_seeds & eval_seeds
    if overlap:
        parser.error("--eval-seeds must be held out: seed %d is in --train-seeds too" % min(overlap))
    try:
        report = write_data(args)
    except (ValueError, RuntimeError) as error:
        print("policy_synth_data: %s" % error, file=sys.stderr)
        return 2
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
