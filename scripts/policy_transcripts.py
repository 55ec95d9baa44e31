#!/usr/bin/python3
"""Training transcripts for the policy model: gold solutions played in real sandbox sessions.

    policy_transcripts.py --out F.jsonl --seeds A-B [--instances K] [--templates train|all|a,b]
                          [--thinking-fraction P] [--recovery-fraction R] [--work DIR] [--build DIR]
                          [--seed S]
    policy_transcripts.py --out F.jsonl --seeds A-B --categories C1,C2,... [--levels L]
                          [--lineages M] [...]

With --categories, the environments are those of `envforge synth`'s procedural generators
(envsynth/procedural/propose.py build) instead of the shop's: per seed and category one
environment with M lineages of levels 1..L (the tier of a transcript is its task's level).

For every seed in A..B, scripts/policy_envs.py writes one environment source, `envforge env pack`
packs it, and an in-process runtime (the envforge Python module) serves all of them. For every
task, the task's gold solution.py runs here with a `tools` object whose calls go to a real
sandbox session of that task (the same tools, database and argument checks an agent meets), and
the answer is submitted to the real verifier: a transcript whose answer does not pass is an error.

The conversation is the one the rollout loop (agents/episode.cc) builds: the default system
prompt, the task prompt as the user message, one assistant turn per tool call, each result as a
tool message (ToolResult.message_text: the loop's own rule), and a last assistant turn calling
submit_result with the answer's JSON text (the list tiers' turn says a word first:
policy_envs.SUBMIT_REMARKS). It is rendered by envforge.encode_chat, the engine's
DSV32 encoder, with the session's tool specs, so training sees the bytes inference will see.
A fraction of the transcripts (chosen per task by --seed) is in thinking mode, with a short
reasoning before each call. With --recovery-fraction P, a fraction P (chosen per task too) shows a
mistaken first call (another name or category, played in a fresh session of the task, its real
error message back) before the gold turns; the mistake is context only, outside the spans.

One JSON object per line:
  {"env", "seed", "task", "template", "tier", "thinking", "recovery", "calls", "text",
   "spans": [[start, end], ...], "messages": [the conversation, as encode_chat takes it]}
spans are Python str offsets into text of what the model generates: each assistant turn from the
end of the prompt the engine would have rendered before it up to and including its EOS token.
The file is written to a temporary name and renamed, so it is whole or absent.
"""

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import policy_envs  # noqa: E402
from policy import rollouts  # noqa: E402


def parse_seeds(text):
    """"1-300" or "5" or "1-3,900001" -> sorted list of ints."""
    seeds = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            seeds.update(range(int(low), int(high) + 1))
        else:
            seeds.add(int(part))
    if not seeds:
        raise ValueError("--seeds names no seed: %r" % text)
    return sorted(seeds)


