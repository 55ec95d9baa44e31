#!/usr/bin/python3
"""The procedural proposer of `envforge synth` (issue 13): one seeded generator per category.

envforge runs this program (embedded in the binary and written to a private directory at run
time; ENVFORGE_SYNTH_PROCEDURAL=DIR runs a source checkout's copy instead) once per request and
reads one JSON object from its standard output:

    propose.py categories
        {"categories": [{"id", "title", "description", "max_level", "tools": [...],
                         "base_tools": [...]}]}
    propose.py environment --category C --seed S
        {"category", "seed", "name", "description", "schema_sql", "preamble",
         "tools": [{"name", "source"}, ...]  (the whole catalogue, in catalogue order),
         "base_tools": [names]}        (the toolset before any augmentation)
    propose.py task --category C --seed S --lineage J --level L [--attempt A]
        {"id", "level", "difficulty", "prompt", "answer_schema", "knobs", "solution", "verifier",
         "oracle", "tools": [names the solution calls]}

and, for people and helpers writing generators,

    propose.py build --category C --seed S [--lineages M] [--levels L] --out DIR
        writes a complete environment source directory (every tool of the catalogue, the tasks of
        every lineage at every level) that `envforge env pack DIR -o X.envdb` packs.

A request the generator cannot serve (unknown category, a level past the category's max_level)
prints {"error": "..."} and exits 2. Everything is a pure function of the arguments: the same
request gives byte-identical output.

CATEGORY MODULES (cat_<id>.py beside this file) define:
    ID, TITLE, DESCRIPTION    strings; ID matches [a-z][a-z0-9_]*
    MAX_LEVEL                 int >= 4: levels 1..MAX_LEVEL, each harder than the one before
    PREAMBLE                  the head of tools.py: docstring, imports, private helpers
    TOOLS                     dict name -> source of one public function (the tool catalogue)
    BASE_TOOLS                list of names: the level-1 toolset; the rest of TOOLS are added
                              only when a task needs them (toolset augmentation)
    environment(seed)         -> {"name", "description", "schema_sql"}
    task(seed, lineage, level, attempt) -> {"id", "prompt", "answer_schema", "knobs",
                              "solution", "verifier", "oracle" ("" for none), "tools"}
task() must derive everything from the database that environment(seed) describes (oracle first:
the constraints come from rows, so every task is solvable by construction), record its knobs
(level, lineage, template and the difficulty knobs: constraints, hops, list_size, distractors,
hidden_steps, ...) and use `attempt` to draw other parameters when a repair asks for another try.
"""

import argparse
import importlib
import json
import os
import re
import sys

CATEGORY_IDS = ("trip_planning", "logistics", "e_commerce", "calendar", "inventory",
                "course_planning", "shop")
_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
_TASK_KEYS = ("id", "prompt", "answer_schema", "knobs", "solution", "verifier", "oracle", "tools")


class RequestError(Exception):
    pass


def load(category):
    if category not in CATEGORY_IDS:
        raise RequestError("unknown category %r (known: %s)" % (category, ", ".join(CATEGORY_IDS)))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    module = importlib.import_module("cat_" + category)
    if module.ID != category or int(module.MAX_LEVEL) < 4:
        raise RequestError("category module cat_%s.py is inconsistent (ID %r, MAX_LEVEL %r)"
                           % (category, module.ID, module.MAX_LEVEL))
    return module


def describe(module):
    return {"id": module.ID, "title": module.TITLE, "description": module.DESCRIPTION,
            "max_level": int(module.MAX_LEVEL), "tools": list(module.TOOLS),
            "base_tools": list(module.BASE_TOOLS)}


def environment(module, seed):
    env = module.environment(seed)
    for key in ("name", "description", "schema_sql"):
        if not isinstance(env.get(key), str) or not env[key]:
            raise RequestError("cat_%s.environment(%d): %r missing" % (module.ID, seed, key))
    if not _ID.match(env["name"]):
        raise RequestError("cat_%s.environment(%d): bad name %r" % (module.ID, seed, env["name"]))
    return {"category": module.ID, "seed": seed, "name": env["name"],
            "description": env["description"], "schema_sql": env["schema_sql"],
            "preamble": module.PREAMBLE,
            "tools": [{"name": n, "source": src} for n, src in module.TOOLS.items()],
            "base_tools": list(module.BASE_TOOLS)}


