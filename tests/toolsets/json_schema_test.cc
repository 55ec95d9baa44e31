// The JSON Schema subset: CheckSchema (what is accepted, what is rejected and where), Validate on
// both sides of every keyword, pointers, the violation cap and the one-line description.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <new>
#include <string>
#include <vector>

#include "base/json.h"
#include "toolsets/json_schema.h"

// Counts allocations on this thread, to check that validating a valid instance allocates nothing.
namespace {
thread_local size_t g_allocations = 0;
}  // namespace

// GCC pairs the malloc inside operator new with the free inside operator delete and warns.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
  ++g_allocations;
  if (void* block = std::malloc(size == 0 ? 1 : size)) return block;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  ++g_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete(void* block, const std::nothrow_t&) noexcept { std::free(block); }
void operator delete[](void* block, const std::nothrow_t&) noexcept { std::free(block); }
void operator delete(void* block) noexcept { std::free(block); }
void operator delete[](void* block) noexcept { std::free(block); }
void operator delete(void* block, std::size_t) noexcept { std::free(block); }
void operator delete[](void* block, std::size_t) noexcept { std::free(block); }
#pragma GCC diagnostic pop

namespace envforge::toolsets {
namespace {

Json J(const char* text) { return Json::parse(text); }

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The CheckSchema error message for `schema` ("" when it is accepted).
std::string SchemaError(const char* schema) {
  Status status = CheckSchema(J(schema));
  if (status.ok()) return "";
  CHECK(status.code() == StatusCode::kInvalidArgument);
  return status.message();
}

// "pointer: message" of each violation, for compact assertions.
std::vector<std::string> Violations(const char* schema, const char* instance, size_t max = 16) {
  Result<CompiledSchema> compiled = CompiledSchema::Compile(J(schema));
  REQUIRE_MESSAGE(compiled.ok(), compiled.status().message());
  std::vector<std::string> out;
  for (const SchemaViolation& violation : compiled->Validate(J(instance), max)) {
    out.push_back(violation.pointer + ": " + violation.message);
  }
  // The one-shot form must agree with the compiled one.
  std::vector<SchemaViolation> direct = Validate(J(schema), J(instance), max);
  CHECK(direct.size() == out.size());
  return out;
}

bool Valid(const char* schema, const char* instance) { return Violations(schema, instance).empty(); }

using Strings = std::vector<std::string>;

TEST_SUITE("toolsets.json_schema") {
  TEST_CASE("CheckSchema accepts the whole supported subset with annotations") {
    const char* schema = R"({
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Trip", "description": "A trip plan.", "default": {}, "examples": [{"days": []}],
    "x-owner": "planning",
    "type": "object",
    "properties": {
      "city": {"type": "string", "minLength": 1, "maxLength": 64, "x-domain": "hotels.city",
               "description": "City name."},
      "nights": {"type": "integer", "minimum": 1, "maximum": 30},
      "budget": {"type": ["number", "null"], "exclusiveMinimum": 0, "exclusiveMaximum": 1e6},
      "class": {"enum": ["economy", "business"], "default": "economy"},
      "version": {"const": 2},
      "days": {"type": "array", "minItems": 1, "maxItems": 14, "uniqueItems": true,
               "items": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"], "additionalProperties": false}},
      "tags": {"type": "object", "additionalProperties": {"type": "string"}},
      "anything": true,
      "nothing": false,
      "flag": {"type": "boolean"}, "empty": {"type": "null"}, "ratio": {"type": "number"}
    },
    "required": ["city", "nights"],
    "additionalProperties": false
  })";
    CHECK(SchemaError(schema) == "");
    CHECK(SchemaError("{}") == "");
    CHECK(SchemaError("true") == "");
    CHECK(SchemaError("false") == "");
    CHECK(SchemaError(R"({"minItems": 2.0, "maxLength": 0})") == "");
    CHECK(SchemaError(R"({"required": []})") == "");
    CHECK(SchemaError(R"({"required": ["a"], "additionalProperties": {"type": "string"}})") == "");
  }

