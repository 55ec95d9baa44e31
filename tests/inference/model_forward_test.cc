// The engine's forward pass against the independent numpy reference (tests/inference/
// reference_model.py) on tiny random checkpoints, plus the engine's internal invariants: decode ==
// prefill, sparse == dense below index_topk, and that a wrong RoPE pairing is detected.
//
// Tolerances are "max |engine - reference| over every logit of every position, divided by the
// largest |reference logit|". The reference runs in float64 with the engine's FP8/bf16 storage
// roundings emulated; the engine runs in fp32, so a value sitting on an FP8 rounding boundary can
// round the other way (one e4m3 step, ~6% of that element) and an indexer near-tie can swap one
// selected key. Both move logits by far less than the tolerances below; a real defect (wrong
// pairing, wrong scale, missing term) moves them by tens of percent.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <span>
#include <vector>

#include "inference/model.h"
#include "tests/inference/model_test_util.h"

namespace envforge::inference {
namespace {

using model_testing::PromptTokens;
using model_testing::RunReference;
using model_testing::TinyModel;

std::unique_ptr<Model> LoadModel(const std::string& dir, bool dense = false) {
  ModelOptions options;
  options.dense_attention = dense;
  auto model = Model::Load(dir, options);
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  return std::move(*model);
}

// Prefill of all tokens with logits for every position.
std::vector<float> PrefillLogits(Model& model, const std::vector<int32_t>& tokens, SelectionRecord* record = nullptr) {
  auto cache = model.NewCache();
  SequenceInput input{cache.get(), tokens};
  std::vector<float> logits;
  ForwardOptions options;
  options.all_logits = true;
  options.record_selection = record;
  Status status = model.Forward(std::span<const SequenceInput>(&input, 1), &logits, options);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return logits;
}

struct Comparison {
  double relative_max_diff = 0;  // max |e - r| / max |r|
  double scale = 0;              // max |r|
  double close_fraction = 0;     // positions whose own max diff is < 1e-3 of the scale
};

Comparison CompareLogits(const std::vector<float>& engine, const Json& reference, int64_t vocab) {
  Comparison out;
  const Json& rows = reference["logits"];
  REQUIRE(static_cast<int64_t>(engine.size()) == static_cast<int64_t>(rows.size()) * vocab);
  double max_diff = 0;
  std::vector<double> position_diff(rows.size(), 0.0);
  for (size_t t = 0; t < rows.size(); ++t) {
    for (int64_t v = 0; v < vocab; ++v) {
      double r = rows[t][static_cast<size_t>(v)].get<double>();
      out.scale = std::max(out.scale, std::fabs(r));
      position_diff[t] =
          std::max(position_diff[t], std::fabs(r - engine[t * static_cast<size_t>(vocab) + static_cast<size_t>(v)]));
    }
    max_diff = std::max(max_diff, position_diff[t]);
  }
  out.relative_max_diff = max_diff / std::max(out.scale, 1e-30);
  size_t close = 0;
  for (double d : position_diff) close += d < 1e-3 * out.scale ? 1 : 0;
  out.close_fraction = static_cast<double>(close) / static_cast<double>(std::max<size_t>(rows.size(), 1));
  return out;
}

// Aggregate recall of the reference's top-k sets by the engine's: sum |E ∩ R| / sum |R| over
// layers and positions.
double TopkRecall(const SelectionRecord& engine, const Json& reference) {
  int64_t hit = 0, total = 0;
  for (const auto& [layer_name, per_query] : reference["topk"].items()) {
    size_t layer = std::stoul(layer_name);
    REQUIRE(layer < engine.size());
    for (size_t t = 0; t < per_query.size(); ++t) {
      std::set<int32_t> mine(engine[layer][t].begin(), engine[layer][t].end());
      for (const Json& key : per_query[t]) {
        total += 1;
        hit += mine.count(key.get<int32_t>());
      }
    }
  }
  REQUIRE(total > 0);
  return static_cast<double>(hit) / static_cast<double>(total);
}

// Prompt longer than the tiny preset's index_topk (16), so most positions select a strict subset.
constexpr int kPromptLength = 40;

TEST_SUITE("inference.model") {
  TEST_CASE("logits match the reference at every prefill position, with sparse top-k sets") {
    // fp32 and bf16 weights: only the FP8 storage roundings of the caches and the indexer separate
    // the two implementations. fp8 weights add W8A8 activation quantization at every linear layer,
    // which multiplies the boundary cases.
    // Measured (2 cores, AVX2): fp32 3e-5, bf16 2e-5, v3 fp32 2e-4, v3 fp8 1e-6 relative; fp8 v32
    // 2e-2 at 6 of 40 positions and ~1e-6 at the others. The fp8 outliers are discrete flips: the
    // fast attention kernel's fp32 accumulation (2e-6 off the double-accumulating ref kernel, with
    // which the engine matches the reference to 1e-6 everywhere) tips a W8A8 activation rounding or
    // a routing near-tie. Hence a loose max for fp8 plus "most positions match tightly".
    struct Case {
      const char* dtype;
      const char* arch;
      double tolerance;
      double close_fraction;
    };
    for (Case c : {Case{"fp32", "v32", 2e-3, 1.0}, Case{"bf16", "v32", 2e-3, 1.0}, Case{"fp8", "v32", 6e-2, 0.7},
                   Case{"fp32", "v3", 2e-3, 1.0}, Case{"fp8", "v3", 6e-2, 0.7}}) {
      CAPTURE(std::string(c.dtype));
      CAPTURE(std::string(c.arch));
      std::string dir = TinyModel(c.dtype, c.arch);
      auto model = LoadModel(dir);
      REQUIRE(model->config().index_topk < kPromptLength);
      auto tokens = PromptTokens(kPromptLength, model->config().vocab_size);
      SelectionRecord record;
      auto logits = PrefillLogits(*model, tokens, &record);
      Json reference = RunReference(dir, tokens);
      Comparison comparison = CompareLogits(logits, reference, model->config().vocab_size);
      CAPTURE(comparison.scale);
      CHECK(comparison.scale > 1.0);
      MESSAGE(std::string(c.dtype) << " " << std::string(c.arch) << ": relative max diff "
                                   << comparison.relative_max_diff
                                   << ", positions within 1e-3: " << comparison.close_fraction);
      CHECK(comparison.relative_max_diff < c.tolerance);
      CHECK(comparison.close_fraction >= c.close_fraction);
      if (model->config().has_indexer()) {
        double recall = TopkRecall(record, reference);
        MESSAGE("top-k recall " << recall);
        CHECK(recall >= 0.99);
        // Sparsity was exercised: the last query kept index_topk of its 40 candidates.
        CHECK(record[1].back().size() == static_cast<size_t>(model->config().index_topk));
      } else {
        CHECK(record[0].back().size() == static_cast<size_t>(kPromptLength));
      }
    }
  }

  TEST_CASE("a wrong indexer RoPE pairing makes the reference comparison fail") {
    // The engine (non-interleaved, as the config says) against a reference told to interleave: the
    // index scores change, so do the top-k sets and the logits past index_topk.
    std::string dir = TinyModel("fp32");
    auto model = LoadModel(dir);
    auto tokens = PromptTokens(kPromptLength, model->config().vocab_size);
    SelectionRecord record;
    auto logits = PrefillLogits(*model, tokens, &record);
    Json swapped = RunReference(dir, tokens, {"--indexer-rope-interleave"});
    double recall = TopkRecall(record, swapped);
    Comparison comparison = CompareLogits(logits, swapped, model->config().vocab_size);
    MESSAGE("swapped pairing: recall " << recall << ", relative max diff " << comparison.relative_max_diff);
    CHECK(recall < 0.95);
    CHECK(comparison.relative_max_diff > 10 * 2e-3);  // 10x the tolerance the right pairing meets
    CHECK(comparison.close_fraction < 0.7);
  }

  TEST_CASE("decoding token t after a prefill of t tokens gives the prefill's logits at t") {
    for (const char* dtype : {"fp32", "fp8"}) {
      CAPTURE(dtype);
      auto model = LoadModel(TinyModel(dtype));
      const int64_t vocab = model->config().vocab_size;
      auto tokens = PromptTokens(30, vocab, 7);
      auto all = PrefillLogits(*model, tokens);
      // Prefill 20, then decode the remaining 10 one by one (positions on both sides of index_topk
      // were covered by the prefill; the decode positions 20..29 all select).
      auto cache = model->NewCache();
      std::vector<int32_t> head(tokens.begin(), tokens.begin() + 20);
      std::vector<float> logits;
      SequenceInput input{cache.get(), head};
      REQUIRE(model->Forward(std::span<const SequenceInput>(&input, 1), &logits).ok());
      double scale = 0, max_diff = 0;
      auto compare = [&](size_t position) {
        for (int64_t v = 0; v < vocab; ++v) {
          double expected = all[position * static_cast<size_t>(vocab) + static_cast<size_t>(v)];
          scale = std::max(scale, std::fabs(expected));
          max_diff = std::max(max_diff, std::fabs(expected - logits[static_cast<size_t>(v)]));
        }
      };
      compare(19);
      for (size_t t = 20; t < tokens.size(); ++t) {
        SequenceInput step{cache.get(), std::span<const int32_t>(&tokens[t], 1)};
        REQUIRE(model->Forward(std::span<const SequenceInput>(&step, 1), &logits).ok());
        compare(t);
      }
      CHECK(cache->length() == 30);
      // Only fp32 summation order differs (GEMM blocking for m = 1 vs m = 20).
      MESSAGE(std::string(dtype) << " decode vs prefill: " << max_diff / scale);
      CHECK(max_diff / scale < 1e-4);
    }
  }

  TEST_CASE("sparse attention equals dense attention while the context fits in index_topk") {
    std::string dir = TinyModel("fp32");
    auto sparse = LoadModel(dir);
    auto dense = LoadModel(dir, /*dense=*/true);
    CHECK(dense->cache_shape().index_head_dim == 0);
    CHECK(sparse->cache_shape().index_head_dim == 128);
    const int64_t topk = sparse->config().index_topk;
    const int64_t vocab = sparse->config().vocab_size;
    auto tokens = PromptTokens(kPromptLength, vocab, 3);

    std::vector<int32_t> short_tokens(tokens.begin(), tokens.begin() + topk);
    SelectionRecord record;
    CHECK(PrefillLogits(*sparse, short_tokens, &record) == PrefillLogits(*dense, short_tokens));
    for (size_t t = 0; t < short_tokens.size(); ++t) CHECK(record[0][t].size() == t + 1);

    // Past index_topk the selection matters: the first topk positions still agree exactly, later
    // ones do not; the dense engine agrees with the reference's dense mode.
    auto sparse_logits = PrefillLogits(*sparse, tokens);
    auto dense_logits = PrefillLogits(*dense, tokens);
    // (Not bit-exact: MoE experts see different token sets once later tokens route differently, which
    // changes the GEMM blocking of the shared rows.)
    auto max_relative_diff = [&](int64_t position_begin, int64_t position_end) {
      double diff = 0, scale = 0;
      for (int64_t i = position_begin * vocab; i < position_end * vocab; ++i) {
        scale = std::max(scale, static_cast<double>(std::fabs(dense_logits[static_cast<size_t>(i)])));
        diff = std::max(diff, static_cast<double>(std::fabs(sparse_logits[static_cast<size_t>(i)] -
                                                            dense_logits[static_cast<size_t>(i)])));
      }
      return diff / scale;
    };
    const auto length = static_cast<int64_t>(tokens.size());
    MESSAGE("sparse vs dense: below index_topk " << max_relative_diff(0, topk) << ", beyond "
                                                 << max_relative_diff(topk, length));
    CHECK(max_relative_diff(0, topk) < 1e-5);
    CHECK(max_relative_diff(topk, length) > 1e-2);
    Json reference_dense = RunReference(dir, tokens, {"--dense"});
    CHECK(CompareLogits(dense_logits, reference_dense, vocab).relative_max_diff < 2e-3);
  }

  TEST_CASE("a batch of sequences at different lengths equals running them one by one") {
    auto model = LoadModel(TinyModel("bf16"));
    const int64_t vocab = model->config().vocab_size;
    auto a = PromptTokens(25, vocab, 11), b = PromptTokens(5, vocab, 12), c = PromptTokens(18, vocab, 13);
    auto last_logits = [&](const std::vector<int32_t>& tokens) {
      auto all = PrefillLogits(*model, tokens);
      return std::vector<float>(all.end() - vocab, all.end());
    };
    auto cache_a = model->NewCache(), cache_b = model->NewCache(), cache_c = model->NewCache();
    std::vector<SequenceInput> batch = {{cache_a.get(), a}, {cache_b.get(), b}, {cache_c.get(), c}};
    std::vector<float> logits;
    REQUIRE(model->Forward(batch, &logits).ok());
    REQUIRE(logits.size() == static_cast<size_t>(3 * vocab));
    int index = 0;
    for (const auto* tokens : {&a, &b, &c}) {
      auto expected = last_logits(*tokens);
      double max_diff = 0, scale = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        scale = std::max(scale, static_cast<double>(std::fabs(expected[static_cast<size_t>(v)])));
        max_diff = std::max(max_diff, static_cast<double>(std::fabs(expected[static_cast<size_t>(v)] -
                                                                    logits[static_cast<size_t>(index * vocab + v)])));
      }
      CHECK(max_diff / scale < 1e-4);
      ++index;
    }
    CHECK(cache_a->length() == 25);
    CHECK(cache_b->length() == 5);
  }

