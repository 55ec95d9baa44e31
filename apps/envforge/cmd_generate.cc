// envforge generate: n sampled continuations of one prompt with the embedded DSA engine.
//
//   envforge generate --model DIR (--prompt TEXT | --prompt-tokens 1,2,3) [--chat] [--thinking]
//                     [-n N] [--max-tokens M] [--temperature T] [--top-p P] [--top-k K]
//                     [--seed S] [--stop 1,2] [--dense] [--device cpu|cuda|auto] [--json]
//
// --chat renders the prompt as one user message in the DeepSeek-V3.2 chat format (with --thinking:
// thinking mode) and parses each completion (reasoning, content, DSML tool calls). Without --chat
// the prompt text is tokenized as is, after BOS. --prompt-tokens feeds token ids directly (models
// without a tokenizer). Progress goes to stderr; --json prints one object on stdout:
// --device cuda (or auto) runs the forward pass on the GPU when envforge was built with the CUDA
// kernels and a device is present; otherwise it runs on the CPU and says why on stderr
// ("envforge generate: --device cuda: no usable CUDA device (...); running on the CPU").
// {"model", "device", "prompt_tokens", "samples": [{"text", "tokens", "logprobs", "raw_logprobs", "kept",
// "finish_reason", "tool_calls"?, "reasoning"?, "content"?}], "timing": {...}}. logprobs are under
// the distribution sampled from (after temperature, top-k, top-p), raw_logprobs under the model's
// own (what an RL trainer's importance ratio needs).
// Exit codes: 0 done, 2 bad arguments or a bad model directory (the message names the missing
// file or the broken tensor), 3 anything else.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/progress.h"
#include "base/json.h"
#include "inference/generator.h"
#include "inference/model.h"
#include "kernels/device.h"

namespace envforge::cli {
namespace {

Result<std::vector<int32_t>> IdList(const std::string& name, const std::string& text) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    int32_t id = 0;
    auto [ptr, error] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || error != std::errc() || ptr != item.data() + item.size()) {
      return InvalidArgumentError(name + " expects comma-separated token ids, got '" + text + "'");
    }
    ids.push_back(id);
    begin = end + 1;
  }
  return ids;
}

Json ToolCallsJson(const inference::ChatMessage& message) {
  Json calls = Json::array();
  for (const auto& call : message.tool_calls) calls.push_back(Json{{"name", call.name}, {"arguments", call.arguments}});
  return calls;
}

int Generate(const ParsedArgs& parsed) {
  auto model_dir = parsed.Option("--model");  // required by the declaration
  auto prompt_text = parsed.Option("--prompt");
  auto prompt_ids_text = parsed.Option("--prompt-tokens");
  if (prompt_text.has_value() == prompt_ids_text.has_value()) {
    return Fail(InvalidArgumentError("envforge generate: pass exactly one of --prompt TEXT and --prompt-tokens IDS"),
                kExitUsage);
  }
  bool chat = parsed.Has("--chat");
  if (chat && !prompt_text)
    return Fail(InvalidArgumentError("envforge generate: --chat needs --prompt TEXT"), kExitUsage);

  inference::GenerateOptions options;
  auto n = parsed.IntOption("-n", 1, 100000);
  auto max_tokens = parsed.IntOption("--max-tokens", 0, 10'000'000);
  auto top_k = parsed.IntOption("--top-k", 0, 100'000'000);
  auto seed = parsed.IntOption("--seed", 0, INT64_MAX);
  for (const auto* r : {&n, &max_tokens, &top_k, &seed}) {
    if (!r->ok()) return Fail(r->status(), kExitUsage);
  }
  auto temperature = parsed.DoubleOption("--temperature");
  auto top_p = parsed.DoubleOption("--top-p");
  for (const auto* r : {&temperature, &top_p}) {
    if (!r->ok()) return Fail(r->status(), kExitUsage);
  }
  options.n = *n;
  options.max_tokens = *max_tokens;
  options.sampling.temperature = *temperature;
  options.sampling.top_p = *top_p;
  options.sampling.top_k = *top_k;
  options.sampling.seed = static_cast<uint64_t>(*seed);
  if (auto stop = parsed.Option("--stop")) {
    auto ids = IdList("--stop", *stop);
    if (!ids.ok()) return Fail(ids.status(), kExitUsage);
    options.stop_tokens = *ids;
  }

  auto load_start = std::chrono::steady_clock::now();
  std::fprintf(stderr, "loading %s\n", model_dir->c_str());
  inference::ModelOptions model_options;
  model_options.dense_attention = parsed.Has("--dense");
  model_options.device = parsed.OptionOr("--device");
  auto model = inference::Model::Load(*model_dir, model_options);
  if (!model.ok()) return Fail(model.status(), ExitCodeFor(model.status()), "envforge generate");
  if (!(*model)->device_note().empty())
    std::fprintf(stderr, "envforge generate: %s\n", (*model)->device_note().c_str());
  if ((*model)->device() == kernels::Device::kCuda) {
    std::fprintf(stderr, "running on %s\n", (*model)->device_detail().c_str());
  }
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  Progress progress("generating", static_cast<size_t>(options.max_tokens));
  options.on_step = [&progress](int64_t step, int64_t live) {
    progress.Update(static_cast<size_t>(step), std::to_string(live) + " live");
  };
  inference::Generator generator(**model);
  Result<inference::GenerateResult> result = InternalError("unreachable");
  if (prompt_ids_text) {
    auto ids = IdList("--prompt-tokens", *prompt_ids_text);
    if (!ids.ok()) return Fail(ids.status(), kExitUsage);
    result = generator.Generate(*ids, options);
  } else if (chat) {
    inference::ChatMessage user;
    user.role = "user";
    user.content = *prompt_text;
    inference::ChatEncodeOptions encode;
    encode.thinking = parsed.Has("--thinking");
    result = generator.GenerateChat({user}, encode, options);
  } else {
    result = generator.GenerateText(*prompt_text, options);
  }
  progress.Finish();
  if (!result.ok()) {
    return Fail(result.status(), ExitCodeFor(result.status()), "envforge generate");
  }

  const auto& timing = result->timing;
  auto per_second = [](double count, double seconds) { return seconds > 0 ? count / seconds : 0.0; };
  Json samples = Json::array();
  for (const auto& sample : result->samples) {
    Json entry{{"text", sample.text},         {"tokens", sample.tokens},
               {"logprobs", sample.logprobs}, {"raw_logprobs", sample.raw_logprobs},
               {"kept", sample.kept_counts},  {"finish_reason", inference::FinishReasonName(sample.finish_reason)}};
    if (chat) {
      if (sample.has_message) {
        entry["reasoning"] = sample.parsed.message.reasoning_content;
        entry["content"] = sample.parsed.message.content;
        entry["tool_calls"] = ToolCallsJson(sample.parsed.message);
      } else {
        entry["parse_error"] = sample.parse_error;
      }
    }
    samples.push_back(std::move(entry));
  }
  Json output{{"model", *model_dir},
              {"device", kernels::DeviceName((*model)->device())},
              {"prompt_tokens", result->prompt.size()},
              {"samples", samples},
              {"timing",
               {{"load_s", load_s},
                {"prefill_s", timing.prefill_s},
                {"decode_s", timing.decode_s},
                {"prefill_tokens", timing.prefill_tokens},
                {"decode_steps", timing.decode_steps},
                {"decode_tokens", timing.decode_tokens},
                {"prefill_tokens_per_s", per_second(static_cast<double>(timing.prefill_tokens), timing.prefill_s)},
                {"decode_tokens_per_s", per_second(static_cast<double>(timing.decode_tokens), timing.decode_s)}}}};
  if (parsed.Has("--json")) {
    std::printf("%s\n", DumpJson(output).c_str());
    return kExitOk;
  }
  for (size_t i = 0; i < result->samples.size(); ++i) {
    const auto& sample = result->samples[i];
    std::printf("--- sample %zu (%zu tokens, %s)\n%s\n", i, sample.tokens.size(),
                inference::FinishReasonName(sample.finish_reason),
                sample.text.empty() && !sample.tokens.empty() ? ("tokens: " + DumpJson(Json(sample.tokens))).c_str()
                                                              : sample.text.c_str());
  }
  std::fprintf(stderr, "prompt %zu tokens, prefill %.1f tok/s, decode %.1f tok/s\n", result->prompt.size(),
               output["timing"]["prefill_tokens_per_s"].get<double>(),
               output["timing"]["decode_tokens_per_s"].get<double>());
  return kExitOk;
}

}  // namespace