  TEST_CASE("CheckSchema rejects each unsupported keyword with its pointer") {
    // Keywords outside the subset (2019-09/2020-12 vocabularies envforge does not implement, and
    // typos), wherever they sit.
    for (const char* keyword : {"unevaluatedProperties", "unevaluatedItems", "$anchor", "$dynamicRef", "$dynamicAnchor",
                                "$recursiveRef", "$vocabulary", "maxDecimal", "requried", "Pattern"}) {
      CAPTURE(keyword);
      std::string schema =
          std::string(R"({"type":"object","properties":{"city":{"type":"string",")") + keyword + R"(":{}}}})";
      Status status = CheckSchema(Json::parse(schema));
      REQUIRE_FALSE(status.ok());
      CHECK(status.code() == StatusCode::kInvalidArgument);
      CHECK(status.message() == "/properties/city/" + std::string(keyword) + ": unsupported keyword '" + keyword + "'");
    }
    CHECK(SchemaError(R"({"oneOf": [{"unevaluatedItems": false}]})") ==
          "/oneOf/0/unevaluatedItems: unsupported keyword 'unevaluatedItems'");
    CHECK(SchemaError(R"({"items": {"$anchor": "a"}})") == "/items/$anchor: unsupported keyword '$anchor'");
    CHECK(SchemaError(R"({"additionalProperties": {"patern": "x"}})") ==
          "/additionalProperties/patern: unsupported keyword 'patern'");
    CHECK(SchemaError(R"({"properties": {"a/b": {"properties": {"c~d": {"patern": "x"}}}}})") ==
          "/properties/a~1b/properties/c~0d/patern: unsupported keyword 'patern'");
    CHECK(SchemaError(R"({"$defs": {"unused": {"minimun": 1}}})") ==
          "/$defs/unused/minimun: unsupported keyword 'minimun'");
    CHECK(SchemaError(R"({"X-domain": "upper case is not an extension"})") ==
          "/X-domain: unsupported keyword 'X-domain'");
  }

  TEST_CASE("CheckSchema rejects wrong keyword value types with their pointer") {
    CHECK(SchemaError(R"({"required": "city"})") == "/required: must be an array of strings");
    CHECK(SchemaError(R"({"required": ["city", 3]})") == "/required: must be an array of strings");
    CHECK(SchemaError(R"({"minimum": "0"})") == "/minimum: must be a number");
    CHECK(Contains(SchemaError(R"({"exclusiveMinimum": true})"), "/exclusiveMinimum: must be a number"));
    CHECK(SchemaError(R"({"maximum": null})") == "/maximum: must be a number");
    CHECK(SchemaError(R"({"exclusiveMaximum": [5]})") == "/exclusiveMaximum: must be a number");
    CHECK(Contains(SchemaError(R"({"type": "float"})"), "/type: unknown type 'float'"));
    CHECK(Contains(SchemaError(R"({"type": ["string", "date"]})"), "/type: unknown type 'date'"));
    CHECK(Contains(SchemaError(R"({"type": []})"), "/type: must be"));
    CHECK(Contains(SchemaError(R"({"type": 3})"), "/type: must be"));
    CHECK(Contains(SchemaError(R"({"type": ["string", "string"]})"), "/type: type 'string' is listed twice"));
    CHECK(SchemaError(R"({"properties": []})") == "/properties: must be an object of schemas");
    CHECK(Contains(SchemaError(R"({"properties": {"city": "string"}})"),
                   "/properties/city: a schema must be an object or a boolean"));
    CHECK(SchemaError(R"({"items": [{"type": "string"}]})") == "");  // draft-07's tuple form
    CHECK(CheckSchema(J(R"({"items": [{"type": "string"}]})"), SchemaOptions{SchemaDialect::kDraft2020}).message() ==
          "/items: must be a schema (the array form is draft-07's; 2020-12 uses prefixItems)");
    CHECK(SchemaError(R"({"items": 1})") == "/items: must be a schema");
    CHECK(SchemaError(R"({"additionalProperties": "no"})") == "/additionalProperties: must be a boolean or a schema");
    CHECK(SchemaError(R"({"enum": "a"})") == "/enum: must be an array");
    CHECK(SchemaError(R"({"enum": []})").empty());  // a schema nothing satisfies, not a malformed one
    for (const char* keyword : {"minLength", "maxLength", "minItems", "maxItems"}) {
      CAPTURE(keyword);
      for (const char* value : {"-1", "1.5", "\"3\"", "true"}) {
        std::string schema = std::string("{\"") + keyword + "\": " + value + "}";
        CHECK(SchemaError(schema.c_str()) == "/" + std::string(keyword) + ": must be a non-negative integer");
      }
    }
    CHECK(SchemaError(R"({"uniqueItems": 1})") == "/uniqueItems: must be a boolean");
    CHECK(SchemaError(R"({"description": 5})") == "/description: must be a string");
    CHECK(SchemaError(R"({"title": ["t"]})") == "/title: must be a string");
    CHECK(SchemaError(R"({"examples": "x"})") == "/examples: must be an array");
    CHECK(Contains(SchemaError(R"("object")"), "a schema must be an object or a boolean"));
    CHECK(Contains(SchemaError("null"), "a schema must be an object or a boolean"));
  }

  TEST_CASE("CheckSchema rejects a required property that additionalProperties false forbids") {
    std::string error = SchemaError(
        R"({"properties": {"city": {"type": "string"}}, "required": ["cty"], "additionalProperties": false})");
    CHECK(Contains(error, "/required: required property 'cty' is not in properties"));
    CHECK(SchemaError(R"({"properties": {"city": {}}, "required": ["city"], "additionalProperties": false})") == "");
  }

  TEST_CASE("nested schemas are checked recursively with their pointers") {
    CHECK(SchemaError(R"({"properties": {"days": {"items": {"properties": {"n": {"minimum": "1"}}}}}})") ==
          "/properties/days/items/properties/n/minimum: must be a number");
    CHECK(SchemaError(R"({"additionalProperties": {"required": 1}})") ==
          "/additionalProperties/required: must be an array of strings");
    CHECK(SchemaError(R"({"items": {"items": {"type": "int"}}})").starts_with("/items/items/type: unknown type 'int'"));
  }

  TEST_CASE("Compile fails exactly when CheckSchema does and keeps the schema") {
    Result<CompiledSchema> bad = CompiledSchema::Compile(J(R"({"patern": "x"})"));
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message() == "/patern: unsupported keyword 'patern'");
    Json schema = J(R"({"type": "string"})");
    Result<CompiledSchema> good = CompiledSchema::Compile(schema);
    REQUIRE(good.ok());
    CHECK(good->schema() == schema);

    CompiledSchema accept_all;
    CHECK(accept_all.schema() == Json(true));
    CHECK(accept_all.Validate(J(R"({"any": [1, "thing"]})")).empty());

    std::vector<SchemaViolation> invalid = Validate(J(R"({"patern": "x"})"), J("1"));
    REQUIRE(invalid.size() == 1);
    CHECK(invalid[0].pointer == "");
    CHECK(Contains(invalid[0].message, "schema is invalid"));
  }

