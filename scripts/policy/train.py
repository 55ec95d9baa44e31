"""The DSA training recipe (DeepSeek-V3.2 paper, section 2.1) over packed transcript batches.

Stages (each with its own step count):
  a. "dense": dense attention, every weight trained with the LM loss on the spans;
  b. "warmup": everything frozen but the lightning indexers, trained with
     KL(main || indexer) per query, the target being the main attention summed over heads and
     L1-normalised, over all causal keys;
  c. "sparse": top-k selection on (the engine's selection), every weight trained with the LM loss,
     each indexer with the KL on its selected set only, its input detached from the main graph.
MoE routers are balanced without an auxiliary loss (DeepSeek-V3): after each step of a and c
every expert's selection bias moves by `bias_rate` towards the mean load.
"""

import math
import sys
import time

import numpy as np
import torch

from . import model as model_lib

STAGES = ("dense", "warmup", "sparse")


def shared_prefix_length(ids, masks, lengths):
    """The longest prefix every row shares that holds no target of the loss (so prefix rows need
    no logits): at most (first masked index) - 1 and (shortest length) - 1 of every row."""
    limit = min(lengths) - 1
    for row in range(len(ids)):
        masked = np.flatnonzero(masks[row][:lengths[row]])
        if len(masked):
            limit = min(limit, int(masked[0]) - 1)
    limit = max(limit, 0)
    first = ids[0, :limit]
    same = np.all(ids[:, :limit] == first[None, :], axis=0)
    differ = np.flatnonzero(~same)
    return int(differ[0]) if len(differ) else limit


class Batch:
    """A packed batch: the shared prefix, the suffixes, and per suffix row the target (the next
    token) with its loss weight: 1 for a span token, value_weight for one marked 2 (an argument
    value: data.Dataset mark_values), 0 elsewhere."""

    def __init__(self, ids, masks, lengths, value_weight=1.0):
        self.P = shared_prefix_length(ids, masks, lengths)
        self.prefix = torch.from_numpy(ids[0, :self.P].copy())
        self.suffix = torch.from_numpy(ids[:, self.P:].copy())
        self.suffix_lengths = [n - self.P for n in lengths]
        # targets of suffix row i: token P+i+1, weighted by its mask
        target = np.full(ids[:, self.P:].shape, 1, dtype=np.int64)
        weight = np.zeros(ids[:, self.P:].shape, dtype=np.float32)
        target[:, :-1] = ids[:, self.P + 1:]
        marks = masks[:, self.P + 1:]
        weight[:, :-1] = np.where(marks > 1, value_weight, marks)
        self.target = torch.from_numpy(target)
        self.weight = torch.from_numpy(weight)
        self.tokens = int(sum(lengths))
        self.rows = self.P + ids.shape[0] * (ids.shape[1] - self.P)
        self.loss_tokens = int((weight > 0).sum())


def lm_loss(model, batch, mode, stats=None):
    """Weighted mean cross-entropy over the batch's target tokens (and the hidden layout)."""
    h, layout = model.hidden(batch.prefix, batch.suffix, mode, stats, batch.suffix_lengths)
    hs = layout.suffix(h)  # [B, S, D]
    pick = batch.weight > 0
    logits = model.lm_head(hs[pick])
    losses = torch.nn.functional.cross_entropy(logits, batch.target[pick], reduction="none")
    weight = batch.weight[pick]
    return (losses * weight).sum() / weight.sum(), logits, pick


def kl_loss(stats):
    """Mean over layers of the per-query KL averaged over the layer's queries."""
    terms = []
    for layer_terms in stats.get("kl", []):
        total = sum(t for t, _ in layer_terms)
        count = sum(c for _, c in layer_terms)
        terms.append(total / max(count, 1))
    return sum(terms) / max(len(terms), 1)


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def make_optimizer(params, lr, weight_decay):
    decay = [p for p in params if p.dim() == 2]
    rest = [p for p in params if p.dim() != 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95), eps=1e-8)


def balance_routers(model, rate):
    for moe in model.moe_layers():
        load = moe.load
        if load.sum() > 0:
            moe.gate.e_score_correction_bias += rate * torch.sign(load.mean() - load)
        moe.load = torch.zeros_like(load)


