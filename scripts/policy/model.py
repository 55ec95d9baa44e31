"""DeepSeek-V3.2 in PyTorch with the embedded engine's semantics (dsa-engine.md section 4).

Parameter names are the Hugging Face checkpoint's (model.layers.L.self_attn.q_a_proj.weight, ...),
so the state dict is the export. The forward follows inference/model.cc:
  * MLA: c^Q = RMSNorm(W_qa x); [q^N | q^R] per head from W_qb c^Q; [c^KV | k^R] = W_kva x,
    c^KV RMS-normed; interleaved RoPE on q^R and k^R with the config's YaRN frequencies; keys and
    values expanded through W_kvb (MHA mode, algebraically the engine's absorbed MQA mode); softmax
    scale qk_head_dim^-0.5 * mscale^2;
  * the engine's cache formats are part of the forward, so training sees them too: c^KV goes
    through the FP8 round trip (1x128 groups, amax / 448 scales, power-of-two with ue8m0) and k^R
    is rounded to bf16, both with a straight-through gradient;
  * lightning indexer: q = W_iq c^Q per head, k = LayerNorm(W_ik x), RoPE non-interleaved on the
    first qk_rope_head_dim dims, the Walsh-Hadamard butterfly (the engine's order), scores
    I[t,s] = sum_j w[t,j] relu(q[t,j] . k[s]) with w = W_w x * n_heads^-0.5 * head_dim^-0.5.
    Key selection always uses the engine's scores (q per head and k per token quantized to FP8);
    the KL loss uses the unquantized scores (differentiable);
  * DSA: a query with more than index_topk causal candidates attends to the index_topk keys of
    highest score, others to every causal key;
  * MoE: sigmoid router in fp32, bias for selection only (grouped: top-2 sum per group, top
    groups, top experts), weights normalized over the chosen experts times routed_scaling_factor,
    plus the shared expert; the first first_k_dense_replace layers are dense SwiGLU.
What remains between this forward and the engine is the export's bf16 rounding of the weight
matrices (export.rounded_copy applies it, giving the "eval mode" model) and fp32
summation order.

Batches are packed: the prompt prefix shared by every sequence of a batch (the system prompt and
tools block, identical in every transcript) is computed once, and each sequence's own tokens
(its suffix) attend to the prefix and to themselves. Rows are [prefix rows; suffix rows of
sequence 0; of sequence 1; ...].
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

FP8_MAX = 448.0
GROUP = 128


# ---------------------------------------------------------------------------------------------
# Number formats (the engine's roundings)


def round_to_e4m3(v):
    """Rounds fp32 values in [-448, 448] to the nearest float8 e4m3fn value, ties to even."""
    a = v.abs()
    mantissa, exponent = torch.frexp(a)  # a = m * 2^e, m in [0.5, 1)
    step = torch.ldexp(torch.ones_like(a), (exponent - 4).clamp(min=-9))  # 3 mantissa bits; subnormal step 2^-9
    return torch.copysign(torch.round(a / step) * step, v)


def fp8_scales(x, pow2):
    """Per-row scale of groups already on the last axis: max(amax, 1e-4) / 448, UE8M0 if pow2."""
    amax = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-4)
    scale = amax / FP8_MAX
    if pow2:
        mantissa, exponent = torch.frexp(scale)
        exponent = torch.where(mantissa == 0.5, exponent - 1, exponent)
        scale = torch.ldexp(torch.ones_like(scale), exponent)
    return scale


def fp8_quantize(x, pow2, group=GROUP):
    """(fp8 values y, scales [..., groups]) of act_quant over groups of `group` on the last axis."""
    shape = x.shape
    g = x.reshape(*shape[:-1], shape[-1] // group, group)
    scale = fp8_scales(g, pow2)
    y = round_to_e4m3((g / scale).clamp(-FP8_MAX, FP8_MAX))
    return y.reshape(shape), scale.squeeze(-1)


def fp8_round_trip(x, pow2, group=GROUP):
    """act_quant then dequantize, with a straight-through gradient."""
    with torch.no_grad():
        shape = x.shape
        y, scale = fp8_quantize(x.detach(), pow2, group)
        deq = (y.reshape(*shape[:-1], shape[-1] // group, group) * scale.unsqueeze(-1)).reshape(shape)
    return x + (deq - x).detach()


def bf16_round_trip(x):
    with torch.no_grad():
        r = x.detach().to(torch.bfloat16).to(torch.float32)
    return x + (r - x).detach()


# ---------------------------------------------------------------------------------------------
# RoPE / YaRN (kernels/cpu/rope.cc)


def yarn_frequencies(config):
    rope_dim = config["qk_rope_head_dim"]
    theta = float(config.get("rope_theta", 10000.0))
    scaling = config.get("rope_scaling") or {}
    factor = float(scaling.get("factor", 1.0))
    base = [theta ** (-2.0 * i / rope_dim) for i in range(rope_dim // 2)]
    if factor > 1.0:
        original = float(scaling.get("original_max_position_embeddings", 4096))

        def correction_dim(rotations):
            return rope_dim * math.log(original / (rotations * 2.0 * math.pi)) / (2.0 * math.log(theta))

        low = min(max(math.floor(correction_dim(float(scaling.get("beta_fast", 32)))), 0.0), rope_dim - 1.0)
        high = min(max(math.ceil(correction_dim(float(scaling.get("beta_slow", 1)))), 0.0), rope_dim - 1.0)
        if high == low:
            high += 0.001
        ramps = [min(max((i - low) / (high - low), 0.0), 1.0) for i in range(rope_dim // 2)]
        base = [b * (1.0 - r) + b / factor * r for b, r in zip(base, ramps)]
    return torch.tensor(base, dtype=torch.float32)


def softmax_scale(config):
    scale = (config["qk_nope_head_dim"] + config["qk_rope_head_dim"]) ** -0.5
    scaling = config.get("rope_scaling") or {}
    factor = float(scaling.get("factor", 1.0))
    if factor > 1.0:
        mscale = 0.1 * float(scaling.get("mscale_all_dim", 1.0)) * math.log(factor) + 1.0
        scale *= mscale * mscale
    return scale


def rope_tables(freqs, positions):
    """cos, sin [N, pairs]: angle = fp32(pos * freq), cos/sin in double then fp32 (as the engine)."""
    angles = (positions.to(torch.float64)[:, None] * freqs.to(torch.float64)[None, :]).to(torch.float32)
    angles = angles.to(torch.float64)
    return torch.cos(angles).to(torch.float32), torch.sin(angles).to(torch.float32)


def apply_rope(v, cos, sin, interleaved):
    """Rotates the last axis of v [N, ..., d]; cos/sin [N, d/2]."""
    shape = (cos.shape[0],) + (1,) * (v.dim() - 2) + (cos.shape[1],)
    cos, sin = cos.reshape(shape), sin.reshape(shape)
    if interleaved:
        a, b = v[..., 0::2], v[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    half = v.shape[-1] // 2
    a, b = v[..., :half], v[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def hadamard(x):
    """The in-place butterfly of kernels/cpu/hadamard.cc, then the 1/sqrt(n) scale (fp32)."""
    n = x.shape[-1]
    lead = x.shape[:-1]
    half = 1
    while half < n:
        v = x.reshape(*lead, n // (2 * half), 2, half)
        a, b = v[..., 0, :], v[..., 1, :]
        x = torch.stack((a + b, a - b), dim=-2).reshape(*lead, n)
        half *= 2
    return x * torch.tensor(1.0 / math.sqrt(n), dtype=torch.float32)


# ---------------------------------------------------------------------------------------------
# Packed batches


def mask_bias(mask):
    return torch.zeros(mask.shape).masked_fill_(~mask, -math.inf)


class Layout:
    """Rows [prefix (P); B suffixes of S rows]; the prefix is shared by every sequence."""

    def __init__(self, prefix_len, batch, suffix_len, suffix_lengths=None):
        self.P, self.B, self.S = prefix_len, batch, suffix_len
        lengths = torch.as_tensor(suffix_lengths if suffix_lengths is not None else [suffix_len] * batch)
        self.valid = torch.arange(suffix_len)[None, :] < lengths[:, None]  # [B, S] real (unpadded) rows
        pos_prefix = torch.arange(prefix_len)
        pos_suffix = torch.arange(prefix_len, prefix_len + suffix_len).repeat(batch)
        self.positions = torch.cat((pos_prefix, pos_suffix))
        # allowed (causal) masks: prefix queries over prefix keys; suffix queries over prefix+suffix keys
        self.prefix_mask = torch.ones(prefix_len, prefix_len, dtype=torch.bool).tril()
        self.suffix_causal = torch.ones(suffix_len, suffix_len, dtype=torch.bool).tril()
        self.suffix_mask = torch.cat((torch.ones(suffix_len, prefix_len, dtype=torch.bool), self.suffix_causal), dim=1)
        # the same masks as additive biases (0 / -inf): adding is much faster than masked_fill
        self.prefix_bias = mask_bias(self.prefix_mask)
        self.suffix_causal_bias = mask_bias(self.suffix_causal)
        self.suffix_bias = mask_bias(self.suffix_mask)

    @property
    def rows(self):
        return self.P + self.B * self.S

    def prefix(self, x):
        return x[:self.P]

    def suffix(self, x):
        return x[self.P:].reshape(self.B, self.S, *x.shape[1:])

    def keys(self, x):
        """[B, P + S, ...]: each sequence's keys, the prefix broadcast."""
        p = x[:self.P].unsqueeze(0).expand(self.B, *x[:self.P].shape)
        return torch.cat((p, self.suffix(x)), dim=1)

