#!/usr/bin/python3
"""Measures a policy model on the evaluation environments with `envforge rollout`, per tier.

    policy_eval.py --model DIR [--envs data/envs/shop_eval_a,data/envs/shop_eval_b] [-n 100]
                   [--modes dsa,dense] [--seed S] [--max-turns T] [--top-p P] [--tool-choice auto|required]
                   [--strict-tools]
                   [--json OUT.json]
                   [--readme DIR/README.md] [--build DIR]
    policy_eval.py --from-json DSA.json,DENSE.json [--readme DIR/README.md]

Every environment source is packed (`envforge env pack`), then `envforge rollout X.envdb --all
--backend embedded:DIR -n N --json` plays every task N times, once with DSA (the indexer's top-k)
and once with `--dense` (the same weights, dense attention). Tasks are grouped by their tier
(task.json "difficulty"; held-out templates are reported as their own rows; an environment of
`envforge synth`'s procedural generators, env.json "category", gets a row per category and level). Per row and mode:
tasks, mean pass@1, pass@10, pass@N (the unbiased estimator per task, averaged; "-" when N is
smaller), mean turns, and the fraction of model turns that were well-formed tool calls
(1 - invalid calls / turns). With --tool-choice required every turn is decoded under the
tool-call grammar (inference/tool_call_grammar.h), so a turn is malformed only when its token
budget cuts it or the session refuses its arguments.

--readme replaces the block between "<!-- eval:begin -->" and "<!-- eval:end -->" in that file
with the table (the block is appended when absent). Progress goes to stderr; --json writes
every figure, per task included. Under the table, each mode's well-formed share of every model
turn over all rows.

--from-json plays nothing: it joins the modes of earlier runs' --json reports (one mode from each,
say, when DSA and dense ran as two commands) into one table, refusing reports whose settings
differ (model, n, seed, temperature, top_p, tool choice, strict tools) or that repeat a mode.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import policy_envs  # noqa: E402
from policy import rollouts  # noqa: E402

pass_at_k = rollouts.pass_at_k  # the unbiased estimator, shared with the GRPO trainer's evaluation
DEFAULT_ENVS = ["data/envs/shop_eval_a", "data/envs/shop_eval_b"]
BEGIN, END = "<!-- eval:begin -->", "<!-- eval:end -->"


def task_table(source):
    """{task id: (tier, template, held_out, category)} from an environment source's task.json
    files, env.json and policy_envs.TEMPLATES (which templates were held out of training)."""
    held_out = {t.name for t in policy_envs.TEMPLATES if t.held_out}
    category = rollouts.synth_category(source)  # "" for a shop: its rows are its tiers
    tasks = {}
    for task_id in sorted(os.listdir(os.path.join(source, "tasks"))):
        with open(os.path.join(source, "tasks", task_id, "task.json")) as handle:
            task = json.load(handle)
        template = task.get("knobs", {}).get("template", task_id)
        tasks[task_id] = (int(task.get("difficulty", 0)), template, template in held_out, category)
    return tasks


def pack(envforge_bin, source, directory):
    name = os.path.basename(os.path.normpath(source))
    return rollouts.pack_source(envforge_bin, source, os.path.join(directory, name + ".envdb"))


def rollout(envforge_bin, bundle, model, args, dense):
    command = [envforge_bin, "rollout", bundle, "--all", "--backend", "embedded:" + model, "-n", str(args.n), "--json",
               "--seed", str(args.seed), "--max-turns", str(args.max_turns), "--max-tokens-per-turn", str(args.max_tokens_per_turn),
               "--temperature", str(args.temperature), "--top-p", str(args.top_p), "--tool-choice", args.tool_choice]
    if dense:
        command.append("--dense")
    if args.strict_tools:
        command.append("--strict-tools")
    print("policy_eval: %s" % " ".join(command), file=sys.stderr, flush=True)
    started = time.monotonic()
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)  # stderr (the progress bar) passes through
    if done.returncode != 0:
        raise RuntimeError("envforge rollout exited %d" % done.returncode)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.strip().startswith("{")]
    return results, time.monotonic() - started


def row_key(tier, template, held_out, category=""):
    """(label, order): a shop task's row is its tier (held-out templates apart), a synth task's
    its category and level, after the shop rows."""
    if category:
        return "%s level %d" % (category, tier), (2, category, tier)
    return ("held-out %s" % template, (1, "", tier)) if held_out else ("tier %d" % tier, (0, "", tier))


def summarize(per_task, n):
    """Rows per tier (and held-out template): means over the row's tasks."""
    rows = {}
    for entry in per_task:
        label, order = row_key(entry["tier"], entry["template"], entry["held_out"], entry.get("category", ""))
        rows.setdefault((order, label), []).append(entry)
    table = []
    for (order, label), entries in sorted(rows.items()):
        def mean_pass(k):
            values = [e["pass_at_k"].get(str(k)) for e in entries if e["pass_at_k"].get(str(k)) is not None]
            return sum(values) / len(values) if values else None
        turns = sum(e["turns"] for e in entries)
        invalid = sum(e["invalid_calls"] for e in entries)
        table.append({"row": label, "tasks": len(entries), "templates": sorted({e["template"] for e in entries}),
                      "pass@1": mean_pass(1), "pass@10": mean_pass(10), "pass@n": mean_pass(n),
                      "mean_turns": sum(e["mean_turns"] for e in entries) / len(entries),
                      "well_formed_turns": 1.0 - invalid / turns if turns else None})
    return table


