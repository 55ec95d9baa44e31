// The tool-call protocol: outcome names, the JSON forms of specs, calls and results, and the
// submit_result spec.
#include <doctest/doctest.h>

#include <string>

#include "base/json.h"
#include "toolsets/json_schema.h"
#include "toolsets/tool_protocol.h"

namespace envforge::toolsets {
namespace {

constexpr Outcome kAllOutcomes[] = {Outcome::kOk,      Outcome::kToolError, Outcome::kInvalidCall,
                                    Outcome::kTimeout, Outcome::kCrashed,   Outcome::kInfraError};

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Expects `result` to be an InvalidArgument error whose message names `field`.
template <typename T>
void CheckRejected(const Result<T>& result, const std::string& field) {
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(Contains(result.status().message(), "'" + field + "'"), result.status().message());
}

TEST_SUITE("toolsets.protocol") {
  TEST_CASE("every outcome name parses back to its outcome") {
    CHECK(OutcomeName(Outcome::kOk) == "ok");
    CHECK(OutcomeName(Outcome::kToolError) == "tool_error");
    CHECK(OutcomeName(Outcome::kInvalidCall) == "invalid_call");
    CHECK(OutcomeName(Outcome::kTimeout) == "timeout");
    CHECK(OutcomeName(Outcome::kCrashed) == "crashed");
    CHECK(OutcomeName(Outcome::kInfraError) == "infra_error");
    for (Outcome outcome : kAllOutcomes) {
      Result<Outcome> parsed = ParseOutcome(OutcomeName(outcome));
      REQUIRE(parsed.ok());
      CHECK(*parsed == outcome);
    }
    for (const char* bad : {"", "OK", "error", "ok "}) {
      Result<Outcome> parsed = ParseOutcome(bad);
      REQUIRE_FALSE(parsed.ok());
      CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    }
  }

  TEST_CASE("tool names follow MCP: 1-128 characters of [A-Za-z0-9_.-]") {
    CHECK(IsValidToolName("search_hotels"));
    CHECK(IsValidToolName("a.B-c_9"));
    CHECK(IsValidToolName("x"));
    CHECK(IsValidToolName(std::string(128, 'a')));
    CHECK_FALSE(IsValidToolName(std::string(129, 'a')));
    CHECK_FALSE(IsValidToolName(""));
    CHECK_FALSE(IsValidToolName("two words"));
    CHECK_FALSE(IsValidToolName("a/b"));
    CHECK_FALSE(IsValidToolName("caf\xc3\xa9"));
    CHECK_FALSE(IsValidToolName("tab\t"));
  }

  TEST_CASE("a tool spec round-trips through its MCP JSON form") {
    ToolSpec spec{"get_weather", "Weather for a city.",
                  Json::parse(R"({"type":"object","properties":{"city":{"type":"string"}}})")};
    Json json = ToJson(spec);
    CHECK(json == Json::parse(R"({"name":"get_weather","description":"Weather for a city.",
                               "inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}})"));
    Result<ToolSpec> back = ToolSpecFromJson(json);
    REQUIRE(back.ok());
    CHECK(back->name == spec.name);
    CHECK(back->description == spec.description);
    CHECK(back->input_schema == spec.input_schema);

    Result<ToolSpec> no_description = ToolSpecFromJson(Json::parse(R"({"name":"t","inputSchema":{}})"));
    REQUIRE(no_description.ok());
    CHECK(no_description->description.empty());
  }

  TEST_CASE("a malformed tool spec is rejected naming the field") {
    CHECK_FALSE(ToolSpecFromJson(Json::array()).ok());
    CheckRejected(ToolSpecFromJson(Json::parse(R"({"inputSchema":{}})")), "name");
    CheckRejected(ToolSpecFromJson(Json::parse(R"({"name":3,"inputSchema":{}})")), "name");
    CheckRejected(ToolSpecFromJson(Json::parse(R"({"name":"bad name","inputSchema":{}})")), "name");
    CheckRejected(ToolSpecFromJson(Json::parse(R"({"name":"t","description":1,"inputSchema":{}})")), "description");
    CheckRejected(ToolSpecFromJson(Json::parse(R"({"name":"t"})")), "inputSchema");
    CheckRejected(ToolSpecFromJson(Json::parse(R"({"name":"t","inputSchema":"object"})")), "inputSchema");
  }

  TEST_CASE("a tool call round-trips and fills defaults for optional members") {
    ToolCall call{"c-7", "get_weather", Json::parse(R"({"city":"Oslo","days":[1,2]})")};
    Json json = ToJson(call);
    CHECK(json == Json::parse(R"({"id":"c-7","name":"get_weather","arguments":{"city":"Oslo","days":[1,2]}})"));
    Result<ToolCall> back = ToolCallFromJson(json);
    REQUIRE(back.ok());
    CHECK(back->id == "c-7");
    CHECK(back->name == "get_weather");
    CHECK(back->arguments == call.arguments);

    Result<ToolCall> minimal = ToolCallFromJson(Json::parse(R"({"name":"ping"})"));
    REQUIRE(minimal.ok());
    CHECK(minimal->id.empty());
    CHECK(minimal->arguments == Json::object());

    Result<ToolCall> extra = ToolCallFromJson(Json::parse(R"({"name":"ping","_meta":{"x":1}})"));
    CHECK(extra.ok());
  }

  TEST_CASE("every malformed tool call shape is rejected naming the field") {
    SUBCASE("not an object") {
      for (const char* text : {"[]", "\"ping\"", "null", "3"}) {
        Result<ToolCall> call = ToolCallFromJson(Json::parse(text));
        REQUIRE_FALSE(call.ok());
        CHECK(call.status().code() == StatusCode::kInvalidArgument);
      }
    }
    SUBCASE("name missing, not a string or empty") {
      CheckRejected(ToolCallFromJson(Json::parse(R"({"arguments":{}})")), "name");
      CheckRejected(ToolCallFromJson(Json::parse(R"({"name":5})")), "name");
      CheckRejected(ToolCallFromJson(Json::parse(R"({"name":null})")), "name");
      CheckRejected(ToolCallFromJson(Json::parse(R"({"name":["ping"]})")), "name");
      CheckRejected(ToolCallFromJson(Json::parse(R"({"name":""})")), "name");
    }
    SUBCASE("arguments not an object") {
      for (const char* arguments : {"[1]", "\"city=Oslo\"", "null", "1", "true"}) {
        CheckRejected(ToolCallFromJson(Json::parse(std::string(R"({"name":"t","arguments":)") + arguments + "}")),
                      "arguments");
      }
    }
    SUBCASE("id not a string") {
      CheckRejected(ToolCallFromJson(Json::parse(R"({"name":"t","id":7})")), "id");
      CheckRejected(ToolCallFromJson(Json::parse(R"({"name":"t","id":null})")), "id");
    }
  }

  TEST_CASE("an ok tool result round-trips with its content") {
    ToolResult result;
    result.call_id = "c-1";
    result.content = Json::parse(R"({"passed":true,"score":1.0,"reasons":[],"verifier_version":"v1"})");
    result.duration_us = 812.5;
    Json json = ToJson(result);
    CHECK(json == Json::parse(R"({"id":"c-1","outcome":"ok","content":{"passed":true,"score":1.0,"reasons":[],
                               "verifier_version":"v1"},"session_alive":true,"duration_us":812.5})"));
    Result<ToolResult> back = ToolResultFromJson(json);
    REQUIRE(back.ok());
    CHECK(back->call_id == "c-1");
    CHECK(back->outcome == Outcome::kOk);
    CHECK(back->content == result.content);
    CHECK(back->message.empty());
    CHECK(back->limit.empty());
    CHECK(back->session_alive);
    CHECK(back->duration_us == 812.5);

    ToolResult empty_ok;  // an ok result always carries "content", even null
    CHECK(ToJson(empty_ok).contains("content"));
  }

