// Token sampling from next-token logits: temperature, top-k and top-p (nucleus) truncation, with
// the log-probabilities a trainer needs to reproduce the sampling distribution.
//
// The distribution actually sampled from ("used"), for logits l over the vocabulary:
//   1. temperature T > 0: p = softmax(l / T);
//   2. top_k > 0: keep the top_k most probable tokens;
//   3. top_p < 1: of those, keep the smallest set of most probable tokens whose probability sum,
//      renormalised over the set kept by step 2, reaches top_p (at least one token);
//   4. renormalise p over the kept set.
// Kept sets are always the `kept_count` most probable tokens (ties broken towards the lower token
// id), so (kept_count, logits) reproduce the mask exactly. T == 0 is greedy: the arg-max token
// (lowest id on ties), kept_count 1 and logprob 0 (the used distribution is a point mass).
//
// Randomness: a SampleStream is a counter-based generator (SplitMix64 over (seed, stream, draw
// counter)); one stream per generated sequence, stream id = sample index, so a sample's tokens
// depend only on (seed, sample index, logits), never on how sequences were batched.
// Thread safety: Sample is a pure function of its arguments; a SampleStream is one caller's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace envforge::inference {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no top-k truncation
  double top_p = 1.0;        // 1: no nucleus truncation; (0, 1]
  uint64_t seed = 0;
};

class SampleStream {
 public:
  SampleStream(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  // Uniform in [0, 1) with 53 random bits; advances the counter.
  double NextUniform();
  uint64_t draws() const { return counter_; }

 private:
  uint64_t seed_;
  uint64_t stream_;
  uint64_t counter_ = 0;
};

struct SampledToken {
  int32_t token = -1;
  double logprob = 0;      // log p_used(token): after temperature, top-k, top-p, renormalised
  double raw_logprob = 0;  // log softmax(logits)(token): the unmodified model distribution (T = 1)
  int64_t kept_count = 0;  // size of the kept (truncated) set
};

// logits: [vocab]. Non-finite logits count as -inf (never sampled while a finite one exists).
// The stream is advanced once per call unless T == 0.
// Keep sampling mask (DeepSeek-V3.2 paper, 3.1): when kept_ids is set and the kept set is smaller
// than the vocabulary (kept_count < logits.size()), its kept_count token ids are appended to
// *kept_ids in the order above (most probable first, ties towards the lower id; greedy: the
// arg-max alone); nothing is appended when nothing was truncated. No allocation when null.
SampledToken Sample(std::span<const float> logits, const SamplingParams& params, SampleStream& stream,
                    std::vector<int32_t>* kept_ids = nullptr);

// log softmax(logits)(token) at T = 1 (non-finite logits count as -inf): the raw model logprob of
// a token drawn from masked logits (constrained decoding samples from a copy with -inf holes).
double RawLogprob(std::span<const float> logits, int32_t token);

}  // namespace envforge::inference
