#!/usr/bin/python3
"""Trains the small DeepSeek-V3.2 policy model with the DSA recipe and exports it for the engine.

    /usr/bin/python3 scripts/train_policy.py --out DIR [--transcripts F.jsonl]
        [--eval-transcripts G.jsonl] [--steps N] [--seed S] [--size small|smoke] [--threads 2]
        [--copy-stage fixed|induction] [--copy-steps K --short-steps S --dense-steps A --warmup-steps B --sparse-steps C]
        [--realign-steps R] [--vocab-size V]
        [--batch-tokens T] [--eval-every N] [--value-weight W] [--init MODEL_DIR --lr-scale F]
        [--copy-mix F --copy-mix-distance D] [--share-prefix]

Steps (scripts/policy/ holds the parts):
  1. tokenizer: a byte-level BPE in DeepSeek-V3's structure trained on the transcripts' text
     (policy/tokenizer.py), written as DIR/tokenizer.json;
  2. data: transcripts tokenized with the loss on the model-generated spans (policy/data.py);
     without --transcripts, scripts/policy_transcripts.py generates them (gold solutions played
     in sandbox sessions of the built tree, cached in DIR.data/); --synthetic trains on
     synthetic transcripts of the same shape (a development fixture); without
     --eval-transcripts, a held-out slice of the training transcripts;
  3. model: DeepSeek-V3.2 in PyTorch with the engine's semantics (policy/model.py);
  4. a copy stage (--copy-stage, --copy-steps): dense steps on synthetic sequences that give the
     model a copying path before it sees a transcript. By default (induction) each row is BOS,
     R, R with R random ids of a length d varied per row (data.induction_sequences), in phases
     of rising range (2-8, 2-24, 2-64 tokens for the small size): the model learns to copy by
     content, at distances it never saw (session 32: exact next token 0.98 at d 41-80, 0.45 at
     121-160); over the whole range at once it stayed at chance. --copy-stage fixed repeats at
     the one distance copy_half = 40 tokens (copy_sequences), the previous checkpoint's: every
     copy of the shop's look-up tiers sits there in non-thinking transcripts (scripts/
     policy_envs.py says how), and copies at 38 or 42 tokens were not learnt. A size with
     lookup_records > 0 gives half of the fixed stage to key-value look-ups (lookup_sequences),
     which were not learnt in this budget. The transcripts' stages undo it: the shipped
     checkpoint repeats random ids at chance (exact 0.002-0.011 at d 2-120), since a shop name is
     two tokens of a 96-word lexicon. --copy-mix F keeps it: the short, dense and sparse stages
     train on the transcripts with induction sequences (d 2 to --copy-mix-distance, 64) among
     them, F of the tokens (session 35: 0.3 over 300 steps from the shipped checkpoint brought
     it back to 0.98 at d 2-64, and the synth categories' argument values began to be learnt);
  5. the DSA recipe (policy/train.py): dense pre-training, dense warm-up of the indexers (KL),
     sparse training, the tokens of tool-call argument values weighing --value-weight in the LM
     loss (a name or number is a few tokens among a turn's ~50 format tokens, whose gradient
     otherwise drowns theirs); --steps N splits N steps over the stages in the size's
     proportions, --dense-steps/--warmup-steps/--sparse-steps set them one by one (the shipped
     checkpoint warms up 200 steps over two commands, its README says how: after the induction
     copy stage, 50 left the indexers at a top-k recall of 0.963 and sparse training then broke
     the model, LM loss 0.11 to 0.72, session 32); --short-steps
     S opens dense pre-training with S steps on the transcripts cut to BOS + their turns (no
     system prompt and tools block, whose 42 opening quotes otherwise compete with the one
     before the name in the prompt while the copying is learnt; 150 for the small size);
     --realign-steps R closes it with R more warm-up steps (indexers only, KL against the final
     weights' dense attention over all keys; 150 for the small size): sparse training moves the
     main model while each indexer learns only on its own selection, so the indexers lag the
     model they serve. Measured on the small size (session 22): without it a held-out two-hop
     task copied its product name with P = 0.59 under DSA against 0.99 dense (pass@1 0.52 vs
     0.85); the realignment raised the mean top-k recall from 0.985 to 0.993, that copy to 0.99
     and that task to 0.85 under DSA, the main weights (so every dense figure) unchanged;
  6. export: config.json, model.safetensors (bf16), tokenizer files and training.json written to
     a temporary directory beside DIR, then renamed to DIR (policy/export.py);
  7. report: a progress line every few seconds on stderr; DIR/training.json with the
     parameters, tokens and wall time per stage, losses, and the evaluation of the exported
     weights (dense and sparse LM loss, token and turn accuracy on the spans, per tier the
     fraction of tool-call argument values predicted exactly and of their first tokens, the
     indexer's top-k recall of the dense attention mass per layer, and per band of distances the
     exact share of repeated random ids, train.copy_exactness); --eval-every N prints that
     evaluation during training, the copy figures included (the synth categories' names need
     copying, which a stage of transcripts alone has undone before).

--share-prefix batches the transcripts of one system prompt (the same tool list) together, with
--batch-tokens counting that prompt once: train.Batch computes a batch's common prefix once, so a
batch of synth transcripts (about 3,800 tokens, 81% of them the prompt before the task) holds
about 4 of them for the compute of 1.35 without it (session 40: 9.2 s against 7.9 s a step on 2
cores, 3.2x the transcripts per second). Repeat rows of --copy-mix, which have no prompt, are
batched among themselves. Off by default, so that the shipped recipe's batches stay as they were.

--init MODEL_DIR continues from an exported checkpoint instead of a fresh one: its tokenizer and
weights are kept (no tokenizer is trained, its tokenizer files are copied into DIR), the copy and
short stages default to 0 steps, and --lr-scale F (default 1) scales the size's learning rates.
The shipped checkpoint's second command is one (the model's README, "Reproduce").

The process re-executes itself once with glibc malloc tunables that keep freed memory in the
heap: PyTorch allocates many tensors of tens of MB per step, and glibc otherwise maps and unmaps
each of them, paying page faults on every step (about 2x the step time on this machine; on
session 40's machine a 3,900-token forward and backward took 21 s without them and 2 s with
them).
"""

