#!/usr/bin/python3
"""An independent numpy reference forward of DeepSeek-V3.2 (DSA) and DeepSeek-V3 checkpoints.

Written from dsa-engine.md section 4 only, as an oracle for the C++ engine: float64 math, with
the engine's storage roundings emulated where they change numbers:
  * FP8 checkpoints run W8A8: every FP8 linear quantize-dequantizes its input per 1x128 group
    (UE8M0 power-of-two scales when scale_fmt is ue8m0) before the dequantized weight multiplies;
  * the MLA latent c^KV is round-tripped through FP8 (128-wide groups) before use, and the RoPE
    key k^R is rounded to bf16 (the engine's KV cache formats, dsa-engine.md 4.3 and 5);
  * the indexer quantizes its Hadamard-rotated q and k to FP8 and scores with 4.5's formula.
Every FP8 quantization (W8A8 inputs, the latent, the indexer's q and k) uses power-of-two scales
when the checkpoint's scale_fmt is ue8m0 (or with --force-ue8m0), else amax / 448.
Attention is the prefill of all positions, causal, in MHA mode (c^KV expanded through kv_b_proj)
restricted to each query's top-k set; --self-test also runs the absorbed MQA mode. kv_b_proj
multiplies the (already FP8-rounded) latent without another activation quantization, as the
absorbed mode must; with power-of-two scales re-quantizing it would change nothing.

    reference_model.py --model DIR --tokens 1,2,3 [--greedy N] [--indexer-rope-interleave]
                       [--dense] [--force-ue8m0] [--out FILE.json]
    reference_model.py --self-test [--model DIR]

The JSON result: {"logits": [[vocab floats] per position], "topk": {"<layer>": [[sorted key
positions] per query]}, "index_scores": {"<layer>": [[scores of keys 0..t] per query t]},
"routing": {"<layer>" (MoE layers only): [[chosen expert ids, descending biased score] per position]},
"greedy": [ids]} (greedy: N argmax tokens, the full forward recomputed each step). DeepSeek-V3
checkpoints (no indexer) have empty topk and index_scores.

Only numpy is needed.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

GROUP = 128  # FP8 activation group and weight block
FP8_MAX = 448.0

# ---------------------------------------------------------------------------------------------
# Number formats


def e4m3_values():
    """Decoded float8 e4m3fn for every byte."""
    out = np.empty(256, dtype=np.float64)
    for code in range(256):
        exponent, mantissa = (code >> 3) & 15, code & 7
        if exponent == 15 and mantissa == 7:
            value = math.nan
        elif exponent == 0:
            value = mantissa * 2.0 ** -9
        else:
            value = (8 + mantissa) * 2.0 ** (exponent - 10)
        out[code] = -value if code & 0x80 else value
    return out


E4M3 = e4m3_values()


def round_to_e4m3(v):
    """Rounds values in [-448, 448] to the nearest e4m3fn value, ties to even (value arithmetic)."""
    v = np.asarray(v, dtype=np.float64)
    a = np.abs(v)
    out = np.empty_like(a)
    subnormal = a < 2.0 ** -6
    out[subnormal] = np.rint(a[subnormal] * 2.0 ** 9) * 2.0 ** -9
    _, exponent = np.frexp(a[~subnormal])  # a = m * 2^exponent, m in [0.5, 1)
    step = np.ldexp(1.0, exponent - 4)  # 3 mantissa bits below the leading one
    out[~subnormal] = np.rint(a[~subnormal] / step) * step
    return np.copysign(out, v)


def round_to_bf16(v):
    bits = np.asarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return bits.view(np.float32).astype(np.float64)


def act_quant(x, pow2):
    """act_quant of dsa-engine.md 3 along the last axis in groups of 128, in fp32 as the kernels.

    Returns (dequantized values, fp8 values y, scales [..., groups])."""
    x = np.asarray(x, dtype=np.float32)
    cols = x.shape[-1]
    groups = -(-cols // GROUP)
    padded = np.zeros(x.shape[:-1] + (groups * GROUP,), dtype=np.float32)
    padded[..., :cols] = x
    g = padded.reshape(x.shape[:-1] + (groups, GROUP))
    amax = np.maximum(np.abs(g).max(axis=-1), np.float32(1e-4))
    scale = (amax / np.float32(FP8_MAX)).astype(np.float32)
    if pow2:
        mantissa, exponent = np.frexp(scale)  # scale = m * 2^e, m in [0.5, 1)
        scale = np.ldexp(np.float32(1.0), np.where(mantissa == 0.5, exponent - 1, exponent)).astype(np.float32)
    y = np.clip(g / scale[..., None], -FP8_MAX, FP8_MAX)
    y = round_to_e4m3(y.astype(np.float64))
    deq = (y * scale[..., None].astype(np.float64)).reshape(padded.shape)[..., :cols]
    return deq, y.reshape(padded.shape)[..., :cols], scale.astype(np.float64)


def hadamard_matrix(n):
    """The Sylvester Hadamard matrix (natural order) scaled to be orthonormal."""
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / math.sqrt(n)


# ---------------------------------------------------------------------------------------------
# Checkpoint reading


class SafetensorsReader:
    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            self.header = json.loads(f.read(size))
        self.data_start = 8 + size
        self.data = np.memmap(path, dtype=np.uint8, mode="r")

    def names(self):
        return [n for n in self.header if n != "__metadata__"]

    def raw(self, name):
        entry = self.header[name]
        begin, end = entry["data_offsets"]
        buf = self.data[self.data_start + begin:self.data_start + end]
        return entry["dtype"], entry["shape"], np.asarray(buf)


def decode(dtype, shape, raw):
    if dtype == "F32":
        values = raw.view(np.float32).astype(np.float64)
    elif dtype == "F16":
        values = raw.view(np.float16).astype(np.float64)
    elif dtype == "BF16":
        values = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    elif dtype == "F8_E4M3":
        values = E4M3[raw]
    else:
        raise ValueError("unsupported dtype %s" % dtype)
    return values.reshape(shape)


class Checkpoint:
    def __init__(self, directory):
        index_path = os.path.join(directory, "model.safetensors.index.json")
        if os.path.exists(index_path):
            with open(index_path) as f:
                weight_map = json.load(f)["weight_map"]
            readers = {shard: SafetensorsReader(os.path.join(directory, shard))
                       for shard in sorted(set(weight_map.values()))}
            self.where = {name: readers[shard] for name, shard in weight_map.items()}
        else:
            reader = SafetensorsReader(os.path.join(directory, "model.safetensors"))
            self.where = {name: reader for name in reader.names()}

    def dtype(self, name):
        return self.where[name].header[name]["dtype"]

    def tensor(self, name):
        """The tensor widened to float64, FP8 weights multiplied by their 128x128 block scales."""
        dtype, shape, raw = self.where[name].raw(name)
        values = decode(dtype, shape, raw)
        if dtype == "F8_E4M3":
            scale = self.tensor(name + "_scale_inv")
            expanded = np.repeat(np.repeat(scale, GROUP, axis=0), GROUP, axis=1)
            values = values * expanded[:shape[0], :shape[1]]
        return values


# ---------------------------------------------------------------------------------------------
# The model


def yarn_frequencies(rope_dim, theta, factor, original_len, beta_fast, beta_slow):
    """Per-pair frequencies f_i and (low, high) of dsa-engine.md 1.3."""
    base = theta ** (-np.arange(0, rope_dim, 2, dtype=np.float64) / rope_dim)
    if factor <= 1:
        return base, None

    def correction_dim(rotations):
        return rope_dim * math.log(original_len / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), rope_dim - 1)
    ramp = np.clip((np.arange(rope_dim // 2) - low) / ((high - low) if high != low else 0.001), 0, 1)
    return base * (1 - ramp) + base / factor * ramp, (low, high)


def rope(v, angles, interleaved):
    """Rotates the last axis of v ([T, ..., d]) by angles [T, d/2]."""
    angles = angles.reshape(angles.shape[:1] + (1,) * (v.ndim - 2) + angles.shape[1:])
    cos, sin = np.cos(angles), np.sin(angles)
    out = np.empty_like(v)
    if interleaved:
        a, b = v[..., 0::2], v[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
    else:
        half = v.shape[-1] // 2
        a, b = v[..., :half], v[..., half:]
        out[..., :half], out[..., half:] = a * cos - b * sin, a * sin + b * cos
    return out


def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def layer_norm(x, weight, bias, eps=1e-6):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def silu(x):
    return x / (1 + np.exp(-x))


class Model:
    def __init__(self, directory, indexer_rope_interleave=None, force_ue8m0=False):
        with open(os.path.join(directory, "config.json")) as f:
            self.config = c = json.load(f)
        arch = c["architectures"][0]
        if arch not in ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM"):
            raise ValueError("unsupported architecture " + arch)
        self.has_indexer = arch == "DeepseekV32ForCausalLM"
        self.checkpoint = Checkpoint(directory)
        quant = c.get("quantization_config") or {}
        self.pow2 = quant.get("scale_fmt") == "ue8m0" or force_ue8m0
        self.indexer_interleave = bool(c.get("indexer_rope_interleave", False)) \
            if indexer_rope_interleave is None else indexer_rope_interleave
        self.heads, self.nope, self.rope_dim, self.v_dim = (c["num_attention_heads"], c["qk_nope_head_dim"],
                                                            c["qk_rope_head_dim"], c["v_head_dim"])
        self.kv_rank, self.eps = c["kv_lora_rank"], c.get("rms_norm_eps", 1e-6)
        scaling = c.get("rope_scaling") or {}
        factor = scaling.get("factor", 1.0)
        self.freqs, _ = yarn_frequencies(self.rope_dim, c.get("rope_theta", 10000.0), factor,
                                         scaling.get("original_max_position_embeddings", 4096),
                                         scaling.get("beta_fast", 32), scaling.get("beta_slow", 1))
        self.softmax_scale = (self.nope + self.rope_dim) ** -0.5
        if factor > 1:
            mscale = 0.1 * scaling.get("mscale_all_dim", 1.0) * math.log(factor) + 1.0
            self.softmax_scale *= mscale * mscale
        self.cache = {}

    def w(self, name):
        if name not in self.cache:
            self.cache[name] = self.checkpoint.tensor(name)
        return self.cache[name]

    def linear(self, x, name):
        """x W^T; W8A8 (input quantize-dequantized per 1x128 group) when W is FP8."""
        if self.checkpoint.dtype(name) == "F8_E4M3":
            x = act_quant(x, self.pow2)[0]
        return x @ self.w(name).T

    def mlp(self, x, prefix):
        gated = silu(self.linear(x, prefix + "gate_proj.weight")) * self.linear(x, prefix + "up_proj.weight")
        return self.linear(gated, prefix + "down_proj.weight")

    def moe(self, x, prefix, routing=None):
        """routing (a list) receives each position's chosen expert ids."""
        c = self.config
        n_experts, n_groups = c["n_routed_experts"], c.get("n_group", 1)
        scores = 1 / (1 + np.exp(-(x @ self.w(prefix + "gate.weight").T)))
        biased = scores + self.w(prefix + "gate.e_score_correction_bias")
        grouped = biased.reshape(len(x), n_groups, n_experts // n_groups)
        per_group = min(2, grouped.shape[-1])
        group_scores = -np.sort(-grouped, axis=-1)[..., :per_group].sum(axis=-1)
        out = np.zeros_like(x)
        for t in range(len(x)):
            kept_groups = np.argsort(-group_scores[t], kind="stable")[:c.get("topk_group", 1)]
            allowed = np.full(n_experts, -np.inf)
            for g in kept_groups:
                span = slice(g * (n_experts // n_groups), (g + 1) * (n_experts // n_groups))
                allowed[span] = biased[t, span]
            chosen = np.argsort(-allowed, kind="stable")[:c["num_experts_per_tok"]]
            if routing is not None:
                routing.append(chosen.tolist())
            weights = scores[t, chosen]
            if c.get("norm_topk_prob", True):
                weights = weights / weights.sum()
            weights = weights * c.get("routed_scaling_factor", 1.0)
            for e, weight in zip(chosen, weights):
                out[t] += weight * self.mlp(x[t:t + 1], prefix + "experts.%d." % e)[0]
        if c.get("n_shared_experts", 0) > 0:
            out += self.mlp(x, prefix + "shared_experts.")
        return out

    def indexer(self, x, cq, angles, prefix):
        """Scores I[t, s] (4.5; -inf for s > t) of the lightning indexer."""
        c = self.config
        n_heads, dim = c["index_n_heads"], c["index_head_dim"]
        T = len(x)
        q = self.linear(cq, prefix + "wq_b.weight").reshape(T, n_heads, dim)
        q[..., :self.rope_dim] = rope(q[..., :self.rope_dim], angles, self.indexer_interleave)  # [RoPE | NoPE]
        k = layer_norm(self.linear(x, prefix + "wk.weight"), self.w(prefix + "k_norm.weight"),
                       self.w(prefix + "k_norm.bias"))
        k[..., :self.rope_dim] = rope(k[..., :self.rope_dim], angles, self.indexer_interleave)
        h = hadamard_matrix(dim)
        q, k = q @ h.T, k @ h.T
        _, q8, q_scale = act_quant(q, self.pow2)  # one group per (token, head)
        _, k8, k_scale = act_quant(k, self.pow2)  # one group per token
        head_weights = (x @ self.w(prefix + "weights_proj.weight").T) * n_heads ** -0.5
        head_weights = head_weights * q_scale[..., 0] * dim ** -0.5
        dots = np.maximum(np.einsum("thd,sd->ths", q8, k8), 0)
        scores = k_scale[:, 0][None, :] * np.einsum("th,ths->ts", head_weights, dots)
        scores[np.triu(np.ones((T, T), dtype=bool), 1)] = -np.inf
        return scores

    def select(self, scores):
        """Causal top-k sets (4.6): everything when t + 1 <= index_topk."""
        k = self.config["index_topk"]
        return [np.sort(np.argsort(-scores[t, :t + 1], kind="stable")[:k]) for t in range(len(scores))]

    def attention_inputs(self, x, positions, prefix):
        angles = positions[:, None].astype(np.float64) * self.freqs[None, :]
        cq = rms_norm(self.linear(x, prefix + "q_a_proj.weight"), self.w(prefix + "q_a_layernorm.weight"), self.eps)
        q = self.linear(cq, prefix + "q_b_proj.weight").reshape(len(x), self.heads, self.nope + self.rope_dim)
        q_nope, q_pe = q[..., :self.nope], rope(q[..., self.nope:], angles, True)
        kv = self.linear(x, prefix + "kv_a_proj_with_mqa.weight")
        latent = rms_norm(kv[:, :self.kv_rank], self.w(prefix + "kv_a_layernorm.weight"), self.eps)
        latent = act_quant(latent, self.pow2)[0]  # the FP8 latent cache
        k_pe = round_to_bf16(rope(kv[:, self.kv_rank:], angles, True))  # the bf16 RoPE cache
        return dict(angles=angles, cq=cq, q_nope=q_nope, q_pe=q_pe, latent=latent, k_pe=k_pe)

    def attend(self, a, allowed, prefix, mode="mha"):
        """Per-head attention outputs [T, heads, v] over the allowed [T, S] keys."""
        wkv_b = self.w(prefix + "kv_b_proj.weight").reshape(self.heads, self.nope + self.v_dim, self.kv_rank)
        w_uk, w_uv = wkv_b[:, :self.nope], wkv_b[:, self.nope:]
        rope_scores = np.einsum("thd,sd->hts", a["q_pe"], a["k_pe"])
        if mode == "mha":  # expand the latent into per-head keys and values
            k_nope = np.einsum("sr,hdr->shd", a["latent"], w_uk)
            values = np.einsum("sr,hdr->shd", a["latent"], w_uv)
            z = np.einsum("thd,shd->hts", a["q_nope"], k_nope) + rope_scores
        else:  # absorb W_UK into the query, attend over the latent, then apply W_UV
            q_absorbed = np.einsum("thd,hdr->thr", a["q_nope"], w_uk)
            z = np.einsum("thr,sr->hts", q_absorbed, a["latent"]) + rope_scores
        z = np.where(allowed[None], z * self.softmax_scale, -np.inf)
        p = softmax(z)
        if mode == "mha":
            return np.einsum("hts,shd->thd", p, values)
        return np.einsum("thr,hdr->thd", np.einsum("hts,sr->thr", p, a["latent"]), w_uv)

    def forward(self, tokens, dense=False, mode="mha", record=None):
        """Logits [T, vocab] of the causal prefill; record (a dict) receives topk and scores."""
        tokens = np.asarray(tokens, dtype=np.int64)
        T = len(tokens)
        positions = np.arange(T)
        h = self.w("model.embed_tokens.weight")[tokens]
        causal = np.tril(np.ones((T, T), dtype=bool))
        for layer in range(self.config["num_hidden_layers"]):
            p = "model.layers.%d." % layer
            x = rms_norm(h, self.w(p + "input_layernorm.weight"), self.eps)
            a = self.attention_inputs(x, positions, p + "self_attn.")
            allowed = causal
            if self.has_indexer and not dense:
                scores = self.indexer(x, a["cq"], a["angles"], p + "self_attn.indexer.")
                selected = self.select(scores)
                allowed = np.zeros((T, T), dtype=bool)
                for t, keys in enumerate(selected):
                    allowed[t, keys] = True
                allowed &= causal  # the causal mask re-added (pitfall 7)
                if record is not None:
                    record.setdefault("topk", {})[str(layer)] = [keys.tolist() for keys in selected]
                    record.setdefault("index_scores", {})[str(layer)] = [scores[t, :t + 1].tolist() for t in range(T)]
            o = self.attend(a, allowed, p + "self_attn.", mode)
            h = h + self.linear(o.reshape(T, -1), p + "self_attn.o_proj.weight")
            x = rms_norm(h, self.w(p + "post_attention_layernorm.weight"), self.eps)
            if layer >= self.config.get("first_k_dense_replace", 0):
                routing = record.setdefault("routing", {}).setdefault(str(layer), []) if record is not None else None
                h = h + self.moe(x, p + "mlp.", routing)
            else:
                h = h + self.mlp(x, p + "mlp.")
        h = rms_norm(h, self.w("model.norm.weight"), self.eps)
        return self.head(h)

    def head(self, h):
        return h @ self.w("lm_head.weight").T

    def greedy(self, tokens, n):
        tokens, out = list(tokens), []
        for _ in range(n):
            next_id = int(np.argmax(self.forward(tokens)[-1]))
            out.append(next_id)
            tokens.append(next_id)
        return out


class GpuNumericsModel(Model):
    """The same forward with the GPU engine's roundings (inference/cuda_forward.h): every GEMM on
    bf16 inputs and bf16 weights (FP8 weights dequantized, then rounded: the engine's bf16 weight
    path), the absorbed query, q_rope, the dequantized latent rows, the attention probabilities
    (exp(z - max) to bf16 for the P.V product, normalised in fp32) and the attention output in
    bf16; the router and the indexer head weights stay fp32, as on the GPU. Everything else is
    float64, so the GPU agrees with it to fp32 summation-order noise except where a value sits on
    an FP8, top-k or routing boundary."""

    def linear(self, x, name):
        return round_to_bf16(x) @ round_to_bf16(self.w(name)).T

    def attend(self, a, allowed, prefix, mode="mha"):
        bf = round_to_bf16
        wkv_b = bf(self.w(prefix + "kv_b_proj.weight")).reshape(self.heads, self.nope + self.v_dim, self.kv_rank)
        w_uk, w_uv = wkv_b[:, :self.nope], wkv_b[:, self.nope:]
        latent = bf(a["latent"])
        q_absorbed = bf(np.einsum("thd,hdr->thr", bf(a["q_nope"]), w_uk))
        z = np.einsum("thr,sr->hts", q_absorbed, latent) + np.einsum("thd,sd->hts", bf(a["q_pe"]), a["k_pe"])
        z = np.where(allowed[None], z * self.softmax_scale, -np.inf)
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        o = np.einsum("hts,sr->thr", bf(e), latent) / e.sum(axis=-1).transpose(1, 0)[:, :, None]
        return np.einsum("thr,hdr->thd", bf(o), w_uv)

    def head(self, h):
        return round_to_bf16(h) @ round_to_bf16(self.w("lm_head.weight")).T


# ---------------------------------------------------------------------------------------------
# Self-test: invariants of dsa-engine.md section 7


def make_model(directory, *flags, report=None):
    """Runs scripts/make_tiny_model.py into directory; report (a dict) receives its JSON report."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "make_tiny_model.py")
    done = subprocess.run([sys.executable, script, "--out", directory, "--no-tokenizer", *flags],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError("make_tiny_model.py failed: " + done.stderr)
    if report is not None:
        report.update(json.loads(done.stdout.splitlines()[0]))
    return directory


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print("ok   " + what)


def relative_error(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def self_test(model_dir):
    rng = np.random.default_rng(1)

    # Formats: the rounding reproduces every e4m3 value, ties go to the even code.
    finite = E4M3[np.isfinite(E4M3)]
    check(np.array_equal(round_to_e4m3(finite), finite), "e4m3 rounding is exact on all 254 finite values")
    positive = np.sort(np.unique(finite[finite >= 0]))
    mid = (positive[:-1] + positive[1:]) / 2
    codes = np.searchsorted(positive, round_to_e4m3(mid))
    check(np.all(codes % 2 == 0), "e4m3 midpoints round to the even code")
    x = rng.standard_normal((4, 300)) * 10
    deq, y, scales = act_quant(x, pow2=True)
    check(np.all(np.abs(y) <= FP8_MAX) and np.all(np.log2(scales) == np.round(np.log2(scales))),
          "act_quant with UE8M0 gives power-of-two scales and |y| <= 448")
    check(relative_error(deq, x) < 0.07, "act_quant round trip is close")

    # YaRN constants of the 671B config (7.5).
    freqs, (low, high) = yarn_frequencies(64, 10000.0, 40, 4096, 32, 1)
    check((low, high) == (10, 23), "YaRN correction range is (10, 23)")
    check(freqs[0] == 1.0 and abs(freqs[31] - 3.334e-6) < 1e-9, "YaRN f_0 = 1, f_31 = 3.334e-6")
    scale = 192 ** -0.5 * (0.1 * math.log(40) + 1) ** 2
    check(abs(scale - 0.1352338) < 1e-7, "MLA softmax scale is 0.1352338")

    # Hadamard is orthonormal and preserves dot products (7.1).
    h = hadamard_matrix(128)
    check(np.allclose(h @ h.T, np.eye(128)), "H/sqrt(128) is orthonormal")
    q, k = rng.standard_normal((8, 128)), rng.standard_normal((5, 128))
    check(np.allclose((q @ h.T) @ (k @ h.T).T, q @ k.T), "Hadamard preserves q.k")

    with tempfile.TemporaryDirectory() as tmp:
        if model_dir is None:
            model_dir = make_model(os.path.join(tmp, "fp32"))
        model = Model(model_dir)
        vocab = model.config["vocab_size"]
        topk = model.config.get("index_topk", 0)
        long_tokens = rng.integers(0, vocab, size=max(40, topk + 8)).tolist()

        # MHA mode == absorbed MQA mode (7.4), on the full model and with sparse masks.
        record = {}
        mha = model.forward(long_tokens, record=record)
        mqa = model.forward(long_tokens, mode="mqa")
        check(relative_error(mqa, mha) < 1e-9, "MQA-mode logits equal MHA-mode logits")

        if model.has_indexer:
            # Sparse == dense causal while the sequence fits in index_topk (7.2).
            short = long_tokens[:topk]
            check(np.array_equal(model.forward(short), model.forward(short, dense=True)),
                  "sparse == dense for %d tokens <= index_topk" % len(short))
            selections = record["topk"]["1"]
            check(all(len(s) == min(t + 1, topk) and max(s) <= t for t, s in enumerate(selections)),
                  "top-k sets are causal with min(t+1, index_topk) keys")
            dense = model.forward(long_tokens, dense=True)
            check(relative_error(mha[topk:], dense[topk:]) > 1e-6, "beyond index_topk sparse differs from dense")
            check(np.array_equal(mha[:topk], dense[:topk]), "positions below index_topk match dense exactly")
            # The indexer's RoPE pairing is observable (7.3).
            swapped = Model(model_dir, indexer_rope_interleave=True)
            rec_swapped = {}
            swapped.forward(long_tokens, record=rec_swapped)
            check(rec_swapped["index_scores"]["0"][-1] != record["index_scores"]["0"][-1],
                  "interleaved indexer RoPE changes the index scores")

        # Causality: the last token does not change earlier logits.
        changed = long_tokens[:-1] + [(long_tokens[-1] + 1) % vocab]
        check(np.array_equal(model.forward(changed)[:-1], mha[:-1]), "logits are causal")

        if model_dir.startswith(tmp):
            # The same seed in other storage formats gives correlated logits (a decoding error would
            # not); only correlated, because the FP8 latent cache, the indexer's FP8 scores and the
            # MoE routing turn small weight differences into discrete flips.
            reference = mha
            dumped = "model.layers.1.self_attn.kv_b_proj.weight"
            for dtype, least in (("bf16", 0.9), ("fp8", 0.7)):
                generated = {}
                other_model = Model(make_model(os.path.join(tmp, dtype), "--dtype", dtype, "--dump-tensor", dumped,
                                               report=generated))
                expected = np.asarray(generated["dump"][dumped]["values"]).reshape(other_model.w(dumped).shape)
                check(np.array_equal(other_model.w(dumped), expected),
                      "%s %s reads back as the generator's values" % (dtype, dumped))
                other = other_model.forward(long_tokens)
                correlation = float(np.corrcoef(other.ravel(), reference.ravel())[0, 1])
                check(correlation > least, "%s logits correlate with fp32 (%.3f > %.1f)" % (dtype, correlation, least))
            fp8 = Model(os.path.join(tmp, "fp8"))
            a = fp8.attention_inputs(np.asarray(rng.standard_normal((12, fp8.config["hidden_size"]))), np.arange(12),
                                     "model.layers.1.self_attn.")
            causal = np.tril(np.ones((12, 12), dtype=bool))
            check(relative_error(fp8.attend(a, causal, "model.layers.1.self_attn.", "mqa"),
                                 fp8.attend(a, causal, "model.layers.1.self_attn.", "mha")) < 1e-9,
                  "FP8 checkpoint: MQA-mode attention equals MHA mode")
            sharded = Model(make_model(os.path.join(tmp, "sharded"), "--shards", "3")).forward(long_tokens)
            check(np.array_equal(sharded, reference), "a sharded checkpoint reads identically")
            v3 = Model(make_model(os.path.join(tmp, "v3"), "--arch", "v3"))
            check(not v3.has_indexer and np.all(np.isfinite(v3.forward(long_tokens[:8]))), "DeepseekV3 runs dense")
    print("self-test passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model")
    parser.add_argument("--tokens", help="comma-separated token ids")
    parser.add_argument("--greedy", type=int, default=0)
    parser.add_argument("--indexer-rope-interleave", action="store_true")
    parser.add_argument("--dense", action="store_true", help="ignore the indexer (dense causal attention)")
    parser.add_argument("--force-ue8m0", action="store_true",
                        help="power-of-two scales for every FP8 quantization, whatever scale_fmt says")
    parser.add_argument("--gpu-numerics", action="store_true",
                        help="round as the GPU engine does (GpuNumericsModel) instead of the CPU engine's fp32")
    parser.add_argument("--logits-f32", help="also write the logits as raw little-endian float32 to this file")
    parser.add_argument("--out")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        self_test(args.model)
        return
    if not args.model or not args.tokens:
        parser.error("--model and --tokens are required (or --self-test)")
    tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    model_class = GpuNumericsModel if args.gpu_numerics else Model
    model = model_class(args.model, True if args.indexer_rope_interleave else None, args.force_ue8m0)
    record = {"topk": {}, "index_scores": {}}
    logits = model.forward(tokens, dense=args.dense, record=record)
    if args.logits_f32:
        logits.astype("<f4").tofile(args.logits_f32)
    result = {"logits": logits.tolist(), "topk": record["topk"], "index_scores": record["index_scores"],
              "routing": record.get("routing", {}), "greedy": model.greedy(tokens, args.greedy) if args.greedy else []}
    text = json.dumps(result)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
