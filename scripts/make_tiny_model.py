#!/usr/bin/python3
"""Writes a small random DeepSeek-V3.2 (or V3) checkpoint in the Hugging Face layout.

    make_tiny_model.py --out DIR [--preset tiny|mid] [--dtype fp32|bf16|fp8] [--arch v32|v3]
                       [--seed S] [--shards N] [--mtp] [--no-tokenizer [--vocab-size V]]
                       [--set FIELD=VALUE ...] [--dump-tensor NAME ...]

DIR receives config.json (every field of dsa-engine.md 1.2; fp8 adds quantization_config),
model.safetensors (or N shards model-0000i-of-0000N.safetensors + model.safetensors.index.json)
and the tokenizer written by make_tiny_tokenizer.write_tokenizer (same directory as this script);
config.json's vocab_size is the tokenizer's. --no-tokenizer skips the tokenizer and uses
--vocab-size (default: the preset's).

Tensors follow dsa-engine.md 2.1. Weights are random but scaled so activations stay O(1): matrices
normal / sqrt(fan_in), norms 1 + small noise, embeddings unit normal, router bias small. fp8:
every 2-D matrix except the embedding, lm_head, the router gate and the indexer's weights_proj is
float8 e4m3fn with a [ceil(rows/128), ceil(cols/128)] fp32 power-of-two weight_scale_inv grid
(dsa-engine.md 2.2); bf16: the same matrices in bf16; 1-D tensors are always fp32. The output is
a pure function of the arguments.

--mtp adds an MTP layer (index num_hidden_layers), which loaders must ignore. --set overrides a
config field of the preset (integers or floats). --dump-tensor NAME puts the stored values of
NAME, widened to fp32 (dequantized for fp8), into the report. The report, one JSON object on
stdout, gives the parameter count of the tensors a loader binds ("parameters", scale grids not
counted) and of the whole file ("checkpoint_parameters").

Only numpy is needed.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

BLOCK = 128  # FP8 weight block (dsa-engine.md 2.2)

PRESETS = {
    # 1 dense + 2 MoE layers; index_topk 16 so prompts of a few dozen tokens are sparse.
    "tiny": dict(
        hidden_size=256, num_hidden_layers=3, first_k_dense_replace=1, num_attention_heads=4,
        q_lora_rank=128, kv_lora_rank=128, qk_nope_head_dim=32, qk_rope_head_dim=64, v_head_dim=32,
        index_n_heads=4, index_head_dim=128, index_topk=16, n_routed_experts=8, n_group=4,
        topk_group=2, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=64,
        intermediate_size=512, vocab_size=512),
    # The 671B per-head shapes, ~100M parameters with a small vocabulary (105M with 1024 tokens).
    "mid": dict(
        hidden_size=1024, num_hidden_layers=7, first_k_dense_replace=1, num_attention_heads=16,
        q_lora_rank=512, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
        v_head_dim=128, index_n_heads=16, index_head_dim=128, index_topk=2048,
        n_routed_experts=16, n_group=4, topk_group=2, num_experts_per_tok=4, n_shared_experts=1,
        moe_intermediate_size=128, intermediate_size=2048, vocab_size=8192),
}

# ---------------------------------------------------------------------------------------------
# Storage formats


def e4m3_table():
    """The 256 values of float8 e4m3fn, indexed by the byte (0x7f/0xff are NaN)."""
    codes = np.arange(256)
    sign = np.where(codes >> 7, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = codes & 0x7
    magnitude = np.where(exponent == 0, mantissa * 2.0 ** -9,
                         (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7.0))
    values = sign * magnitude
    values[(exponent == 15) & (mantissa == 7)] = np.nan
    return values.astype(np.float32)


E4M3 = e4m3_table()
E4M3_POSITIVE = E4M3[:127].astype(np.float64)  # codes 0x00..0x7e, increasing, 0 .. 448


def to_e4m3(x):
    """Float array -> e4m3fn bytes, round to nearest, ties to the even code, saturating at 448."""
    x = np.asarray(x, dtype=np.float64)
    magnitude = np.minimum(np.abs(x), 448.0)
    upper = np.clip(np.searchsorted(E4M3_POSITIVE, magnitude, side="left"), 0, 126)
    lower = np.clip(upper - 1, 0, 126)
    up_distance = E4M3_POSITIVE[upper] - magnitude
    down_distance = magnitude - E4M3_POSITIVE[lower]
    take_upper = (up_distance < down_distance) | ((up_distance == down_distance) & (upper % 2 == 0))
    code = np.where(take_upper, upper, lower).astype(np.uint8)
    return code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)


def to_bf16(x):
    """Float32 array -> bf16 bits (uint16), round to nearest even."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def quantize_fp8_blocks(w):
    """128x128-block e4m3 quantization with power-of-two scales: (codes, scale_inv, dequantized)."""
    rows, cols = w.shape
    grid_rows, grid_cols = -(-rows // BLOCK), -(-cols // BLOCK)
    scale = np.empty((grid_rows, grid_cols), dtype=np.float32)
    for i in range(grid_rows):
        for j in range(grid_cols):
            block = w[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK]
            amax = max(float(np.abs(block).max()), 1e-4)
            scale[i, j] = 2.0 ** math.ceil(math.log2(amax / 448.0))
    expanded = np.repeat(np.repeat(scale, BLOCK, axis=0), BLOCK, axis=1)[:rows, :cols]
    codes = to_e4m3(w.astype(np.float64) / expanded)
    dequantized = E4M3[codes] * expanded
    return codes, scale, dequantized


# ---------------------------------------------------------------------------------------------
# safetensors


class Tensor:
    def __init__(self, name, dtype, array, parameter=True):
        self.name, self.dtype, self.array, self.parameter = name, dtype, np.ascontiguousarray(array), parameter

    @property
    def nbytes(self):
        return self.array.nbytes


DTYPE_SIZE = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1}