# ---------------------------------------------------------------------------------------------
# Modules


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def mm(x, w):
    """x [N, K] @ w [M, K]^T -> [N, M]. Debian's torch links libblas.so.3: with the reference BLAS
    (a few GFLOP/s) its 1x1 convolution over a channels-last view of x was several times faster
    and needs no copy of x or of the result, so every large product goes through it. Under
    OpenBLAS (scripts/setup.sh installs it) both run at 30-40 GFLOP/s on one core here."""
    n, k = x.shape
    if n < 32:
        return F.linear(x, w)
    x = x.contiguous()
    y = F.conv2d(x.view(1, n, 1, k).permute(0, 3, 1, 2), w.reshape(w.shape[0], k, 1, 1))
    return y.permute(0, 2, 3, 1).reshape(n, w.shape[0])


def bmm(a, b):
    """a [G, M, K] @ b [G, K, N] -> [G, M, N]. torch.bmm goes to the same reference BLAS as
    F.linear; a grouped 1x1 convolution (oneDNN; group g: b[g]'s N columns as filters over a[g]'s
    M rows as positions) runs forward and backward 4-8x faster at the attention's shapes."""
    g, m, k = a.shape
    n = b.shape[2]
    if m < 32:
        return torch.bmm(a, b)
    x = a.permute(0, 2, 1).reshape(1, g * k, m, 1)
    w = b.permute(0, 2, 1).reshape(g * n, k, 1, 1)
    return F.conv2d(x, w, groups=g).reshape(g, n, m).transpose(1, 2)