  TEST_CASE("type: each name, unions, integer vs 3.0 vs 3.5, booleans are never numbers") {
    CHECK(Valid(R"({"type": "integer"})", "3"));
    CHECK(Valid(R"({"type": "integer"})", "-3"));
    CHECK(Valid(R"({"type": "integer"})", "3.0"));
    CHECK(Valid(R"({"type": "integer"})", "18446744073709551615"));
    CHECK(Violations(R"({"type": "integer"})", "3.5") == Strings{": expected integer, got number"});
    CHECK(Violations(R"({"type": "integer"})", R"("3")") == Strings{": expected integer, got string"});
    CHECK(Violations(R"({"type": "integer"})", "true") == Strings{": expected integer, got boolean"});
    CHECK(Valid(R"({"type": "number"})", "3"));
    CHECK(Valid(R"({"type": "number"})", "3.5"));
    CHECK(Violations(R"({"type": "number"})", "false") == Strings{": expected number, got boolean"});
    CHECK(Violations(R"({"type": "boolean"})", "0") == Strings{": expected boolean, got integer"});
    CHECK(Valid(R"({"type": "boolean"})", "false"));
    CHECK(Valid(R"({"type": "string"})", R"("")"));
    CHECK(Violations(R"({"type": "string"})", "null") == Strings{": expected string, got null"});
    CHECK(Valid(R"({"type": "null"})", "null"));
    CHECK(Violations(R"({"type": "null"})", "{}") == Strings{": expected null, got object"});
    CHECK(Valid(R"({"type": "object"})", "{}"));
    CHECK(Violations(R"({"type": "object"})", "[]") == Strings{": expected object, got array"});
    CHECK(Valid(R"({"type": "array"})", "[]"));
    CHECK(Violations(R"({"type": "array"})", "{}") == Strings{": expected array, got object"});
    CHECK(Valid(R"({"type": ["string", "null"]})", "null"));
    CHECK(Valid(R"({"type": ["string", "null"]})", R"("x")"));
    CHECK(Violations(R"({"type": ["string", "null"]})", "1") == Strings{": expected string or null, got integer"});
    CHECK(Valid("{}", "[1, {}]"));
  }