def write_safetensors(path, tensors):
    # Widest dtypes first: with the header padded to 8 bytes every tensor stays aligned.
    ordered = sorted(tensors, key=lambda t: -DTYPE_SIZE[t.dtype])
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for tensor in ordered:
        header[tensor.name] = {"dtype": tensor.dtype, "shape": list(tensor.array.shape),
                               "data_offsets": [offset, offset + tensor.nbytes]}
        offset += tensor.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        out.write(len(text).to_bytes(8, "little"))
        out.write(text)
        for tensor in ordered:
            out.write(tensor.array.tobytes())
    os.replace(tmp, path)


def write_checkpoint(out_dir, tensors, shards):
    if shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
        return ["model.safetensors"]
    total = sum(t.nbytes for t in tensors)
    groups, current, written = [[] for _ in range(shards)], 0, 0
    for tensor in tensors:  # contiguous runs of about total / shards bytes
        if written >= total * (current + 1) / shards and current < shards - 1 and groups[current]:
            current += 1
        groups[current].append(tensor)
        written += tensor.nbytes
    names, weight_map = [], {}
    for index, group in enumerate(groups):
        name = "model-%05d-of-%05d.safetensors" % (index + 1, shards)
        write_safetensors(os.path.join(out_dir, name), group)
        names.append(name)
        for tensor in group:
            weight_map[tensor.name] = name
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as out:
        json.dump(index, out, indent=2)
    return names + ["model.safetensors.index.json"]


# ---------------------------------------------------------------------------------------------
# The model


def make_config(dims, arch, dtype, vocab_size, mtp):
    config = {
        "architectures": ["DeepseekV32ForCausalLM" if arch == "v32" else "DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v32" if arch == "v32" else "deepseek_v3",
        "transformers_version": "4.44.2",
        "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1,
        "first_k_dense_replace": dims["first_k_dense_replace"], "hidden_act": "silu",
        "hidden_size": dims["hidden_size"], "initializer_range": 0.02,
        "intermediate_size": dims["intermediate_size"], "kv_lora_rank": dims["kv_lora_rank"],
        "max_position_embeddings": 163840,
        "moe_intermediate_size": dims["moe_intermediate_size"], "moe_layer_freq": 1,
        "n_group": dims["n_group"], "n_routed_experts": dims["n_routed_experts"],
        "n_shared_experts": dims["n_shared_experts"], "norm_topk_prob": True,
        "num_attention_heads": dims["num_attention_heads"],
        "num_experts_per_tok": dims["num_experts_per_tok"],
        "num_hidden_layers": dims["num_hidden_layers"],
        "num_key_value_heads": dims["num_attention_heads"],
        "num_nextn_predict_layers": 1 if mtp else 0,
        "q_lora_rank": dims["q_lora_rank"], "qk_nope_head_dim": dims["qk_nope_head_dim"],
        "qk_rope_head_dim": dims["qk_rope_head_dim"], "v_head_dim": dims["v_head_dim"],
        "vocab_size": vocab_size, "rms_norm_eps": 1e-06,
        "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                         "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
        "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
        "tie_word_embeddings": False, "topk_group": dims["topk_group"], "topk_method": "noaux_tc",
        "torch_dtype": "bfloat16" if dtype != "fp32" else "float32", "use_cache": True,
    }
    if arch == "v32":
        config.update(index_head_dim=dims["index_head_dim"], index_n_heads=dims["index_n_heads"],
                      index_topk=dims["index_topk"])
    if dtype == "fp8":
        config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3",
                                         "quant_method": "fp8", "scale_fmt": "ue8m0",
                                         "weight_block_size": [BLOCK, BLOCK]}
    return dict(sorted(config.items()))