class Linear(nn.Module):
    """nn.Linear without bias, computed by mm."""

    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim_out, dim_in))

    def forward(self, x):
        return mm(x.reshape(-1, x.shape[-1]), self.weight).reshape(*x.shape[:-1], self.weight.shape[0])


def linear(dim_in, dim_out):
    return Linear(dim_in, dim_out)


class Indexer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.dim, self.rope = c["index_n_heads"], c["index_head_dim"], c["qk_rope_head_dim"]
        self.interleave = bool(c.get("indexer_rope_interleave", False))
        self.wq_b = linear(c["q_lora_rank"], self.heads * self.dim)
        self.wk = linear(c["hidden_size"], self.dim)
        self.k_norm = nn.LayerNorm(self.dim, eps=1e-6)
        self.weights_proj = linear(c["hidden_size"], self.heads)

    def forward(self, x, cq, cos, sin):
        """(q [N, heads, dim], k [N, dim], head weights [N, heads]) after RoPE and Hadamard."""
        n = x.shape[0]
        q = self.wq_b(cq).reshape(n, self.heads, self.dim)
        q = torch.cat((apply_rope(q[..., :self.rope], cos, sin, self.interleave), q[..., self.rope:]), dim=-1)
        k = self.k_norm(self.wk(x))
        k = torch.cat((apply_rope(k[..., :self.rope], cos, sin, self.interleave), k[..., self.rope:]), dim=-1)
        w = self.weights_proj(x) * (self.heads ** -0.5 * self.dim ** -0.5)
        return hadamard(q), hadamard(k), w


