"""Episodes for the GRPO trainer and its evaluation, played by envforge.

InProcessRollouts plays tasks with the envforge Python module in this process
(envforge.rollout: sandbox sessions and the embedded engine here) and reads the recorded episodes
back (envforge.read_episodes); RemoteRollouts plays them against the sessions of a running
`envforge serve` (envforge.rollout(url=...)), the engine still here. Every call opens the engine on the model directory it is given,
so a checkpoint exported between steps is what the next step samples from.

Evaluation (evaluate): every task of the evaluation environments played n times with one seed,
pass@1 and pass@k (the unbiased estimator) per task, averaged per row: "tier D" by the task's
difficulty, and "held-out T" for tasks whose template (knobs.template, else the task id) never
occurs in the training environments.
"""

import json
import math
import os
import subprocess
import time


def pack_source(envforge_bin, source, target):
    """`envforge env pack source -o target`, written beside target and renamed into place (no
    half-written bundle); RuntimeError with envforge's message when it fails."""
    scratch = target + ".tmp"
    done = subprocess.run([envforge_bin, "env", "pack", source, "-o", scratch], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError("envforge env pack %s: %s" % (source, done.stderr.strip()))
    os.replace(scratch, target)
    return target


def pack_sources(envforge_bin, directory, out_dir):
    """Every environment under `directory` as an *.envdb in out_dir: bundles are linked, source
    directories (holding env.json) packed with `envforge env pack`. Returns out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    found = 0
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.endswith(".envdb") and os.path.isfile(path):
            target = os.path.join(out_dir, name)
            if not os.path.exists(target):
                os.symlink(os.path.abspath(path), target)
            found += 1
        elif os.path.isfile(os.path.join(path, "env.json")):
            pack_source(envforge_bin, path, os.path.join(out_dir, name + ".envdb"))
            found += 1
    if not found:
        raise RuntimeError("%s holds no environment (*.envdb files or source directories with env.json)" % directory)
    return out_dir


def synth_category(source):
    """The category of an environment source made by `envforge synth`'s procedural generators
    (env.json "category"), or "" for the policy's own shops (category "shop") and sources without one."""
    with open(os.path.join(source, "env.json"), encoding="utf-8") as handle:
        category = json.load(handle).get("category", "")
    return "" if category == "shop" else category


def template_of(task):
    return (task.get("knobs") or {}).get("template") or task["id"]


class InProcessRollouts:
    def __init__(self, envforge_module, envs_dir, store_path):
        self.envforge, self.envs_dir, self.store_path = envforge_module, envs_dir, store_path

    def tasks(self):
        """[{"env", "task", "difficulty", "template"}] of every environment in envs_dir."""
        out = []
        with self.envforge.Runtime(self.envs_dir) as runtime:
            for env in runtime.envs():
                for task in runtime.tasks(env["name"]):
                    out.append({"env": env["name"], "task": task["id"], "difficulty": int(task.get("difficulty") or 0),
                                "template": template_of(task)})
        return out

    def play(self, model_dir, env, task, n, seed, sampling, record=True):
        """envforge.rollout figures of one task (or a list of every task's when task is None)."""
        return self.envforge.rollout(self.envs_dir, env, task, backend="embedded:" + os.path.abspath(model_dir), n=n,
                                     seed=seed, concurrency=0, trajectories=self.store_path if record else None,
                                     **sampling)

    def episodes(self, ids):
        return self.envforge.read_episodes(self.store_path, ids)


class RemoteRollouts(InProcessRollouts):
    """The same over RPC: the environments, sessions, tools and verifiers of a running
    `envforge serve` at url; the model (the embedded engine) in this process. Episodes are
    recorded here, in store_path (the server records its own served episodes as well)."""

    def __init__(self, envforge_module, url, token, store_path):
        super().__init__(envforge_module, "", store_path)
        self.url, self.token = url, token

    def tasks(self):
        out = []
        client = self.envforge.Client(self.url, token=self.token)
        try:
            for env in client.envs():
                for task in client.tasks(env["name"]):
                    out.append({"env": env["name"], "task": task["id"], "difficulty": int(task.get("difficulty") or 0),
                                "template": template_of(task)})
        finally:
            client.close()
        return out

    def play(self, model_dir, env, task, n, seed, sampling, record=True):
        return self.envforge.rollout("", env, task, url=self.url, token=self.token,
                                     backend="embedded:" + os.path.abspath(model_dir), n=n, seed=seed, concurrency=0,
                                     trajectories=self.store_path if record else None, **sampling)


def pass_at_k(n, c, k):
    """The unbiased estimator 1 - C(n-c, k) / C(n, k) of n scored episodes, c passed; None when k > n."""
    if k > n or n <= 0:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def evaluate(source, model_dir, eval_tasks, train_templates, n, seed, sampling, ks=(1, 10), progress=None):
    """{"rows": [{"row", "tasks", "pass@1", "pass@10", ...}], "tasks": [...], "seconds", "n", "seed"}."""
    started = time.time()
    info = {(t["env"], t["task"]): t for t in eval_tasks}
    per_task = []
    for env in sorted({t["env"] for t in eval_tasks}):
        for figures in source.play(model_dir, env, None, n, seed, sampling, record=False):
            task = info[(env, figures["task"])]
            per_task.append({"env": env, "task": task["task"], "difficulty": task["difficulty"],
                             "template": task["template"], "scored": int(figures["scored"]),
                             "passed": int(figures["passed"])})
        if progress:
            progress("evaluated %s (%d tasks so far, %.0fs)" % (env, len(per_task), time.time() - started))
    result = summarize(per_task, train_templates, ks)
    result.update({"seconds": time.time() - started, "n": n, "seed": seed})
    return result


def summarize(per_task, train_templates, ks=(1, 10)):
    """Rows of per-task results ({"env", "task", "difficulty", "template", "scored", "passed"}):
    "tier D" per difficulty, "held-out T" per template absent from train_templates; each row the
    mean over its tasks of pass@k (the unbiased estimator per task)."""
    tasks = []
    for entry in per_task:
        entry = dict(entry)
        entry["held_out"] = entry["template"] not in train_templates
        entry["row"] = ("held-out %s" % entry["template"]) if entry["held_out"] else ("tier %d" % entry["difficulty"])
        for k in ks:
            entry["pass@%d" % k] = pass_at_k(entry["scored"], entry["passed"], k)
        tasks.append(entry)
    rows = {}
    for entry in tasks:
        order = (1, entry["template"]) if entry["held_out"] else (0, "%04d" % entry["difficulty"])
        rows.setdefault((order, entry["row"]), []).append(entry)
    table = []
    for (_, label), entries in sorted(rows.items()):
        row = {"row": label, "tasks": len(entries)}
        for k in ks:
            values = [e["pass@%d" % k] for e in entries if e["pass@%d" % k] is not None]
            row["pass@%d" % k] = sum(values) / len(values) if values else None
        table.append(row)
    return {"rows": table, "tasks": tasks}
