#include "server/internal/openai_response.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

namespace envforge::server::internal {
namespace {

std::string RandomHex(size_t digits) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  while (text.size() < digits) {
    uint64_t bits = generator();
    for (int i = 0; i < 16 && text.size() < digits; ++i, bits >>= 4) text.push_back(kHex[bits & 15]);
  }
  return text;
}

// A token as text: the backend's string when it has one, else vLLM's "token_id:N" form.
std::string TokenText(const inference::Completion& choice, size_t i) {
  if (i < choice.token_texts.size()) return choice.token_texts[i];
  if (i < choice.tokens.size()) return "token_id:" + std::to_string(choice.tokens[i]);
  return {};
}

Json Bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// A logprob as JSON: -inf (a token outside the sampled set) is not JSON; OpenAI clients expect a
// number, so it becomes the most negative double.
double Finite(double logprob) { return std::isfinite(logprob) ? logprob : -std::numeric_limits<double>::max(); }

Json AlternativeJson(const inference::TokenAlternative& alternative) {
  std::string text = alternative.text.empty() && alternative.token >= 0
                         ? "token_id:" + std::to_string(alternative.token)
                         : alternative.text;
  return Json{{"token", text}, {"logprob", Finite(alternative.logprob)}, {"bytes", Bytes(text)}};
}

size_t LogprobCount(const inference::Completion& choice) {
  return std::min(choice.logprobs.size(), std::max(choice.tokens.size(), choice.token_texts.size()));
}

}  // namespace

std::string NewResponseId(const char* prefix) { return prefix + RandomHex(24); }

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void AssignToolCallIds(inference::CompletionResult& result) {
  for (auto& choice : result.choices) {
    for (auto& call : choice.message.tool_calls) {
      if (call.id.empty()) call.id = "call_" + RandomHex(24);
    }
  }
}

std::string FinishReason(const inference::Completion& choice) {
  if (!choice.message.tool_calls.empty()) return "tool_calls";
  return choice.finish_reason.empty() ? "stop" : choice.finish_reason;
}

Json UsageJson(const inference::CompletionResult& result) {
  return Json{{"prompt_tokens", result.prompt_tokens},
              {"completion_tokens", result.completion_tokens},
              {"total_tokens", result.prompt_tokens + result.completion_tokens}};
}

Json ToolCallsJson(const inference::Completion& choice, bool with_index) {
  Json calls = Json::array();
  for (size_t i = 0; i < choice.message.tool_calls.size(); ++i) {
    const auto& call = choice.message.tool_calls[i];
    // OpenAI's arguments are JSON text; a backend may hold them as an object or as text already.
    std::string arguments = call.arguments.is_string() ? call.arguments.get<std::string>() : DumpJson(call.arguments);
    Json entry{{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", arguments}}}};
    if (with_index) entry["index"] = i;
    calls.push_back(std::move(entry));
  }
  return calls;
}

Json MessageJson(const inference::Completion& choice, bool thinking) {
  const auto& message = choice.message;
  bool has_calls = !message.tool_calls.empty();
  Json json{{"role", "assistant"},
            {"content", message.content.empty() && has_calls ? Json(nullptr) : Json(message.content)}};
  if (thinking) json["reasoning_content"] = message.reasoning_content;
  if (has_calls) json["tool_calls"] = ToolCallsJson(choice, false);
  return json;
}

Json ChatLogprobsJson(const inference::Completion& choice, int64_t top_logprobs) {
  Json content = Json::array();
  for (size_t i = 0; i < LogprobCount(choice); ++i) {
    std::string token = TokenText(choice, i);
    Json top = Json::array();
    if (i < choice.top_logprobs.size()) {
      for (size_t k = 0; k < choice.top_logprobs[i].size() && static_cast<int64_t>(k) < top_logprobs; ++k) {
        top.push_back(AlternativeJson(choice.top_logprobs[i][k]));
      }
    }
    content.push_back(Json{{"token", token},
                           {"logprob", Finite(choice.logprobs[i])},
                           {"bytes", Bytes(token)},
                           {"top_logprobs", std::move(top)}});
  }
  return Json{{"content", std::move(content)}};
}

Json LegacyLogprobsJson(const inference::Completion& choice, int64_t top_logprobs) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  size_t offset = 0;
  for (size_t i = 0; i < LogprobCount(choice); ++i) {
    std::string token = TokenText(choice, i);
    tokens.push_back(token);
    token_logprobs.push_back(Finite(choice.logprobs[i]));
    offsets.push_back(offset);
    offset += token.size();
    Json alternatives = Json::object();
    if (i < choice.top_logprobs.size()) {
      for (size_t k = 0; k < choice.top_logprobs[i].size() && static_cast<int64_t>(k) < top_logprobs; ++k) {
        Json one = AlternativeJson(choice.top_logprobs[i][k]);
        alternatives[one["token"].get<std::string>()] = one["logprob"];
      }
    }
    top.push_back(std::move(alternatives));
  }
  return Json{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

Json ChatCompletionJson(const ResponseMeta& meta, const V1Request& request, const inference::CompletionResult& result) {
  Json choices = Json::array();
  for (size_t i = 0; i < result.choices.size(); ++i) {
    const auto& choice = result.choices[i];
    choices.push_back(
        Json{{"index", i},
             {"message", MessageJson(choice, request.completion.thinking)},
             {"logprobs",
              request.completion.logprobs ? ChatLogprobsJson(choice, request.completion.top_logprobs) : Json(nullptr)},
             {"finish_reason", FinishReason(choice)}});
  }
  return Json{{"id", meta.id},       {"object", "chat.completion"},   {"created", meta.created},
              {"model", meta.model}, {"choices", std::move(choices)}, {"usage", UsageJson(result)}};
}

Json TextCompletionJson(const ResponseMeta& meta, const V1Request& request, const inference::CompletionResult& result) {
  Json choices = Json::array();
  for (size_t i = 0; i < result.choices.size(); ++i) {
    const auto& choice = result.choices[i];
    choices.push_back(
        Json{{"index", i},
             {"text", choice.text},
             {"logprobs",
              request.legacy_logprobs >= 0 ? LegacyLogprobsJson(choice, request.legacy_logprobs) : Json(nullptr)},
             {"finish_reason", choice.finish_reason.empty() ? "stop" : choice.finish_reason}});
  }
  return Json{{"id", meta.id},       {"object", "text_completion"},   {"created", meta.created},
              {"model", meta.model}, {"choices", std::move(choices)}, {"usage", UsageJson(result)}};
}

Json ChunkJson(const ResponseMeta& meta, bool chat, int64_t index, Json delta, Json finish_reason, Json logprobs) {
  Json choice{{"index", index}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish_reason)}};
  if (chat) {
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = delta.is_object() && delta.contains("text") ? delta["text"] : Json("");
  }
  return Json{{"id", meta.id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", meta.created},
              {"model", meta.model},
              {"choices", Json::array({std::move(choice)})}};
}

Json UsageChunkJson(const ResponseMeta& meta, bool chat, const inference::CompletionResult& result) {
  return Json{{"id", meta.id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", meta.created},
              {"model", meta.model},
              {"choices", Json::array()},
              {"usage", UsageJson(result)}};
}

Json ModelJson(const std::string& name, int64_t created) {
  return Json{{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "envforge"}};
}

Json ModelListJson(const std::string& name, int64_t created) {
  return Json{{"object", "list"}, {"data", Json::array({ModelJson(name, created)})}};
}

}  // namespace envforge::server::internal
