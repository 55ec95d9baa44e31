// Conformance: the official JSON-Schema-Test-Suite (Debian json-schema-test-suite), draft7.
// Every group (one schema + its tests) of every tests/draft7/*.json file is compiled with the
// draft-07 dialect; a group that compiles must pass every one of its tests, and a group whose
// schema uses only keywords toolsets/json_schema.h supports must compile. optional/ is not read:
// its groups test optional behaviour (bignum, ECMA-262 regex corners, format names outside ours,
// content*). refRemote.json's groups need a server on localhost:1234; their remote $refs are
// rejected at compile time, as envforge rejects every remote $ref, so they count as not compiled.
//
// ENVFORGE_JSON_SCHEMA_SUITE overrides the directory; the test is skipped (with a message) when
// it is missing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/json.h"
#include "toolsets/json_schema.h"

namespace envforge::toolsets {
namespace {

namespace fs = std::filesystem;

std::string SuiteDir() {
  const char* override_dir = std::getenv("ENVFORGE_JSON_SCHEMA_SUITE");
  return override_dir != nullptr ? override_dir : "/usr/share/json-schema-test-suite/tests/draft7";
}

// Keywords json_schema.h lists as supported for draft-07 (prefixItems is 2020-12's).
const std::set<std::string, std::less<>> kSupported = {"type",
                                                       "enum",
                                                       "const",
                                                       "allOf",
                                                       "anyOf",
                                                       "oneOf",
                                                       "not",
                                                       "if",
                                                       "then",
                                                       "else",
                                                       "$ref",
                                                       "minimum",
                                                       "maximum",
                                                       "exclusiveMinimum",
                                                       "exclusiveMaximum",
                                                       "multipleOf",
                                                       "minLength",
                                                       "maxLength",
                                                       "pattern",
                                                       "format",
                                                       "items",
                                                       "additionalItems",
                                                       "minItems",
                                                       "maxItems",
                                                       "uniqueItems",
                                                       "contains",
                                                       "minContains",
                                                       "maxContains",
                                                       "properties",
                                                       "required",
                                                       "additionalProperties",
                                                       "patternProperties",
                                                       "propertyNames",
                                                       "minProperties",
                                                       "maxProperties",
                                                       "dependentRequired",
                                                       "dependentSchemas",
                                                       "dependencies",
                                                       "$defs",
                                                       "definitions",
                                                       "title",
                                                       "description",
                                                       "default",
                                                       "examples",
                                                       "$schema",
                                                       "$id",
                                                       "$comment",
                                                       "readOnly",
                                                       "writeOnly",
                                                       "deprecated",
                                                       "contentEncoding",
                                                       "contentMediaType",
                                                       "contentSchema"};

// Why `schema` is outside the supported subset ("" when it is inside): an unknown keyword, a
// $ref that is not a local JSON pointer, or a $ref below a nested $id.
std::string Unsupported(const Json& schema, bool root = true, bool under_id = false);

std::string UnsupportedChildren(const std::string& keyword, const Json& value, bool under_id) {
  static const std::set<std::string, std::less<>> kSchemaMaps = {"properties",  "patternProperties", "$defs",
                                                                 "definitions", "dependentSchemas",  "dependencies"};
  static const std::set<std::string, std::less<>> kSchemaLists = {"allOf", "anyOf", "oneOf", "items"};
  static const std::set<std::string, std::less<>> kSchemas = {
      "items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"};
  std::string why;
  if (kSchemaMaps.contains(keyword) && value.is_object()) {
    for (const auto& [name, child] : value.items()) {
      if (why.empty() && (child.is_object() || child.is_boolean())) why = Unsupported(child, false, under_id);
    }
  } else if (kSchemaLists.contains(keyword) && value.is_array()) {
    for (const Json& child : value) {
      if (why.empty()) why = Unsupported(child, false, under_id);
    }
  } else if (kSchemas.contains(keyword)) {
    why = Unsupported(value, false, under_id);
  }
  return why;
}

std::string Unsupported(const Json& schema, bool root, bool under_id) {
  if (!schema.is_object()) return "";
  if (!root && schema.contains("$id") && schema["$id"].is_string() &&
      !schema["$id"].get<std::string>().starts_with("#")) {
    under_id = true;
  }
  for (const auto& [keyword, value] : schema.items()) {
    if (!kSupported.contains(keyword)) return "unsupported keyword '" + keyword + "'";
    if (keyword == "$ref" && value.is_string()) {
      const std::string& ref = value.get_ref<const std::string&>();
      if (!(ref == "#" || ref.starts_with("#/"))) return "non-local $ref '" + ref + "'";
      if (under_id) return "$ref below a nested $id";
    }
    std::string why = UnsupportedChildren(keyword, value, under_id);
    if (!why.empty()) return why;
  }
  return "";
}

Json ReadJson(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return Json::parse(text.str());
}

TEST_CASE("JSON-Schema-Test-Suite draft7: supported groups compile and pass") {
  const std::string dir = SuiteDir();
  if (!fs::is_directory(dir)) {
    MESSAGE("skipped: " << dir << " is missing (install Debian's json-schema-test-suite)");
    return;
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(!files.empty());
  size_t groups = 0, compiled = 0, tests = 0, passed = 0;
  SchemaOptions draft7{SchemaDialect::kDraft7};
  for (const fs::path& file : files) {
    for (const Json& group : ReadJson(file)) {
      ++groups;
      const std::string name = file.filename().string() + ": " + group["description"].get<std::string>();
      CAPTURE(name);
      Result<CompiledSchema> schema = CompiledSchema::Compile(group["schema"], draft7);
      const std::string unsupported = Unsupported(group["schema"]);
      if (!schema.ok()) {
        CHECK_MESSAGE(!unsupported.empty(),
                      "uses only supported keywords but does not compile: " << schema.status().message());
        std::cout << "  not compiled: " << name << " (" << schema.status().message() << ")\n";
        continue;
      }
      ++compiled;
      for (const Json& test : group["tests"]) {
        CAPTURE(test["description"].get<std::string>());
        ++tests;
        bool valid = schema->Validate(test["data"], 4).empty();
        CHECK(valid == test["valid"].get<bool>());
        passed += valid == test["valid"].get<bool>();
      }
    }
  }
  std::cout << "draft7: " << compiled << " of " << groups << " groups compiled, " << passed << " tests passed"
            << " (of " << tests << " in compiled groups)\n";
  MESSAGE("draft7: " << compiled << " of " << groups << " groups compiled, " << passed << " tests passed");
  CHECK(passed == tests);
}

}  // namespace
}  // namespace envforge::toolsets