def template_names(selection):
    """--templates: "train" (policy_envs.TRAIN_TEMPLATES), "all", or a comma list."""
    known = {t.name: t for t in policy_envs.TEMPLATES}
    if selection == "all":
        return list(known)
    if selection == "train":
        return list(policy_envs.TRAIN_TEMPLATES)
    names = [n.strip() for n in selection.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError("unknown template(s) %s; known: %s" % (", ".join(unknown), ", ".join(known)))
    return names


def import_envforge(build_dir):
    sys.path.insert(0, os.path.join(build_dir, "python"))
    import envforge  # noqa: E402  (the built module)
    return envforge


def tool_parameter_order(tools_py):
    """{tool name: [parameter names in order]} from the environment's tools.py, so that a gold
    solution's positional arguments map to names as the sandbox's tools proxy maps them."""
    with open(tools_py) as source:
        tree = ast.parse(source.read(), tools_py)
    order = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            order[node.name] = [arg.arg for arg in node.args.args]
    return order


class GoldToolError(RuntimeError):
    pass


class RecordingTools:
    """The `tools` object a gold solution receives: every call goes to the session and is kept."""

    def __init__(self, session, parameters):
        self._session = session
        self._parameters = parameters
        self.calls = []  # (name, arguments dict, result json, message_text)

    def __getattr__(self, name):
        if name.startswith("_") or name not in self._parameters:
            raise AttributeError("the environment has no tool %r" % name)

        def call(*args, **kwargs):
            names = self._parameters[name]
            if len(args) > len(names):
                raise GoldToolError("%s takes %d arguments, the solution gave %d" % (name, len(names), len(args)))
            arguments = dict(zip(names, args))
            arguments.update(kwargs)
            result = self._session.call_with(name, arguments)
            view = result.to_dict()
            self.calls.append((name, arguments, view, result.message_text))
            if not result.ok:
                raise GoldToolError("%s(%s) answered %s: %s" % (name, arguments, view.get("outcome"), view.get("message")))
            return view.get("content")

        return call


def answer_text_of(answer):
    """The submitted text: compact JSON, the tool results' own formatting, so that a value read
    from a result ("price":851) is written back with the same tokens ({"price":851})."""
    return answer if isinstance(answer, str) else json.dumps(answer, separators=(",", ":"))


def compact(arguments):
    return ", ".join("%s=%s" % (key, json.dumps(value)) for key, value in arguments.items())


def conversation(envforge, prompt, calls, answer_text, thinking, remark=""):
    """The rollout loop's messages for a gold run: assistant turn per call, then submit_result,
    whose turn says `remark` first (policy_envs.SUBMIT_REMARKS says why)."""
    messages = [{"role": "system", "content": envforge.DEFAULT_SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
    for name, arguments, _view, message_text in calls:
        turn = {"role": "assistant", "content": "", "tool_calls": [{"name": name, "arguments": arguments}]}
        if thinking:
            turn["reasoning_content"] = "Next I call %s with %s." % (name, compact(arguments))
        messages.append(turn)
        messages.append({"role": "tool", "content": message_text})
    submit = {"role": "assistant", "content": remark,
              "tool_calls": [{"name": "submit_result", "arguments": {"answer_text": answer_text}}]}
    if thinking:
        submit["reasoning_content"] = "The answer is %s." % answer_text
    messages.append(submit)
    return messages


def render(envforge, messages, tools, thinking):
    """The full text and the spans of its assistant turns (see the module comment)."""
    text = envforge.encode_chat(messages, tools=tools, thinking=thinking)
    spans = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = envforge.encode_chat(messages[:index], tools=tools, thinking=thinking)
        through = envforge.encode_chat(messages[:index + 1], tools=tools, thinking=thinking)
        if not text.startswith(through) or not through.startswith(before):
            raise RuntimeError("the rendering of message %d is not a prefix of the conversation's" % index)
        spans.append([len(before), len(through)])
    return text, spans


PROPOSE_PY = os.path.join(ROOT, "envsynth", "procedural", "propose.py")


def synth_sources(seeds, categories, lineages, levels, work):
    """One procedural synth environment per seed and category (propose.py build), named
    <category>_<seed>; returns [(seed, env name, source dir)]."""
    envs = []
    for category in categories:
        for seed in seeds:
            source = os.path.join(work, "sources", "%s_%d" % (category, seed))
            if not os.path.isdir(source):
                command = [sys.executable, PROPOSE_PY, "build", "--category", category, "--seed", str(seed),
                           "--lineages", str(lineages), "--levels", str(levels), "--out", source]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    raise RuntimeError("propose.py build --category %s --seed %d failed: %s"
                                       % (category, seed, done.stderr.strip()[-400:]))
            with open(os.path.join(source, "env.json")) as handle:
                envs.append((seed, json.load(handle)["name"], source))
    return envs


def generate_sources(seeds, instances, templates, work):
    """Writes and packs one environment per seed; returns [(seed, env name, source dir)]."""
    envs = []
    for seed in seeds:
        name = "shop_%06d" % seed
        source = os.path.join(work, "sources", name)
        if not os.path.isdir(source):
            policy_envs.generate(seed, source, instances=instances, templates=templates, name=name)
        envs.append((seed, name, source))
    return envs


def pack_all(envforge_bin, envs, work, progress):
    packed_dir = os.path.join(work, "envs")
    os.makedirs(packed_dir, exist_ok=True)

    def pack(item):
        _seed, name, source = item
        target = os.path.join(packed_dir, name + ".envdb")
        if os.path.exists(target):
            return
        rollouts.pack_source(envforge_bin, source, target)

    with ThreadPoolExecutor(max_workers=2) as pool:
        for count, _ in enumerate(pool.map(pack, envs), 1):
            progress("packed", count, len(envs))
    return packed_dir


RUNTIME_CHUNK = 16  # environments served by one in-process runtime


def chunk_dir(packed_dir, work, first, chunk):
    """A directory holding (links to) only the chunk's packed environments."""
    directory = os.path.join(work, "chunks", "%06d" % first)
    os.makedirs(directory, exist_ok=True)
    for _seed, name, _source in chunk:
        link = os.path.join(directory, name + ".envdb")
        if not os.path.lexists(link):
            os.symlink(os.path.join(packed_dir, name + ".envdb"), link)
    return directory


def wrong_first_call(session, rng, name, arguments):
    """A call like the gold's first one with its name or category mistaken, played in the session
    and answered with an error, as RecordingTools keeps calls (name, arguments, view, message_text);
    None when no such mistake errs.
    A name keeps its item noun and gets another lexicon word ("Mita Brush" for "Pola Brush"), a
    category becomes another known category: the slips a small policy makes when a copy fails."""
    if "name" in arguments:
        key, words = "name", arguments["name"].split(" ")
        candidates = [" ".join([w] + words[1:]) for w in policy_envs.LEXICON if w != words[0]]
    elif "category" in arguments:
        key = "category"
        candidates = [c for c, _ in policy_envs.CATEGORIES if c != arguments["category"]]
    else:
        return None
    rng.shuffle(candidates)
    for candidate in candidates[:8]:  # a shop has 5-6 of the 9 categories: 8 tries always find one it lacks
        wrong = dict(arguments, **{key: candidate})
        result = session.call_with(name, wrong)
        if not result.ok:
            return name, wrong, result.to_dict(), result.message_text
    return None


def transcripts_of_env(envforge, connection, seed, name, source, choice_seed, thinking_fraction,
                       recovery_fraction=0.0):
    parameters = tool_parameter_order(os.path.join(source, "tools.py"))
    category = rollouts.synth_category(source)
    for task_id in sorted(os.listdir(os.path.join(source, "tasks"))):
        task_dir = os.path.join(source, "tasks", task_id)
        with open(os.path.join(task_dir, "task.json")) as handle:
            task = json.load(handle)
        with open(os.path.join(task_dir, "solution.py")) as handle:
            solution_source = handle.read()
        knobs = task.get("knobs", {})
        # Chosen per task, so that adding seeds or templates does not move the other choices.
        thinking = random.Random("%d/%s/%s" % (choice_seed, name, task_id)).random() < thinking_fraction
        recovery_rng = random.Random("%d/%s/%s/recovery" % (choice_seed, name, task_id))
        recover = recovery_rng.random() < recovery_fraction
        session = connection.create_session(name, task_id)
        try:
            tools = RecordingTools(session, parameters)
            namespace = {}
            exec(compile(solution_source, os.path.join(task_dir, "solution.py"), "exec"), namespace)
            answer = namespace["solve"](tools)
            answer_text = answer_text_of(answer)
            verdict = session.submit(answer_text)
            if not verdict.get("passed"):
                raise RuntimeError("%s/%s: the gold answer %s did not pass its verifier: %s" % (name, task_id, answer_text, verdict))
            mistake = None
            if recover and tools.calls:  # played in a fresh session: the state the mistake would meet
                probe = connection.create_session(name, task_id)
                try:
                    mistake = wrong_first_call(probe, recovery_rng, *tools.calls[0][:2])
                finally:
                    probe.close()
            # A mistake is a call before the gold's: context only, so its turn's span is dropped.
            context = [mistake] if mistake is not None else []
            remark = policy_envs.SUBMIT_REMARKS.get(knobs.get("template"), "")
            messages = conversation(envforge, session.prompt, context + tools.calls, answer_text, thinking, remark)
            text, spans = render(envforge, messages, session.tools, thinking)
            spans = spans[len(context):]
        finally:
            session.close()
        # A synth task's template is named by its category too (templates repeat across categories).
        template = knobs.get("template", task_id)
        if category:
            template = "%s/%s" % (category, template)
        yield {"env": name, "seed": seed, "task": task_id, "template": template,
               "tier": task.get("difficulty", 0), "thinking": thinking, "recovery": mistake is not None,
               "calls": len(tools.calls) + 1,
               "text": text, "spans": spans, "messages": messages}


def make_progress(quiet):
    last = [0.0]

    def progress(what, done, total):
        now = time.monotonic()
        if quiet or (now - last[0] < 2.0 and done != total):
            return
        last[0] = now
        print("policy_transcripts: %s %d/%d" % (what, done, total), file=sys.stderr, flush=True)

    return progress


def write_transcripts(args):
    templates = template_names(args.templates)
    seeds = parse_seeds(args.seeds)
    envforge = import_envforge(args.build)
    envforge_bin = os.path.join(args.build, "bin", "envforge")
    work = args.work or tempfile.mkdtemp(prefix="policy-transcripts-")
    progress = make_progress(args.quiet)
    if args.categories:
        categories = [c.strip() for c in args.categories.split(",") if c.strip()]
        envs = synth_sources(seeds, categories, args.lineages, args.levels, work)
    else:
        envs = generate_sources(seeds, args.instances, templates, work)
    packed_dir = pack_all(envforge_bin, envs, work, progress)
    directory = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(directory, exist_ok=True)
    count = 0
    started = time.monotonic()
    with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, suffix=".tmp") as out:
        try:
            for first in range(0, len(envs), RUNTIME_CHUNK):
                chunk = envs[first:first + RUNTIME_CHUNK]
                # One runtime per chunk: a runtime keeps a zygote per environment it served.
                with envforge.Runtime(chunk_dir(packed_dir, work, first, chunk)) as connection:
                    for number, (seed, name, source) in enumerate(chunk, first + 1):
                        for record in transcripts_of_env(envforge, connection, seed, name, source, args.seed,
                                                         args.thinking_fraction, args.recovery_fraction):
                            out.write(json.dumps(record, ensure_ascii=False) + "\n")
                            count += 1
                        progress("played", number, len(envs))
            out.flush()
            os.fsync(out.fileno())
            os.fchmod(out.fileno(), 0o644)
        except BaseException:
            os.unlink(out.name)
            raise
    os.replace(out.name, args.out)
    if not args.work and not args.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return {"transcripts": count, "envs": len(envs), "seconds": round(time.monotonic() - started, 1), "out": args.out}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSONL file to write")
    parser.add_argument("--seeds", required=True, help='environment seeds, e.g. "1-300" or "900001,900002"')
    parser.add_argument("--instances", type=int, default=4, help="tasks per template per environment")
    parser.add_argument("--templates", default="train", help='"train" (the templates trained on), "all", or a comma list')
    parser.add_argument("--thinking-fraction", type=float, default=0.25)
    parser.add_argument("--recovery-fraction", type=float, default=0.0,
                        help="share of transcripts whose first call is mistaken once (an error back) before the gold's")
    parser.add_argument("--seed", type=int, default=0, help="seed of the thinking-mode and recovery choices")
    parser.add_argument("--categories", help="synth categories (envsynth/procedural) instead of the shop environments")
    parser.add_argument("--levels", type=int, default=2, help="with --categories: levels 1..L of each lineage")
    parser.add_argument("--lineages", type=int, default=2, help="with --categories: lineages per environment")
    parser.add_argument("--work", help="keep generated sources and packed envs here (reused when present)")
    parser.add_argument("--keep-work", action="store_true")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="the CMake build directory")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.instances < 1:
        parser.error("--instances must be at least 1")
    if args.levels < 1 or args.lineages < 1:
        parser.error("--levels and --lineages must be at least 1")
    for option in ("thinking_fraction", "recovery_fraction"):
        if not 0.0 <= getattr(args, option) <= 1.0:
            parser.error("--%s must lie in [0, 1]" % option.replace("_", "-"))
    try:
        report = write_transcripts(args)
    except (ValueError, RuntimeError, GoldToolError) as error:
        print("policy_transcripts: %s" % error, file=sys.stderr)
        return 2
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