def per_task_entries(results, tasks, n):
    """Per task: its row key, pass@1, pass@10 and pass@n (computed here: the rollout reports
    pass@k at powers of two and n only), mean turns, outcomes, turns and invalid calls."""
    entries = []
    for result in results:
        tier, template, held_out, category = tasks[result["task"]]
        episodes = result.get("episodes", [])
        scored, passed = int(result.get("scored", 0)), int(result.get("passed", 0))
        estimates = {str(k): pass_at_k(scored, passed, k) for k in sorted({1, 10, n})}
        entries.append({"env": result["env"], "task": result["task"], "tier": tier, "template": template, "held_out": held_out,
                        "category": category, "pass_at_k": estimates, "scored": scored, "passed": passed,
                        "mean_turns": result["mean_turns"], "outcomes": result["outcomes"],
                        "turns": sum(e["turns"] for e in episodes), "invalid_calls": sum(e["invalid_calls"] for e in episodes)})
    return entries


def fmt(value):
    return "-" if value is None else "%.2f" % value


def markdown(tables, n):
    modes = list(tables)
    # pass@10 and pass@n are one column when n is 10 (and pass@10 is "-" below it)
    passes = [("pass@1", "pass@1")] + ([("pass@10", "pass@10")] if n > 10 else []) + [("pass@n", "pass@%d" % n)]
    if n == 1:
        passes = passes[:1]
    per_mode = [label for _, label in passes] + ["turns", "well-formed"]
    lines = ["| row | tasks | " + " | ".join("%s %s" % (m, c) for m in modes for c in per_mode) + " |",
             "|---|---|" + "---|" * (len(per_mode) * len(modes))]
    for index, row in enumerate(tables[modes[0]]):
        cells = []
        for mode in modes:
            other = tables[mode][index]
            cells += [fmt(other[key]) for key, _ in passes] + [fmt(other["mean_turns"]),
                                                                fmt(other["well_formed_turns"])]
        lines.append("| %s | %d | %s |" % (row["row"], row["tasks"], " | ".join(cells)))
    return "\n".join(lines)


def well_formed_totals(report):
    """Per mode: the well-formed share of every model turn over all rows."""
    lines = []
    for mode, figures in report["modes"].items():
        turns = sum(e["turns"] for e in figures["tasks"])
        invalid = sum(e["invalid_calls"] for e in figures["tasks"])
        share = "%.1f%%" % (100.0 * (1.0 - invalid / turns)) if turns else "-"
        lines.append("%s: %s of all %d model turns well-formed." % (mode, share, turns))
    return "\n".join(lines)


SETTINGS = ("model", "n", "seed", "temperature", "top_p", "tool_choice", "strict_tools")


def join_reports(paths):
    """One report holding the modes of several --json reports; ValueError on a conflict."""
    joined = None
    for path in paths:
        with open(path) as handle:
            report = json.load(handle)
        if joined is None:
            joined = {key: report.get(key) for key in SETTINGS}
            joined["modes"] = {}
        for key in SETTINGS:
            if report.get(key) != joined[key]:
                raise ValueError("%s: %s is %r, the first report's is %r" % (path, key, report.get(key), joined[key]))
        for mode, figures in report["modes"].items():
            if mode in joined["modes"]:
                raise ValueError("%s: mode %s is in an earlier report too" % (path, mode))
            joined["modes"][mode] = figures
    return joined