  TEST_CASE("a tool's printed output and error location travel with the result, and only when present") {
    ToolResult result = ToolResult::Error(Outcome::kToolError, "ValueError: unknown hotel 'X'", "c-2");
    result.stdout_text = "looking up X\n";
    result.where = "tools.py:42 in get_city_by_hotel";
    Json json = ToJson(result);
    CHECK(json["stdout"] == "looking up X\n");
    CHECK(json["where"] == "tools.py:42 in get_city_by_hotel");
    Result<ToolResult> back = ToolResultFromJson(json);
    REQUIRE(back.ok());
    CHECK(back->stdout_text == result.stdout_text);
    CHECK(back->where == result.where);
    CHECK_FALSE(ToJson(ToolResult{}).contains("stdout"));
    CHECK_FALSE(ToJson(ToolResult{}).contains("where"));
    json["stdout"] = 7;
    CHECK_FALSE(ToolResultFromJson(json).ok());
  }

  TEST_CASE("every outcome's error result round-trips") {
    for (Outcome outcome : kAllOutcomes) {
      CAPTURE(OutcomeName(outcome));
      ToolResult result = ToolResult::Error(outcome, "went wrong", "c-9");
      result.limit = outcome == Outcome::kTimeout ? "wall_time" : "";
      result.duration_us = 42;
      Json json = ToJson(result);
      CHECK(json["outcome"] == OutcomeName(outcome));
      CHECK(json["message"] == "went wrong");
      CHECK(json.contains("limit") == (outcome == Outcome::kTimeout));
      CHECK(json.contains("content") == (outcome == Outcome::kOk));
      Result<ToolResult> back = ToolResultFromJson(json);
      REQUIRE(back.ok());
      CHECK(back->call_id == "c-9");
      CHECK(back->outcome == outcome);
      CHECK(back->message == "went wrong");
      CHECK(back->limit == result.limit);
      CHECK(back->session_alive == result.session_alive);
      CHECK(back->duration_us == 42);
      CHECK(back->content.is_null());
    }
  }

