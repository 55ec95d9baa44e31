// The DeepSeek-V3.2 chat encoding ("DSV32", dsa-engine.md 6): messages -> prompt text, and the
// parser of generated completions (reasoning, content, DSML tool calls).
//
// EncodeChat renders system / user / assistant / tool messages exactly as the reference encoder
// (encoding_dsv32.py's encode_messages) does, byte for byte: BOS, "<｜User｜>...<｜Assistant｜>"
// followed by "<think>" or "</think>", assistant reasoning + content + DSML tool-call block +
// EOS, tool results in "<function_results>" blocks, the tools block appended to the system
// message, and the thinking-retention rule (with drop_thinking, reasoning is removed from
// assistant messages before the last user message). The "developer" role is rejected
// (InvalidArgument), as in the public API; so are unknown roles, tool messages without a preceding
// assistant tool call, and tool-call arguments that are not a JSON object.
//
// ParseCompletion reads generated text (after the prompt) in the same mode: reasoning up to
// "</think>" (thinking mode), content up to EOS or the DSML block, then the invokes. A completion
// that stops before EOS (max tokens) parses as far as it is well-formed and reports truncated.
// Malformed DSML is InvalidArgument naming the position and what was expected.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::inference {

inline constexpr std::string_view kBosToken = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEosToken = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUserToken = "<｜User｜>";
inline constexpr std::string_view kAssistantToken = "<｜Assistant｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsmlMarker = "｜DSML｜";
// The DSML tool-call block's tags (the parser's and the tool-call grammar's).
inline constexpr std::string_view kFunctionCallsOpen = "<｜DSML｜function_calls>";
inline constexpr std::string_view kFunctionCallsClose = "</｜DSML｜function_calls>";
inline constexpr std::string_view kInvokeOpen = "<｜DSML｜invoke name=\"";
inline constexpr std::string_view kInvokeClose = "</｜DSML｜invoke>";
inline constexpr std::string_view kParameterOpen = "<｜DSML｜parameter name=\"";
inline constexpr std::string_view kParameterClose = "</｜DSML｜parameter>";

struct ChatToolCall {
  std::string id;  // OpenAI's tool-call id (tool messages answer it); not rendered by DSV32
  std::string name;
  // A JSON object, or a string holding a JSON object's text (OpenAI style), which EncodeChat reads
  // keeping its key order (Json objects render in their own, sorted, key order).
  Json arguments = Json::object();
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::string reasoning_content;         // assistant only
  std::vector<ChatToolCall> tool_calls;  // assistant only
  std::string tool_call_id;              // tool only: the call it answers (OpenAI); not rendered
};

struct ChatEncodeOptions {
  bool thinking = false;
  bool drop_thinking = true;
  bool add_bos = true;
  // MCP-style tool specs ({name, description, inputSchema} or OpenAI {type:function, function:
  // {name, description, parameters}}); rendered into the system message's tools block (a system
  // message is created when there is none). An entry may also be a string of JSON text, rendered
  // in its own key order (the reference prints schemas in insertion order). OrderedJson keeps the
  // order the caller gave (a Json converts, in its sorted order).
  OrderedJson tools = OrderedJson::array();
  OrderedJson response_format;  // null: none; a string is JSON text, as for tools
};

Result<std::string> EncodeChat(const std::vector<ChatMessage>& messages, const ChatEncodeOptions& options);

struct ParsedCompletion {
  ChatMessage message;     // role "assistant"
  bool finished = false;   // ended with EOS
  bool truncated = false;  // ran out before EOS (partial content kept)
};
Result<ParsedCompletion> ParseCompletion(std::string_view text, bool thinking);

// Renders one DSML function_calls block (the part of an assistant message), for tests and agents.
std::string RenderToolCalls(const std::vector<ChatToolCall>& calls);

}  // namespace envforge::inference
