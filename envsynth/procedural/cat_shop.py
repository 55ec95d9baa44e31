"""Category "shop": the policy model's own environments (scripts/policy_envs.py) as a synthesis
category, so that the shipped policy (data/models/policy-small, trained on shops of other seeds)
meets tasks it can solve sometimes, and the pass@k filter has something to keep.

Levels are policy_envs' tiers: 1 a single look-up (price, stock), 2 a two-hop chain (a product's
supplier's city or phone), 3 a choice over a list (cheapest in a category), 4 a choice under
constraints (cheapest with stock and rating floors), 5 an aggregate over two categories. Lineage j
takes template j mod (templates of the tier) and an instance of it; `attempt` takes the next
instance. Prompts, tools and verifiers are policy_envs' own, byte for byte, so the policy sees the
distribution it was trained on (on seeds it never saw: use seeds outside 1..TRAIN_SEED_MAX, e.g.
envforge synth --seed chosen so that the derived seeds are large; the derived seeds of a run are
1..999,999,999, mostly above the training range). The verifiers have no oracle: the audit judges
them on their own (policy_envs' verifiers check one value against the database).
"""

import ast
import functools
import json
import os
import sys

try:
    import policy_envs
except ImportError:  # a source checkout: envsynth/procedural beside scripts/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
    import policy_envs

ID = "shop"
TITLE = "Shop"
DESCRIPTION = ("A small shop: products (category, price, stock, rating, supplier) and suppliers (city, "
               "phone), with made-up names; the environments the shipped policy model was trained on.")
MAX_LEVEL = 5
_INSTANCES = 4


def _split_tools(text):
    """(preamble, {tool name: source}): tools.py cut into its public functions and the rest."""
    lines = text.splitlines(keepends=True)
    tools, taken = {}, set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            tools[node.name] = "".join(lines[start:node.end_lineno])
            taken.update(range(start, node.end_lineno))
    preamble = "".join(line for i, line in enumerate(lines) if i not in taken)
    return preamble.rstrip("\n") + "\n", tools


PREAMBLE, TOOLS = _split_tools(policy_envs.TOOLS_PY)
BASE_TOOLS = list(TOOLS)
_TIERS = {}
for _t in policy_envs.TEMPLATES:
    _TIERS.setdefault(_t.tier, []).append(_t.name)


@functools.lru_cache(maxsize=4)
def _render(seed):
    return policy_envs.render(seed, _INSTANCES, None, "shop_%d" % seed)


def environment(seed):
    files = _render(seed)
    manifest = json.loads(files["env.json"])
    return {"name": "%s_%d" % (ID, seed), "description": manifest["description"],
            "schema_sql": files["schema.sql"]}


def task(seed, lineage, level, attempt):
    templates = _TIERS[level]
    template = templates[lineage % len(templates)]
    instance = (lineage // len(templates) + attempt) % _INSTANCES
    source = "tasks/%s_%02d/" % (template, instance)
    files = _render(seed)
    spec = json.loads(files[source + "task.json"])
    knobs = dict(spec.get("knobs", {}))
    knobs.update({"template": template, "instance": instance, "tier": level})
    return {"id": "%s_l%d_%d" % (template, level, lineage), "prompt": spec["prompt"],
            "answer_schema": spec["answer_schema"], "knobs": knobs,
            "solution": files[source + "solution.py"], "verifier": files[source + "verifier.py"],
            "oracle": "", "tools": []}
