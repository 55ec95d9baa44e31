// n-sample generation with the embedded engine: one prompt, n continuations sharing the prompt's
// KV cache.
//
// Generate(prompt ids, options):
//   1. prefill the prompt once into one KvCache (Model::Forward with all its tokens);
//   2. fork that cache n times (KvCache::Fork: the prompt rows become a shared read-only prefix, so
//      they are neither recomputed nor copied per sample);
//   3. sample each sample's first token from the prefill's last logits, then decode: every step
//      feeds the last token of each live sample in one batched Forward (linear weights stream once
//      per step for all live samples) and samples each next token;
//   4. a sample finishes on a stop token (finish "stop"; the stop token is kept in tokens/logprobs
//      but left out of text) or after max_tokens tokens or at the model's
//      max_position_embeddings (finish "length").
// Sample i draws from SampleStream(seed, i), so its tokens depend on (seed, i), never on n or on
// which other samples were batched with it.
//
// GenerateText / GenerateChat tokenize first (a tokenizer is required: FailedPrecondition without
// one). GenerateText prepends BOS (config.bos_token_id) to Encode(text) unless the text already
// starts with it; GenerateChat renders the messages with EncodeChat (thinking on/off) and parses
// every sample's completion with ParseCompletion (reasoning, content, DSML tool calls).
//
// Errors: InvalidArgument for an empty prompt, n < 1, max_tokens < 0, bad sampling parameters
// (temperature < 0, top_p outside (0, 1], top_k < 0), token ids outside the vocabulary; errors of
// Model::Forward. Thread safety: one Generate at a time per Model (Forward is not reentrant).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "inference/chat_format.h"
#include "inference/model.h"
#include "inference/sampler.h"

namespace envforge::inference {

enum class FinishReason { kStop, kLength };
const char* FinishReasonName(FinishReason reason);  // "stop", "length"

struct GenerateOptions {
  int64_t n = 1;
  int64_t max_tokens = 256;
  SamplingParams sampling;
  // Stop token ids; empty: the model's eos_token_id.
  std::vector<int32_t> stop_tokens;
  // Called after the prefill (step 0) and after every decode step with the number of live samples.
  std::function<void(int64_t step, int64_t live)> on_step;
};

struct GeneratedSample {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs;      // per token, under the sampling distribution used (sampler.h)
  std::vector<double> raw_logprobs;  // per token, under the unmodified model distribution
  std::vector<int64_t> kept_counts;  // per token, size of the kept (top-k/top-p) set
  FinishReason finish_reason = FinishReason::kLength;
  std::string text;  // decoded tokens without a final stop token; empty without a tokenizer
  // GenerateChat only: the parsed completion, or parse_error when it is malformed.
  bool has_message = false;
  ParsedCompletion parsed;
  std::string parse_error;
};

struct GenerateTiming {
  double prefill_s = 0;
  double decode_s = 0;
  int64_t prefill_tokens = 0;  // tokens run through the model for the prompt (once for all n)
  int64_t decode_steps = 0;    // batched Forward calls after the prefill
  int64_t decode_tokens = 0;   // tokens fed in those steps (sum of live samples per step)
};

struct GenerateResult {
  std::vector<GeneratedSample> samples;
  std::vector<int32_t> prompt;
  GenerateTiming timing;
};

class Generator {
 public:
  explicit Generator(Model& model) : model_(model) {}

  Result<GenerateResult> Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options);
  Result<GenerateResult> GenerateText(std::string_view text, const GenerateOptions& options);
  Result<GenerateResult> GenerateChat(const std::vector<ChatMessage>& messages, const ChatEncodeOptions& encode,
                                      const GenerateOptions& options);

 private:
  Model& model_;
};

}  // namespace envforge::inference