  TEST_CASE("forked caches attend over the shared prefix exactly like a private copy") {
    auto model = LoadModel(TinyModel("fp32"));
    const int64_t vocab = model->config().vocab_size;
    auto tokens = PromptTokens(30, vocab, 21);
    std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 24);
    // Private: one cache, prefill 24, decode 6.
    auto private_cache = model->NewCache();
    std::vector<float> expected, logits;
    SequenceInput input{private_cache.get(), prompt};
    REQUIRE(model->Forward(std::span<const SequenceInput>(&input, 1), &expected).ok());
    // Shared: prefill into a cache, fork it, continue in the fork (a prefill chunk and decode steps).
    auto prompt_cache = model->NewCache();
    SequenceInput shared_input{prompt_cache.get(), prompt};
    REQUIRE(model->Forward(std::span<const SequenceInput>(&shared_input, 1), &logits).ok());
    auto fork = prompt_cache->Fork();
    CHECK(fork->prefix_length() == 24);
    std::vector<int32_t> two(tokens.begin() + 24, tokens.begin() + 26);
    SequenceInput private_two{private_cache.get(), two}, fork_two{fork.get(), two};
    REQUIRE(model->Forward(std::span<const SequenceInput>(&private_two, 1), &expected).ok());
    REQUIRE(model->Forward(std::span<const SequenceInput>(&fork_two, 1), &logits).ok());
    CHECK(logits == expected);
    for (size_t t = 26; t < tokens.size(); ++t) {
      SequenceInput p{private_cache.get(), std::span<const int32_t>(&tokens[t], 1)};
      SequenceInput f{fork.get(), std::span<const int32_t>(&tokens[t], 1)};
      REQUIRE(model->Forward(std::span<const SequenceInput>(&p, 1), &expected).ok());
      REQUIRE(model->Forward(std::span<const SequenceInput>(&f, 1), &logits).ok());
      CHECK(logits == expected);
    }
  }

