// The one tool-call protocol: outcome names, the JSON wire forms and the submit_result spec.
#include "toolsets/tool_protocol.h"

#include <utility>

namespace envforge::toolsets {
namespace {

Status FieldError(std::string_view what, std::string_view field, std::string_view problem) {
  std::string message(what);
  message += ": '";
  message += field;
  message += "' ";
  message += problem;
  return InvalidArgumentError(std::move(message));
}

// Reads an optional string member; absent leaves *out untouched.
Status ReadOptionalString(const Json& json, std::string_view what, const char* field, std::string* out) {
  auto it = json.find(field);
  if (it == json.end()) return Status::Ok();
  if (!it->is_string()) return FieldError(what, field, "must be a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

}  // namespace

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk: return "ok";
    case Outcome::kToolError: return "tool_error";
    case Outcome::kInvalidCall: return "invalid_call";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kCrashed: return "crashed";
    case Outcome::kInfraError: return "infra_error";
  }
  return "unknown";
}

Result<Outcome> ParseOutcome(std::string_view name) {
  for (Outcome outcome : {Outcome::kOk, Outcome::kToolError, Outcome::kInvalidCall, Outcome::kTimeout,
                          Outcome::kCrashed, Outcome::kInfraError}) {
    if (OutcomeName(outcome) == name) return outcome;
  }
  return InvalidArgumentError("unknown outcome '" + std::string(name) +
                              "' (expected ok, tool_error, invalid_call, timeout, crashed or infra_error)");
}

ToolResult ToolResult::Error(Outcome outcome, std::string message, std::string call_id) {
  ToolResult result;
  result.call_id = std::move(call_id);
  result.outcome = outcome;
  result.message = std::move(message);
  result.session_alive = outcome != Outcome::kCrashed;
  return result;
}

Json ToJson(const ToolSpec& spec) {
  return Json{{"name", spec.name}, {"description", spec.description}, {"inputSchema", spec.input_schema}};
}

Json ToJson(const ToolCall& call) { return Json{{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}}; }

Json ToJson(const ToolResult& result) {
  Json json{{"id", result.call_id}, {"outcome", OutcomeName(result.outcome)}};
  if (result.ok() || !result.content.is_null()) json["content"] = result.content;
  if (!result.message.empty()) json["message"] = result.message;
  if (!result.limit.empty()) json["limit"] = result.limit;
  if (!result.stdout_text.empty()) json["stdout"] = result.stdout_text;
  if (!result.where.empty()) json["where"] = result.where;
  json["session_alive"] = result.session_alive;
  json["duration_us"] = result.duration_us;
  return json;
}

Result<ToolSpec> ToolSpecFromJson(const Json& json) {
  constexpr std::string_view kWhat = "tool spec";
  if (!json.is_object()) return InvalidArgumentError("tool spec must be a JSON object");
  ToolSpec spec;
  auto name = json.find("name");
  if (name == json.end()) return FieldError(kWhat, "name", "is missing");
  if (!name->is_string()) return FieldError(kWhat, "name", "must be a string");
  spec.name = name->get<std::string>();
  if (!IsValidToolName(spec.name)) {
    return FieldError(kWhat, "name", "must be 1-128 characters of [A-Za-z0-9_.-], got '" + spec.name + "'");
  }
  ENVFORGE_RETURN_IF_ERROR(ReadOptionalString(json, kWhat, "description", &spec.description));
  auto schema = json.find("inputSchema");
  if (schema == json.end()) return FieldError(kWhat, "inputSchema", "is missing");
  if (!schema->is_object()) return FieldError(kWhat, "inputSchema", "must be a JSON object");
  spec.input_schema = *schema;
  return spec;
}

Result<ToolCall> ToolCallFromJson(const Json& json) {
  constexpr std::string_view kWhat = "tool call";
  if (!json.is_object()) return InvalidArgumentError("tool call must be a JSON object");
  ToolCall call;
  auto name = json.find("name");
  if (name == json.end()) return FieldError(kWhat, "name", "is missing");
  if (!name->is_string()) return FieldError(kWhat, "name", "must be a string");
  call.name = name->get<std::string>();
  if (call.name.empty()) return FieldError(kWhat, "name", "must not be empty");
  ENVFORGE_RETURN_IF_ERROR(ReadOptionalString(json, kWhat, "id", &call.id));
  auto arguments = json.find("arguments");
  if (arguments != json.end()) {
    if (!arguments->is_object()) return FieldError(kWhat, "arguments", "must be a JSON object");
    call.arguments = *arguments;
  }
  return call;
}

Result<ToolResult> ToolResultFromJson(const Json& json) {
  constexpr std::string_view kWhat = "tool result";
  if (!json.is_object()) return InvalidArgumentError("tool result must be a JSON object");
  ToolResult result;
  ENVFORGE_RETURN_IF_ERROR(ReadOptionalString(json, kWhat, "id", &result.call_id));
  auto outcome = json.find("outcome");
  if (outcome == json.end()) return FieldError(kWhat, "outcome", "is missing");
  if (!outcome->is_string()) return FieldError(kWhat, "outcome", "must be a string");
  Result<Outcome> parsed = ParseOutcome(outcome->get_ref<const std::string&>());
  if (!parsed.ok()) return parsed.status().WithContext("tool result: 'outcome'");
  result.outcome = *parsed;
  if (auto content = json.find("content"); content != json.end()) result.content = *content;
  ENVFORGE_RETURN_IF_ERROR(ReadOptionalString(json, kWhat, "message", &result.message));
  ENVFORGE_RETURN_IF_ERROR(ReadOptionalString(json, kWhat, "limit", &result.limit));
  ENVFORGE_RETURN_IF_ERROR(ReadOptionalString(json, kWhat, "stdout", &result.stdout_text));
  ENVFORGE_RETURN_IF_ERROR(ReadOptionalString(json, kWhat, "where", &result.where));
  if (auto alive = json.find("session_alive"); alive != json.end()) {
    if (!alive->is_boolean()) return FieldError(kWhat, "session_alive", "must be a boolean");
    result.session_alive = alive->get<bool>();
  }
  if (auto duration = json.find("duration_us"); duration != json.end()) {
    if (!duration->is_number()) return FieldError(kWhat, "duration_us", "must be a number");
    result.duration_us = duration->get<double>();
  }
  return result;
}

bool IsValidToolName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

ToolSpec SubmitResultSpec() {
  ToolSpec spec;
  spec.name = std::string(kSubmitResultTool);
  spec.description =
      "Submit your final answer as text; JSON text is parsed as JSON. Ends the task: the result "
      "carries the verifier's verdict.";
  spec.input_schema = Json{
      {"type", "object"},
      {"properties",
       {{"answer_text",
         {{"type", "string"},
          {"description",
           "Your final answer. If the task asks for structured output, give it as JSON text "
           "(e.g. {\"total\": 42}); otherwise plain text."}}}}},
      {"required", Json::array({"answer_text"})},
      {"additionalProperties", false},
  };
  return spec;
}

}  // namespace envforge::toolsets
