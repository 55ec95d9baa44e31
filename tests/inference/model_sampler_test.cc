// Sampler: greedy, temperature, top-k / top-p kept sets on hand-made logits, logprob bookkeeping
// and per-stream determinism.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "inference/sampler.h"

namespace envforge::inference {
namespace {

// Logits whose softmax is exactly `probs` (up to rounding).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs)
    logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -std::numeric_limits<float>::infinity());
  return logits;
}

// Draws `draws` tokens; returns token -> (count, logprob seen).
std::map<int32_t, std::pair<int, SampledToken>> Draw(const std::vector<float>& logits, const SamplingParams& params,
                                                     int draws, uint64_t stream_id = 0) {
  SampleStream stream(params.seed, stream_id);
  std::map<int32_t, std::pair<int, SampledToken>> seen;
  for (int i = 0; i < draws; ++i) {
    SampledToken token = Sample(logits, params, stream);
    auto& entry = seen[token.token];
    entry.first += 1;
    entry.second = token;
  }
  return seen;
}

// The `count` most probable token ids of `logits`, most probable first, ties towards the lower id:
// what a kept set must be.
std::vector<int32_t> TopTokens(const std::vector<float>& logits, int64_t count) {
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  ids.resize(static_cast<size_t>(count));
  return ids;
}