  TEST_CASE("a decode batch of forked caches equals decoding each fork alone") {
    // The batched decode path splits selection and attention across sequences and runs the experts
    // side by side; every fork also reads the shared prefix through the two-segment view.
    for (const char* dtype : {"fp8", "bf16"}) {
      CAPTURE(dtype);
      auto model = LoadModel(TinyModel(dtype));
      const int64_t vocab = model->config().vocab_size;
      REQUIRE(model->config().index_topk < 24);  // decode steps select keys
      auto prompt = PromptTokens(24, vocab, 31);
      auto prompt_cache = model->NewCache();
      std::vector<float> logits, alone;
      SequenceInput input{prompt_cache.get(), prompt};
      REQUIRE(model->Forward(std::span<const SequenceInput>(&input, 1), &logits).ok());
      constexpr int kForks = 6, kSteps = 4;
      std::vector<std::unique_ptr<KvCache>> batched, single;
      for (int i = 0; i < kForks; ++i) {
        batched.push_back(prompt_cache->Fork());
        single.push_back(prompt_cache->Fork());
      }
      for (int step = 0; step < kSteps; ++step) {
        std::vector<int32_t> tokens;
        for (int i = 0; i < kForks; ++i) tokens.push_back(static_cast<int32_t>(2 + (step * 13 + i * 7) % (vocab - 2)));
        std::vector<SequenceInput> batch;
        for (int i = 0; i < kForks; ++i)
          batch.push_back(
              {batched[static_cast<size_t>(i)].get(), std::span<const int32_t>(&tokens[static_cast<size_t>(i)], 1)});
        REQUIRE(model->Forward(batch, &logits).ok());
        for (int i = 0; i < kForks; ++i) {
          SequenceInput one{single[static_cast<size_t>(i)].get(),
                            std::span<const int32_t>(&tokens[static_cast<size_t>(i)], 1)};
          REQUIRE(model->Forward(std::span<const SequenceInput>(&one, 1), &alone).ok());
          double max_diff = 0, scale = 0;
          for (int64_t v = 0; v < vocab; ++v) {
            const float expected = alone[static_cast<size_t>(v)];
            scale = std::max(scale, static_cast<double>(std::fabs(expected)));
            max_diff = std::max(max_diff,
                                static_cast<double>(std::fabs(expected - logits[static_cast<size_t>(i * vocab + v)])));
          }
          CHECK(max_diff / scale < 1e-5);
        }
      }
      CHECK(batched[0]->length() == 24 + kSteps);
    }
  }

