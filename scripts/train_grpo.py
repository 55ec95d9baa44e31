#!/usr/bin/python3
"""Closed-loop RL: GRPO on envforge environments lifts the policy on held-out tasks (issue 21).

    /usr/bin/python3 scripts/train_grpo.py --policy data/models/policy-small {--train-envs DIR | --url URL}
        --eval-envs DIR --steps N --group G --out RUN_DIR [--tasks-per-step B] [--lr LR]
        [--no-unbiased-kl] [--no-off-policy-mask] [--no-keep-routing] [--no-keep-sampling-mask]
        [--eval-n 10] [--json]

Each step samples --tasks-per-step tasks from the training environments (DIR of *.envdb bundles
or environment source directories, packed here), plays --group episodes of each with the
embedded engine on the current weights (envforge.rollout in this process: real sandbox sessions,
real verifiers; with --url URL the sessions, tools and verifiers are those of a running
`envforge serve` reached over JSON-RPC, every task it serves being a training task), reads the episodes' token-exact segments back (envforge.read_episodes), scores
them by their verdicts and updates the policy with GRPO (scripts/policy/grpo.py: advantages,
the clipped objective and the paper's four stabilisers). The new weights are exported
(bf16, Hugging Face layout) to RUN_DIR/policy, which the engine loads for the next step.

RUN_DIR holds: policy/ (the current weights), checkpoints/step-N/ (every --save-every steps
and the last; each loads with `envforge rollout --backend embedded:DIR`), metrics.jsonl (one
line per step), trajectories.db (every training episode), eval.json and eval.md (held-out
pass@1 and pass@10 before and after, same seeds), run.json (the arguments and timings).

A progress line per step on stderr: mean reward, pass@1 of the batch, KL, tokens, seconds.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--policy", default=os.path.join(ROOT, "data", "models", "policy-small"),
                        help="the starting checkpoint (an exported model directory)")
    parser.add_argument("--reference", help="the KL reference policy (default: --policy); give the original policy "
                                            "when --policy is a checkpoint of an earlier run being continued")
    parser.add_argument("--train-envs", help="directory of training environments (played in this process)")
    parser.add_argument("--url", help="play the training tasks on this `envforge serve` instead (every task of every "
                                      "environment it serves), over JSON-RPC; the model stays in this process")
    parser.add_argument("--token", help="bearer token for --url")
    parser.add_argument("--eval-envs", required=True, help="directory of held-out evaluation environments")
    parser.add_argument("--out", required=True, help="run directory")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--group", type=int, default=8, help="episodes per task (G)")
    parser.add_argument("--tasks-per-step", type=int, default=8)
    parser.add_argument("--minibatches", type=int, default=2, help="updates per step (later ones are off-policy)")
    parser.add_argument("--micro-batch", type=int, default=16, help="sequences per forward (memory)")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--clip", type=float, default=0.2)
    parser.add_argument("--beta", type=float, default=0.01, help="KL coefficient")
    parser.add_argument("--delta", type=float, default=0.5, help="off-policy sequence masking threshold")
    parser.add_argument("--std-normalize", action="store_true", help="divide advantages by the group std")
    parser.add_argument("--length-penalty", type=float, default=0.0)
    parser.add_argument("--length-free", type=int, default=256)
    for name in ("unbiased-kl", "off-policy-mask", "keep-routing", "keep-sampling-mask"):
        parser.add_argument("--no-" + name, dest=name.replace("-", "_"), action="store_false",
                            help="switch off the %s stabiliser" % name)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-tokens-per-turn", type=int, default=128)
    parser.add_argument("--eval-n", type=int, default=10, help="episodes per held-out task (0: no evaluation)")
    parser.add_argument("--eval-seed", type=int, default=7)
    parser.add_argument("--before-eval", help="reuse the starting policy's evaluation from this eval.json (an earlier "
                                              "run from the same policy with the same --eval-envs, --eval-n and --eval-seed)")
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--json", action="store_true", help="print the run summary as JSON on stdout")
    args = parser.parse_args(argv)
    for name in ("steps", "group", "tasks_per_step", "minibatches", "micro_batch"):
        if getattr(args, name) < 1:
            parser.error("--%s must be at least 1" % name.replace("_", "-"))
    if args.group < 2:
        parser.error("--group must be at least 2 (advantages are relative to the group)")
    if args.eval_n < 0:
        parser.error("--eval-n must be 0 or more")
    if (args.train_envs is None) == (args.url is None):
        parser.error("give exactly one of --train-envs DIR and --url URL")
    args.reference = args.reference or args.policy
    for flag, path in (("--policy", args.policy), ("--reference", args.reference), ("--train-envs", args.train_envs),
                       ("--eval-envs", args.eval_envs)):
        if path is not None and not os.path.isdir(path):
            parser.error("%s %s is not a directory" % (flag, path))
    if args.before_eval and not os.path.isfile(args.before_eval):
        parser.error("--before-eval %s is not a file" % args.before_eval)
    if not os.path.isfile(os.path.join(args.policy, "config.json")):
        parser.error("--policy %s holds no config.json (an exported model directory)" % args.policy)
    return args


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, HERE)
    from train_policy import MALLOC_TUNABLES  # fewer page faults; train_policy.py says why
    if os.environ.get("GLIBC_TUNABLES") != MALLOC_TUNABLES:
        os.environ["GLIBC_TUNABLES"] = MALLOC_TUNABLES
        os.execv(sys.executable, [sys.executable] + sys.argv)
    sys.path.insert(0, os.path.join(args.build, "python"))
    try:
        import envforge  # noqa: F401
        import torch
    except ImportError as error:
        print("train_grpo: %s (build the project and install python3-torch: make test does both)" % error,
              file=sys.stderr)
        return 2
    from policy import grpo_loop
    torch.set_num_threads(args.threads)
    try:
        summary = grpo_loop.run(args, envforge, log=lambda line: print(line, file=sys.stderr, flush=True))
    except (RuntimeError, ValueError) as error:
        print("train_grpo: %s" % error, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