  TEST_CASE("the boolean schemas accept everything and nothing") {
    CHECK(Valid("true", "1"));
    CHECK(Violations("false", "1") == Strings{": no value is allowed here"});
    CHECK(Violations(R"({"properties": {"legacy": false}})", R"({"legacy": 1})") ==
          Strings{"/legacy: no value is allowed here"});
    CHECK(Valid(R"({"properties": {"legacy": false}})", R"({"other": 1})"));
  }

  TEST_CASE("enum and const, with numbers compared by value") {
    const char* colors = R"({"enum": ["a", "b"]})";
    CHECK(Valid(colors, R"("a")"));
    CHECK(Violations(colors, R"("c")") == Strings{R"(: must be one of ["a","b"])"});
    CHECK(Valid(R"({"enum": [1, null, {"k": [2]}]})", "1.0"));
    CHECK(Valid(R"({"enum": [1, null, {"k": [2]}]})", R"({"k": [2]})"));
    CHECK_FALSE(Valid(R"({"enum": [1, null, {"k": [2]}]})", R"({"k": [3]})"));
    CHECK_FALSE(Valid(R"({"enum": [1]})", "true"));
    CHECK_FALSE(Valid(R"({"enum": [0]})", "false"));
    CHECK(Valid(R"({"const": 2})", "2"));
    CHECK(Valid(R"({"const": 2})", "2.0"));
    CHECK(Violations(R"({"const": 2})", "3") == Strings{": must equal 2"});
    CHECK(Violations(R"({"const": "x"})", R"("y")") == Strings{R"(: must equal "x")"});
    CHECK(Violations(R"({"const": false})", "0") == Strings{": must equal false"});
    // Exact: 2^53 + 1 is not the double 2^53 (nlohmann's == says it is, through double).
    CHECK_FALSE(Valid(R"({"const": 9007199254740993})", "9007199254740992.0"));
    CHECK_FALSE(Valid(R"({"enum": [9007199254740992.0]})", "9007199254740993"));
    CHECK(Valid(R"({"const": 9007199254740992})", "9007199254740992.0"));
    CHECK_FALSE(Valid(R"({"const": 18446744073709551615})", "18446744073709551614"));
    CHECK(Valid(R"({"const": 18446744073709551615})", "18446744073709551615"));
    CHECK(Valid(R"({"const": -3})", "-3.0"));
    CHECK(Valid(R"({"const": {"a": [1, {"b": 2.0}]}})", R"({"a": [1.0, {"b": 2}]})"));
    CHECK_FALSE(Valid(R"({"const": {"a": [1, {"b": 2}]}})", R"({"a": [1, {"b": 2, "c": 3}]})"));
    CHECK_FALSE(Valid(R"({"const": [1, 2]})", "[1, 2, 3]"));
    CHECK_FALSE(Valid(R"({"const": [true]})", "[1]"));
  }

  TEST_CASE("the cases every validation path must agree on (schema_agreement_cases.json)") {
    // toolsets_schema_agreement_test (schema_agreement_session_test.cc) runs the same file through
    // the session manager (an agent's call) and the worker (a gold solution's calls) in a session.
    const char* source = std::getenv("ENVFORGE_SOURCE_DIR");
    std::ifstream file(std::string(source != nullptr ? source : ENVFORGE_TEST_SOURCE_DIR) +
                       "/tests/toolsets/schema_agreement_cases.json");
    REQUIRE(file.good());
    std::stringstream text;
    text << file.rdbuf();
    Json cases = Json::parse(text.str())["cases"];
    REQUIRE(cases.size() >= 20);
    for (const Json& c : cases) {
      CAPTURE(c.dump());
      REQUIRE(CheckSchema(c["schema"]).ok());
      CHECK(Validate(c["schema"], c["instance"], 4).empty() == c["valid"].get<bool>());
    }
  }