  // Prefills `prompt` into a new cache (logits discarded).
  std::unique_ptr<KvCache> Prefilled(Model & model, const std::vector<int32_t>& prompt) {
    auto cache = model.NewCache();
    std::vector<float> logits;
    SequenceInput input{cache.get(), prompt};
    REQUIRE(model.Forward(std::span<const SequenceInput>(&input, 1), &logits).ok());
    return cache;
  }

  TEST_CASE("dense attention past two chunks of rows: forks decoded together and alone, prefill and decode agree") {
    // 600 prompt rows: the shared prefix is attended as a group (kernels::DenseMqaAttentionGroup,
    // its chunks dequantized once for all forks) in the decode batch and in the prefill; one fork
    // decoded alone takes the per-query path. The attention is the same bit for bit on all paths;
    // what differs is the GEMM blocking of the projections and experts (m = 1 vs m = 6 rows).
    auto model = LoadModel(TinyModel("fp32"), /*dense=*/true);
    const int64_t vocab = model->config().vocab_size;
    auto prompt = PromptTokens(600, vocab, 41);
    auto all = PrefillLogits(*model, prompt);
    std::vector<int32_t> head(prompt.begin(), prompt.end() - 3);
    auto prompt_cache = Prefilled(*model, head);
    std::vector<float> logits, alone;
    auto relative_diff = [&](const float* got, const float* expected) {
      double diff = 0, scale = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        scale = std::max(scale, static_cast<double>(std::fabs(expected[v])));
        diff = std::max(diff, static_cast<double>(std::fabs(got[v] - expected[v])));
      }
      return diff / scale;
    };
    constexpr int kForks = 6;
    std::vector<std::unique_ptr<KvCache>> batched, single;
    for (int i = 0; i < kForks; ++i) {
      batched.push_back(prompt_cache->Fork());
      single.push_back(prompt_cache->Fork());
    }
    for (size_t t = head.size(); t < prompt.size(); ++t) {
      std::vector<SequenceInput> batch;
      for (auto& cache : batched) batch.push_back({cache.get(), std::span<const int32_t>(&prompt[t], 1)});
      REQUIRE(model->Forward(batch, &logits).ok());
      for (int i = 0; i < kForks; ++i) {
        SequenceInput one{single[static_cast<size_t>(i)].get(), std::span<const int32_t>(&prompt[t], 1)};
        REQUIRE(model->Forward(std::span<const SequenceInput>(&one, 1), &alone).ok());
        CHECK(relative_diff(&logits[static_cast<size_t>(i * vocab)], alone.data()) < 1e-5);
        // Every fork fed the prompt's own next token: the prefill's logits at t.
        CHECK(relative_diff(alone.data(), &all[t * static_cast<size_t>(vocab)]) < 1e-4);
      }
    }
  }

  TEST_CASE("a decode batch mixing shared prefixes selects exactly the keys each sequence selects alone") {
    // Decode rows sharing a prefix store score it in one indexer call per group; rows of another
    // prefix, a lone fork and a private cache (no prefix) sit in the same batch, interleaved.
    auto model = LoadModel(TinyModel("fp32"));
    const int64_t vocab = model->config().vocab_size;
    REQUIRE(model->config().index_topk < 20);
    auto prompt_a = PromptTokens(24, vocab, 41), prompt_b = PromptTokens(37, vocab, 42);
    auto prompt_c = PromptTokens(20, vocab, 43);
    auto cache_a = Prefilled(*model, prompt_a), cache_b = Prefilled(*model, prompt_b);
    auto cache_c = Prefilled(*model, prompt_c);
    // Two copies of every sequence: one decoded in the batch, one alone.
    std::vector<std::unique_ptr<KvCache>> batched, single;
    for (int copy = 0; copy < 2; ++copy) {
      auto& caches = copy == 0 ? batched : single;
      for (int i = 0; i < 4; ++i) {
        caches.push_back(cache_a->Fork());
        if (i < 3) caches.push_back(cache_b->Fork());
      }
      caches.push_back(cache_c->Fork());
      caches.push_back(Prefilled(*model, prompt_a));
    }
    const size_t rows = batched.size();
    for (int step = 0; step < 3; ++step) {
      std::vector<int32_t> tokens;
      for (size_t i = 0; i < rows; ++i) {
        tokens.push_back(static_cast<int32_t>(2 + (step * 17 + static_cast<int64_t>(i) * 5) % (vocab - 2)));
      }
      std::vector<SequenceInput> batch;
      for (size_t i = 0; i < rows; ++i) batch.push_back({batched[i].get(), std::span<const int32_t>(&tokens[i], 1)});
      std::vector<float> logits, alone;
      SelectionRecord record, alone_record;
      ForwardOptions options;
      options.record_selection = &record;
      REQUIRE(model->Forward(batch, &logits, options).ok());
      for (size_t i = 0; i < rows; ++i) {
        CAPTURE(step);
        CAPTURE(i);
        SequenceInput one{single[i].get(), std::span<const int32_t>(&tokens[i], 1)};
        options.record_selection = &alone_record;
        REQUIRE(model->Forward(std::span<const SequenceInput>(&one, 1), &alone, options).ok());
        for (size_t layer = 0; layer < record.size(); ++layer) CHECK(record[layer][i] == alone_record[layer][0]);
        const int64_t pos = single[i]->length() - 1;
        CHECK(record.back()[i].size() == static_cast<size_t>(std::min<int64_t>(pos + 1, model->config().index_topk)));
      }
    }
  }

  TEST_CASE("record_routing: every MoE layer's experts per token row, as the reference routes them, however fed") {
    auto model = LoadModel(TinyModel("fp32"));
    const ModelConfig& config = model->config();
    const int64_t k = config.num_experts_per_tok, width = config.routing_width();
    REQUIRE(config.first_k_dense_replace == 1);
    REQUIRE(width == 2 * k);  // the tiny preset: 1 dense + 2 MoE layers
    auto tokens = PromptTokens(kPromptLength, config.vocab_size, 3);
    auto cache = model->NewCache();
    SequenceInput input{cache.get(), tokens};
    std::vector<float> logits;
    std::vector<int16_t> routing = {99};  // replaced, not appended to
    ForwardOptions options;
    options.record_routing = &routing;
    REQUIRE(model->Forward(std::span<const SequenceInput>(&input, 1), &logits, options).ok());
    REQUIRE(static_cast<int64_t>(routing.size()) == kPromptLength * width);
    const std::vector<int16_t> full = routing;

    Json reference = RunReference(TinyModel("fp32"), tokens);
    for (int64_t layer = config.first_k_dense_replace; layer < config.num_hidden_layers; ++layer) {
      const Json& chosen = reference["routing"][std::to_string(layer)];
      REQUIRE(static_cast<int64_t>(chosen.size()) == kPromptLength);
      const int64_t moe = layer - config.first_k_dense_replace;
      for (int64_t t = 0; t < kPromptLength; ++t) {
        std::vector<int32_t> mine(routing.begin() + t * width + moe * k, routing.begin() + t * width + (moe + 1) * k);
        CHECK_MESSAGE(mine == chosen[static_cast<size_t>(t)].get<std::vector<int32_t>>(), "layer ", layer, " t ", t);
      }
    }

    // The same positions fed as a prefill of 25, then decode steps in a batch with another
    // sequence: each row's routing is the full prefill's at its position.
    auto head = model->NewCache(), other = model->NewCache();
    std::vector<int32_t> first(tokens.begin(), tokens.begin() + 25);
    SequenceInput prefill{head.get(), first};
    REQUIRE(model->Forward(std::span<const SequenceInput>(&prefill, 1), &logits, options).ok());
    std::vector<int16_t> incremental = routing;
    std::vector<int32_t> other_tokens = {5};
    for (size_t t = 25; t < tokens.size(); ++t) {
      std::vector<SequenceInput> batch = {{other.get(), other_tokens}, {head.get(), {&tokens[t], 1}}};
      REQUIRE(model->Forward(batch, &logits, options).ok());
      REQUIRE(static_cast<int64_t>(routing.size()) == 2 * width);
      incremental.insert(incremental.end(), routing.begin() + width, routing.end());
    }
    CHECK(incremental == full);
  }

  TEST_CASE("Forward rejects bad input and leaves the caches unchanged") {
    auto model = LoadModel(TinyModel("fp32"));
    auto cache = model->NewCache();
    std::vector<float> logits;
    std::vector<int32_t> bad = {1, static_cast<int32_t>(model->config().vocab_size)};
    SequenceInput input{cache.get(), bad};
    Status status = model->Forward(std::span<const SequenceInput>(&input, 1), &logits);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message().find("token id") != std::string::npos);
    CHECK(cache->length() == 0);
    std::vector<int32_t> none;
    SequenceInput empty{cache.get(), none};
    CHECK(model->Forward(std::span<const SequenceInput>(&empty, 1), &logits).code() == StatusCode::kInvalidArgument);
    auto dense = LoadModel(TinyModel("fp32"), true);
    auto dense_cache = dense->NewCache();
    std::vector<int32_t> ok = {1, 2};
    SequenceInput other_shape{dense_cache.get(), ok};
    CHECK(model->Forward(std::span<const SequenceInput>(&other_shape, 1), &logits).code() ==
          StatusCode::kInvalidArgument);
  }

  TEST_CASE("loading a directory without a checkpoint names what is missing") {
    model_testing::TempDir dir;
    auto missing = Model::Load(dir / "nope");
    CHECK(missing.status().code() == StatusCode::kNotFound);
    std::filesystem::create_directories(dir / "empty");
    auto empty = Model::Load(dir / "empty");
    CHECK(empty.status().code() == StatusCode::kNotFound);
    CHECK(empty.status().message().find("config.json") != std::string::npos);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