import argparse
import hashlib
import json
import os
import sys
import time

# Why: torch's large activations, each mmapped and unmapped by glibc, made most of a step page
# faults. From the heap (mmap_max=0, never trimmed) they fault once; hugetlb=1 (glibc >= 2.35,
# ignored before) asks for transparent huge pages on the heap, which cut the faults of one
# 3,900-token forward and backward 40x more on session 40's machine (THP in madvise mode).
MALLOC_TUNABLES = "glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184"

# Architecture sizes. Engine constraints (inference/model_config.cc): kv_lora_rank a multiple of
# 128, index_head_dim 128, qk_rope_head_dim even and <= index_head_dim, n_group dividing
# n_routed_experts, num_experts_per_tok <= topk_group * experts per group.
SIZES = {
    "small": {
        "dims": dict(hidden_size=256, num_hidden_layers=4, first_k_dense_replace=1, num_attention_heads=4,
                     q_lora_rank=128, kv_lora_rank=128, qk_nope_head_dim=32, qk_rope_head_dim=32,
                     v_head_dim=32, index_n_heads=2, index_head_dim=128, index_topk=128,
                     n_routed_experts=8, n_group=4, topk_group=2, num_experts_per_tok=2, n_shared_experts=1,
                     moe_intermediate_size=256, intermediate_size=768, routed_scaling_factor=1.0),
        "tie_embeddings": True, "vocab_size": 1024, "batch_tokens": 8192, "steps": (700, 50, 150), "lr": (2e-3, 1e-3, 5e-4),
        "short_steps": 150, "short_batch_tokens": 4096, "realign_steps": 150,
        "copy_steps": 150, "copy_batch_tokens": 4096, "copy_half": 40, "lookup_records": 0,
        "induction_phases": ((250, 2, 8, 1.0), (150, 2, 24, 0.5), (150, 2, 64, 0.5)),
        "value_weight": 10.0,
        "synthetic": 3000,
    },
    "smoke": {
        "dims": dict(hidden_size=128, num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=2,
                     q_lora_rank=64, kv_lora_rank=128, qk_nope_head_dim=16, qk_rope_head_dim=16,
                     v_head_dim=16, index_n_heads=1, index_head_dim=128, index_topk=64,
                     n_routed_experts=4, n_group=2, topk_group=1, num_experts_per_tok=2, n_shared_experts=1,
                     moe_intermediate_size=64, intermediate_size=256, routed_scaling_factor=1.0),
        "tie_embeddings": True, "vocab_size": 512, "batch_tokens": 2048, "steps": (16, 6, 8), "lr": (3e-3, 2e-3, 1e-3),
        "short_steps": 0, "short_batch_tokens": 1024, "realign_steps": 6,
        "copy_steps": 0, "copy_batch_tokens": 1024, "copy_half": 16, "lookup_records": 6,
        "induction_phases": ((2, 2, 8, 1.0), (1, 2, 24, 0.5)),
        "value_weight": 1.0,
        "synthetic": 240,
    },
}
EVAL_HOLDOUT = 48  # transcripts kept out of training when no --eval-transcripts is given
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The shipped model's data: scripts/policy_envs.py seeds (training < 900000; evaluation shops
# data/envs/shop_eval_a/_b are 900001/900002), 4 instances of each training template per seed.
TRAIN_SEEDS, EVAL_SEEDS, INSTANCES = "1-300", "900001-900002", 4
# Thinking-mode transcripts put a reasoning line between the source of a copy and its target, so
# their copies sit at other distances than copy_half (34-38 tokens, not 40): a small share keeps
# the mode in the data without spending the copy training on distances the copy stage never taught.
THINKING_FRACTION = 0.1


