"""GRPO over envforge episodes, with the DeepSeek-V3.2 paper's stabilisers (section 3.1).

Input: episodes as envforge.read_episodes returns them (agents/trajectory_store.h, EpisodeToJson):
the verdict, the outcome and the token-exact segments ("tokens": ids, mask, logprobs, and when
recorded "routing" and "kept"). The loss runs on those token ids, never on re-tokenised text.

Rewards: 1 when the episode was submitted and its verdict passed, else 0; infra_error episodes
are dropped (never scored 0). The optional length penalty subtracts
length_penalty * max(0, generated - length_free) / length_free (a solution that rambles past
length_free tokens scores less than a concise one; capped so a reward never drops below -1).

Advantage of episode i of a group: R_i - mean(R), NOT divided by the group's standard deviation
by default (the paper's formula; dividing weights a task with one success in G as heavily as a
task with G/2, so rare lucky successes of a hard task get amplified while the task's signal is
mostly noise). --std-normalize divides. A group whose rewards are all equal has advantage 0
everywhere: it is skipped and counted.

Objective per minibatch (tokens t of the model-generated spans of episode i, |o_i| of them):
  ratio_t = pi_theta(o_t) / pi_old(o_t), pi_old the engine's recorded logprob (the distribution
            the token was sampled from);
  J = 1/N sum_i 1/|o_i| sum_t [ M_i min(ratio_t A_i, clip(ratio_t, 1-eps, 1+eps) A_i)
                                - beta KL_t ]
Stabilisers (each switchable):
  unbiased_kl: KL_t = ratio_t (pi_ref/pi_theta - log(pi_ref/pi_theta) - 1), the k3 estimate
      re-weighted by the importance ratio, which makes it unbiased for KL(pi_theta || pi_ref)
      when the tokens come from pi_old; off: the plain k3 estimate (biased off-policy);
  off_policy_mask: M_i = 0 when A_i < 0 and 1/|o_i| sum_t log(pi_old / pi_theta) > delta
      (a negative sample the policy has drifted far from teaches mostly noise); off: M_i = 1;
  keep_routing: the experts the engine routed each token to (segments' "routing") are enforced
      in the training forward (model.Gate forced); off: the trainer's router chooses;
  keep_sampling_mask: the top-k/top-p kept set of each sampled token (segments' "kept") masks
      the logits of pi_theta and pi_ref before the softmax, so both live on the support pi_old
      sampled from; off: the full softmax.
Logits are divided by the sampling temperature first, as the engine did.
"""

import math

import numpy as np
import torch

from . import train as train_lib

STABILISERS = ("unbiased_kl", "off_policy_mask", "keep_routing", "keep_sampling_mask")


class Segment:
    """One contiguous model context of an episode: ids, loss mask (model-generated tokens with a
    recorded logprob), the recorded logprobs (0 where unmasked), routing [T, L, k] (-1 where not
    recorded) or None, kept sets ({position: ids}) or None."""

    def __init__(self, ids, mask, logprobs, routing=None, kept=None):
        self.ids, self.mask, self.logprobs, self.routing, self.kept = ids, mask, logprobs, routing, kept

    @staticmethod
    def from_json(segment):
        ids = np.asarray(segment["ids"], dtype=np.int64)
        lp = segment["logprobs"]
        mask = np.array([m == 1 and lp[i] is not None for i, m in enumerate(segment["mask"])], dtype=bool)
        logprobs = np.array([lp[i] if mask[i] else 0.0 for i in range(len(ids))], dtype=np.float64)
        routing = None
        if segment.get("routing") is not None:
            rows = segment["routing"]
            width = next((len(r) for r in rows if r is not None), 0)
            routing = np.full((len(ids), width), -1, dtype=np.int64)
            for i, r in enumerate(rows):
                if r is not None:
                    routing[i] = r
        kept = None
        if segment.get("kept") is not None:
            kept = {i: np.asarray(k, dtype=np.int64) for i, k in enumerate(segment["kept"]) if k is not None}
        return Segment(ids, mask, logprobs, routing, kept)


