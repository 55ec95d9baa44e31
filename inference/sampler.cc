// Sampling: softmax with temperature, top-k / top-p truncation over a probability-sorted order,
// inverse-CDF draw from a counter-based stream.
#include "inference/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace envforge::inference {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

float Finite(float v) { return std::isfinite(v) ? v : -std::numeric_limits<float>::infinity(); }

}  // namespace

double SampleStream::NextUniform() {
  // Mixing the three words through chained SplitMix64 rounds makes streams of nearby seeds and ids
  // independent for practical purposes.
  uint64_t bits = SplitMix64(SplitMix64(SplitMix64(seed_) ^ stream_) ^ counter_);
  ++counter_;
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

SampledToken Sample(std::span<const float> logits, const SamplingParams& params, SampleStream& stream,
                    std::vector<int32_t>* kept_ids) {
  SampledToken result;
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (vocab == 0) return result;

  // Arg-max (lowest id on ties) and the raw log-partition function at T = 1.
  int32_t best = 0;
  float best_value = Finite(logits[0]);
  for (int64_t i = 1; i < vocab; ++i) {
    float v = Finite(logits[static_cast<size_t>(i)]);
    if (v > best_value) {
      best_value = v;
      best = static_cast<int32_t>(i);
    }
  }
  auto log_partition = [&](double inv_temperature) {
    double sum = 0;
    for (float v : logits) {
      float f = Finite(v);
      if (f != -std::numeric_limits<float>::infinity()) sum += std::exp((f - best_value) * inv_temperature);
    }
    return static_cast<double>(best_value) * inv_temperature + std::log(sum);
  };
  double raw_log_z = best_value == -std::numeric_limits<float>::infinity() ? 0.0 : log_partition(1.0);
  auto raw_logprob = [&](int32_t token) {
    return static_cast<double>(Finite(logits[static_cast<size_t>(token)])) - raw_log_z;
  };

  if (params.temperature <= 0 || best_value == -std::numeric_limits<float>::infinity()) {
    result.token = best;
    result.logprob = 0;
    result.raw_logprob = raw_logprob(best);
    result.kept_count = 1;
    if (kept_ids != nullptr && vocab > 1) kept_ids->push_back(best);
    return result;
  }

  const double inv_t = 1.0 / params.temperature;
  // Probabilities at temperature T (unnormalised, relative to the max).
  std::vector<double> weight(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) {
    float f = Finite(logits[static_cast<size_t>(i)]);
    weight[static_cast<size_t>(i)] =
        f == -std::numeric_limits<float>::infinity() ? 0.0 : std::exp((f - best_value) * inv_t);
  }
  // Order: probability descending, token id ascending on ties. Only the kept part is sorted.
  // Ordered by logit rather than by weight so tokens whose weight underflows still sort by
  // probability.
  auto before = [&](int32_t a, int32_t b) {
    float la = Finite(logits[static_cast<size_t>(a)]), lb = Finite(logits[static_cast<size_t>(b)]);
    return la != lb ? la > lb : a < b;
  };
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  int64_t finite = 0;
  for (float v : logits) finite += Finite(v) != -std::numeric_limits<float>::infinity() ? 1 : 0;
  int64_t kept = finite;
  if (params.top_k > 0) kept = std::min(kept, params.top_k);
  bool nucleus = params.top_p < 1.0;
  if (kept < vocab || nucleus) {
    std::partial_sort(order.begin(), order.begin() + kept, order.end(), before);
  }
  if (nucleus) {
    double total = 0;
    for (int64_t i = 0; i < kept; ++i) total += weight[static_cast<size_t>(order[static_cast<size_t>(i)])];
    double target = params.top_p * total;
    double running = 0;
    int64_t cut = kept;
    for (int64_t i = 0; i < kept; ++i) {
      running += weight[static_cast<size_t>(order[static_cast<size_t>(i)])];
      // A small relative slack keeps top_p = sum-of-a-prefix from spilling one extra token through
      // rounding.
      if (running >= target * (1 - 1e-12)) {
        cut = i + 1;
        break;
      }
    }
    kept = cut;
  }
  // When nothing was truncated the order is the identity; sampling in id order is as good.
  double kept_sum = 0;
  for (int64_t i = 0; i < kept; ++i) kept_sum += weight[static_cast<size_t>(order[static_cast<size_t>(i)])];

  double u = stream.NextUniform() * kept_sum;
  int32_t chosen = order[static_cast<size_t>(kept - 1)];
  double running = 0;
  for (int64_t i = 0; i < kept; ++i) {
    int32_t token = order[static_cast<size_t>(i)];
    running += weight[static_cast<size_t>(token)];
    if (u < running) {
      chosen = token;
      break;
    }
  }
  // Skip zero-weight tail picks that only rounding could produce.
  if (weight[static_cast<size_t>(chosen)] == 0) chosen = order[0];

  result.token = chosen;
  result.logprob = std::log(weight[static_cast<size_t>(chosen)] / kept_sum);
  result.raw_logprob = raw_logprob(chosen);
  result.kept_count = kept;
  // order's first `kept` entries are sorted whenever kept < vocab (the partial_sort above).
  if (kept_ids != nullptr && kept < vocab) kept_ids->insert(kept_ids->end(), order.begin(), order.begin() + kept);
  return result;
}

double RawLogprob(std::span<const float> logits, int32_t token) {
  float best = -std::numeric_limits<float>::infinity();
  for (float v : logits) best = std::max(best, Finite(v));
  if (best == -std::numeric_limits<float>::infinity()) return 0;
  double sum = 0;
  for (float v : logits) {
    const float f = Finite(v);
    if (f != -std::numeric_limits<float>::infinity()) sum += std::exp(static_cast<double>(f - best));
  }
  return static_cast<double>(Finite(logits[static_cast<size_t>(token)])) - best - std::log(sum);
}

}  // namespace envforge::inference
