// The request bodies of POST /v1/chat/completions and POST /v1/completions (server/openai_api.h),
// read into an inference::CompletionRequest.
//
// Chat: model; messages (system | user | assistant | tool; content a string, an array of
// {type: "text", text} parts joined with newlines (other part types are refused), or null for an
// assistant message; assistant tool_calls with function.arguments as JSON text (or an object) and
// reasoning_content; tool messages' tool_call_id); tools (OpenAI function tools or MCP specs);
// tool_choice ("auto" | "none" | "required" | {type: "function", function: {name}}); n;
// temperature; top_p; top_k; max_tokens / max_completion_tokens (default 512); seed; stop (a
// string or an array of up to 16); logprobs + top_logprobs (0..20); stream +
// stream_options.include_usage; thinking ({"thinking": {"type": "enabled" | "disabled"}} or
// chat_template_kwargs {"thinking" | "enable_thinking": bool}).
// Completions: prompt (a string, or an array of one string), the same sampling fields
// (max_tokens default 16, as OpenAI's), echo and suffix refused, logprobs an integer 0..5 (the
// legacy form: that many alternatives per token).
// Unknown fields are ignored. A field of the wrong type or out of range is a 400 naming it
// (param "messages[2].role", "temperature", ...). No seed: a random one (repeat the seed to get
// the same sample).
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "base/json.h"
#include "inference/backend.h"
#include "server/internal/openai_error.h"

namespace envforge::server::internal {

struct V1Request {
  bool chat = true;   // false: /v1/completions
  std::string model;  // as requested ("" when absent)
  inference::CompletionRequest completion;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // /v1/completions' legacy logprobs: alternatives per token (0..5); -1 when not asked.
  int64_t legacy_logprobs = -1;
};

// The largest n and max_tokens a request may ask for.
inline constexpr int64_t kMaxChoices = 128;
inline constexpr int64_t kMaxTokensLimit = 1 << 20;

// Reads a chat completion request body (already parsed JSON, keys in the client's order: the tools
// reach the prompt, or a model server, in that order).
std::variant<V1Request, ApiError> ParseChatRequest(const OrderedJson& body);
// Reads a (raw) completion request body.
std::variant<V1Request, ApiError> ParseCompletionRequest(const Json& body);

}  // namespace envforge::server::internal
