"""The GRPO run of scripts/train_grpo.py: sample -> score -> update -> export, step by step, with
the held-out evaluation before and after (policy/rollouts.py) and the run directory's files."""

import json
import os
import random
import shutil
import time

import numpy as np
import torch

from . import export, grpo, rollouts, train as train_lib

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def sampling_options(args):
    return {"temperature": args.temperature, "top_p": args.top_p, "top_k": args.top_k, "max_turns": args.max_turns,
            "max_tokens_per_turn": args.max_tokens_per_turn}


def training_options(args):
    options = sampling_options(args)
    if args.keep_routing:
        options["record_routing"] = True
    if args.keep_sampling_mask:
        options["record_kept_sets"] = True
    return options


def loss_config(args):
    return grpo.LossConfig(clip=args.clip, beta=args.beta, delta=args.delta, temperature=args.temperature,
                           unbiased_kl=args.unbiased_kl, off_policy_mask=args.off_policy_mask,
                           keep_routing=args.keep_routing, keep_sampling_mask=args.keep_sampling_mask)


class Trainer:
    """The policy being trained, the frozen reference, the optimizer, and one step's update."""

    def __init__(self, policy_dir, args):
        self.policy = export.load(policy_dir)
        self.reference = export.load(getattr(args, "reference", None) or policy_dir)
        for p in self.reference.parameters():
            p.requires_grad_(False)
        c = self.policy.config
        self.moe_layers = c["num_hidden_layers"] - c.get("first_k_dense_replace", 0)
        self.top_k = c["num_experts_per_tok"]
        self.params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = train_lib.make_optimizer(self.params, args.lr, 0.0)
        self.config = loss_config(args)
        self.minibatches, self.micro_batch = args.minibatches, args.micro_batch

    def _micro_batches(self, samples):
        """Samples in groups of at most micro_batch segments (a sample's segments stay together)."""
        groups, current, size = [], [], 0
        for index, sample in enumerate(samples):
            if current and size + len(sample.segments) > self.micro_batch:
                groups.append(current)
                current, size = [], 0
            current.append(index)
            size += len(sample.segments)
        if current:
            groups.append(current)
        return groups

    def _pack(self, samples, indices):
        items = [(seg, local) for local, i in enumerate(indices) for seg in samples[i].segments]
        return grpo.PackedBatch(items, self.moe_layers, self.top_k)

    def rescore(self, samples):
        """Token-exact check: max and mean |trainer logprob - engine logprob| over the samples'
        tokens, under the current weights as exported (bf16-rounded) with this run's switches."""
        rounded = export.rounded_copy(self.policy)
        diffs = []
        with torch.no_grad():
            for indices in self._micro_batches(samples):
                packed = self._pack(samples, indices)
                lp = grpo.token_logprobs(rounded, packed, self.config.temperature, self.config.keep_routing,
                                         self.config.keep_sampling_mask)
                diffs.append((lp - packed.old_logprob).abs())
        d = torch.cat(diffs) if diffs else torch.zeros(1, dtype=torch.float64)
        return {"max_abs": float(d.max()), "mean_abs": float(d.mean()), "tokens": int(d.numel())}

    def update(self, samples, rng):
        """GRPO updates over the samples in `minibatches` shuffled parts; returns figures."""
        order = list(range(len(samples)))
        rng.shuffle(order)
        parts = [order[i::self.minibatches] for i in range(self.minibatches)]
        totals = {"kl": [], "masked_sequences": 0, "clip_fraction": [], "ratio_max": 0.0, "divergence_mean": [],
                  "tokens": 0, "loss": []}
        self.policy.train()
        for part in parts:
            if not part:
                continue
            # a task's episodes side by side and by length: a micro-batch then shares the longest
            # prefix (system, tools and the task's prompt are computed once) and pads the least
            chosen = sorted((samples[i] for i in part), key=lambda s: (s.key, sum(len(g.ids) for g in s.segments)))
            self.optimizer.zero_grad(set_to_none=True)
            for indices in self._micro_batches(chosen):
                packed = self._pack(chosen, indices)
                advantages = torch.tensor([chosen[i].advantage for i in indices], dtype=torch.float64)
                with torch.no_grad():
                    ref_lp = grpo.token_logprobs(self.reference, packed, self.config.temperature,
                                                 self.config.keep_routing, self.config.keep_sampling_mask)
                new_lp = grpo.token_logprobs(self.policy, packed, self.config.temperature, self.config.keep_routing,
                                             self.config.keep_sampling_mask)
                loss, figures = grpo.grpo_loss(new_lp, packed.old_logprob, ref_lp, packed.owner, advantages,
                                               self.config)
                (loss * (len(indices) / len(chosen))).backward()
                totals["kl"].append(figures["kl"])
                totals["masked_sequences"] += figures["masked_sequences"]
                totals["clip_fraction"].append(figures["clip_fraction"])
                totals["ratio_max"] = max(totals["ratio_max"], figures["ratio_max"])
                totals["divergence_mean"].append(figures["divergence_mean"])
                totals["tokens"] += figures["tokens"]
                totals["loss"].append(float(loss))
            torch.nn.utils.clip_grad_norm_(self.params, 1.0)
            self.optimizer.step()
        self.policy.eval()
        return {key: (float(np.mean(value)) if isinstance(value, list) and value else value)
                for key, value in totals.items()}

    def export_to(self, directory, tokenizer_files, extra=None):
        export.export(self.policy, directory, tokenizer_files, extra)