def generated_transcripts(args):
    """(train path, eval path): scripts/policy_transcripts.py output in DIR.data/ beside --out,
    reused when present (the generator is deterministic)."""
    import policy_transcripts
    cache = os.path.abspath(args.out).rstrip("/") + ".data"
    os.makedirs(cache, exist_ok=True)
    paths = []
    for name, seeds, templates in (("train", TRAIN_SEEDS, "train"), ("eval", EVAL_SEEDS, "all")):
        path = os.path.join(cache, name + ".jsonl")
        if not os.path.exists(path):
            log("generating %s transcripts (seeds %s) with scripts/policy_transcripts.py" % (name, seeds))
            code = policy_transcripts.main(["--out", path, "--seeds", seeds, "--instances", str(INSTANCES),
                                            "--templates", templates, "--work", os.path.join(cache, name + "-work"),
                                            "--thinking-fraction", str(THINKING_FRACTION),
                                            "--build", args.build])
            if code != 0:
                sys.exit("train_policy: policy_transcripts.py failed (exit %d)" % code)
        paths.append(path)
    return paths


def recorded_path(path):
    """A path as training.json records it: relative to the checkout when inside it (a committed
    --init reads the same on every machine), else absolute."""
    path = os.path.abspath(path)
    inside = os.path.commonpath([path, ROOT]) == ROOT
    return os.path.relpath(path, ROOT) if inside else path