  TEST_CASE("ToolResult::Error marks the session dead only for a crash") {
    CHECK_FALSE(ToolResult::Error(Outcome::kCrashed, "segfault").session_alive);
    CHECK(ToolResult::Error(Outcome::kTimeout, "slow").session_alive);
    CHECK(ToolResult::Error(Outcome::kToolError, "bad city").session_alive);
    ToolResult error = ToolResult::Error(Outcome::kInvalidCall, "unknown tool 'x'");
    CHECK_FALSE(error.ok());
    CHECK(error.call_id.empty());
    CHECK(error.message == "unknown tool 'x'");

    ToolResult crashed = ToolResult::Error(Outcome::kCrashed, "killed", "c");
    Result<ToolResult> back = ToolResultFromJson(ToJson(crashed));
    REQUIRE(back.ok());
    CHECK_FALSE(back->session_alive);
  }

  TEST_CASE("a malformed tool result is rejected naming the field") {
    CHECK_FALSE(ToolResultFromJson(Json::parse("[]")).ok());
    CheckRejected(ToolResultFromJson(Json::parse(R"({"id":"c"})")), "outcome");
    CheckRejected(ToolResultFromJson(Json::parse(R"({"outcome":1})")), "outcome");
    CheckRejected(ToolResultFromJson(Json::parse(R"({"outcome":"exploded"})")), "outcome");
    CheckRejected(ToolResultFromJson(Json::parse(R"({"outcome":"ok","id":1})")), "id");
    CheckRejected(ToolResultFromJson(Json::parse(R"({"outcome":"ok","message":{}})")), "message");
    CheckRejected(ToolResultFromJson(Json::parse(R"({"outcome":"timeout","limit":5})")), "limit");
    CheckRejected(ToolResultFromJson(Json::parse(R"({"outcome":"ok","session_alive":"yes"})")), "session_alive");
    CheckRejected(ToolResultFromJson(Json::parse(R"({"outcome":"ok","duration_us":"3ms"})")), "duration_us");
    CheckRejected(ToolResultFromJson(Json::parse(R"({"outcome":"ok","duration_us":true})")), "duration_us");
  }

  TEST_CASE("submit_result takes exactly one string answer_text") {
    ToolSpec spec = SubmitResultSpec();
    CHECK(spec.name == kSubmitResultTool);
    CHECK(IsValidToolName(spec.name));
    CHECK(Contains(spec.description, "Submit your final answer as text"));
    CHECK(Contains(spec.description, "verdict"));
    REQUIRE(CheckSchema(spec.input_schema).ok());
    CHECK(spec.input_schema["required"] == Json::array({"answer_text"}));
    CHECK(spec.input_schema["properties"]["answer_text"]["type"] == "string");
    CHECK(spec.input_schema["properties"]["answer_text"]["description"].is_string());
    CHECK(spec.input_schema["additionalProperties"] == false);

    CHECK(Validate(spec.input_schema, Json::parse(R"({"answer_text":"{\"total\": 3}"})")).empty());
    CHECK_FALSE(Validate(spec.input_schema, Json::object()).empty());
    CHECK_FALSE(Validate(spec.input_schema, Json::parse(R"({"answer_text":3})")).empty());
    CHECK_FALSE(Validate(spec.input_schema, Json::parse(R"({"answer_text":"x","answer":"y"})")).empty());

    Result<ToolSpec> back = ToolSpecFromJson(ToJson(spec));
    REQUIRE(back.ok());
    CHECK(back->input_schema == spec.input_schema);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::toolsets