class Builder:
    """Draws tensors in a fixed order and stores them in the requested format."""

    def __init__(self, rng, dtype):
        self.rng, self.dtype, self.tensors, self.values = rng, dtype, [], {}

    def normal(self, shape, std):
        return self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def matrix(self, name, rows, cols, quantizable=True, std=None):
        w = self.normal((rows, cols), 1.0 / math.sqrt(cols) if std is None else std)
        if self.dtype == "fp8" and quantizable:
            codes, scale, dequantized = quantize_fp8_blocks(w)
            self.tensors.append(Tensor(name, "F8_E4M3", codes))
            self.tensors.append(Tensor(name + "_scale_inv", "F32", scale, parameter=False))
            self.values[name] = dequantized
        elif self.dtype in ("fp8", "bf16"):
            bits = to_bf16(w)
            self.tensors.append(Tensor(name, "BF16", bits))
            self.values[name] = from_bf16(bits)
        else:
            self.tensors.append(Tensor(name, "F32", w))
            self.values[name] = w

    def vector(self, name, size, mean, std):
        v = (np.float32(mean) + self.normal((size,), std)).astype(np.float32)
        self.tensors.append(Tensor(name, "F32", v))
        self.values[name] = v

    def norm(self, name, size):
        self.vector(name, size, 1.0, 0.05)

    def mlp(self, prefix, hidden, inter):
        self.matrix(prefix + "gate_proj.weight", inter, hidden)
        self.matrix(prefix + "up_proj.weight", inter, hidden)
        self.matrix(prefix + "down_proj.weight", hidden, inter)

    def layer(self, index, d, arch, moe):
        p = "model.layers.%d." % index
        hidden, heads = d["hidden_size"], d["num_attention_heads"]
        self.norm(p + "input_layernorm.weight", hidden)
        self.norm(p + "post_attention_layernorm.weight", hidden)
        a = p + "self_attn."
        self.matrix(a + "q_a_proj.weight", d["q_lora_rank"], hidden)
        self.norm(a + "q_a_layernorm.weight", d["q_lora_rank"])
        self.matrix(a + "q_b_proj.weight", heads * (d["qk_nope_head_dim"] + d["qk_rope_head_dim"]),
                    d["q_lora_rank"])
        self.matrix(a + "kv_a_proj_with_mqa.weight", d["kv_lora_rank"] + d["qk_rope_head_dim"], hidden)
        self.norm(a + "kv_a_layernorm.weight", d["kv_lora_rank"])
        self.matrix(a + "kv_b_proj.weight", heads * (d["qk_nope_head_dim"] + d["v_head_dim"]),
                    d["kv_lora_rank"])
        self.matrix(a + "o_proj.weight", hidden, heads * d["v_head_dim"])
        if arch == "v32":
            i = a + "indexer."
            self.matrix(i + "wq_b.weight", d["index_n_heads"] * d["index_head_dim"], d["q_lora_rank"])
            self.matrix(i + "wk.weight", d["index_head_dim"], hidden)
            self.norm(i + "k_norm.weight", d["index_head_dim"])
            self.vector(i + "k_norm.bias", d["index_head_dim"], 0.0, 0.05)
            self.matrix(i + "weights_proj.weight", d["index_n_heads"], hidden, quantizable=False)
        m = p + "mlp."
        if not moe:
            self.mlp(m, hidden, d["intermediate_size"])
            return
        self.matrix(m + "gate.weight", d["n_routed_experts"], hidden, quantizable=False)
        self.vector(m + "gate.e_score_correction_bias", d["n_routed_experts"], 0.0, 0.02)
        for expert in range(d["n_routed_experts"]):
            self.mlp(m + "experts.%d." % expert, hidden, d["moe_intermediate_size"])
        if d["n_shared_experts"] > 0:
            self.mlp(m + "shared_experts.", hidden, d["n_shared_experts"] * d["moe_intermediate_size"])


