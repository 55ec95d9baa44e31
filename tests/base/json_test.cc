// The nesting bound of base/json.h: at the bound a document parses, one level past it is refused
// with a message naming the bound, and 100,000 levels (what crashed the server) are refused
// without building anything.
#include <doctest/doctest.h>

#include <string>

#include "base/json.h"

namespace envforge {
namespace {

std::string NestedArrays(int depth, std::string_view innermost = "1") {
  return std::string(depth, '[') + std::string(innermost) + std::string(depth, ']');
}

std::string NestedObjects(int depth) {
  std::string text;
  for (int i = 0; i < depth; ++i) text += "{\"k\":";
  text += "null";
  text += std::string(depth, '}');
  return text;
}

TEST_CASE("ParseJson accepts a document at the depth bound and refuses one level past it") {
  auto at_bound = ParseJson(NestedArrays(kMaxJsonDepth));
  REQUIRE(at_bound.ok());
  CHECK(JsonDepthWithin(*at_bound, kMaxJsonDepth));
  CHECK_FALSE(JsonDepthWithin(*at_bound, kMaxJsonDepth - 1));

  auto past = ParseJson(NestedArrays(kMaxJsonDepth + 1), "request");
  REQUIRE_FALSE(past.ok());
  CHECK(past.status().code() == StatusCode::kInvalidArgument);
  CHECK(past.status().message() ==
        "request nests deeper than 128 levels of arrays and objects (byte 128); the limit is 128");

  CHECK(ParseJson(NestedObjects(kMaxJsonDepth)).ok());
  CHECK_FALSE(ParseJson(NestedObjects(kMaxJsonDepth + 1)).ok());
  // Mixed nesting counts both kinds.
  CHECK_FALSE(ParseJson(NestedArrays(kMaxJsonDepth / 2, NestedObjects(kMaxJsonDepth / 2 + 1))).ok());
}

TEST_CASE("ParseJson refuses 100,000 levels of nesting with a message, not a crash") {
  const std::string deep = NestedArrays(100'000);
  CHECK(deep.size() > 200'000);
  auto parsed = ParseJson(deep, "tools/call arguments");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().message().find("tools/call arguments nests deeper than 128 levels") == 0);
  // Unterminated: the depth bound trips before the parser would report the syntax error.
  CHECK_FALSE(ParseJson(std::string(100'000, '{')).ok());
}

TEST_CASE("Brackets inside strings and escaped quotes do not count as nesting") {
  const std::string brackets(1000, '[');
  auto parsed = ParseJson("{\"s\":\"" + brackets + "\",\"t\":\"\\\"[[[\\\\\",\"u\":[1]}");
  REQUIRE(parsed.ok());
  CHECK((*parsed)["s"].get<std::string>().size() == 1000);
  CHECK((*parsed)["t"] == "\"[[[\\");
  CHECK(CheckJsonTextDepth("\"\\\\\"[[", 1, "x").code() == StatusCode::kInvalidArgument);
  CHECK(CheckJsonTextDepth("\"\\\"[[\"", 1, "x").ok());
}

TEST_CASE("A custom bound applies, and depth 0 admits only scalars") {
  CHECK(ParseJson("[[1]]", "x", 2).ok());
  CHECK_FALSE(ParseJson("[[1]]", "x", 1).ok());
  CHECK(ParseJson("42", "x", 0).ok());
  CHECK_FALSE(ParseJson("[]", "x", 0).ok());
  CHECK(JsonDepthWithin(Json(3), 0));
  CHECK_FALSE(JsonDepthWithin(Json::array(), 0));
  CHECK(JsonDepthWithin(Json::array(), 1));
}

TEST_CASE("JsonDepthWithin stops at the bound on a value deeper than any stack would hold") {
  // Built iteratively, as a hostile Python object converted level by level would be; nlohmann
  // destroys values iteratively, so only the check itself could recurse too far.
  Json deep = Json::array();
  for (int i = 0; i < 200'000; ++i) {
    Json wrapper = Json::array();
    wrapper.push_back(std::move(deep));
    deep = std::move(wrapper);
  }
  CHECK_FALSE(JsonDepthWithin(deep, kMaxJsonValueDepth));
}

}  // namespace
}  // namespace envforge
