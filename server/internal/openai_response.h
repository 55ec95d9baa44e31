// The response bodies of the /v1 endpoint (server/openai_api.h) in the shape of
// agents-and-rollouts.md section 3: chat.completion, text_completion, their streamed chunks,
// usage, logprobs and the model list.
#pragma once

#include <cstdint>
#include <string>

#include "base/json.h"
#include "inference/backend.h"
#include "server/internal/openai_request.h"

namespace envforge::server::internal {

// What every object of one response shares.
struct ResponseMeta {
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;    // the served model's name
};

// A fresh id: prefix + 24 random hex digits.
std::string NewResponseId(const char* prefix);
int64_t UnixSeconds();

// Gives every tool call without an id one ("call_..."), so that streamed and whole answers name
// the calls the same way and tool messages can answer them.
void AssignToolCallIds(inference::CompletionResult& result);

// "tool_calls" when the message has tool calls, else the backend's reason ("stop" when none).
std::string FinishReason(const inference::Completion& choice);

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
Json UsageJson(const inference::CompletionResult& result);

// The assistant message {role, content, reasoning_content?, tool_calls?}; reasoning_content only
// in thinking mode; content null when empty beside tool calls.
Json MessageJson(const inference::Completion& choice, bool thinking);
// [{index?, id, type: "function", function: {name, arguments: JSON text}}]; with_index for
// streamed deltas.
Json ToolCallsJson(const inference::Completion& choice, bool with_index);
// Chat logprobs {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
Json ChatLogprobsJson(const inference::Completion& choice, int64_t top_logprobs);
// Legacy completion logprobs {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}.
Json LegacyLogprobsJson(const inference::Completion& choice, int64_t top_logprobs);

// The whole (non-streamed) answers.
Json ChatCompletionJson(const ResponseMeta& meta, const V1Request& request, const inference::CompletionResult& result);
Json TextCompletionJson(const ResponseMeta& meta, const V1Request& request, const inference::CompletionResult& result);

// One streamed chunk for choice `index`: chat puts `delta` under choices[].delta, completions put
// delta["text"] under choices[].text. finish_reason and logprobs may be null.
Json ChunkJson(const ResponseMeta& meta, bool chat, int64_t index, Json delta, Json finish_reason = nullptr,
               Json logprobs = nullptr);
// The usage chunk of stream_options.include_usage: empty choices, usage set.
Json UsageChunkJson(const ResponseMeta& meta, bool chat, const inference::CompletionResult& result);

// GET /v1/models and GET /v1/models/{id}.
Json ModelJson(const std::string& name, int64_t created);
Json ModelListJson(const std::string& name, int64_t created);

}  // namespace envforge::server::internal
