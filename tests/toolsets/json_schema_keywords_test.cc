// The JSON Schema keywords beyond the original subset (issue 19): applicators (anyOf, oneOf,
// allOf, not, if/then/else), $ref with $defs/definitions and its failure messages (remote,
// anchor, dangling, cycles, nested $id, the recursion bound), pattern/patternProperties,
// propertyNames, multipleOf, property counts, dependencies, prefixItems/tuple items, contains,
// format, annotations, the draft-07 vs 2020-12 differences, and real Pydantic / MCP schemas.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "base/json.h"
#include "toolsets/json_schema.h"

namespace envforge::toolsets {
namespace {

Json J(const char* text) { return Json::parse(text); }

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string SchemaError(const char* schema, SchemaOptions options = {}) {
  Status status = CheckSchema(J(schema), options);
  if (status.ok()) return "";
  CHECK(status.code() == StatusCode::kInvalidArgument);
  return status.message();
}

using Strings = std::vector<std::string>;

Strings Violations(const char* schema, const Json& instance, SchemaOptions options = {}) {
  Result<CompiledSchema> compiled = CompiledSchema::Compile(J(schema), options);
  REQUIRE_MESSAGE(compiled.ok(), compiled.status().message());
  Strings out;
  for (const SchemaViolation& violation : compiled->Validate(instance)) {
    out.push_back(violation.pointer + ": " + violation.message);
  }
  return out;
}

Strings Violations(const char* schema, const char* instance, SchemaOptions options = {}) {
  return Violations(schema, J(instance), options);
}

bool Valid(const char* schema, const char* instance, SchemaOptions options = {}) {
  return Violations(schema, instance, options).empty();
}

TEST_SUITE("toolsets.json_schema.keywords") {
  TEST_CASE("anyOf: Pydantic's optional field, with why each branch failed") {
    const char* optional = R"({"anyOf": [{"type": "string"}, {"type": "null"}], "default": null})";
    CHECK(Valid(optional, R"("x")"));
    CHECK(Valid(optional, "null"));
    CHECK(Violations(optional, "3") ==
          Strings{": must match at least one schema in anyOf: (0) expected string, got integer; (1) expected null, "
                  "got integer"});
    CHECK(SchemaError(R"({"anyOf": []})") == "/anyOf: must be a non-empty array of schemas");
    CHECK(SchemaError(R"({"anyOf": {"type": "string"}})") == "/anyOf: must be a non-empty array of schemas");
    CHECK(Contains(SchemaError(R"({"anyOf": [{"type": "strin"}]})"), "/anyOf/0/type: unknown type 'strin'"));
  }

  TEST_CASE("oneOf: exactly one branch") {
    const char* schema = R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})";
    CHECK(Valid(schema, "1"));
    CHECK(Valid(schema, "2.5"));
    CHECK(Violations(schema, "3") == Strings{": must match exactly one schema in oneOf, but matches schemas 0 and 1"});
    CHECK(Violations(schema, "1.5") ==
          Strings{": must match exactly one schema in oneOf, matched none: (0) expected integer, got number; (1) must "
                  "be >= 2, got 1.5"});
  }

  TEST_CASE("allOf reports each branch's violations; not") {
    const char* schema = R"({"allOf": [{"type": "string"}, {"minLength": 3}, {"maxLength": 1}]})";
    CHECK(Violations(schema, R"("ab")") ==
          Strings{": must have at least 3 characters, got 2", ": must have at most 1 character, got 2"});
    CHECK(Violations(R"({"not": {"type": "null"}})", "null") == Strings{": must not match the schema in 'not'"});
    CHECK(Valid(R"({"not": {"type": "null"}})", "0"));
    CHECK(Violations(R"({"not": true})", "0") == Strings{": must not match the schema in 'not'"});
  }