def build_tensors(d, arch, dtype, vocab_size, seed, mtp):
    builder = Builder(np.random.default_rng(seed), dtype)
    hidden = d["hidden_size"]
    builder.matrix("model.embed_tokens.weight", vocab_size, hidden, quantizable=False, std=1.0)
    for index in range(d["num_hidden_layers"]):
        builder.layer(index, d, arch, moe=index >= d["first_k_dense_replace"])
    builder.norm("model.norm.weight", hidden)
    builder.matrix("lm_head.weight", vocab_size, hidden, quantizable=False)
    bound = sum(t.array.size for t in builder.tensors if t.parameter)
    if mtp:  # DeepSeek's multi-token-prediction layer: a full layer plus its own head pieces
        index = d["num_hidden_layers"]
        builder.layer(index, d, arch, moe=True)
        p = "model.layers.%d." % index
        builder.matrix(p + "eh_proj.weight", hidden, 2 * hidden, quantizable=False)
        builder.norm(p + "enorm.weight", hidden)
        builder.norm(p + "hnorm.weight", hidden)
        builder.norm(p + "shared_head.norm.weight", hidden)
    return builder, bound


def parse_overrides(items):
    overrides = {}
    for item in items:
        field, _, value = item.partition("=")
        if not value:
            sys.exit("--set expects FIELD=VALUE, got %r" % item)
        try:
            overrides[field] = int(value)
        except ValueError:
            overrides[field] = float(value)
    return overrides


def write_tokenizer_or_exit(out_dir):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        from make_tiny_tokenizer import write_tokenizer
    except ImportError as error:
        sys.exit("make_tiny_model.py: cannot import write_tokenizer from scripts/make_tiny_tokenizer.py "
                 "(%s); pass --no-tokenizer [--vocab-size V] to write the weights only" % error)
    return int(write_tokenizer(out_dir))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--dtype", choices=["fp32", "bf16", "fp8"], default="fp32")
    parser.add_argument("--arch", choices=["v32", "v3"], default="v32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--mtp", action="store_true")
    parser.add_argument("--no-tokenizer", action="store_true")
    parser.add_argument("--vocab-size", type=int)
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--dump-tensor", action="append", default=[], metavar="NAME")
    args = parser.parse_args()

    dims = dict(PRESETS[args.preset])
    for field, value in parse_overrides(args.set).items():
        if field not in dims:
            sys.exit("--set: unknown field %r (known: %s)" % (field, ", ".join(sorted(dims))))
        dims[field] = value
    os.makedirs(args.out, exist_ok=True)
    if args.no_tokenizer:
        vocab_size = args.vocab_size or dims["vocab_size"]
    else:
        vocab_size = write_tokenizer_or_exit(args.out)
        if args.vocab_size:
            vocab_size = max(vocab_size, args.vocab_size)

    config = make_config(dims, args.arch, args.dtype, vocab_size, args.mtp)
    with open(os.path.join(args.out, "config.json"), "w") as out:
        json.dump(config, out, indent=2)
    builder, bound = build_tensors(dims, args.arch, args.dtype, vocab_size, args.seed, args.mtp)
    files = write_checkpoint(args.out, builder.tensors, args.shards)

    report = {
        "out": args.out, "preset": args.preset, "dtype": args.dtype, "arch": args.arch,
        "vocab_size": vocab_size, "parameters": bound,
        "checkpoint_parameters": sum(t.array.size for t in builder.tensors if t.parameter),
        "tensors": len(builder.tensors), "files": files, "dump": {},
    }
    stored = {t.name: t for t in builder.tensors}
    for name in args.dump_tensor:
        if name not in builder.values:
            sys.exit("--dump-tensor: no tensor %r" % name)
        values = builder.values[name].astype(np.float32)
        report["dump"][name] = {
            "dtype": stored[name].dtype, "shape": list(values.shape),
            "sum": float(values.astype(np.float64).sum()),
            "values": [float(v) for v in values.reshape(-1)[:65536]],
        }
    print(json.dumps(report))
    print("%s: %s %s %s, %.2fM parameters, vocab %d" % (args.out, args.preset, args.arch, args.dtype,
                                                         bound / 1e6, vocab_size), file=sys.stderr)


if __name__ == "__main__":
    main()
