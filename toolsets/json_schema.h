// JSON Schema validation of tool arguments (and answer schemas), for the subset envforge
// supports: the validation keywords of draft-07 and 2020-12 that real tool schemas use (Pydantic,
// MCP servers). A schema that uses a keyword outside this subset is rejected by CheckSchema (at
// pack time), never silently ignored. This is the one validator: the worker's embedded Python
// (a gold solution's tool calls) reaches it through pybind11 (sandbox/worker/schema_module.cc).
//
// Supported validation keywords:
//   any type     type (string or array of: object, array, string, integer, number, boolean,
//                null), enum, const, allOf, anyOf, oneOf, not, if/then/else, $ref
//   numbers      minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers; not the
//                draft-04 booleans), multipleOf (> 0)
//   strings      minLength, maxLength (characters), pattern, format
//   arrays       items (a schema; or draft-07's array form with additionalItems), prefixItems,
//                minItems, maxItems, uniqueItems, contains, minContains, maxContains
//   objects      properties, required, additionalProperties (bool or schema), patternProperties,
//                propertyNames, minProperties, maxProperties, dependentRequired,
//                dependentSchemas, dependencies (draft-07: array or schema values)
//   containers   $defs, definitions (schemas reachable by $ref; each is checked even if unused)
// Accepted annotations (no effect on validation): title, description, default, examples,
// $schema, $id, $comment, readOnly, writeOnly, deprecated, contentEncoding, contentMediaType,
// contentSchema (2019-09's schema of the JSON a string carries; the tool-call grammar decodes by it),
// OpenAPI's discriminator (Pydantic emits it beside the oneOf of a tagged union, which is what
// validates), and any keyword starting with "x-" (e.g. "x-domain": "hotels.name").
//
// Semantics worth knowing:
// - "integer" accepts JSON integers and floats with no fractional part (1.0), as JSON Schema says.
// - enum/const/uniqueItems compare numbers by exact value (2 == 2.0; 2^53+1 != 2^53) and never
//   equate a boolean with a number. An empty enum is a schema nothing satisfies.
// - multipleOf: exact for integers; for floats the quotient must be within 1e-9 (relative) of an
//   integer, and a quotient that overflows a double is not a multiple.
// - $ref: local JSON pointers only ("#", "#/$defs/item", "#/properties/a~1b", percent-escapes
//   decoded; a reference that starts with the root's own "$id" counts as local). A remote or
//   relative URI ("other.json#/x", "http://...") and a plain-name anchor ("#foo") are rejected
//   at compile time, as is a $ref below a nested "$id" (which would change
//   the base URI). A cycle of $refs and in-place applicators (allOf, anyOf, oneOf, not,
//   if/then/else, dependentSchemas) that never descends into the instance is rejected at
//   compile time; validation depth is bounded as well (kMaxSchemaDepth), so no schema recurses
//   forever. Draft-07 ignores the siblings of a $ref; 2020-12 (and a schema without $schema, by
//   default) applies them alongside.
// - pattern/patternProperties: Oniguruma's Perl_NG syntax (base/regex.h), the closest it has to
//   ECMA-262, unanchored, under a backtracking limit (a search that hits it fails validation with
//   a message saying so). ECMA's \uHHHH escape is rewritten to \x{HHHH} first (Perl_NG would read
//   a literal "u"). Known differences from ECMA-262 that remain: \d, \w, \s and \b follow
//   Unicode (ECMA: \d and \w are ASCII only); "$" also matches before a final newline; \A, \z,
//   \Z, possessive quantifiers, atomic groups, (?i)-style inline flags and POSIX brackets
//   ([[:alpha:]]) are extensions ECMA rejects; ECMA's "[^]" (an error here), a surrogate pair
//   written as two \u escapes, and the /u-only "\u{...}" are not supported (write the character
//   itself). A pattern that does not compile is a schema error naming its pointer.
// - format: date, date-time, time, email, uri, uuid, ipv4 and ipv6 are assertions
//   (internal/json_schema_format.h gives the grammar of each); any other format name (Pydantic's
//   "password", "binary", "duration", ...) is an annotation, as 2020-12's default vocabulary has it.
// - Dialect: a root "$schema" naming draft-04/06/07 chooses draft-07 rules, one naming 2019-09
//   or 2020-12 chooses 2020-12 rules; without it, SchemaOptions::dialect decides.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::toolsets {

namespace internal {
struct SchemaTree;
}  // namespace internal

// How deep validation may nest schema applications (a property's, an item's, a $ref's or an
// applicator's subschema is one level each); past it the instance is reported invalid ("schema
// recursion limit (512 levels) exceeded") instead of recursing on. In-place cycles are already
// rejected at compile time, so only a deep instance against a recursive schema gets here.
inline constexpr int kMaxSchemaDepth = 512;

enum class SchemaDialect {
  // Both: `items` may be a schema or draft-07's tuple array (with additionalItems), prefixItems
  // is accepted, and $ref's siblings apply alongside it (2020-12).
  kAny,
  kDraft7,     // $ref's siblings are ignored; prefixItems is an unknown keyword
  kDraft2020,  // `items` must be a schema; additionalItems is an unknown keyword
};

struct SchemaOptions {
  SchemaDialect dialect = SchemaDialect::kAny;  // used when the root has no known "$schema"
};

// Checks that `schema` is a well-formed schema of the supported subset. The error names the
// JSON pointer of the offending keyword, e.g. "/properties/city/foo: unsupported keyword
// 'foo'", "/required: must be an array of strings", "/properties/a/pattern: regex '(': ...",
// "/$ref: 'http://x/y.json' is a remote reference; only local references ("#/...") are
// supported". A required property that is not in "properties" while additionalProperties is
// false (a schema nothing can satisfy) is an error too.
Status CheckSchema(const Json& schema, const SchemaOptions& options = {});

struct SchemaViolation {
  std::string pointer;  // JSON pointer into the instance, "" for the root
  std::string message;  // e.g. "expected integer, got string"
};

// Validates `instance` against a schema that passed CheckSchema. Returns every violation found
// (empty = valid), at most `max_violations`. Pointers are RFC 6901 ("/days/1/city"); a missing
// required or unexpected property is reported at its object's pointer, naming the property.
// Compiles `schema` on every call: prefer CompiledSchema for repeated use. A schema that fails
// CheckSchema yields one violation at "" saying so.
std::vector<SchemaViolation> Validate(const Json& schema, const Json& instance, size_t max_violations = 16);

// One line for a model: "arguments invalid: /city: expected string, got integer; ...". A
// violation at the root has no pointer prefix. Empty for no violations.
std::string DescribeViolations(const std::vector<SchemaViolation>& violations);

// A validator compiled once per schema, for the hot path (one tools/call = one Validate).
// Compile runs CheckSchema (same errors). Validate allocates nothing for a valid instance unless
// the schema has pattern, patternProperties or propertyNames (anyOf, oneOf, not, if and contains
// probe their branches without building messages). Copies share the compiled form
// (cheap); an object may be used from many threads at once.
class CompiledSchema {
 public:
  CompiledSchema();  // the schema `true`: accepts every instance
  static Result<CompiledSchema> Compile(const Json& schema, const SchemaOptions& options = {});
  std::vector<SchemaViolation> Validate(const Json& instance, size_t max_violations = 16) const;
  const Json& schema() const { return schema_; }

 private:
  Json schema_;
  std::shared_ptr<const internal::SchemaTree> tree_;  // null for the default (accept-all) schema
};

}  // namespace envforge::toolsets
