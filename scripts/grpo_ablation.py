#!/usr/bin/python3
"""The stabiliser ablation of issue 21: short GRPO runs with every stabiliser on, then with each
one switched off, and a table of what each does to KL, reward and held-out pass@1.

    /usr/bin/python3 scripts/grpo_ablation.py --train-envs DIR --eval-envs DIR --out DIR
        [--steps 6] [--only all,no-keep-routing,...] [-- EXTRA train_grpo.py ARGS]

Each variant is one `scripts/train_grpo.py` run in OUT/<variant>/ with the same seeds (tasks,
sampling and evaluation), so the runs differ only by the switch. The before column is measured
once (the starting policy, in the first run) and reused by the others (--before-eval). Writes OUT/ablation.json and
OUT/ablation.md and prints the table: per variant the mean KL and mean reward over the steps,
the largest importance ratio, masked sequences, the token-exact re-scoring gap of step 1, and
held-out pass@1 per row after the run.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("all", "no-unbiased-kl", "no-off-policy-mask", "no-keep-routing", "no-keep-sampling-mask")


def run_variant(variant, args, extra, before_eval=None):
    out = os.path.join(args.out, variant)
    command = [sys.executable, os.path.join(HERE, "train_grpo.py"), "--train-envs", args.train_envs,
               "--eval-envs", args.eval_envs, "--out", out, "--steps", str(args.steps)] + extra
    if variant != "all":
        command.append("--" + variant)
    if before_eval:
        command += ["--before-eval", before_eval]
    print("grpo_ablation: %s" % " ".join(command), file=sys.stderr, flush=True)
    done = subprocess.run(command)
    if done.returncode != 0:
        raise RuntimeError("%s: train_grpo.py exited %d" % (variant, done.returncode))
    with open(os.path.join(out, "metrics.jsonl")) as f:
        metrics = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(out, "eval.json")) as f:
        evaluation = json.load(f)
    trained = [m for m in metrics if m.get("tokens")]
    rescore = metrics[0].get("rescore", {}) if metrics else {}
    return {"variant": variant, "steps": len(metrics),
            "mean_kl": sum(m["kl"] for m in trained) / max(len(trained), 1),
            "mean_reward": sum(m["mean_reward"] for m in metrics) / max(len(metrics), 1),
            "ratio_max": max((m.get("ratio_max", 0.0) for m in trained), default=0.0),
            "masked_sequences": sum(m.get("masked_sequences", 0) for m in metrics),
            "rescore_mean_abs": rescore.get("mean_abs"), "rescore_max_abs": rescore.get("max_abs"),
            "before": {r["row"]: r["pass@1"] for r in evaluation["before"]["rows"]},
            "after": {r["row"]: r["pass@1"] for r in evaluation["after"]["rows"]}}


def markdown(results):
    rows = list(results[0]["before"])
    head = ["variant", "mean KL", "mean reward", "max ratio", "masked", "rescore |d| mean / max"]
    head += ["%s pass@1" % r for r in rows]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    before = results[0]["before"]
    lines.append("| (before) | | | | | | " + " | ".join("%.3f" % before[r] for r in rows) + " |")
    for r in results:
        rescore = "-" if r["rescore_mean_abs"] is None else "%.1e / %.1e" % (r["rescore_mean_abs"], r["rescore_max_abs"])
        cells = [r["variant"], "%.5f" % r["mean_kl"], "%.3f" % r["mean_reward"], "%.3f" % r["ratio_max"],
                 str(r["masked_sequences"]), rescore] + ["%.3f" % r["after"].get(row, float("nan")) for row in rows]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--train-envs", required=True)
    parser.add_argument("--eval-envs", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--only", default=",".join(VARIANTS), help="comma-separated variants of: " + ", ".join(VARIANTS))
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.only.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        parser.error("unknown variant(s) %s; choose from %s" % (", ".join(unknown) or "(none)", ", ".join(VARIANTS)))
    os.makedirs(args.out, exist_ok=True)
    try:
        results = []
        for variant in variants:
            before_eval = os.path.join(args.out, results[0]["variant"], "eval.json") if results else None
            results.append(run_variant(variant, args, extra, before_eval))
    except (RuntimeError, OSError) as error:
        print("grpo_ablation: %s" % error, file=sys.stderr)
        return 2
    table = markdown(results)
    with open(os.path.join(args.out, "ablation.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.out, "ablation.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