  TEST_CASE("numeric bounds on both sides, naming the bound") {
    CHECK(Violations(R"({"minimum": 0})", "-1") == Strings{": must be >= 0, got -1"});
    CHECK(Valid(R"({"minimum": 0})", "0"));
    CHECK(Violations(R"({"minimum": 0.5})", "0.25") == Strings{": must be >= 0.5, got 0.25"});
    CHECK(Valid(R"({"maximum": 10})", "10"));
    CHECK(Violations(R"({"maximum": 10})", "10.5") == Strings{": must be <= 10, got 10.5"});
    CHECK(Violations(R"({"exclusiveMaximum": 5})", "5") == Strings{": must be < 5, got 5"});
    CHECK(Valid(R"({"exclusiveMaximum": 5})", "4.99"));
    CHECK(Violations(R"({"exclusiveMinimum": 0})", "0") == Strings{": must be > 0, got 0"});
    CHECK(Valid(R"({"exclusiveMinimum": 0})", "0.001"));
    CHECK(Violations(R"({"minimum": 1, "maximum": 0})", "0.5") ==
          Strings{": must be >= 1, got 0.5", ": must be <= 0, got 0.5"});
    // Exact for integers beyond double precision: 2^53 + 1 is above the bound 2^53.
    CHECK(Violations(R"({"maximum": 9007199254740992})", "9007199254740993") ==
          Strings{": must be <= 9007199254740992, got 9007199254740993"});
    CHECK(Valid(R"({"maximum": 18446744073709551615})", "18446744073709551615"));
    CHECK(Valid(R"({"minimum": -9223372036854775808})", "-9223372036854775808"));
    CHECK(Valid(R"({"minimum": 5})", R"("strings are not numbers")"));
  }

  TEST_CASE("string length counts characters, not bytes") {
    CHECK(Violations(R"({"minLength": 2})", R"("a")") == Strings{": must have at least 2 characters, got 1"});
    CHECK(Valid(R"({"minLength": 2})", R"("ab")"));
    CHECK(Valid(R"({"maxLength": 3})", R"("abc")"));
    CHECK(Violations(R"({"maxLength": 3})", R"("abcd")") == Strings{": must have at most 3 characters, got 4"});
    CHECK(Violations(R"({"maxLength": 1})", R"("ab")") == Strings{": must have at most 1 character, got 2"});
    CHECK(Valid(R"({"maxLength": 4})", "\"Z\u00fcrich\"") == false);
    CHECK(Valid(R"({"maxLength": 6})", "\"Z\u00fcrich\""));  // 6 characters, 7 bytes
    CHECK(Valid(R"({"minLength": 5})", "4"));
  }

  TEST_CASE("item counts, uniqueItems and items") {
    CHECK(Violations(R"({"minItems": 1})", "[]") == Strings{": must have at least 1 item, got 0"});
    CHECK(Valid(R"({"minItems": 1})", "[0]"));
    CHECK(Valid(R"({"maxItems": 2})", "[0, 1]"));
    CHECK(Violations(R"({"maxItems": 2})", "[0, 1, 2]") == Strings{": must have at most 2 items, got 3"});
    CHECK(Valid(R"({"uniqueItems": true})", R"([1, "1", true, [1], {"a": 1}])"));
    CHECK(Violations(R"({"uniqueItems": true})", "[1, 2, 1.0]") ==
          Strings{": must have unique items, but items 0 and 2 are equal"});
    CHECK_FALSE(Valid(R"({"uniqueItems": true})", R"([{"a": [1]}, {"a": [1]}])"));
    CHECK(Valid(R"({"uniqueItems": false})", "[1, 1]"));
    std::string many = "[";
    for (int value = 0; value < 200; ++value) many += std::to_string(value) + ",";
    CHECK(Valid(R"({"uniqueItems": true})", (many + "200]").c_str()));
    std::vector<std::string> duplicate = Violations(R"({"uniqueItems": true})", (many + "17]").c_str());
    CHECK(duplicate == Strings{": must have unique items, but items 17 and 200 are equal"});
    CHECK(Violations(R"({"items": {"type": "integer"}})", R"([1, "2", 3, null])") ==
          Strings{"/1: expected integer, got string", "/3: expected integer, got null"});
  }