def collect(source, model_dir, chosen, args, step):
    """Plays every chosen task G times; returns the recorded episodes (dicts)."""
    ids = []
    for task in chosen:
        figures = source.play(model_dir, task["env"], task["task"], args.group, args.seed * 1_000_003 + step,
                              training_options(args))
        ids += [e["id"] for e in figures["episodes"] if e.get("id")]
    return source.episodes(ids)


def score(episodes, args):
    samples, dropped = [], {}
    for episode in episodes:
        sample, why = grpo.sample_from_episode(episode, args.length_penalty, args.length_free)
        if sample is None:
            dropped[why] = dropped.get(why, 0) + 1
        else:
            samples.append(sample)
    return samples, dropped


def format_rows(before, after):
    lines = ["| row | tasks | pass@1 before | pass@1 after | pass@10 before | pass@10 after |",
             "|---|---|---|---|---|---|"]

    def fmt(v):
        return "-" if v is None else "%.3f" % v
    after_rows = {r["row"]: r for r in (after or {}).get("rows", [])}
    for row in before["rows"]:
        a = after_rows.get(row["row"], {})
        lines.append("| %s | %d | %s | %s | %s | %s |" % (row["row"], row["tasks"], fmt(row.get("pass@1")),
                                                         fmt(a.get("pass@1")), fmt(row.get("pass@10")),
                                                         fmt(a.get("pass@10"))))
    return "\n".join(lines)


def reused_evaluation(args, eval_tasks, train_templates):
    """The "before" of an earlier run's eval.json, when it was measured the same way on the same
    tasks; its rows are summarized again against this run's training templates."""
    with open(args.before_eval) as f:
        before = json.load(f)["before"]
    if (before.get("n"), before.get("seed")) != (args.eval_n, args.eval_seed):
        raise ValueError("--before-eval %s was measured with n=%s seed=%s, this run evaluates with n=%d seed=%d"
                         % (args.before_eval, before.get("n"), before.get("seed"), args.eval_n, args.eval_seed))
    if {(t["env"], t["task"]) for t in before["tasks"]} != {(t["env"], t["task"]) for t in eval_tasks}:
        raise ValueError("--before-eval %s holds other tasks than --eval-envs" % args.before_eval)
    result = rollouts.summarize(before["tasks"], train_templates)
    result.update({key: before.get(key) for key in ("seconds", "n", "seed")})
    return result


