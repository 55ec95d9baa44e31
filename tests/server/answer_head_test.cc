// server/internal/answer_head.h: the load generator's reading of an answer keeps every member but
// the skipped ones of "result", exactly as a full parse has them, and refuses what is not one JSON
// object.
#include <doctest/doctest.h>

#include <string>

#include "base/json.h"
#include "server/internal/answer_head.h"

namespace envforge::server::internal {
namespace {

TEST_CASE("a session/create answer without its tools and prompt: the rest as a full parse has it") {
  Json tools = Json::array();
  for (int i = 0; i < 40; ++i) {
    tools.push_back({{"name", "tool_" + std::to_string(i)},
                     {"inputSchema", {{"type", "object"}, {"properties", {{"q", {{"type", "string"}}}}}}}});
  }
  Json answer = {{"jsonrpc", "2.0"},
                 {"id", 41},
                 {"result",
                  {{"session", "s-\u00e9-1"},
                   {"tools", tools},
                   {"prompt", "Find \"Vuzu\"\n"},
                   {"versions", {{"env", "abc"}, {"task", nullptr}}},
                   {"trajectory", nullptr},
                   {"n", -3.5e2},
                   {"alive", true}}}};
  auto head = ParseAnswerHead(DumpJson(answer), {"content", "tools", "prompt"});
  REQUIRE_MESSAGE(head.ok(), head.status().ToString());
  Json expected = answer;
  expected["result"].erase("tools");
  expected["result"].erase("prompt");
  CHECK(*head == expected);

  // Whitespace between tokens, and an escaped key that reads "tools", are skipped too.
  std::string spaced = " {\"id\" : 2 ,\n \"result\" : { \"t\\u006fols\" : [ 1 , {\"x\": [] } ] , \"k\" : \"v\" } }\r\n";
  auto lenient = ParseAnswerHead(spaced, {"tools"});
  REQUIRE_MESSAGE(lenient.ok(), lenient.status().ToString());
  CHECK(*lenient == Json{{"id", 2}, {"result", {{"k", "v"}}}});
}

TEST_CASE("errors and results that are not objects are kept whole") {
  Json error = {{"jsonrpc", "2.0"},
                {"id", nullptr},
                {"error", {{"code", -32003}, {"message", "full"}, {"data", {{"retry_after_ms", 20}}}}}};
  CHECK(ParseAnswerHead(DumpJson(error), {"tools"}).value() == error);
  Json array_result = {{"id", 1}, {"result", Json::array({1, "tools", Json::object()})}};
  CHECK(ParseAnswerHead(DumpJson(array_result), {"tools"}).value() == array_result);
  Json string_result = {{"id", 1}, {"result", "tools"}};
  CHECK(ParseAnswerHead(DumpJson(string_result), {"tools"}).value() == string_result);
}

TEST_CASE("what is not one JSON object is refused with the reason") {
  for (const char* text : {"", "[1, 2]", "\"text\"", "{\"id\": 1", "{\"id\": 1} {}", "{\"id\": 1} x", "{\"id\": 01}",
                           "{\"result\": {\"session\": \"s\", \"tools\": [1, }}", "<html>"}) {
    auto head = ParseAnswerHead(text, {"tools"});
    CHECK_MESSAGE(!head.ok(), text);
    if (!head.ok()) CHECK(head.status().message().find("answer") != std::string::npos);
  }
}

}  // namespace
}  // namespace envforge::server::internal
