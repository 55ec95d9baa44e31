// base/preserialized_json.h: a preserialized node dumps as the value it was made from, wherever it
// sits in a tree, and the bytes of the whole dump are those of the tree holding the value itself.
#include <doctest/doctest.h>

#include <string>

#include "base/json.h"
#include "base/preserialized_json.h"

namespace envforge {
namespace {

const Json kTools = Json::array({
    Json{{"name", "search_hotels"},
         {"description", "Hotels in a city; \"quoted\", unicode \xC3\xA9 and a newline\n"},
         {"inputSchema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}},
    Json{{"name", "book"}, {"inputSchema", {{"type", "object"}, {"required", Json::array({"id"})}}}},
});

TEST_CASE("a tree dumps the same with a value or with its preserialized node in its place") {
  const Json node = PreserializedJson(kTools);
  CHECK(IsPreserializedJson(node));
  CHECK_FALSE(IsPreserializedJson(kTools));

  Json plain = {{"jsonrpc", "2.0"},
                {"id", 12},
                {"result", {{"session", "s-1"}, {"tools", kTools}, {"z", Json::array({1, kTools, "x"})}}}};
  Json spliced = plain;
  spliced["result"]["tools"] = node;
  spliced["result"]["z"][1] = node;
  CHECK(DumpJson(spliced) == DumpJson(plain));
  CHECK(DumpSplicingPreserialized(spliced).value() == DumpJson(plain));
  CHECK(ParseJson(DumpJson(spliced)).value() == plain);

  CHECK(DumpJson(node) == DumpJson(kTools));  // a node at the root
  CHECK(DumpJson(Json::array({node})) == DumpJson(Json::array({kTools})));
  CHECK_FALSE(DumpSplicingPreserialized(plain).has_value());  // no node: the plain dump
}

TEST_CASE("a copy of a node carries its text; keys and bad UTF-8 around it dump as DumpJson writes them") {
  Json copy = PreserializedJson(Json{{"a", 1}});
  Json again = copy;
  CHECK(IsPreserializedJson(again));
  CHECK(DumpJson(again) == R"({"a":1})");

  Json plain = {{"key \"with\" quotes\n", "bad \xFF byte"}, {"tools", kTools}};
  Json spliced = plain;
  spliced["tools"] = PreserializedJson(kTools);
  CHECK(DumpJson(spliced) == DumpJson(plain));
  CHECK(DumpJson(spliced).find("\xEF\xBF\xBD") != std::string::npos);  // replaced, as DumpJson does
}

TEST_CASE("a binary value of another subtype, or of none, is not a preserialized node") {
  Json other = Json::binary({'{', '}'}, 7);
  Json untyped = Json::binary({'{', '}'});
  CHECK_FALSE(IsPreserializedJson(other));
  CHECK_FALSE(IsPreserializedJson(untyped));
  CHECK_FALSE(DumpSplicingPreserialized(Json{{"b", other}}).has_value());
  CHECK(DumpJson(Json{{"b", other}}) == Json{{"b", other}}.dump());  // nlohmann's binary form, unchanged
}

}  // namespace
}  // namespace envforge