def run(args, envforge, log):
    started = time.time()
    os.makedirs(args.out, exist_ok=True)
    envforge_bin = os.path.join(args.build, "bin", "envforge")
    eval_dir = rollouts.pack_sources(envforge_bin, args.eval_envs, os.path.join(args.out, "envs", "eval"))
    store = os.path.join(args.out, "trajectories.db")
    if args.url:
        source = rollouts.RemoteRollouts(envforge, args.url, args.token, store)
    else:
        train_dir = rollouts.pack_sources(envforge_bin, args.train_envs, os.path.join(args.out, "envs", "train"))
        source = rollouts.InProcessRollouts(envforge, train_dir, store)
    eval_source = rollouts.InProcessRollouts(envforge, eval_dir, None)
    train_tasks = source.tasks()
    eval_tasks = eval_source.tasks()
    train_templates = {t["template"] for t in train_tasks}
    tokenizer_files = [os.path.join(args.policy, f) for f in TOKENIZER_FILES if os.path.exists(os.path.join(args.policy, f))]
    log("train_grpo: %d training tasks in %d environments, %d held-out tasks; %d steps x %d tasks x %d episodes"
        % (len(train_tasks), len({t["env"] for t in train_tasks}), len(eval_tasks), args.steps, args.tasks_per_step,
           args.group))

    def evaluate(model_dir, label):
        if args.eval_n == 0:
            return None
        log("train_grpo: evaluating %s (%d held-out tasks x %d episodes)" % (label, len(eval_tasks), args.eval_n))
        return rollouts.evaluate(eval_source, model_dir, eval_tasks, train_templates, args.eval_n, args.eval_seed,
                                 sampling_options(args), progress=log)

    if args.before_eval:
        before = reused_evaluation(args, eval_tasks, train_templates)
    else:
        before = evaluate(args.policy, "the starting policy")
    trainer = Trainer(args.policy, args)
    current = os.path.join(args.out, "policy")
    trainer.export_to(current, tokenizer_files)
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    metrics_path = os.path.join(args.out, "metrics.jsonl")
    open(metrics_path, "w").close()
    timings = {"rollout": 0.0, "update": 0.0, "export": 0.0}
    episodes_total = tokens_total = 0
    for step in range(args.steps):
        chosen = rng.sample(train_tasks, min(args.tasks_per_step, len(train_tasks)))
        t0 = time.time()
        episodes = collect(source, current, chosen, args, step)
        t1 = time.time()
        samples, dropped = score(episodes, args)
        trainable, groups, skipped = grpo.assign_advantages(samples, args.std_normalize)
        rescored = trainer.rescore(trainable[:args.micro_batch]) if step == 0 and trainable else None
        figures = trainer.update(trainable, rng) if trainable else {"kl": 0.0, "tokens": 0, "masked_sequences": 0}
        t2 = time.time()
        trainer.export_to(current, tokenizer_files)
        t3 = time.time()
        scored = len(samples)
        record = {"step": step + 1, "tasks": len(chosen), "episodes": len(episodes), "scored": scored,
                  "dropped": dropped, "groups": groups, "skipped_groups": skipped, "trained_episodes": len(trainable),
                  "mean_reward": float(np.mean([s.reward for s in samples])) if samples else 0.0,
                  "pass@1": float(np.mean([s.passed for s in samples])) if samples else 0.0,
                  "generated_tokens": int(sum(s.generated for s in samples)),
                  "seconds": {"rollout": t1 - t0, "update": t2 - t1, "export": t3 - t2}}
        record.update(figures)
        if rescored is not None:
            record["rescore"] = rescored
        timings["rollout"] += t1 - t0
        timings["update"] += t2 - t1
        timings["export"] += t3 - t2
        episodes_total += len(episodes)
        tokens_total += int(figures.get("tokens", 0))
        with open(metrics_path, "a") as out:
            out.write(json.dumps(record) + "\n")
        log("[grpo] step %d/%d reward %.3f pass@1 %.3f kl %.5f tokens %d (%d groups, %d skipped, %d masked) | "
            "rollout %.1fs update %.1fs export %.1fs"
            % (step + 1, args.steps, record["mean_reward"], record["pass@1"], record["kl"], record["tokens"],
               groups, skipped, record["masked_sequences"], t1 - t0, t2 - t1, t3 - t2))
        if (step + 1) % args.save_every == 0 or step + 1 == args.steps:
            checkpoint = os.path.join(args.out, "checkpoints", "step-%d" % (step + 1))
            shutil.rmtree(checkpoint, ignore_errors=True)
            shutil.copytree(current, checkpoint)
    after = evaluate(current, "the trained policy")
    summary = {"steps": args.steps, "seconds": time.time() - started, "timings": timings,
               "episodes": episodes_total, "trained_tokens": tokens_total,
               "episodes_per_s": episodes_total / max(timings["rollout"], 1e-9),
               "trained_tokens_per_s": tokens_total / max(timings["update"], 1e-9),
               "stabilisers": {name: bool(getattr(args, name)) for name in grpo.STABILISERS},
               "args": {k: ("(set)" if k == "token" and v else v) for k, v in vars(args).items()}}  # no secrets in files
    if before is not None:
        evaluation = {"before": before, "after": after}
        with open(os.path.join(args.out, "eval.json"), "w") as out:
            json.dump(evaluation, out, indent=1)
        table = format_rows(before, after)
        with open(os.path.join(args.out, "eval.md"), "w") as out:
            out.write("Held-out pass@1 and pass@10 (n=%d, seed %d), before and after %d GRPO steps:\n\n%s\n"
                      % (args.eval_n, args.eval_seed, args.steps, table))
        summary["eval"] = {"before": before["rows"], "after": after["rows"]}
        log(table)
    with open(os.path.join(args.out, "run.json"), "w") as out:
        json.dump(summary, out, indent=1)
    log("train_grpo: done in %.0fs (rollout %.0fs, update %.0fs, export %.0fs); %s"
        % (summary["seconds"], timings["rollout"], timings["update"], timings["export"], args.out))
    return summary