def pair_dots(layout, q, k, suffix_bias=None):
    """Dot products of every query row with its keys, in the two query groups of the layout:
    (prefix queries [G, P, P], suffix queries [B, G, S, P + S]). q [N, G, d]; k [N, G, d] (a key
    per group) or [N, d] (one key shared by the groups). Products against the shared prefix keys
    are one large matmul per group (mm); only suffix x suffix products use bmm. suffix_bias
    [S, S] is added to the suffix x suffix products (the causal mask applied before the parts are
    joined, on the smaller tensor)."""
    P, B, S = layout.P, layout.B, layout.S
    n, g, d = q.shape
    if k.dim() == 2:
        zp = mm(q.reshape(n * g, d), k[:P]).reshape(n, g, P).transpose(0, 1) if P else q.new_zeros(g, n, 0)
        qs = layout.suffix(q).reshape(B, S * g, d)
        zs = bmm(qs, layout.suffix(k).transpose(1, 2)).reshape(B, S, g, S).transpose(1, 2)
    else:
        qt = q.transpose(0, 1).contiguous()  # [G, N, d]
        kt = k[:P].transpose(0, 1).contiguous()
        # unbind, not qt[j]: indexing's backward writes each head's gradient into a zeroed copy of
        # the whole tensor, unbind's stacks the heads' gradients once.
        zp = torch.stack([mm(qj, kj) for qj, kj in zip(qt.unbind(0), kt.unbind(0))]) if P else q.new_zeros(g, n, 0)
        zs = bmm(qt[:, P:].reshape(g * B, S, d),
                       layout.suffix(k).permute(2, 0, 3, 1).reshape(g * B, d, S)).reshape(g, B, S, S).transpose(0, 1)
    if suffix_bias is not None:
        zs = zs + suffix_bias
    z_prefix, z_suffix_prefix = zp.split([P, n - P], dim=1)
    z_suffix = torch.cat((z_suffix_prefix.reshape(g, B, S, P).transpose(0, 1), zs), dim=-1)
    return z_prefix, z_suffix


def apply_values(layout, p_prefix, p_suffix, v):
    """sum_k p[q, k] v[k] per group: p_prefix [G, P, P], p_suffix [B, G, S, P + S], v [N, G, dv]
    -> [N, G, dv] in row order."""
    P, B, S = layout.P, layout.B, layout.S
    g, dv = v.shape[1], v.shape[2]
    v_prefix, v_suffix = v.split([P, v.shape[0] - P])
    p_sp, p_ss = p_suffix.split([P, S], dim=-1)
    vs = v_suffix.reshape(B, S, g, dv).permute(2, 0, 1, 3).reshape(g * B, S, dv)
    out = bmm(p_ss.transpose(0, 1).reshape(g * B, S, S), vs).reshape(g, B * S, dv)
    if P:
        vt = v_prefix.permute(1, 2, 0).contiguous()  # [G, dv, P]
        p_sp = p_sp.transpose(0, 1).reshape(g, B * S, P)
        heads_v = vt.unbind(0)  # unbind for the reason pair_dots gives
        out = out + torch.stack([mm(p, vj) for p, vj in zip(p_sp.unbind(0), heads_v)])
        out = torch.cat((torch.stack([mm(p, vj) for p, vj in zip(p_prefix.unbind(0), heads_v)]), out), dim=1)
    return out.transpose(0, 1)  # [N, G, dv]


