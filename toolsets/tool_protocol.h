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
  // "memory", "output_size", "processes". Empty otherwise.
  std::string limit;
  bool session_alive = true;  // false once the session process is gone (crashed, killed)
  double duration_us = 0;     // measured by the manager, call sent -> result received

  bool ok() const { return outcome == Outcome::kOk; }
  static ToolResult Error(Outcome outcome, std::string message, std::string call_id = {});
};

// JSON forms.
//   ToolSpec   -> {"name", "description", "inputSchema"}
//   ToolCall   -> {"id", "name", "arguments"}
//   ToolResult -> {"id", "outcome", "content"?, "message"?, "limit"?, "session_alive", "duration_us"}
Json ToJson(const ToolSpec& spec);
Json ToJson(const ToolCall& call);
Json ToJson(const ToolResult& result);
Result<ToolSpec> ToolSpecFromJson(const Json& json);
// Accepts {"name", "arguments"?, "id"?}; arguments must be an object when present.
Result<ToolCall> ToolCallFromJson(const Json& json);
Result<ToolResult> ToolResultFromJson(const Json& json);

// MCP tool names: 1-128 characters of [A-Za-z0-9_.-].
bool IsValidToolName(std::string_view name);

// The runtime tool every environment has: submit_result(answer_text: str). Its ok-result's
// content is the verifier's verdict {"passed", "score", "reasons", "verifier_version"}.
inline constexpr std::string_view kSubmitResultTool = "submit_result";
ToolSpec SubmitResultSpec();

}  // namespace envforge::toolsets