class Sample:
    """A scored episode: its task key, reward, whether it passed, generated tokens, segments."""

    def __init__(self, episode_id, key, reward, passed, generated, segments):
        self.episode_id, self.key, self.reward, self.passed = episode_id, key, reward, passed
        self.generated, self.segments = generated, segments
        self.advantage = 0.0


def episode_passed(episode):
    verdict = episode.get("verdict") or {}
    return episode.get("outcome") == "submitted" and bool(verdict.get("passed"))


def reward_of(episode, length_penalty=0.0, length_free=256):
    """The verdict as reward (1 passed, 0 not), less the optional length penalty."""
    reward = 1.0 if episode_passed(episode) else 0.0
    if length_penalty > 0:
        generated = sum(len(t.get("output_tokens") or []) for t in episode.get("model_turns", []))
        over = max(0, generated - length_free) / float(length_free)
        reward -= min(1.0, length_penalty * over)
    return reward


def sample_from_episode(episode, length_penalty=0.0, length_free=256):
    """(Sample, None) or (None, why it is not trained on): "infra_error" (never scored),
    "inconsistent" (its token record is not the context the model saw), "no_tokens"."""
    if episode.get("outcome") == "infra_error":
        return None, "infra_error"
    segments_json = episode.get("tokens") or []
    if any(not s.get("consistent", True) for s in segments_json):
        return None, "inconsistent"
    segments = [Segment.from_json(s) for s in segments_json]
    if not any(s.mask.any() for s in segments):
        return None, "no_tokens"
    generated = int(sum(s.mask.sum() for s in segments))
    key = (episode.get("env_name", ""), episode.get("task_id", ""))
    return Sample(episode["id"], key, reward_of(episode, length_penalty, length_free), episode_passed(episode),
                  generated, segments), None


def assign_advantages(samples, std_normalize=False):
    """Sets each sample's advantage within its task group; returns (trainable samples, groups,
    groups skipped because every reward was equal)."""
    groups = {}
    for sample in samples:
        groups.setdefault(sample.key, []).append(sample)
    kept, skipped = [], 0
    for group in groups.values():
        rewards = np.array([s.reward for s in group], dtype=np.float64)
        if len(group) < 2 or np.all(rewards == rewards[0]):
            skipped += 1
            continue
        advantages = rewards - rewards.mean()
        if std_normalize:
            advantages /= rewards.std() + 1e-6
        for sample, advantage in zip(group, advantages):
            sample.advantage = float(advantage)
            kept.append(sample)
    return kept, len(groups), skipped


class PackedBatch:
    """Segments packed for model.hidden (train.Batch's layout: a shared prefix, padded suffixes)
    with, per loss position (the suffix rows whose next token is a model-generated one): the
    recorded logprob, the owning sample, the kept set; and per row the enforced routing."""

    def __init__(self, items, moe_layers, top_k):
        """items: [(Segment, sample index)]."""
        lengths = [len(seg.ids) for seg, _ in items]
        width = max(lengths)
        ids = np.zeros((len(items), width), dtype=np.int64)
        masks = np.zeros((len(items), width), dtype=np.int64)
        for row, (seg, _) in enumerate(items):
            ids[row, :len(seg.ids)] = seg.ids
            masks[row, :len(seg.ids)] = seg.mask
        self.batch = train_lib.Batch(ids, masks, lengths)
        P = self.batch.P
        pick = (self.batch.weight > 0).numpy()  # [B, S]: suffix row r predicts token P + r + 1
        rows, cols = np.nonzero(pick)
        positions = P + cols + 1
        self.pick = torch.from_numpy(pick)
        self.old_logprob = torch.tensor([items[r][0].logprobs[p] for r, p in zip(rows, positions)], dtype=torch.float64)
        self.owner = torch.tensor([items[r][1] for r in rows], dtype=torch.int64)
        self.kept = [None if items[r][0].kept is None else items[r][0].kept.get(int(p)) for r, p in zip(rows, positions)]
        self.routing = self._routing(items, P, width, moe_layers, top_k)

    def _routing(self, items, P, width, moe_layers, top_k):
        if moe_layers == 0 or all(seg.routing is None for seg, _ in items):
            return None
        S = width - P
        routing = np.full((P + len(items) * S, moe_layers, top_k), -1, dtype=np.int64)
        first = items[0][0]
        if first.routing is not None and P:
            routing[:P] = first.routing[:P].reshape(P, moe_layers, top_k)
        for row, (seg, _) in enumerate(items):
            if seg.routing is None:
                continue
            n = len(seg.ids) - P
            routing[P + row * S:P + row * S + n] = seg.routing[P:].reshape(n, moe_layers, top_k)
        return torch.from_numpy(routing)