def task(module, seed, lineage, level, attempt):
    if not 1 <= level <= int(module.MAX_LEVEL):
        raise RequestError("category %s has levels 1..%d, not %d"
                           % (module.ID, int(module.MAX_LEVEL), level))
    t = module.task(seed, lineage, level, attempt)
    missing = [k for k in _TASK_KEYS if k not in t]
    if missing:
        raise RequestError("cat_%s.task: missing %s" % (module.ID, ", ".join(missing)))
    if not _ID.match(t["id"]):
        raise RequestError("cat_%s.task: bad id %r" % (module.ID, t["id"]))
    unknown = [n for n in t["tools"] if n not in module.TOOLS]
    if unknown:
        raise RequestError("cat_%s.task %s: tools not in the catalogue: %s"
                           % (module.ID, t["id"], ", ".join(unknown)))
    knobs = dict(t["knobs"])
    knobs.setdefault("level", level)
    knobs.setdefault("lineage", lineage)
    out = {key: t[key] for key in _TASK_KEYS}
    out["knobs"] = knobs
    out["level"] = level
    out["difficulty"] = min(level, 5)
    return out


def tools_py(env, names):
    """tools.py of a toolset: the preamble, then each tool in catalogue order."""
    chosen = [t["source"].strip("\n") for t in env["tools"] if t["name"] in names]
    return env["preamble"].rstrip("\n") + "\n\n\n" + "\n\n\n".join(chosen) + "\n"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def task_json(t):
    return json.dumps({"prompt": t["prompt"], "answer_schema": t["answer_schema"],
                       "difficulty": t["difficulty"], "knobs": t["knobs"]}, indent=2,
                      ensure_ascii=False) + "\n"


def build(module, seed, lineages, levels, out):
    env = environment(module, seed)
    write(os.path.join(out, "env.json"), json.dumps({
        "name": env["name"], "kind": "general", "category": module.ID,
        "description": env["description"],
        "provenance": {"generator": "envsynth procedural", "category": module.ID, "seed": seed}},
        indent=2) + "\n")
    write(os.path.join(out, "schema.sql"), env["schema_sql"])
    write(os.path.join(out, "tools.py"), tools_py(env, set(t["name"] for t in env["tools"])))
    for lineage in range(lineages):
        for level in range(1, min(levels, int(module.MAX_LEVEL)) + 1):
            t = task(module, seed, lineage, level, 0)
            d = os.path.join(out, "tasks", t["id"])
            write(os.path.join(d, "task.json"), task_json(t))
            for name in ("solution", "verifier", "oracle"):
                if t[name]:  # a category without oracles (shop) leaves oracle.py out
                    write(os.path.join(d, name + ".py"), t[name])
    return {"name": env["name"], "out": out}


def main(argv):
    parser = argparse.ArgumentParser(prog="propose.py", description=__doc__.split("\n")[0])
    parser.add_argument("op", choices=("categories", "environment", "task", "build"))
    parser.add_argument("--category")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lineage", type=int, default=0)
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--attempt", type=int, default=0)
    parser.add_argument("--lineages", type=int, default=2)
    parser.add_argument("--levels", type=int, default=4)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    try:
        if args.op == "categories":
            reply = {"categories": [describe(load(c)) for c in CATEGORY_IDS]}
        else:
            if not args.category:
                raise RequestError("--category is required")
            module = load(args.category)
            if args.op == "environment":
                reply = environment(module, args.seed)
            elif args.op == "task":
                reply = task(module, args.seed, args.lineage, args.level, args.attempt)
            else:
                if not args.out:
                    raise RequestError("--out is required")
                reply = build(module, args.seed, args.lineages, args.levels, args.out)
    except RequestError as exc:
        json.dump({"error": str(exc)}, sys.stdout)
        sys.stdout.write("\n")
        return 2
    json.dump(reply, sys.stdout, ensure_ascii=False, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