def file_sha256(path):
    """The digest that names a transcripts file where its scratch path cannot."""
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def reexec_with_malloc_tunables():
    if MALLOC_TUNABLES in os.environ.get("GLIBC_TUNABLES", ""):
        return
    env = dict(os.environ)
    env["GLIBC_TUNABLES"] = (env["GLIBC_TUNABLES"] + ":" if env.get("GLIBC_TUNABLES") else "") + MALLOC_TUNABLES
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="model directory to write (replaced atomically)")
    parser.add_argument("--transcripts", help="training transcripts (JSONL); default: generated by "
                        "scripts/policy_transcripts.py for seeds " + TRAIN_SEEDS)
    parser.add_argument("--eval-transcripts", help="evaluation transcripts (JSONL); default: generated for the "
                        "evaluation seeds " + EVAL_SEEDS + " with --transcripts unset, else a held-out slice")
    parser.add_argument("--synthetic", action="store_true", help="train on synthetic transcripts of the same shape "
                        "(scripts/policy/data.py; a development fixture, no build needed)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="the CMake build (envforge CLI and "
                        "Python module) that plays the gold solutions")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--steps", type=int, help="total steps, split over the stages in the size's proportions")
    parser.add_argument("--dense-steps", type=int)
    parser.add_argument("--warmup-steps", type=int)
    parser.add_argument("--sparse-steps", type=int)
    parser.add_argument("--short-steps", type=int, help="dense steps on the transcripts without their system "
                        "prompt before the dense stage (default: the size's; see the stage list above)")
    parser.add_argument("--realign-steps", type=int, help="indexer-only warm-up steps after the sparse stage, "
                        "against the final weights (default: the size's; see the stage list above)")
    parser.add_argument("--copy-steps", type=int, help="steps on synthetic repeat sequences (random ids, "
                        "repeated) before the transcripts (default: the size's)")
    parser.add_argument("--copy-stage", choices=("fixed", "induction"), default="induction",
                        help="the copy stage's sequences: at distances varied per row over phases of rising "
                        "range (content-based copying, the shipped checkpoint's; --copy-steps N splits N over "
                        "the phases), or repeats at the fixed distance copy_half (the previous checkpoint's)")
    parser.add_argument("--copy-mix", type=float, default=0.0, help="share of the tokens of the short, dense "
                        "and sparse stages given to repeat sequences at distances varied per row (2 to "
                        "--copy-mix-distance, the copy stage's kind) mixed among the transcripts, so that copying "
                        "arbitrary ids is kept while the transcripts train (0: none)")
    parser.add_argument("--copy-mix-distance", type=int, default=64, help="the longest distance of --copy-mix's "
                        "repeat sequences")
    parser.add_argument("--value-weight", type=float, help="loss weight of the tokens of tool-call argument "
                        "values (names, categories, answers) against 1 for the other generated tokens "
                        "(default: the size's)")
    parser.add_argument("--init", help="continue from this exported model directory (its tokenizer and weights)")
    parser.add_argument("--lr-scale", type=float, default=1.0, help="factor on the size's learning rates")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, help="tokenizer vocabulary (default: the size's)")
    parser.add_argument("--batch-tokens", type=int, help="padded tokens per batch (default: the size's)")
    parser.add_argument("--share-prefix", action="store_true", help="batch the transcripts of one system "
                        "prompt (tool list) together and compute that prompt once per batch, --batch-tokens "
                        "counting it once: more transcripts per step for the same compute (dense, warm-up, "
                        "sparse and realign stages)")
    parser.add_argument("--eval-limit", type=int, default=200, help="evaluate on at most this many transcripts")
    parser.add_argument("--log-every", type=float, default=5.0, help="seconds between progress lines")
    parser.add_argument("--eval-every", type=int, default=0, help="every N steps of a stage, print the "
                        "evaluation transcripts' exact argument values and first tokens per tier (teacher "
                        "forced; 0: never)")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 3:
        parser.error("--steps must be at least 3 (one per stage)")
    if args.init and not os.path.isfile(os.path.join(args.init, "model.safetensors")):
        parser.error("--init %s: no model.safetensors there" % args.init)
    if not args.lr_scale > 0:
        parser.error("--lr-scale must be positive")
    if not 0 <= args.copy_mix < 1:
        parser.error("--copy-mix must be in [0, 1)")
    if args.copy_mix_distance < 2:
        parser.error("--copy-mix-distance must be at least 2")
    if args.init:  # a trained checkpoint already copies and knows the turns' form
        args.copy_steps = 0 if args.copy_steps is None else args.copy_steps
        args.short_steps = 0 if args.short_steps is None else args.short_steps
    return args


def stage_steps(args, size):
    dense, warmup, sparse = size["steps"]
    if args.steps is not None:
        total = dense + warmup + sparse
        warmup = max(1, round(args.steps * warmup / total))
        sparse = max(1, round(args.steps * sparse / total))
        dense = max(1, args.steps - warmup - sparse)
    return (args.dense_steps if args.dense_steps is not None else dense,
            args.warmup_steps if args.warmup_steps is not None else warmup,
            args.sparse_steps if args.sparse_steps is not None else sparse)