TEST_SUITE("inference.sampler") {
  TEST_CASE("kept ids: exactly the kept set, most probable first, holding the sampled token; none when untruncated") {
    // 64 tokens with distinct logits, a tie (ids 5 and 9) and a masked one.
    std::vector<float> logits;
    for (int i = 0; i < 64; ++i) logits.push_back(std::sin(static_cast<float>(i) * 1.7f) * 3.0f);
    logits[9] = logits[5];
    logits[20] = -std::numeric_limits<float>::infinity();
    struct Case {
      double temperature, top_p;
      int64_t top_k;
    };
    for (Case c : {Case{1.0, 1.0, 7}, Case{0.7, 0.9, 0}, Case{1.3, 0.5, 20}, Case{0.0, 1.0, 0}, Case{1.0, 0.999, 64}}) {
      CAPTURE(c.temperature);
      CAPTURE(c.top_p);
      CAPTURE(c.top_k);
      SamplingParams params{c.temperature, c.top_k, c.top_p, 3};
      SampleStream stream(params.seed, 0), twin(params.seed, 0);
      for (int draw = 0; draw < 50; ++draw) {
        std::vector<int32_t> kept = {-7};  // appended to, never cleared
        SampledToken token = Sample(logits, params, stream, &kept);
        SampledToken plain = Sample(logits, params, twin);  // recording changes nothing drawn
        CHECK(token.token == plain.token);
        CHECK(token.kept_count == plain.kept_count);
        REQUIRE(kept.size() == static_cast<size_t>(token.kept_count) + 1);
        kept.erase(kept.begin());
        CHECK(std::find(kept.begin(), kept.end(), token.token) != kept.end());
        CHECK(kept == TopTokens(logits, token.kept_count));
      }
    }
    // Nothing truncated: all 64 tokens kept, nothing appended; the masked token alone truncates.
    std::vector<float> flat(64, 0.5f);
    SampleStream stream(1, 0);
    std::vector<int32_t> kept;
    CHECK(Sample(flat, SamplingParams{}, stream, &kept).kept_count == 64);
    CHECK(kept.empty());
    CHECK(Sample(logits, SamplingParams{}, stream, &kept).kept_count == 63);
    CHECK(kept == TopTokens(logits, 63));
  }

  TEST_CASE("temperature 0 is greedy: the arg-max, kept set of one, logprob 0 and the raw logprob") {
    std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
    SamplingParams params;
    params.temperature = 0;
    SampleStream stream(1, 0);
    SampledToken token = Sample(logits, params, stream);
    CHECK(token.token == 1);  // ties go to the lower id
    CHECK(token.kept_count == 1);
    CHECK(token.logprob == 0.0);
    double z = std::log(std::exp(0.5) + 2 * std::exp(2.0) + std::exp(-1.0));
    CHECK(token.raw_logprob == doctest::Approx(2.0 - z).epsilon(1e-6));
    CHECK(stream.draws() == 0);
  }

  TEST_CASE("top-k keeps the k most probable tokens and renormalises over them") {
    std::vector<double> probs = {0.1, 0.4, 0.05, 0.3, 0.15};
    SamplingParams params;
    params.top_k = 3;
    params.seed = 7;
    auto seen = Draw(LogitsOf(probs), params, 4000);
    CHECK(seen.size() == 3);
    CHECK(seen.count(1) == 1);
    CHECK(seen.count(3) == 1);
    CHECK(seen.count(4) == 1);
    double kept_mass = 0.4 + 0.3 + 0.15;
    double sum = 0;
    for (const auto& [token, entry] : seen) {
      CHECK(entry.second.kept_count == 3);
      CHECK(entry.second.logprob ==
            doctest::Approx(std::log(probs[static_cast<size_t>(token)] / kept_mass)).epsilon(1e-5));
      CHECK(entry.second.raw_logprob == doctest::Approx(std::log(probs[static_cast<size_t>(token)])).epsilon(1e-5));
      sum += std::exp(entry.second.logprob);
      // Frequencies follow the renormalised distribution (4000 draws: a few percent of noise).
      CHECK(entry.first / 4000.0 == doctest::Approx(probs[static_cast<size_t>(token)] / kept_mass).epsilon(0.1));
    }
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
  }

  TEST_CASE("top-p keeps the smallest most-probable prefix reaching p") {
    std::vector<double> probs = {0.05, 0.5, 0.15, 0.3};  // sorted: 1 (0.5), 3 (0.3), 2 (0.15), 0 (0.05)
    auto logits = LogitsOf(probs);
    auto kept_for = [&](double top_p, int64_t top_k = 0) {
      SamplingParams params;
      params.top_p = top_p;
      params.top_k = top_k;
      params.seed = 3;
      auto seen = Draw(logits, params, 2000);
      int64_t kept = seen.begin()->second.second.kept_count;
      for (const auto& [token, entry] : seen) CHECK(entry.second.kept_count == kept);
      return std::make_pair(kept, seen);
    };
    CHECK(kept_for(0.3).first == 1);
    CHECK(kept_for(0.5).first == 1);
    CHECK(kept_for(0.7).first == 2);
    CHECK(kept_for(0.8).first == 2);  // 0.5 + 0.3 reaches 0.8 exactly: no third token
    CHECK(kept_for(0.81).first == 3);
    CHECK(kept_for(1.0).first == 4);
    auto [kept, seen] = kept_for(0.9);
    CHECK(kept == 3);
    CHECK(seen.count(0) == 0);
    double sum = 0;
    for (const auto& [token, entry] : seen) sum += std::exp(entry.second.logprob);
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
    // top-k first, then top-p over the renormalised top-k set: {0.5, 0.3} -> {0.625, 0.375}.
    CHECK(kept_for(0.6, 2).first == 1);
    CHECK(kept_for(0.7, 2).first == 2);
  }

  TEST_CASE("temperature rescales the logits before the softmax") {
    std::vector<float> logits = {1.0f, 0.0f, -0.5f};
    SamplingParams params;
    params.temperature = 0.5;
    auto seen = Draw(logits, params, 500);
    double z = 0;
    for (float l : logits) z += std::exp(l / 0.5);
    for (const auto& [token, entry] : seen) {
      CHECK(entry.second.kept_count == 3);
      CHECK(entry.second.logprob ==
            doctest::Approx(logits[static_cast<size_t>(token)] / 0.5 - std::log(z)).epsilon(1e-5));
    }
  }

  TEST_CASE("non-finite logits are never sampled") {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> logits = {-inf, 0.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f, inf};
    SamplingParams params;
    auto seen = Draw(logits, params, 500);
    CHECK(seen.size() == 2);
    CHECK(seen.count(1) == 1);
    CHECK(seen.count(3) == 1);
    CHECK(seen[1].second.kept_count == 2);
  }

  TEST_CASE("a stream is a pure function of (seed, stream id, draw): batching cannot change samples") {
    std::vector<float> logits(64);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(static_cast<double>(i)));
    SamplingParams params;
    params.seed = 42;
    params.top_p = 0.9;
    auto run = [&](uint64_t seed, uint64_t stream_id) {
      SampleStream stream(seed, stream_id);
      std::vector<int32_t> tokens;
      for (int i = 0; i < 50; ++i) tokens.push_back(Sample(logits, params, stream).token);
      return tokens;
    };
    CHECK(run(42, 0) == run(42, 0));
    CHECK(run(42, 3) == run(42, 3));
    CHECK(run(42, 0) != run(42, 1));
    CHECK(run(42, 0) != run(43, 0));
    // Interleaving draws of two streams does not change either.
    SampleStream a(42, 0), b(42, 1);
    std::vector<int32_t> a_tokens, b_tokens;
    for (int i = 0; i < 50; ++i) {
      a_tokens.push_back(Sample(logits, params, a).token);
      b_tokens.push_back(Sample(logits, params, b).token);
    }
    CHECK(a_tokens == run(42, 0));
    CHECK(b_tokens == run(42, 1));
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