  TEST_CASE("if/then/else") {
    const char* schema = R"({"if": {"properties": {"country": {"const": "US"}}},
    "then": {"properties": {"zip": {"pattern": "^[0-9]{5}$"}}},
    "else": {"properties": {"zip": {"type": "string"}}}})";
    CHECK(Valid(schema, R"({"country": "US", "zip": "12345"})"));
    CHECK(Violations(schema, R"({"country": "US", "zip": "1234"})") ==
          Strings{"/zip: must match the pattern '^[0-9]{5}$'"});
    CHECK(Valid(schema, R"({"country": "NO", "zip": "1234"})"));
    CHECK(Violations(schema, R"({"country": "NO", "zip": 1234})") == Strings{"/zip: expected string, got integer"});
    CHECK(Valid(R"({"then": false})", "1"));  // then/else without if do nothing
    CHECK(Valid(R"({"if": false, "then": false})", "1"));
  }

  TEST_CASE("$ref to $defs and definitions: Pydantic's nested models, recursion through the instance") {
    const char* pydantic = R"({
    "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                          "title": "Address"}},
    "properties": {"home": {"$ref": "#/$defs/Address"},
                   "work": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": null}},
    "required": ["home"], "title": "Person", "type": "object"})";
    CHECK(Valid(pydantic, R"({"home": {"city": "Oslo"}, "work": null})"));
    CHECK(Violations(pydantic, R"({"home": {"city": 1}})") == Strings{"/home/city: expected string, got integer"});
    CHECK(Violations(pydantic, R"({"home": {}})") == Strings{"/home: missing required property 'city'"});
    const char* tree = R"({"definitions": {"node": {"type": "object", "properties": {
      "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}},
    "$ref": "#/definitions/node"})";
    CHECK(Valid(tree, R"({"value": 1, "children": [{"value": 2, "children": []}, {"value": 3}]})"));
    CHECK(Violations(tree, R"({"children": [{"children": [{"value": "x"}]}]})") ==
          Strings{"/children/0/children/0/value: expected integer, got string"});
    CHECK(Valid(R"({"properties": {"next": {"$ref": "#"}}, "additionalProperties": false})",
                R"({"next": {"next": {}}})"));
    CHECK_FALSE(
        Valid(R"({"properties": {"next": {"$ref": "#"}}, "additionalProperties": false})", R"({"next": {"x": 1}})"));
    // Escaped and percent-encoded pointers.
    CHECK(Valid(R"({"$defs": {"a/b": {"type": "integer"}, "c%d": {"type": "integer"}},
                  "properties": {"x": {"$ref": "#/$defs/a~1b"}, "y": {"$ref": "#/$defs/c%25d"}}})",
                R"({"x": 1, "y": 2})"));
    CHECK_FALSE(Valid(R"({"$defs": {"a/b": {"type": "integer"}}, "properties": {"x": {"$ref": "#/$defs/a~1b"}}})",
                      R"({"x": "1"})"));
    // A reference to the document's own $id is local.
    CHECK(Valid(R"({"$id": "https://example.com/s.json", "$defs": {"n": {"type": "integer"}},
                  "items": {"$ref": "https://example.com/s.json#/$defs/n"}})",
                "[1, 2]"));
  }

  TEST_CASE("$ref failures name the reference and its pointer") {
    CHECK(SchemaError(R"({"properties": {"a": {"$ref": "http://example.com/s.json#/x"}}})") ==
          "/properties/a/$ref: 'http://example.com/s.json#/x' is a remote reference; only local references (\"#/...\") "
          "are supported");
    CHECK(Contains(SchemaError(R"({"$ref": "other.json#/x"})"), "/$ref: 'other.json#/x' is a remote reference"));
    CHECK(Contains(SchemaError(R"({"$ref": "#node"})"), "/$ref: '#node' names an anchor"));
    CHECK(SchemaError(R"({"$ref": "#/$defs/missing"})") == "/$ref: '#/$defs/missing' points at nothing in this schema");
    CHECK(SchemaError(R"({"$ref": 3})") == "/$ref: must be a string (a URI reference)");
    CHECK(SchemaError(R"({"$defs": {"a": {}}, "$ref": "#/$defs/a%2"})") ==
          "/$ref: '#/$defs/a%2' has a malformed percent-escape");
    CHECK(Contains(SchemaError(R"({"$defs": {"a": {"$id": "https://x/a.json", "$ref": "#/$defs/b"}, "b": {}}})"),
                   "/$defs/a/$ref: a $ref below a nested \"$id\""));
    CHECK(SchemaError(R"({"$defs": {"a": {"$id": "#a", "type": "string"}}})") == "");  // a plain-name $id is fine
  }

  TEST_CASE("recursion is bounded: in-place cycles are rejected, deep instances stop at the limit") {
    CHECK(SchemaError(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}})") ==
          "/$defs/a: circular schema: #/$defs/a -> #/$defs/b -> #/$defs/a applies to the same value forever without "
          "descending into it");
    CHECK(Contains(SchemaError(R"({"allOf": [{"$ref": "#"}]})"), "circular schema: # -> #/allOf/0 -> #"));
    CHECK(Contains(SchemaError(R"({"anyOf": [{"not": {"$ref": "#"}}]})"), "circular schema"));
    CHECK(Contains(SchemaError(R"({"$ref": "#"})"), "circular schema"));
    CHECK(SchemaError(R"({"items": {"$ref": "#"}})") == "");  // descends into the items: fine
    Json deep = Json::array();
    for (int level = 0; level < 600; ++level) deep = Json::array({deep});
    Strings violations = Violations(R"({"items": {"$ref": "#"}})", deep);
    REQUIRE(violations.size() == 1);
    CHECK(Contains(violations[0], "schema recursion limit (512 levels) exceeded"));
    Json shallow = Json::array();
    for (int level = 0; level < 100; ++level) shallow = Json::array({shallow});
    CHECK(Violations(R"({"items": {"$ref": "#"}})", shallow).empty());
  }

  TEST_CASE("draft-07 ignores $ref's siblings; 2020-12 and the default apply them") {
    const char* schema =
        R"({"$defs": {"a": {"type": "array"}}, "properties": {"x": {"$ref": "#/$defs/a", "maxItems": 1}}})";
    CHECK(Violations(schema, R"({"x": [1, 2]})") == Strings{"/x: must have at most 1 item, got 2"});
    CHECK(Valid(schema, R"({"x": [1, 2]})", SchemaOptions{SchemaDialect::kDraft7}));
    const char* declared =
        R"({"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {"type": "array"}},
    "properties": {"x": {"$ref": "#/definitions/a", "maxItems": 1}}})";
    CHECK(Valid(declared, R"({"x": [1, 2]})"));
    CHECK(SchemaError(R"({"$schema": "http://json-schema.org/draft-07/schema#", "prefixItems": []})") ==
          "/prefixItems: unsupported keyword 'prefixItems'");
    CHECK(SchemaError(R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "additionalItems": false})") ==
          "/additionalItems: unsupported keyword 'additionalItems'");
  }

  TEST_CASE("pattern: unanchored Perl-style regexes; a bad pattern is named with its pointer") {
    const char* schema = R"({"properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"}}})";
    CHECK(Valid(schema, R"({"code": "ABC-12"})"));
    CHECK(Violations(schema, R"({"code": "abc-12"})") == Strings{"/code: must match the pattern '^[A-Z]{3}-\\d+$'"});
    CHECK(Valid(R"({"pattern": "b"})", R"("abc")"));  // unanchored
    CHECK(Valid(R"({"pattern": "b"})", "12"));        // only strings
    CHECK(Valid(R"({"pattern": "^(?<year>\\d{4})-(?:0[1-9]|1[0-2])$"})", R"("2024-05")"));
    CHECK(Valid(R"({"pattern": "^\\p{L}+$"})", "\"Z\u00fcrich\""));
    CHECK(Valid(R"({"pattern": "^a.*?b$"})", R"("axxb")"));
    // ECMA-262's \uHHHH escape (Perl_NG alone would read "u0041").
    CHECK(Valid(R"({"pattern": "^\\u0041+$"})", R"("AA")"));
    CHECK(Valid(R"({"pattern": "^[\\u0000-\\u007F]*$"})", R"("ascii only")"));
    CHECK_FALSE(Valid(R"({"pattern": "^[\\u0000-\\u007F]*$"})", "\"Z\u00fcrich\""));
    CHECK(Valid(R"({"pattern": "^\\\\u0041$"})", R"("\\u0041")"));  // an escaped backslash stays one
    CHECK(Valid(R"({"pattern": "^a$"})", R"("a")"));
    CHECK_FALSE(Valid(R"({"pattern": "^a$"})", R"("b\na")"));  // ^ and $ are not per line
    std::string error = SchemaError(R"({"properties": {"code": {"pattern": "([A-Z]"}}})");
    CHECK(error.starts_with("/properties/code/pattern: regex '([A-Z]': "));
    CHECK(SchemaError(R"({"pattern": 5})") == "/pattern: must be a string (a regular expression)");
    // A catastrophic pattern fails validation (the retry limit), it does not hang.
    std::string subject = "\"" + std::string(40, 'a') + "!\"";
    Strings slow = Violations(R"({"pattern": "^(a+)+$"})", subject.c_str());
    REQUIRE(slow.size() == 1);
    CHECK((Contains(slow[0], "could not be checked") || Contains(slow[0], "must match the pattern")));
  }

  TEST_CASE("patternProperties with properties and additionalProperties") {
    const char* schema = R"({"properties": {"id": {"type": "integer"}},
    "patternProperties": {"^x-": {"type": "string"}, "^x-n": {"maxLength": 2}},
    "additionalProperties": false})";
    CHECK(Valid(schema, R"({"id": 1, "x-a": "s", "x-n": "ab"})"));
    CHECK(Violations(schema, R"({"id": 1, "x-a": 1, "x-nn": "abc", "y": 0})") ==
          Strings{"/x-a: expected string, got integer", "/x-nn: must have at most 2 characters, got 3",
                  ": unexpected property 'y'"});
    CHECK(Violations(R"({"properties": {"xa": {"type": "string"}}, "patternProperties": {"a$": {"minLength": 2}}})",
                     R"({"xa": "s"})") == Strings{"/xa: must have at least 2 characters, got 1"});
    CHECK(SchemaError(R"({"patternProperties": {"(": {}}})").starts_with("/patternProperties/(: regex '(': "));
    // A required name that a pattern admits is satisfiable even with additionalProperties false.
    CHECK(SchemaError(R"({"patternProperties": {"^a": {}}, "required": ["ab"], "additionalProperties": false})") == "");
  }

  TEST_CASE("propertyNames, minProperties, maxProperties") {
    const char* names = R"({"propertyNames": {"maxLength": 3, "pattern": "^[a-z]+$"}})";
    CHECK(Valid(names, R"({"abc": 1, "x": 2})"));
    CHECK(Violations(names, R"({"abcd": 1})") ==
          Strings{": property name 'abcd': must have at most 3 characters, got 4"});
    CHECK(Violations(R"({"propertyNames": false})", R"({"a": 1})") ==
          Strings{": property name 'a': no value is allowed here"});
    CHECK(Valid(R"({"propertyNames": false})", "{}"));
    CHECK(Violations(R"({"minProperties": 2})", R"({"a": 1})") == Strings{": must have at least 2 properties, got 1"});
    CHECK(Violations(R"({"maxProperties": 1})", R"({"a": 1, "b": 2})") ==
          Strings{": must have at most 1 property, got 2"});
    CHECK(Valid(R"({"maxProperties": 0})", "[1]"));
    CHECK(SchemaError(R"({"minProperties": -1})") == "/minProperties: must be a non-negative integer");
  }

  TEST_CASE("multipleOf: exact for integers, tolerant for decimals") {
    CHECK(Valid(R"({"multipleOf": 3})", "9"));
    CHECK(Violations(R"({"multipleOf": 3})", "10") == Strings{": must be a multiple of 3, got 10"});
    CHECK(Valid(R"({"multipleOf": 0.01})", "19.99"));
    CHECK(Valid(R"({"multipleOf": 0.1})", "0.3"));
    CHECK_FALSE(Valid(R"({"multipleOf": 0.01})", "19.999"));
    CHECK(Valid(R"({"multipleOf": 2})", "9007199254740994"));
    CHECK_FALSE(Valid(R"({"multipleOf": 2})", "9007199254740993"));
    CHECK_FALSE(Valid(R"({"multipleOf": 0.123456789})", "1e308"));  // the quotient overflows
    CHECK(SchemaError(R"({"multipleOf": 0})") == "/multipleOf: must be a number greater than 0");
    CHECK(SchemaError(R"({"multipleOf": "2"})") == "/multipleOf: must be a number greater than 0");
  }

  TEST_CASE("dependentRequired, dependentSchemas and draft-07 dependencies") {
    CHECK(Violations(R"({"dependentRequired": {"card": ["cvv", "expiry"]}})", R"({"card": "x", "cvv": 1})") ==
          Strings{": property 'card' requires property 'expiry'"});
    CHECK(Valid(R"({"dependentRequired": {"card": ["cvv"]}})", R"({"cvv": 1})"));
    CHECK(Violations(R"({"dependentSchemas": {"card": {"required": ["cvv"]}}})", R"({"card": 1})") ==
          Strings{": missing required property 'cvv'"});
    CHECK(Violations(R"({"dependencies": {"a": ["b"], "c": {"properties": {"d": {"type": "string"}}}}})",
                     R"({"a": 1, "c": 2, "d": 3})") ==
          Strings{": property 'a' requires property 'b'", "/d: expected string, got integer"});
    CHECK(SchemaError(R"({"dependentRequired": {"a": [1]}})") == "/dependentRequired/a: must be an array of strings");
    CHECK(SchemaError(R"({"dependencies": {"a": 1}})").starts_with("/dependencies/a: a schema must be"));
  }

  TEST_CASE("prefixItems, draft-07 tuple items with additionalItems") {
    const char* tuple = R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})";
    CHECK(Valid(tuple, R"(["a", 1])"));
    CHECK(Valid(tuple, R"(["a"])"));
    CHECK(Violations(tuple, R"([1, 1, null])") ==
          Strings{"/0: expected string, got integer", "/2: no value is allowed here"});
    const char* draft7 = R"({"items": [{"type": "string"}], "additionalItems": {"type": "integer"}})";
    CHECK(Valid(draft7, R"(["a", 1, 2])"));
    CHECK(Violations(draft7, R"(["a", "b"])") == Strings{"/1: expected integer, got string"});
    CHECK(Valid(R"({"items": {"type": "string"}, "additionalItems": false})", R"(["a", "b"])"));  // ignored
    CHECK(SchemaError(R"({"prefixItems": [{}], "items": [{}]})") ==
          "/items: the array form cannot be combined with prefixItems");
  }

  TEST_CASE("contains, minContains, maxContains") {
    CHECK(Valid(R"({"contains": {"const": 2}})", "[1, 2]"));
    CHECK(Violations(R"({"contains": {"const": 2}})", "[1, 3]") ==
          Strings{": must contain at least 1 item matching 'contains', got 0"});
    CHECK(Violations(R"({"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3})", R"([1, "a"])") ==
          Strings{": must contain at least 2 items matching 'contains', got 1"});
    CHECK(Violations(R"({"contains": {"type": "integer"}, "maxContains": 1})", "[1, 2]") ==
          Strings{": must contain at most 1 item matching 'contains', got 2"});
    CHECK(Valid(R"({"contains": {"type": "integer"}, "minContains": 0})", "[]"));
    CHECK(Valid(R"({"minContains": 5})", "[]"));  // without contains it does nothing
    CHECK(Valid(R"({"contains": false})", "{}"));
  }

  TEST_CASE("format: the eight asserted formats") {
    struct Case {
      const char* format;
      const char* good;
      const char* bad;
    };
    const Case cases[] = {
        {"date", "2024-02-29", "2023-02-29"},
        {"date", "1999-12-31", "1999-1-31"},
        {"date-time", "2024-05-01T12:30:00Z", "2024-05-01 12:30:00Z"},
        {"date-time", "2024-05-01t12:30:00.123+02:00", "2024-05-01T12:30:00"},
        {"date-time", "1998-12-31T23:59:60Z", "1998-12-31T22:59:60Z"},
        {"time", "08:30:06+02:00", "24:00:00Z"},
        {"time", "23:20:50.52Z", "23:20:50."},
        {"email", "joe.bloggs@example.com", "joe..bloggs@example.com"},
        {"email", "\"joe bloggs\"@example.com", "joe@-example.com"},
        {"email", "a@[192.168.0.1]", "no-at-sign"},
        {"uri", "https://example.com/a?b=c#d", "//example.com/relative"},
        {"uri", "urn:isbn:0451450523", "http://exa mple.com"},
        {"uri", "mailto:joe@example.com", "http://x/%zz"},
        {"uuid", "2EB8AA08-AA98-11EA-B4AA-73B441D16380", "2eb8aa08-aa98-11ea-b4aa-73b441d1638"},
        {"ipv4", "192.168.0.1", "192.168.0.01"},
        {"ipv4", "255.255.255.255", "256.1.1.1"},
        {"ipv6", "::1", "12345::"},
        {"ipv6", "2001:db8::ff00:42:8329", "1::2::3"},
        {"ipv6", "::ffff:192.168.0.1", "1:2:3:4:5:6:7:8:9"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.format);
      std::string schema = std::string(R"({"format": ")") + c.format + "\"}";
      CHECK(Valid(schema.c_str(), Json(c.good).dump().c_str()));
      CHECK(Violations(schema.c_str(), Json(c.bad)) == Strings{": must be a valid " + std::string(c.format)});
    }
    CHECK(Valid(R"({"format": "date"})", "20240101"));           // formats only constrain strings
    CHECK(Valid(R"({"format": "password"})", R"("anything")"));  // not an asserted format: an annotation
    CHECK(SchemaError(R"({"format": 1})") == "/format: must be a string");
  }

  TEST_CASE("annotations are accepted and type-checked") {
    CHECK(SchemaError(R"({"$id": "https://example.com/s.json", "$comment": "c", "readOnly": true, "writeOnly": false,
                        "deprecated": true, "contentEncoding": "base64", "contentMediaType": "image/png"})") == "");
    CHECK(SchemaError(R"({"readOnly": "yes"})") == "/readOnly: must be a boolean");
    CHECK(SchemaError(R"({"$comment": 1})") == "/$comment: must be a string");
    CHECK(SchemaError(R"({"$id": {}})") == "/$id: must be a string");
    CHECK(SchemaError(R"({"contentMediaType": 1})") == "/contentMediaType: must be a string");
    CHECK(Valid(R"({"readOnly": true, "contentEncoding": "base64"})", "12"));
    CHECK(SchemaError(R"({"discriminator": "kind"})") == "/discriminator: must be an object");
    // contentSchema describes the JSON inside a string; the string itself is what validates.
    const char* json_text = R"({"type": "string", "contentMediaType": "application/json",
                                "contentSchema": {"type": "object", "required": ["price"]}})";
    CHECK(SchemaError(json_text) == "");
    CHECK(Valid(json_text, R"("not even JSON")"));
    CHECK(SchemaError(R"({"contentSchema": 5})") == "/contentSchema: must be a schema (an object or a boolean)");
  }

  TEST_CASE("a Pydantic tagged union: oneOf with $refs and a discriminator") {
    const char* schema = R"({"$defs": {
      "Cat": {"properties": {"pet_type": {"const": "cat", "title": "Pet Type"}, "meows": {"type": "integer"}},
              "required": ["pet_type", "meows"], "title": "Cat", "type": "object"},
      "Dog": {"properties": {"pet_type": {"const": "dog", "title": "Pet Type"}, "barks": {"type": "number"}},
              "required": ["pet_type", "barks"], "title": "Dog", "type": "object"}},
    "properties": {"pet": {"discriminator": {"mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"},
                                             "propertyName": "pet_type"},
                           "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}], "title": "Pet"},
                   "n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null, "title": "N"}},
    "required": ["pet"], "title": "Model", "type": "object"})";
    CHECK(Valid(schema, R"({"pet": {"pet_type": "cat", "meows": 3}, "n": null})"));
    CHECK(Valid(schema, R"({"pet": {"pet_type": "dog", "barks": 1.5}})"));
    CHECK_FALSE(Valid(schema, R"({"pet": {"pet_type": "dog", "meows": 3}})"));
    CHECK_FALSE(Valid(schema, R"({"pet": {"pet_type": "cat", "meows": 3}, "n": "3"})"));
  }

  TEST_CASE("an MCP server's schema: pattern, format, oneOf, const") {
    const char* schema = R"({"type": "object", "properties": {
      "url": {"type": "string", "format": "uri"},
      "id": {"type": "string", "pattern": "^[a-f0-9]{8}$"},
      "when": {"type": "string", "format": "date-time"},
      "target": {"oneOf": [{"type": "object", "properties": {"kind": {"const": "file"}, "path": {"type": "string"}},
                            "required": ["kind", "path"]},
                           {"type": "object", "properties": {"kind": {"const": "url"}, "href": {"type": "string"}},
                            "required": ["kind", "href"]}]}},
    "required": ["url"], "additionalProperties": false})";
    CHECK(Valid(schema, R"({"url": "https://a.b/c", "id": "deadbeef", "when": "2024-01-01T00:00:00Z",
                          "target": {"kind": "file", "path": "/tmp/x"}})"));
    Strings violations = Violations(schema, R"({"url": "not a uri", "id": "DEADBEEF", "target": {"kind": "ftp"}})");
    REQUIRE(violations.size() == 3);
    CHECK(violations[0] == "/id: must match the pattern '^[a-f0-9]{8}$'");
    CHECK(Contains(violations[1], "/target: must match exactly one schema in oneOf, matched none"));
    CHECK(violations[2] == "/url: must be a valid uri");
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::toolsets