def readme_block(report, block):
    tool_choice = "" if report["tool_choice"] == "auto" else " --tool-choice " + report["tool_choice"]
    tool_choice += " --strict-tools" if report["strict_tools"] else ""
    return ("Measured by `/usr/bin/python3 scripts/policy_eval.py --model %s -n %d --seed %d --top-p %g%s` "
            "(temperature %g; modes %s):\n\n%s"
            % (report["model"], report["n"], report["seed"], report["top_p"], tool_choice, report["temperature"],
               ", ".join(report["modes"]), block))


def update_readme(path, block):
    text = open(path).read() if os.path.exists(path) else ""
    section = BEGIN + "\n" + block + "\n" + END
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    scratch = path + ".tmp"
    with open(scratch, "w") as out:
        out.write(text)
    os.replace(scratch, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="the model directory to play (required unless --from-json)")
    parser.add_argument("--from-json", help="comma-separated --json reports to join into one table; plays nothing")
    parser.add_argument("--envs", default=",".join(DEFAULT_ENVS), help="comma-separated environment source dirs")
    parser.add_argument("-n", type=int, default=100)
    parser.add_argument("--modes", default="dsa,dense")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-tokens-per-turn", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--tool-choice", default="auto", choices=["auto", "required"],
                        help="required: every turn decoded under the tool-call grammar (well-formed by construction)")
    parser.add_argument("--strict-tools", action="store_true",
                        help="every tool strict: with --tool-choice auto a turn is text alone or calls decoded "
                             "under the grammar (envforge rollout --strict-tools)")
    parser.add_argument("--top-p", type=float, default=1.0,
                        help="nucleus sampling (DeepSeek-V3.2's recommended setting is 0.95)")
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--readme", help="put the table into this markdown file")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args(argv)
    if args.from_json:
        return print_joined(args)
    if not args.model:
        parser.error("--model is required (or --from-json)")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in ("dsa", "dense") for m in modes):
        parser.error("--modes takes dsa and/or dense")
    if args.n < 1:
        parser.error("-n must be at least 1")
    if not 0.0 < args.top_p <= 1.0:
        parser.error("--top-p must be in (0, 1]")
    envforge_bin = os.path.join(args.build, "bin", "envforge")
    sources = [os.path.join(ROOT, s) if not os.path.isabs(s) else s for s in args.envs.split(",") if s.strip()]
    report = {"model": args.model, "n": args.n, "seed": args.seed, "temperature": args.temperature,
              "top_p": args.top_p, "tool_choice": args.tool_choice, "strict_tools": args.strict_tools, "modes": {}}
    try:
        with tempfile.TemporaryDirectory(prefix="policy-eval-") as scratch:
            packed = [(pack(envforge_bin, s, scratch), task_table(s)) for s in sources]
            for mode in modes:
                entries, seconds = [], 0.0
                for bundle, tasks in packed:
                    results, took = rollout(envforge_bin, bundle, args.model, args, mode == "dense")
                    entries += per_task_entries(results, tasks, args.n)
                    seconds += took
                report["modes"][mode] = {"seconds": round(seconds, 1), "rows": summarize(entries, args.n),
                                         "tasks": entries}
    except RuntimeError as error:
        print("policy_eval: %s" % error, file=sys.stderr)
        return 2
    publish(report, args)
    return 0


def publish(report, args):
    """Writes --json; prints the table and the well-formed totals, into --readme too when asked."""
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)
    block = markdown({mode: figures["rows"] for mode, figures in report["modes"].items()}, report["n"])
    block += "\n\n" + well_formed_totals(report)
    print(block)
    if args.readme:
        update_readme(args.readme, readme_block(report, block))


def print_joined(args):
    try:
        report = join_reports([p.strip() for p in args.from_json.split(",") if p.strip()])
    except (OSError, ValueError, KeyError) as error:
        print("policy_eval: --from-json: %s" % error, file=sys.stderr)
        return 2
    if report is None:
        print("policy_eval: --from-json: no report named", file=sys.stderr)
        return 2
    publish(report, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