def token_logprobs(model, packed, temperature, keep_routing, keep_sampling_mask, mode="sparse"):
    """log pi(token) at every loss position of the packed batch, under `model`."""
    batch = packed.batch
    routing = packed.routing if keep_routing else None
    h, layout = model.hidden(batch.prefix, batch.suffix, mode, None, batch.suffix_lengths, routing)
    logits = model.lm_head(layout.suffix(h)[packed.pick]).to(torch.float64) / max(temperature, 1e-6)
    if keep_sampling_mask and any(k is not None for k in packed.kept):
        allowed = torch.ones(logits.shape, dtype=torch.bool)
        for i, kept in enumerate(packed.kept):
            if kept is not None:
                allowed[i] = False
                allowed[i, torch.from_numpy(kept)] = True
        logits = logits.masked_fill(~allowed, -math.inf)
    target = batch.target[packed.pick]
    return torch.log_softmax(logits, dim=-1).gather(1, target.unsqueeze(1)).squeeze(1)


class LossConfig:
    def __init__(self, clip=0.2, beta=0.01, delta=0.5, temperature=1.0, unbiased_kl=True, off_policy_mask=True,
                 keep_routing=True, keep_sampling_mask=True):
        self.clip, self.beta, self.delta, self.temperature = clip, beta, delta, temperature
        self.unbiased_kl, self.off_policy_mask = unbiased_kl, off_policy_mask
        self.keep_routing, self.keep_sampling_mask = keep_routing, keep_sampling_mask


def per_sample_mean(values, owner, count):
    """Mean of `values` over each sample's tokens: [count]."""
    sums = torch.zeros(count, dtype=values.dtype).index_add(0, owner, values)
    tokens = torch.zeros(count, dtype=values.dtype).index_add(0, owner, torch.ones_like(values))
    return sums / tokens.clamp(min=1)


def grpo_loss(new_lp, old_lp, ref_lp, owner, advantages, config):
    """(loss, figures) for one minibatch: new_lp with gradient, old_lp/ref_lp without; owner maps
    tokens to samples 0..len(advantages)-1."""
    count = len(advantages)
    adv_token = advantages[owner]
    log_ratio = new_lp - old_lp
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1 - config.clip, 1 + config.clip)
    surrogate = torch.minimum(ratio * adv_token, clipped * adv_token)
    divergence = per_sample_mean((-log_ratio).detach(), owner, count)  # 1/|o| sum log(pi_old / pi_theta)
    keep = torch.ones(count, dtype=new_lp.dtype)
    if config.off_policy_mask:
        keep = torch.where((advantages < 0) & (divergence > config.delta), 0.0, 1.0).to(new_lp.dtype)
    log_ref_ratio = ref_lp - new_lp
    k3 = torch.exp(log_ref_ratio) - log_ref_ratio - 1
    kl = ratio * k3 if config.unbiased_kl else k3
    per_token = keep[owner] * surrogate - config.beta * kl
    objective = per_sample_mean(per_token, owner, count).mean()
    with torch.no_grad():
        figures = {"kl": float(per_sample_mean(kl.detach(), owner, count).mean()),
                   "masked_sequences": int((keep == 0).sum()),
                   "clip_fraction": float(((ratio - clipped).abs() > 1e-9).to(torch.float64).mean()),
                   "ratio_max": float(ratio.max()), "divergence_mean": float(divergence.mean()),
                   "tokens": int(new_lp.numel())}
    return -objective, figures