def index_scores(layout, q, k, w, key_scale=None):
    """Indexer scores I[t, s] = key_scale[s] * sum_j w[t, j] relu(q[t, j] . k[s]) in the layout's
    two query groups: ([P, P], [B, S, P + S]). q [N, H, d], k [N, d], w [N, H], key_scale [N]."""
    d_prefix, d_suffix = pair_dots(layout, q, k)
    i_prefix = torch.einsum("gqk,qg->qk", d_prefix.clamp(min=0), w[:layout.P])
    i_suffix = torch.einsum("bgqk,bqg->bqk", d_suffix.clamp(min=0), layout.suffix(w))
    if key_scale is not None:
        i_prefix = i_prefix * key_scale[:layout.P]
        i_suffix = i_suffix * layout.keys(key_scale).unsqueeze(1)
    return i_prefix, i_suffix


def engine_index_scores(layout, q, k, w, pow2):
    """The engine's scores: q quantized per (token, head), k per token, then 4.5's formula."""
    q8, q_scale = fp8_quantize(q, pow2, q.shape[-1])
    k8, k_scale = fp8_quantize(k, pow2, k.shape[-1])
    return index_scores(layout, q8, k8, w * q_scale[..., 0], k_scale[..., 0])


def select_keys(scores, allowed_bias, topk):
    """Bias [..., Q, K] (0 selected, -inf not): the topk allowed keys of highest score per query
    (every allowed key when there are at most topk), ties to the lower index as the engine's TopK
    takes them. Zeros are made +0 first: the engine's sums start from +0, so -0 never reaches its
    order keys. allowed_bias: 0 / -inf for the causal candidates."""
    scores = scores + allowed_bias + 0.0
    k = min(topk, scores.shape[-1])
    # The k-th highest score bounds the selection: every key above it, then the keys equal to it
    # in index order until k are taken (what a stable descending sort's first k are, without the
    # sort: topk is linear in the keys).
    kth = torch.topk(scores, k, dim=-1).values[..., -1:]
    above = scores > kth
    tied = scores == kth
    room = k - above.sum(-1, keepdim=True)
    chosen = above | (tied & (tied.cumsum(-1) <= room))
    return torch.zeros_like(scores).masked_fill_(~chosen, -math.inf) + allowed_bias


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.nope, self.rope, self.v_dim = (c["num_attention_heads"], c["qk_nope_head_dim"],
                                                        c["qk_rope_head_dim"], c["v_head_dim"])
        self.kv_rank = c["kv_lora_rank"]
        eps = c.get("rms_norm_eps", 1e-6)
        self.q_a_proj = linear(c["hidden_size"], c["q_lora_rank"])
        self.q_a_layernorm = RMSNorm(c["q_lora_rank"], eps)
        self.q_b_proj = linear(c["q_lora_rank"], self.heads * (self.nope + self.rope))
        self.kv_a_proj_with_mqa = linear(c["hidden_size"], self.kv_rank + self.rope)
        self.kv_a_layernorm = RMSNorm(self.kv_rank, eps)
        self.kv_b_proj = linear(self.kv_rank, self.heads * (self.nope + self.v_dim))
        self.o_proj = linear(self.heads * self.v_dim, c["hidden_size"])
        self.has_indexer = c["architectures"][0] == "DeepseekV32ForCausalLM"
        if self.has_indexer:
            self.indexer = Indexer(c)
            self.topk = c["index_topk"]
        self.scale = softmax_scale(c)
        self.pow2 = (c.get("quantization_config") or {}).get("scale_fmt") == "ue8m0"

    def forward(self, x, layout, cos, sin, mode, stats):
        """mode: "dense" | "sparse" | "warmup" (dense attention; the indexer's KL over all causal
        keys). stats (a dict, or None) receives per layer "kl": [(sum, count)] of the indexer's KL
        (its gradient reaches the indexer only) in warm-up and sparse modes, and, when it holds a
        "recall" list, (layer, attention mass on the selection, queries) for queries with more
        than index_topk candidates."""
        n = x.shape[0]
        cq = self.q_a_layernorm(self.q_a_proj(x))
        q = self.q_b_proj(cq).reshape(n, self.heads, self.nope + self.rope)
        q_pe = apply_rope(q[..., self.nope:], cos, sin, True)
        kv = self.kv_a_proj_with_mqa(x)
        latent = fp8_round_trip(self.kv_a_layernorm(kv[:, :self.kv_rank]), self.pow2)
        k_pe = bf16_round_trip(apply_rope(kv[:, self.kv_rank:], cos, sin, True))
        kvb = self.kv_b_proj(latent).reshape(n, self.heads, self.nope + self.v_dim)
        queries = torch.cat((q[..., :self.nope], q_pe), dim=-1) * self.scale
        keys = torch.cat((kvb[..., :self.nope], k_pe.unsqueeze(1).expand(n, self.heads, self.rope)), dim=-1)
        z_prefix, z_suffix = pair_dots(layout, queries, keys, layout.suffix_causal_bias)
        allowed_prefix, allowed_suffix = layout.prefix_bias, layout.suffix_bias.unsqueeze(0)

        recall = stats is not None and "recall" in stats
        use_indexer = self.has_indexer and (mode in ("sparse", "warmup") or recall)
        bias_prefix, bias_suffix = allowed_prefix, None  # (the suffix causal mask is already in)
        if use_indexer:
            detach = mode != "warmup"  # sparse: the indexer's input is cut from the main graph
            iq, ik, iw = self.indexer(x.detach() if detach else x, cq.detach() if detach else cq, cos, sin)
            with torch.no_grad():
                e_prefix, e_suffix = engine_index_scores(layout, iq, ik, iw, self.pow2)
                sel_prefix = select_keys(e_prefix, allowed_prefix, self.topk)
                sel_suffix = select_keys(e_suffix, allowed_suffix, self.topk)
            if mode == "sparse":
                bias_prefix, bias_suffix = sel_prefix, sel_suffix
        p_prefix = torch.softmax(z_prefix + bias_prefix, dim=-1)
        p_suffix = torch.softmax(z_suffix if bias_suffix is None else z_suffix + bias_suffix.unsqueeze(1), dim=-1)
        out = apply_values(layout, p_prefix, p_suffix, kvb[..., self.nope:])

        if use_indexer and stats is not None:
            with torch.no_grad():  # the head-summed, L1-normalised attention
                t_prefix = p_prefix.detach().sum(0)
                t_prefix = t_prefix / t_prefix.sum(-1, keepdim=True)
                t_suffix = p_suffix.detach().sum(1)
                t_suffix = t_suffix / t_suffix.sum(-1, keepdim=True)
            valid_prefix = torch.ones(layout.P, dtype=torch.bool)
            if recall:
                mass = count = 0.0
                for target, sel, allowed, valid in ((t_prefix, sel_prefix, layout.prefix_mask, valid_prefix),
                                                    (t_suffix, sel_suffix, layout.suffix_mask, layout.valid)):
                    many = (allowed.sum(-1) > self.topk) & valid
                    mass += float((target * torch.exp(sel)).sum(-1)[many].sum())
                    count += int(many.sum())
                stats["recall"].append((self.layer_index, mass, count))
            if mode in ("warmup", "sparse"):
                i_prefix, i_suffix = index_scores(layout, iq, ik, iw)
                terms = []
                for scores, target, bias, valid, weight in (
                        (i_prefix, t_prefix, bias_prefix, valid_prefix, layout.B),  # the prefix stands for B
                        (i_suffix, t_suffix, allowed_suffix if bias_suffix is None else bias_suffix, layout.valid, 1)):
                    log_q = torch.log_softmax(scores + bias.clamp(min=-1e30), dim=-1)
                    kl = (target * (torch.log(target.clamp(min=1e-30)) - log_q)).sum(-1)
                    terms.append(((kl * valid).sum() * weight, float(valid.sum()) * weight))
                stats.setdefault("kl", []).append(terms)
        return self.o_proj(out.reshape(n, self.heads * self.v_dim))