  TEST_CASE("objects: properties, required, additionalProperties with pointers") {
    const char* schema = R"({"type": "object",
    "properties": {"city": {"type": "string"}, "nights": {"type": "integer", "minimum": 1}},
    "required": ["city", "nights"], "additionalProperties": false})";
    CHECK(Valid(schema, R"({"city": "Oslo", "nights": 2})"));
    CHECK(Violations(schema, R"({"nights": 2})") == Strings{": missing required property 'city'"});
    CHECK(Violations(schema, R"({"cty": "Oslo", "nights": 0})") ==
          Strings{": missing required property 'city'", ": unexpected property 'cty'", "/nights: must be >= 1, got 0"});
    CHECK(Violations(schema, R"({"city": 7, "nights": 2, "zzz": 1})") ==
          Strings{"/city: expected string, got integer", ": unexpected property 'zzz'"});
    CHECK(Valid(R"({"properties": {"a": {}}})", R"({"b": 1})"));  // additionalProperties defaults to true
    CHECK(Valid(R"({"required": ["a"]})", R"("not an object")"));
    CHECK(Violations(R"({"required": ["z", "a"]})", R"({"m": 1})") ==
          Strings{": missing required property 'z'", ": missing required property 'a'"});
    CHECK(Violations(R"({"properties": {"a": {}}, "additionalProperties": {"type": "string"}})",
                     R"({"a": 1, "b": "x", "c": 2})") == Strings{"/c: expected string, got integer"});
    CHECK(Violations(R"({"properties": {"a/b": {"type": "string"}, "m~n": {"type": "string"}}})",
                     R"({"a/b": 1, "m~n": 2})") ==
          Strings{"/a~1b: expected string, got integer", "/m~0n: expected string, got integer"});
  }

  TEST_CASE("nested violations point into the instance") {
    const char* schema = R"({"type": "object", "properties": {"days": {"type": "array",
    "items": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}})";
    CHECK(Violations(schema, R"({"days": [{"city": "Oslo"}, {"city": 3}, {}]})") ==
          Strings{"/days/1/city: expected string, got integer", "/days/2: missing required property 'city'"});
  }

  TEST_CASE("max_violations caps the violations returned") {
    const char* schema = R"({"items": {"type": "string"}})";
    const char* instance = "[1, 2, 3, 4, 5]";
    CHECK(Violations(schema, instance).size() == 5);
    CHECK(Violations(schema, instance, 2) ==
          Strings{"/0: expected string, got integer", "/1: expected string, got integer"});
    CHECK(Violations(schema, instance, 1).size() == 1);
    CHECK(Violations(schema, instance, 0).empty());
    CHECK(Violations(R"({"minimum": 5, "maximum": 1, "enum": [7]})", "3", 2).size() == 2);
  }

  TEST_CASE("DescribeViolations makes one line for a model") {
    CHECK(DescribeViolations({}) == "");
    CHECK(DescribeViolations({{"", "missing required property 'city'"}}) ==
          "arguments invalid: missing required property 'city'");
    CHECK(DescribeViolations({{"/city", "expected string, got integer"}, {"/days/1/n", "must be >= 0, got -1"}}) ==
          "arguments invalid: /city: expected string, got integer; /days/1/n: must be >= 0, got -1");
  }

  TEST_CASE("validating a valid instance allocates nothing") {
    Result<CompiledSchema> compiled = CompiledSchema::Compile(J(R"({"type": "object",
    "properties": {"city": {"type": "string", "minLength": 1}, "nights": {"type": "integer", "minimum": 1},
                   "days": {"type": "array", "items": {"enum": ["mon", "tue"]}}},
    "required": ["city"], "additionalProperties": false})"));
    REQUIRE(compiled.ok());
    Json instance = J(R"({"city": "Oslo", "nights": 3, "days": ["mon", "tue"]})");
    size_t before = g_allocations;
    std::vector<SchemaViolation> violations = compiled->Validate(instance);
    size_t allocations = g_allocations - before;
    CHECK(violations.empty());
    CHECK(allocations == 0);
    // Applicators probe their branches without building messages: still no allocation.
    Result<CompiledSchema> applicators = CompiledSchema::Compile(J(R"({"$defs": {"n": {"type": "integer"}},
    "type": "object", "properties": {
      "a": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/n"}]},
      "b": {"oneOf": [{"type": "string"}, {"type": "null"}]},
      "c": {"not": {"type": "null"}, "if": {"minimum": 5}, "then": {"multipleOf": 5}, "else": {"maximum": 1}},
      "d": {"type": "array", "contains": {"const": 2}, "prefixItems": [{"type": "integer"}], "uniqueItems": true},
      "e": {"format": "date", "dependentRequired": {"x": ["y"]}, "minProperties": 0}}})"));
    REQUIRE(applicators.ok());
    Json mixed = J(R"({"a": 3, "b": null, "c": 10, "d": [1, 2], "e": "2024-01-31"})");
    before = g_allocations;
    violations = applicators->Validate(mixed);
    allocations = g_allocations - before;
    CHECK(violations.empty());
    CHECK(allocations == 0);
    before = g_allocations;
    violations = compiled->Validate(J(R"({"city": ""})"));
    CHECK(g_allocations > before);  // the counter works: a violation does allocate
    CHECK(violations.size() == 1);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::toolsets
