// The one tool-call protocol of envforge (ARCHITECTURE.md, "The one tool-call protocol").
//
// Specs follow MCP ({name, description, inputSchema}); a call is {id, name, arguments}; every
// result carries a typed Outcome, never just a string. These types are plain values; the JSON
// forms below are the wire forms used by the sandbox, the server and trajectories.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::toolsets {

enum class Outcome : unsigned char {
  kOk,           // the tool ran; content holds its result
  kToolError,    // the tool raised or rejected its arguments; the message is for the model
  kInvalidCall,  // unknown tool or arguments that fail the schema; the tool never ran
  kTimeout,      // the tool ran past its wall-time limit
  kCrashed,      // the session process died; the episode ends with this outcome
  kInfraError,   // the runtime (or a task's verifier) failed: not the agent's fault, never reward 0
};

std::string_view OutcomeName(Outcome outcome);
// Parses "ok", "tool_error", "invalid_call", "timeout", "crashed", "infra_error".
Result<Outcome> ParseOutcome(std::string_view name);

struct ToolSpec {
  std::string name;
  std::string description;
  Json input_schema;  // JSON Schema of the arguments object
};

struct ToolCall {
  std::string id;  // caller-chosen, echoed in the result; may be empty
  std::string name;
  Json arguments = Json::object();
};

struct ToolResult {
  std::string call_id;
  Outcome outcome = Outcome::kOk;
  Json content;         // kOk: the tool's JSON result (for submit_result: the verdict)
  std::string message;  // every other outcome: what went wrong, for the model or the operator
  // Which configured limit produced this result, when one did: "wall_time", "cpu_time",
  // "memory", "output_size", "processes", "disk". Empty otherwise.
  std::string limit;
  // What the tool printed (stdout and stderr, at most min(the session's max_output_bytes, 4 MiB)),
  // with any outcome but infra_error (whose replies carry none); empty when it printed nothing
  // and for calls a kernel answers (what interpreter code printed is in the result's content).
  // For debugging a tool, not part of its result.
  std::string stdout_text;
  // Where a tool_error came from in the environment's code ("tools.py:42 in get_book"), when
  // the session could tell.
  std::string where;
  bool session_alive = true;  // false once the session process is gone (crashed, killed)
  double duration_us = 0;     // measured by the manager, call sent -> result received

  bool ok() const { return outcome == Outcome::kOk; }
  // A result with `outcome` and `message`; session_alive is false for kCrashed, true otherwise.
  static ToolResult Error(Outcome outcome, std::string message, std::string call_id = {});
};

// JSON forms.
//   ToolSpec   -> {"name", "description", "inputSchema"}
//   ToolCall   -> {"id", "name", "arguments"}
//   ToolResult -> {"id", "outcome", "content"?, "message"?, "limit"?, "stdout"?, "where"?,
//                  "session_alive", "duration_us"}
//                 ("content" always for ok, otherwise only when not null; "message" and "limit"
//                 only when not empty)
// The *FromJson functions accept what ToJson writes and return InvalidArgument naming the
// offending field ("tool call: 'arguments' must be a JSON object"). Unknown members are ignored.
Json ToJson(const ToolSpec& spec);
Json ToJson(const ToolCall& call);
Json ToJson(const ToolResult& result);
// Requires a valid tool name (IsValidToolName) and an object inputSchema; description optional.
// Does not run CheckSchema on inputSchema.
Result<ToolSpec> ToolSpecFromJson(const Json& json);
// Accepts {"name", "arguments"?, "id"?}: name a non-empty string, id a string, arguments an object
// when present (null is rejected too).
Result<ToolCall> ToolCallFromJson(const Json& json);
// Requires "outcome" (a name ParseOutcome knows); the other members are optional with the
// ToolResult defaults, each type-checked.
Result<ToolResult> ToolResultFromJson(const Json& json);

// MCP tool names: 1-128 characters of [A-Za-z0-9_.-].
bool IsValidToolName(std::string_view name);

// The runtime tool every environment has: submit_result(answer_text: str). Its ok-result's
// content is the verifier's verdict {"passed", "score", "reasons", "verifier_version"}.
inline constexpr std::string_view kSubmitResultTool = "submit_result";
ToolSpec SubmitResultSpec();

}  // namespace envforge::toolsets