def induction_stage(data, train, model, tok, size, total_steps, lr, rng, args):
    """The copy stage on data.induction_sequences, phase by phase (steps, shortest and longest
    distance, factor on lr) as the size lists them; total_steps (when set) is split over the
    phases in their proportions. Returns the stage's record, with each phase's record in
    "phases"."""
    phases = size["induction_phases"]
    if total_steps is not None:
        planned = sum(p[0] for p in phases)
        phases = [(max(1, round(total_steps * p[0] / planned)),) + tuple(p[1:]) for p in phases]
    record = {"steps": 0, "tokens": 0, "computed_rows": 0, "loss_tokens": 0, "losses": [], "kl": [], "seconds": 0.0,
              "phases": []}
    for index, (steps, shortest, longest, lr_factor) in enumerate(phases):
        count = steps * max(1, size["copy_batch_tokens"] // (2 * longest + 1))
        ids, masks = data.induction_sequences(tok, count, shortest, longest, seed=args.seed + 100 + index)
        label = "copy d%d-%d" % (shortest, longest)
        phase = train.run_stage(model, data.Dataset.from_sequences(tok, ids, masks), "dense", steps,
                                size["copy_batch_tokens"], lr * lr_factor, rng, log_every=args.log_every,
                                label=label)
        tail = phase["losses"][-10:]
        log("stage %s: %d steps, %d tokens in %.0fs, loss %.4f at the end"
            % (label, steps, phase["tokens"], phase["seconds"], sum(tail) / len(tail)))
        for key in ("steps", "tokens", "computed_rows", "loss_tokens", "seconds"):
            record[key] += phase[key]
        record["losses"] += phase["losses"]
        record["phases"].append({"distances": [shortest, longest], "lr": lr * lr_factor, "steps": steps,
                                 "tokens": phase["tokens"], "seconds": phase["seconds"],
                                 "loss_last": sum(tail) / len(tail)})
    return record


def log(message):
    print("train_policy: " + message, file=sys.stderr, flush=True)


def main(argv=None):
    reexec_with_malloc_tunables()
    args = parse_args(argv if argv is not None else sys.argv[1:])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    import torch
    from policy import data, export, model as model_lib, tokenizer as tokenizer_lib, train

    started = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    size = SIZES[args.size]
    steps = stage_steps(args, size)

    # Data
    if not args.transcripts and not args.synthetic:
        args.transcripts, generated_eval = generated_transcripts(args)
        args.eval_transcripts = args.eval_transcripts or generated_eval
    if args.transcripts:
        records = data.load_jsonl(args.transcripts)
        source = recorded_path(args.transcripts)
    else:
        records = data.synthetic_transcripts(size["synthetic"], seed=1000 + args.seed)
        source = "synthetic (scripts/policy/data.py, %d transcripts)" % len(records)
        log("--synthetic: training on %s" % source)
    if not records:
        sys.exit("train_policy: no transcripts in %s" % source)
    if args.eval_transcripts:
        eval_records = data.load_jsonl(args.eval_transcripts)
        eval_source = recorded_path(args.eval_transcripts)
    else:
        holdout = min(EVAL_HOLDOUT, len(records) // 10)
        order = np.random.default_rng(args.seed).permutation(len(records))
        eval_records = [records[i] for i in order[:holdout]]
        records = [records[i] for i in order[holdout:]]
        eval_source = "held out of the training transcripts (%d)" % holdout

    t0 = time.time()
    if args.init:
        tok = tokenizer_lib.Tokenizer.load(args.init)
        merges = tok.merges
    else:
        vocab_size = args.vocab_size or size["vocab_size"]
        # Digits merge like any other symbol: a two-digit price or stock is then one token, like a
        # name's word, and is copied at the same distance as a name (scripts/policy_envs.py).
        vocab, merges = tokenizer_lib.train_bpe(tokenizer_lib.bpe_corpus([r["text"] for r in records]), vocab_size,
                                                split_digits=False)
        tok = tokenizer_lib.Tokenizer(vocab, merges)
    value_weight = size["value_weight"] if args.value_weight is None else args.value_weight
    mark_values = value_weight != 1.0
    dataset = data.Dataset(tok, records, mark_values=mark_values)
    eval_set = data.Dataset(tok, eval_records[:args.eval_limit])
    log("tokenizer: %d ids (%d merges) in %.1fs; %d transcripts, %d tokens (mean %.0f, max %d), "
        "%.1f%% of them trained on; eval: %d transcripts"
        % (tok.vocab_size, len(merges), time.time() - t0, len(dataset), dataset.total_tokens,
           dataset.lengths.mean(), dataset.lengths.max(),
           100.0 * sum(int((m > 0).sum()) for m in dataset.masks) / dataset.total_tokens, len(eval_set)))

    # Model
    if args.init:
        model = export.load(args.init)
        config = model.config
    else:
        config = export.make_config(size["dims"], tok.vocab_size)
        model = model_lib.DeepseekV32(config, tie_embeddings=size["tie_embeddings"])
        model.init_weights(args.seed)
    lrs = [lr * args.lr_scale for lr in size["lr"]]
    parameters = sum(p.numel() for p in model.parameters())
    indexer_parameters = sum(p.numel() for p in model.indexer_parameters())
    log("model: %.2fM parameters (%.2fM in the indexers); stages: dense %d, warm-up %d, sparse %d steps"
        % (parameters / 1e6, indexer_parameters / 1e6, *steps))

    def checkpoint(stage, step):
        mode = "sparse" if stage == "sparse" else "dense"
        figures = train.evaluate(model, eval_set, modes=(mode,), max_sequences=args.eval_limit, by_argument=True)[mode]
        copying = train.copy_exactness(model, tok, mode=mode)
        recall = figures.get("topk_recall", {}).get("mean")  # dense evaluations only: what the warm-ups train
        log("[%s] step %d: eval loss %.4f, span token accuracy %.3f, exact arguments by tier %s, their first "
            "tokens %s, copy exact by distance %s%s"
            % (stage, step, figures["loss"], figures["token_accuracy"],
               json.dumps(figures.get("argument_exact_by_tier", {})),
               json.dumps(figures.get("argument_first_token_by_tier", {})), json.dumps(copying),
               "" if recall is None else ", indexer top-k recall %.4f" % recall))

    rng = np.random.default_rng(args.seed)
    batch_tokens = args.batch_tokens or size["batch_tokens"]
    stages = {}
    copy_steps = size["copy_steps"] if args.copy_steps is None else args.copy_steps
    if args.copy_stage == "induction" and args.copy_steps != 0:  # unset: the size's phases as listed
        stages["copy"] = induction_stage(data, train, model, tok, size, args.copy_steps, lrs[0], rng, args)
    elif args.copy_stage == "fixed" and copy_steps:
        half = size["copy_half"]
        count = copy_steps * max(1, size["copy_batch_tokens"] // (2 * half + 1))
        # repeats, or half repeats and half key-value look-ups (mixed by the batch plan's length order)
        lookups = count // 2 if size["lookup_records"] else 0
        copy_ids, copy_masks = data.copy_sequences(tok, count - lookups, half, seed=args.seed)
        lookup_ids, lookup_masks = [], []
        if lookups:
            lookup_ids, lookup_masks = data.lookup_sequences(tok, lookups, size["lookup_records"], seed=args.seed + 1)
        copy_set = data.Dataset.from_sequences(tok, copy_ids + lookup_ids, copy_masks + lookup_masks)
        stages["copy"] = train.run_stage(model, copy_set, "dense", copy_steps, size["copy_batch_tokens"],
                                         lrs[0], rng, log_every=args.log_every, label="copy")
        log("stage copy: %d steps, %d tokens in %.0fs" % (copy_steps, stages["copy"]["tokens"],
                                                          stages["copy"]["seconds"]))

    def mixed(transcripts, salt):  # the transcripts with --copy-mix's repeat sequences among them
        if not args.copy_mix:
            return transcripts
        out = data.with_induction_rows(transcripts, args.copy_mix, 2, args.copy_mix_distance,
                                       args.seed + 300 + salt)
        added = len(out) - len(transcripts)
        log("--copy-mix %.2f: %d repeat sequences among %d transcripts (%d of %d tokens)"
            % (args.copy_mix, added, len(transcripts), out.total_tokens - transcripts.total_tokens, out.total_tokens))
        return out

    short_steps = size["short_steps"] if args.short_steps is None else args.short_steps
    if short_steps:
        short_set = data.Dataset(tok, [data.without_system_prompt(r) for r in dataset.records],
                                 mark_values=mark_values)
        short_set = mixed(short_set, 1)
        stages["short"] = train.run_stage(model, short_set, "dense", short_steps, size["short_batch_tokens"],
                                          lrs[0], rng,
                                          log_every=args.log_every, checkpoint=checkpoint,
                                          checkpoint_every=args.eval_every, label="short",
                                          value_weight=value_weight)
        log("stage short: %d steps, %d tokens in %.0fs" % (short_steps, stages["short"]["tokens"],
                                                           stages["short"]["seconds"]))
    trained = mixed(dataset, 2)
    for stage, count, lr in zip(train.STAGES, steps, lrs):
        stage_set = dataset if stage == "warmup" else trained  # the warm-up fits attention: transcripts only
        stages[stage] = train.run_stage(model, stage_set, stage, count, batch_tokens, lr, rng, log_every=args.log_every,
                                        checkpoint=checkpoint, checkpoint_every=args.eval_every,
                                        value_weight=value_weight, share_prefix=args.share_prefix)
        record = stages[stage]
        log("stage %s: %d steps, %d tokens in %.0fs" % (stage, count, record["tokens"], record["seconds"]))
    realign_steps = size["realign_steps"] if args.realign_steps is None else args.realign_steps
    if realign_steps:
        stages["realign"] = train.run_stage(model, dataset, "warmup", realign_steps, batch_tokens, lrs[1], rng,
                                            log_every=args.log_every, label="realign",
                                            share_prefix=args.share_prefix)
        log("stage realign: %d steps, %d tokens in %.0fs" % (realign_steps, stages["realign"]["tokens"],
                                                             stages["realign"]["seconds"]))

    # Evaluate the exported weights, then write everything at once.
    t0 = time.time()
    final = export.rounded_copy(model)
    evaluation = train.evaluate(final, eval_set, by_argument=True)
    evaluation["copy_exact_by_distance"] = train.copy_exactness(final, tok)
    log("evaluation (%.0fs): %s" % (time.time() - t0, json.dumps(evaluation)))

    def summary(record):
        losses = record["losses"]
        tail = losses[-max(1, len(losses) // 10):]
        out = {"steps": record["steps"], "tokens": record["tokens"], "computed_rows": record["computed_rows"],
               "loss_tokens": record["loss_tokens"], "seconds": round(record["seconds"], 1),
               "tokens_per_second": round(record["tokens"] / max(record["seconds"], 1e-9), 1),
               "loss_first": losses[0] if losses else None, "loss_last_10pct": float(np.mean(tail)) if tail else None,
               "losses": [round(v, 5) for v in losses]}
        if "phases" in record:
            out["phases"] = record["phases"]
        if record["kl"]:
            out["kl_first"], out["kl_last_10pct"] = record["kl"][0], float(np.mean(record["kl"][-len(tail):]))
        return out

    report = {
        "command": " ".join(["scripts/train_policy.py"] + (argv if argv is not None else sys.argv[1:])),
        "size": args.size, "seed": args.seed, "init": recorded_path(args.init) if args.init else None,
        "lr_scale": args.lr_scale, "threads": args.threads, "torch": torch.__version__,
        "copy_mix": {"share": args.copy_mix, "longest_distance": args.copy_mix_distance} if args.copy_mix else None,
        "parameters": parameters, "indexer_parameters": indexer_parameters,
        "config": config, "vocab_size": tok.vocab_size, "merges": len(merges),
        "data": {"train": source, "train_sha256": file_sha256(args.transcripts) if args.transcripts else None,
                 "eval_sha256": file_sha256(args.eval_transcripts) if args.eval_transcripts else None,
                 "train_transcripts": len(dataset), "train_tokens": dataset.total_tokens,
                 "train_loss_tokens": int(sum(int((m > 0).sum()) for m in dataset.masks)),
                 "eval": eval_source, "eval_transcripts": len(eval_set), "batch_tokens": batch_tokens,
                 "share_prefix": args.share_prefix},
        "stages": {stage: summary(record) for stage, record in stages.items()},
        "evaluation": evaluation,
    }
    report["wall_seconds"] = round(time.time() - started, 1)
    with_tokenizer = {}
    if args.init:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(args.init, name), encoding="utf-8") as handle:
                with_tokenizer[name] = handle.read()
    else:
        tokenizer_text, tokenizer_config_text = tokenizer_lib.tokenizer_json(vocab, merges)
        with_tokenizer["tokenizer.json"] = tokenizer_text
        with_tokenizer["tokenizer_config.json"] = tokenizer_config_text
    with_tokenizer["training.json"] = json.dumps(report, indent=2) + "\n"
    export.export(final, args.out, [], with_tokenizer)
    size_mb = os.path.getsize(os.path.join(args.out, "model.safetensors")) / 1e6
    log("wrote %s (model.safetensors %.1f MB) in %.0fs total" % (args.out, size_mb, time.time() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