std::vector<Command> GenerateCommands() {
  return {
      {{.name = "generate",
        .summary = "N sampled continuations of one prompt from the embedded DSA engine",
        .details =
            "HF config.json + safetensors + tokenizer.json; fp32, bf16, fp16, FP8 e4m3 with block scales. Pass "
            "exactly one of --prompt and --prompt-tokens. Progress on stderr.\n"
            "--json prints {\"model\", \"device\", \"prompt_tokens\", \"samples\": [{\"text\", \"tokens\", "
            "\"logprobs\", \"raw_logprobs\", \"kept\", \"finish_reason\", \"tool_calls\"?, \"reasoning\"?, "
            "\"content\"?}], \"timing\"}: logprobs under the distribution sampled from (after temperature, top-k, "
            "top-p), raw_logprobs under the model's own.\n"
            "Exit 2 for bad arguments or a bad model directory (the message names the missing file or the broken "
            "tensor), 3 anything else.",
        .options =
            {{.name = "--model", .metavar = "DIR", .help = "the model directory", .required = true},
             {.name = "--prompt",
              .metavar = "TEXT",
              .help = "the prompt, tokenized as is after BOS (or with --chat, as one user message)"},
             {.name = "--prompt-tokens",
              .metavar = "IDS",
              .help = "the prompt as comma-separated token ids (models without a tokenizer)"},
             {.name = "--chat",
              .help = "render --prompt in the DeepSeek-V3.2 chat format and parse each completion (reasoning, content, "
                      "DSML tool calls)"},
             {.name = "--thinking", .help = "with --chat: thinking mode"},
             {.name = "-n", .metavar = "N", .help = "continuations", .default_text = "1"},
             {.name = "--max-tokens",
              .metavar = "M",
              .help = "generated tokens per continuation",
              .default_text = "64"},
             {.name = "--temperature", .metavar = "T", .help = "sampling temperature", .default_text = "1"},
             {.name = "--top-p", .metavar = "P", .help = "nucleus sampling", .default_text = "1"},
             {.name = "--top-k", .metavar = "K", .help = "keep the K likeliest tokens (0: all)", .default_text = "0"},
             {.name = "--seed", .metavar = "S", .help = "the sampling seed", .default_text = "0"},
             {.name = "--stop", .metavar = "IDS", .help = "comma-separated token ids that end a continuation"},
             {.name = "--dense", .help = "dense attention instead of DSA's top-k (same weights)"},
             {.name = "--device",
              .metavar = "cpu|cuda|auto",
              .help = "where the forward pass runs; cuda without a usable device says why and runs on the CPU",
              .default_text = "cpu"},
             JsonOption("tokens, per-token logprobs and kept-set sizes as one JSON object")}},
       Generate},
  };
}

}  // namespace envforge::cli