class Progress:
    """A progress line every `every` seconds: stage, step, loss, tokens/s, ETA."""

    def __init__(self, stage, steps, every=5.0, out=sys.stderr):
        self.stage, self.steps, self.every, self.out = stage, steps, every, out
        self.start = self.last = time.time()
        self.tokens = 0

    def update(self, step, loss, tokens, extra=""):
        self.tokens += tokens
        now = time.time()
        if now - self.last < self.every and step + 1 < self.steps:
            return
        self.last = now
        elapsed = now - self.start
        eta = elapsed / (step + 1) * (self.steps - step - 1)
        print("[%s] step %d/%d loss %.4f %s| %.0f tok/s | %.0fs elapsed, ETA %.0fs"
              % (self.stage, step + 1, self.steps, loss, extra, self.tokens / max(elapsed, 1e-9), elapsed, eta),
              file=self.out, flush=True)


def run_stage(model, dataset, stage, steps, tokens_per_batch, lr, rng, bias_rate=0.005, weight_decay=0.1,
              warmup=None, log_every=5.0, out=sys.stderr, checkpoint=None, checkpoint_every=0, label=None,
              value_weight=1.0, share_prefix=False):
    """Trains `steps` steps of one stage; returns its record (losses, tokens, time). share_prefix:
    batches from dataset.shared_prefix_plan (one toolset's transcripts per batch, tokens_per_batch
    counting their system prompt once) instead of batch_plan. checkpoint:
    called as checkpoint(stage, step) every checkpoint_every steps and after the last (a periodic
    evaluation; the model is back in training mode afterwards). label names the stage in the
    progress lines and checkpoint calls (default: the stage)."""
    label = label or stage
    assert stage in STAGES
    model.train()
    indexer = set(id(p) for p in model.indexer_parameters())
    for p in model.parameters():
        p.requires_grad_(stage != "warmup" or id(p) in indexer)
    if stage == "dense":
        params = [p for p in model.parameters() if id(p) not in indexer]
    elif stage == "warmup":
        params = model.indexer_parameters()
    else:
        params = list(model.parameters())
    optimizer = make_optimizer(params, lr, weight_decay)
    warmup = warmup if warmup is not None else max(1, min(100, steps // 10))
    progress = Progress(label, steps, log_every, out)
    record = {"steps": steps, "tokens": 0, "computed_rows": 0, "loss_tokens": 0, "losses": [], "kl": []}
    start = time.time()
    plan = []
    for step in range(steps):
        if not plan:
            plan = (dataset.shared_prefix_plan if share_prefix else dataset.batch_plan)(tokens_per_batch, rng)
        batch = Batch(*dataset.collate(plan.pop()), value_weight=value_weight)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup)
        stats = {} if stage != "dense" else None
        mode = {"dense": "dense", "warmup": "warmup", "sparse": "sparse"}[stage]
        if stage == "warmup":
            model.hidden(batch.prefix, batch.suffix, mode, stats, batch.suffix_lengths)
            kl = kl_loss(stats)
            loss_value, total = float(kl), kl
            record["kl"].append(loss_value)
            extra = ""
        else:
            lm, _, _ = lm_loss(model, batch, mode, stats)
            total = lm
            loss_value = float(lm)
            extra = ""
            if stage == "sparse":
                kl = kl_loss(stats)
                total = lm + kl
                record["kl"].append(float(kl))
                extra = "kl %.4f " % float(kl)
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        if stage != "warmup":
            balance_routers(model, bias_rate)
        record["losses"].append(loss_value)
        record["tokens"] += batch.tokens
        record["computed_rows"] += batch.rows
        record["loss_tokens"] += batch.loss_tokens
        progress.update(step, loss_value, batch.tokens, extra)
        if checkpoint is not None and checkpoint_every and ((step + 1) % checkpoint_every == 0 or step + 1 == steps):
            checkpoint(label, step + 1)
            model.train()
    for p in model.parameters():
        p.requires_grad_(True)
    for moe in model.moe_layers():
        moe.load = torch.zeros_like(moe.load)
    record["seconds"] = time.time() - start
    return record


@torch.no_grad()
def evaluate(model, dataset, modes=("dense", "sparse"), max_sequences=None, by_argument=False):
    """Per mode: LM loss, token accuracy and exact-turn accuracy on the spans (teacher forced);
    with by_argument, per tier the fraction of tool-call argument values (names, categories,
    answers: data.argument_values) predicted exactly with the token that ends them (what play
    needs: a value not ended is a wrong value), and the fraction whose first token is (where a
    value is chosen: the rest of a name is copied once its start is); plus the indexer's top-k
    recall of the dense attention mass per layer (queries with more than index_topk candidates)."""
    model.eval()
    result = {}
    n = len(dataset) if max_sequences is None else min(max_sequences, len(dataset))
    for mode in modes:
        loss_sum = tokens = correct = turns = turns_exact = 0
        recall = {}
        values = {}
        for i in range(n):
            ids, masks, lengths = dataset.collate([i])
            batch = Batch(ids, masks, lengths)
            stats = {"recall": []} if mode == "dense" and model.config.get("index_topk") else None
            h, layout = model.hidden(batch.prefix, batch.suffix, mode, stats, batch.suffix_lengths)
            hs = layout.suffix(h)[0]
            w = batch.weight[0] > 0
            logits = model.lm_head(hs[w])
            target = batch.target[0][w]
            loss_sum += float(torch.nn.functional.cross_entropy(logits, target, reduction="sum"))
            hit = (logits.argmax(-1) == target).numpy()
            tokens += len(target)
            correct += int(hit.sum())
            # turns: maximal runs of consecutive target positions
            positions = np.flatnonzero(w.numpy())
            run_start = 0
            for k in range(1, len(positions) + 1):
                if k == len(positions) or positions[k] != positions[k - 1] + 1:
                    turns += 1
                    turns_exact += int(hit[run_start:k].all())
                    run_start = k
            if by_argument:
                # token t of the sequence is predicted at suffix row t - P - 1
                hit_at = dict(zip((positions + batch.P + 1).tolist(), hit.tolist()))
                tier = str(dataset.records[i].get("tier", "?"))
                counts = values.setdefault(tier, [0, 0, 0])
                for inside in dataset.argument_values(i):
                    counts[0] += int(all(hit_at.get(int(t), False) for t in inside))
                    counts[1] += 1
                    counts[2] += int(hit_at.get(int(inside[0]), False))
            if stats is not None:
                for layer, mass, count in stats["recall"]:
                    m, c = recall.get(layer, (0.0, 0))
                    recall[layer] = (m + mass, c + count)
        entry = {"loss": loss_sum / max(tokens, 1), "token_accuracy": correct / max(tokens, 1),
                 "turn_exact": turns_exact / max(turns, 1), "tokens": tokens, "turns": turns,
                 "sequences": n}
        if values:
            exact, first_token = {}, {}
            for tier, (ok, total, first) in sorted(values.items()):
                exact[tier], first_token[tier] = round(ok / max(total, 1), 4), round(first / max(total, 1), 4)
            entry["argument_exact_by_tier"], entry["argument_first_token_by_tier"] = exact, first_token
        if recall:
            per = {str(layer): (m / c if c else None) for layer, (m, c) in sorted(recall.items())}
            vals = [v for v in per.values() if v is not None]
            entry["topk_recall"] = {"per_layer": per, "mean": float(np.mean(vals)) if vals else None,
                                    "queries": int(max(c for _, c in recall.values()))}
        result[mode] = entry
    return result


COPY_BANDS = ((2, 8), (9, 24), (25, 64), (65, 120))


@torch.no_grad()
def copy_exactness(model, tokenizer, bands=COPY_BANDS, per_band=40, seed=7, mode="dense"):
    """Per band of distances "lo-hi": the share of the repeated tokens of data.induction_sequences
    (random ordinary ids, then the same ids again; the first repeated token excluded) that the
    model predicts exactly, teacher forced (evaluate's token accuracy on them). 1/V is chance:
    whether the model still copies ids it has no prior for, by content, which the synth
    categories' multi-token names need."""
    from . import data
    out = {}
    for index, (lo, hi) in enumerate(bands):
        ids, masks = data.induction_sequences(tokenizer, per_band, lo, hi, seed=seed + index)
        figures = evaluate(model, data.Dataset.from_sequences(tokenizer, ids, masks), modes=(mode,))[mode]
        out["%d-%d" % (lo, hi)] = round(figures["token_accuracy"], 4)
    return out