class Mlp(nn.Module):
    def __init__(self, dim, inter):
        super().__init__()
        self.gate_proj = linear(dim, inter)
        self.up_proj = linear(dim, inter)
        self.down_proj = linear(inter, dim)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Gate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_experts, self.top_k = c["n_routed_experts"], c["num_experts_per_tok"]
        self.groups, self.topk_groups = c.get("n_group", 1), c.get("topk_group", 1)
        self.normalize = c.get("norm_topk_prob", True)
        self.route_scale = float(c.get("routed_scaling_factor", 1.0))
        self.weight = nn.Parameter(torch.empty(self.n_experts, c["hidden_size"]))
        self.register_buffer("e_score_correction_bias", torch.zeros(self.n_experts))

    def forward(self, x, forced=None):
        """(chosen experts [N, top_k], their weights). forced [N, top_k] (or None): experts recorded
        at sampling (keep routing): rows whose first entry is >= 0 take those experts, the others
        the router's choice. The weights are the current router's scores of the chosen experts
        either way, so the router still learns."""
        scores = torch.sigmoid(F.linear(x, self.weight))
        with torch.no_grad():
            biased = scores.detach() + self.e_score_correction_bias
            if self.groups > 1 and self.topk_groups < self.groups:
                grouped = biased.reshape(-1, self.groups, self.n_experts // self.groups)
                group_scores = grouped.topk(min(2, grouped.shape[-1]), dim=-1).values.sum(-1)
                keep = group_scores.topk(self.topk_groups, dim=-1).indices
                group_mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, keep, True)
                biased = biased.masked_fill(~group_mask.repeat_interleave(self.n_experts // self.groups, 1), -math.inf)
            chosen = biased.topk(self.top_k, dim=-1).indices
            if forced is not None:
                chosen = torch.where(forced[:, :1] >= 0, forced, chosen)
        self.last_chosen = chosen  # the routing of the latest forward (rows x top_k), for agreement figures
        weights = scores.gather(1, chosen)
        if self.normalize:
            weights = weights / weights.sum(-1, keepdim=True)
        return chosen, weights * self.route_scale


class Moe(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate = Gate(c)
        self.experts = nn.ModuleList(Mlp(c["hidden_size"], c["moe_intermediate_size"])
                                     for _ in range(c["n_routed_experts"]))
        self.has_shared = c.get("n_shared_experts", 0) > 0
        if self.has_shared:
            self.shared_experts = Mlp(c["hidden_size"], c["n_shared_experts"] * c["moe_intermediate_size"])
        self.load = torch.zeros(c["n_routed_experts"])  # tokens routed per expert since the last reset

    def forward(self, x, forced=None):
        chosen, weights = self.gate(x, forced)
        out = self.shared_experts(x) if self.has_shared else torch.zeros_like(x)
        flat = chosen.reshape(-1)
        counts = torch.bincount(flat, minlength=len(self.experts))
        self.load += counts.to(self.load.dtype)
        order = torch.argsort(flat)
        token_of = order // chosen.shape[1]
        rows = x[token_of]
        parts = []
        for e, (part, count) in enumerate(zip(rows.split(counts.tolist()), counts.tolist())):
            if count:
                parts.append(self.experts[e](part))
        y = torch.cat(parts) * weights.reshape(-1)[order].unsqueeze(1)
        return out.index_add(0, token_of, y)


class Layer(nn.Module):
    def __init__(self, c, index):
        super().__init__()
        eps = c.get("rms_norm_eps", 1e-6)
        self.input_layernorm = RMSNorm(c["hidden_size"], eps)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], eps)
        self.self_attn = Attention(c)
        self.self_attn.layer_index = index
        dense_layers = c.get("first_k_dense_replace", 0)
        if index < dense_layers:
            self.mlp = Mlp(c["hidden_size"], c["intermediate_size"])
        else:
            self.mlp = Moe(c)
        self.moe_index = index - dense_layers if index >= dense_layers else None

    def forward(self, h, layout, cos, sin, mode, stats, routing=None):
        h = h + self.self_attn(self.input_layernorm(h), layout, cos, sin, mode, stats)
        x = self.post_attention_layernorm(h)
        if self.moe_index is None:
            return h + self.mlp(x)
        return h + self.mlp(x, None if routing is None else routing[:, self.moe_index])


class Backbone(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Layer(c, i) for i in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c.get("rms_norm_eps", 1e-6))


class DeepseekV32(nn.Module):
    def __init__(self, config, tie_embeddings=False):
        """tie_embeddings: lm_head shares embed_tokens' matrix while training. One matrix for both
        ends means copying a token from the context (a name from the prompt, a value from a tool
        result) needs only an attention path that maps an embedding to itself, learnt once for
        every token; untied, each token's output row is learnt on its own, and a small model did
        not learn to copy among 900 distinct ids in 120 steps where the tied one reached 56%.
        The export writes both tensors and config tie_word_embeddings stays false (the engine
        rejects tied configs), which describes the checkpoint exactly."""
        super().__init__()
        self.config = dict(config)
        self.model = Backbone(config)
        self.lm_head = linear(config["hidden_size"], config["vocab_size"])
        if tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.register_buffer("rope_freqs", yarn_frequencies(config), persistent=False)

    def init_weights(self, seed, std=0.02):
        g = torch.Generator().manual_seed(seed)
        layers = self.config["num_hidden_layers"]
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:
                    p.fill_(0.0 if name.endswith(".bias") else 1.0)
                    continue
                scale = std / math.sqrt(2 * layers) if name.endswith(("o_proj.weight", "down_proj.weight")) else std
                p.copy_(torch.randn(p.shape, generator=g) * scale)

    def moe_layers(self):
        return [layer.mlp for layer in self.model.layers if isinstance(layer.mlp, Moe)]

    def indexer_parameters(self):
        return [p for n, p in self.named_parameters() if ".indexer." in n]

    def hidden(self, prefix_ids, suffix_ids, mode="dense", stats=None, suffix_lengths=None, routing=None):
        """Final-normed hidden states of every row of the packed batch: prefix_ids [P] shared,
        suffix_ids [B, S] (rows past suffix_lengths[b] are padding). routing (or None): [rows,
        MoE layers, top_k] experts to enforce per row (keep routing; -1 rows route freely).
        Returns (hidden [P + B*S, D], layout)."""
        layout = Layout(prefix_ids.shape[0], suffix_ids.shape[0], suffix_ids.shape[1], suffix_lengths)
        ids = torch.cat((prefix_ids, suffix_ids.reshape(-1)))
        cos, sin = rope_tables(self.rope_freqs, layout.positions)
        h = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            h = layer(h, layout, cos, sin, mode, stats, routing)
        return self.model.norm(h), layout

    def logits(self, ids, mode="sparse"):
        """Logits [T, vocab] of one sequence (every position), the engine's prefill."""
        h, _ = self.hidden(ids[:0], ids.reshape(1, -1), mode)
        return self.lm_head(h)
