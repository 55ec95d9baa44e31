// Generator: prefill once, fork the cache per sample, batched decode steps.
#include "inference/generator.h"

#include <algorithm>
#include <chrono>
#include <span>

namespace envforge::inference {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

Status CheckOptions(const GenerateOptions& options) {
  if (options.n < 1) return InvalidArgumentError("n must be at least 1, got " + std::to_string(options.n));
  if (options.max_tokens < 0) return InvalidArgumentError("max_tokens must be >= 0");
  const SamplingParams& p = options.sampling;
  if (!(p.temperature >= 0)) return InvalidArgumentError("temperature must be >= 0");
  if (!(p.top_p > 0 && p.top_p <= 1)) return InvalidArgumentError("top_p must be in (0, 1]");
  if (p.top_k < 0) return InvalidArgumentError("top_k must be >= 0");
  return Status::Ok();
}

}  // namespace

const char* FinishReasonName(FinishReason reason) { return reason == FinishReason::kStop ? "stop" : "length"; }

Result<GenerateResult> Generator::Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options) {
  ENVFORGE_RETURN_IF_ERROR(CheckOptions(options));
  if (prompt.empty()) return InvalidArgumentError("empty prompt");
  const ModelConfig& config = model_.config();
  std::vector<int32_t> stop = options.stop_tokens;
  if (stop.empty()) stop.push_back(static_cast<int32_t>(config.eos_token_id));
  const int64_t max_positions = config.max_position_embeddings > 0 ? config.max_position_embeddings : INT64_MAX;
  if (static_cast<int64_t>(prompt.size()) > max_positions) {
    return InvalidArgumentError("prompt of " + std::to_string(prompt.size()) +
                                " tokens exceeds max_position_embeddings " + std::to_string(max_positions));
  }

  GenerateResult result;
  result.prompt = prompt;
  result.samples.resize(static_cast<size_t>(options.n));
  if (options.max_tokens == 0) return result;

  // 1. Prefill.
  auto prefill_start = Clock::now();
  std::unique_ptr<KvCache> prompt_cache = model_.NewCache();
  std::vector<float> logits;
  SequenceInput input{prompt_cache.get(), std::span<const int32_t>(prompt)};
  ENVFORGE_RETURN_IF_ERROR(model_.Forward(std::span<const SequenceInput>(&input, 1), &logits));
  result.timing.prefill_s = SecondsSince(prefill_start);
  result.timing.prefill_tokens = static_cast<int64_t>(prompt.size());
  if (options.on_step) options.on_step(0, options.n);

  // 2. One cache per sample over the shared prompt rows.
  const auto n = static_cast<size_t>(options.n);
  std::vector<std::unique_ptr<KvCache>> caches(n);
  if (n == 1) {
    caches[0] = std::move(prompt_cache);
  } else {
    for (size_t i = 0; i < n; ++i) caches[i] = prompt_cache->Fork();
    prompt_cache.reset();  // the forks keep the prefix alive
  }
  std::vector<SampleStream> streams;
  for (size_t i = 0; i < n; ++i) streams.emplace_back(options.sampling.seed, i);

  const auto vocab = static_cast<size_t>(config.vocab_size);
  auto take = [&](size_t sample, std::span<const float> row) {
    GeneratedSample& out = result.samples[sample];
    SampledToken token = Sample(row, options.sampling, streams[sample]);
    out.tokens.push_back(token.token);
    out.logprobs.push_back(token.logprob);
    out.raw_logprobs.push_back(token.raw_logprob);
    out.kept_counts.push_back(token.kept_count);
    if (std::find(stop.begin(), stop.end(), token.token) != stop.end()) {
      out.finish_reason = FinishReason::kStop;
      return false;
    }
    out.finish_reason = FinishReason::kLength;
    if (static_cast<int64_t>(out.tokens.size()) >= options.max_tokens) return false;
    if (caches[sample]->length() + 1 > max_positions) return false;
    return true;
  };

  // 3. First tokens from the prefill's logits, then batched decode steps.
  std::vector<size_t> live;
  for (size_t i = 0; i < n; ++i) {
    if (take(i, std::span<const float>(logits.data(), vocab))) live.push_back(i);
  }
  auto decode_start = Clock::now();
  std::vector<SequenceInput> batch;
  while (!live.empty()) {
    batch.clear();
    for (size_t i : live)
      batch.push_back({caches[i].get(), std::span<const int32_t>(&result.samples[i].tokens.back(), 1)});
    ENVFORGE_RETURN_IF_ERROR(model_.Forward(batch, &logits));
    result.timing.decode_steps += 1;
    result.timing.decode_tokens += static_cast<int64_t>(live.size());
    std::vector<size_t> still_live;
    for (size_t j = 0; j < live.size(); ++j) {
      if (take(live[j], std::span<const float>(logits.data() + j * vocab, vocab))) still_live.push_back(live[j]);
    }
    live = std::move(still_live);
    if (options.on_step) options.on_step(result.timing.decode_steps, static_cast<int64_t>(live.size()));
  }
  result.timing.decode_s = SecondsSince(decode_start);

  if (const Tokenizer* tokenizer = model_.tokenizer()) {
    for (GeneratedSample& sample : result.samples) {
      size_t text_tokens = sample.tokens.size() - (sample.finish_reason == FinishReason::kStop ? 1 : 0);
      sample.text = tokenizer->Decode(std::span<const int32_t>(sample.tokens.data(), text_tokens));
    }
  }
  return result;
}

Result<GenerateResult> Generator::GenerateText(std::string_view text, const GenerateOptions& options) {
  const Tokenizer* tokenizer = model_.tokenizer();
  if (tokenizer == nullptr)
    return FailedPreconditionError("model directory '" + model_.dir() + "' has no tokenizer.json");
  std::vector<int32_t> prompt = tokenizer->Encode(text);
  const auto bos = static_cast<int32_t>(model_.config().bos_token_id);
  if (prompt.empty() || prompt.front() != bos) prompt.insert(prompt.begin(), bos);
  return Generate(prompt, options);
}

Result<GenerateResult> Generator::GenerateChat(const std::vector<ChatMessage>& messages,
                                               const ChatEncodeOptions& encode, const GenerateOptions& options) {
  const Tokenizer* tokenizer = model_.tokenizer();
  if (tokenizer == nullptr)
    return FailedPreconditionError("model directory '" + model_.dir() + "' has no tokenizer.json");
  ENVFORGE_ASSIGN_OR_RETURN(std::string prompt_text, EncodeChat(messages, encode));
  std::vector<int32_t> prompt = tokenizer->Encode(prompt_text);
  ENVFORGE_ASSIGN_OR_RETURN(GenerateResult result, Generate(prompt, options));
  for (GeneratedSample& sample : result.samples) {
    // The parser wants the stop token's text (EOS) to know the message finished.
    auto parsed = ParseCompletion(tokenizer->Decode(sample.tokens), encode.thinking);
    if (parsed.ok()) {
      sample.has_message = true;
      sample.parsed = std::move(*parsed);
    } else {
      sample.parse_error = parsed.status().message();
    }
  }
  return result;
}

}  // namespace envforge::inference
