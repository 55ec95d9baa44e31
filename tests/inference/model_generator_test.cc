// Generator: greedy equals the reference's greedy continuation, determinism, per-sample streams
// independent of n, and n samples sharing one prefill.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "inference/generator.h"
#include "tests/inference/model_test_util.h"

namespace envforge::inference {
namespace {

using model_testing::PromptTokens;
using model_testing::RunReference;
using model_testing::TinyModel;

std::unique_ptr<Model> LoadModel(const std::string& dir) {
  auto model = Model::Load(dir);
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  return std::move(*model);
}

GenerateResult MustGenerate(Generator& generator, const std::vector<int32_t>& prompt, const GenerateOptions& options) {
  auto result = generator.Generate(prompt, options);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  return std::move(*result);
}

TEST_SUITE("inference.generator") {
  TEST_CASE("temperature 0 is deterministic and equals the reference's greedy continuation") {
    std::string dir = TinyModel("fp32");
    auto model = LoadModel(dir);
    Generator generator(*model);
    auto prompt = PromptTokens(20, model->config().vocab_size, 5);
    GenerateOptions options;
    options.n = 3;
    options.max_tokens = 8;
    options.sampling.temperature = 0;
    options.stop_tokens = {-1};  // never stop early: compare all 8 tokens
    GenerateResult first = MustGenerate(generator, prompt, options);
    GenerateResult second = MustGenerate(generator, prompt, options);
    REQUIRE(first.samples.size() == 3);
    for (const auto& sample : first.samples) {
      CHECK(sample.tokens == first.samples[0].tokens);
      CHECK(sample.finish_reason == FinishReason::kLength);
      for (int64_t kept : sample.kept_counts) CHECK(kept == 1);
    }
    CHECK(second.samples[0].tokens == first.samples[0].tokens);
    Json reference = RunReference(dir, prompt, {"--greedy", "8"});
    std::vector<int32_t> expected;
    for (const Json& id : reference["greedy"]) expected.push_back(id.get<int32_t>());
    CHECK(first.samples[0].tokens == expected);
  }

  TEST_CASE("n samples share one prefill of the prompt; each sample's stream is independent of n") {
    auto model = LoadModel(TinyModel("bf16"));
    Generator generator(*model);
    auto prompt = PromptTokens(24, model->config().vocab_size, 9);
    GenerateOptions options;
    options.max_tokens = 6;
    options.sampling.temperature = 1.0;
    options.sampling.top_p = 0.95;
    options.sampling.seed = 1234;
    options.stop_tokens = {-1};

    options.n = 1;
    GenerateResult alone = MustGenerate(generator, prompt, options);
    model->profile().Reset();
    options.n = 4;
    GenerateResult four = MustGenerate(generator, prompt, options);
    // The prompt ran through the model once, not once per sample; each sample fed its own tokens
    // back (all but the last).
    CHECK(model->profile().prefill_tokens == static_cast<int64_t>(prompt.size()));
    CHECK(model->profile().decode_tokens == 4 * (6 - 1));
    CHECK(four.timing.prefill_tokens == static_cast<int64_t>(prompt.size()));
    CHECK(four.timing.decode_steps == 5);

    // Sample 0 of n = 4 is sample 0 of n = 1: same seed, same stream, batching does not matter.
    CHECK(four.samples[0].tokens == alone.samples[0].tokens);
    for (size_t i = 0; i < alone.samples[0].logprobs.size(); ++i) {
      CHECK(four.samples[0].logprobs[i] == doctest::Approx(alone.samples[0].logprobs[i]).epsilon(1e-4));
    }
    // Different streams give different samples (6 tokens from a 1024-token vocabulary).
    CHECK(four.samples[1].tokens != four.samples[0].tokens);
    for (const auto& sample : four.samples) {
      REQUIRE(sample.tokens.size() == 6);
      for (size_t i = 0; i < sample.tokens.size(); ++i) {
        CHECK(sample.logprobs[i] <= 1e-9);
        // Truncation only raises a kept token's probability.
        CHECK(sample.logprobs[i] >= sample.raw_logprobs[i] - 1e-6);
        CHECK(sample.kept_counts[i] >= 1);
        CHECK(sample.kept_counts[i] <= model->config().vocab_size);
      }
    }
    // A different seed changes sample 0.
    options.sampling.seed = 99;
    GenerateResult other = MustGenerate(generator, prompt, options);
    CHECK(other.samples[0].tokens != four.samples[0].tokens);
  }

  TEST_CASE("a stop token ends a sample with finish reason stop and is kept in its tokens") {
    auto model = LoadModel(TinyModel("fp32"));
    Generator generator(*model);
    auto prompt = PromptTokens(10, model->config().vocab_size, 2);
    GenerateOptions options;
    options.max_tokens = 5;
    options.sampling.temperature = 0;
    options.stop_tokens = {-1};
    GenerateResult free_run = MustGenerate(generator, prompt, options);
    REQUIRE(free_run.samples[0].tokens.size() == 5);
    // Stop on the third greedy token.
    options.stop_tokens = {free_run.samples[0].tokens[2]};
    GenerateResult stopped = MustGenerate(generator, prompt, options);
    const auto& sample = stopped.samples[0];
    CHECK(sample.finish_reason == FinishReason::kStop);
    CHECK(sample.tokens.size() <= 3);
    CHECK(sample.tokens.back() == free_run.samples[0].tokens[2]);
  }

  TEST_CASE("bad requests are InvalidArgument") {
    auto model = LoadModel(TinyModel("fp32"));
    Generator generator(*model);
    GenerateOptions options;
    CHECK(generator.Generate({}, options).status().code() == StatusCode::kInvalidArgument);
    options.n = 0;
    CHECK(generator.Generate({1, 2}, options).status().code() == StatusCode::kInvalidArgument);
    options.n = 1;
    options.sampling.top_p = 0;
    CHECK(generator.Generate({1, 2}, options).status().code() == StatusCode::kInvalidArgument);
    options.sampling.top_p = 1;
    CHECK(generator.Generate({1, 1 << 30}, options).status().code() == StatusCode::kInvalidArgument);
    // No tokenizer in this directory.
    CHECK(generator.GenerateText("hi", options).status().code() == StatusCode::kFailedPrecondition);
  }

  TEST_CASE("text and chat prompts go through the tokenizer and the chat format") {
    auto model = LoadModel(TinyModel("fp32", "v32", /*tokenizer=*/true));
    REQUIRE(model->tokenizer() != nullptr);
    Generator generator(*model);
    GenerateOptions options;
    options.n = 2;
    options.max_tokens = 4;
    options.sampling.temperature = 0.8;
    options.sampling.seed = 5;
    auto text = generator.GenerateText("hello world", options);
    INFO(text.status().ToString());
    REQUIRE(text.ok());
    CHECK(text->prompt.front() == model->config().bos_token_id);
    ChatMessage user;
    user.role = "user";
    user.content = "hi";
    ChatEncodeOptions encode;
    encode.thinking = false;
    auto chat = generator.GenerateChat({user}, encode, options);
    INFO(chat.status().ToString());
    REQUIRE(chat.ok());
    for (const auto& sample : chat->samples) {
      CHECK(!sample.tokens.empty());
      // Random weights produce arbitrary text; it either parses as a (possibly truncated) message or
      // reports why not.
      CHECK((sample.has_message || !sample.parse_error.empty()));
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
