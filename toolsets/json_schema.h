// JSON Schema validation of tool arguments (and answer schemas), for the subset envforge
// supports. A schema that uses a validation keyword outside this subset is rejected by
// CheckSchema (at pack time), never silently ignored.
//
// Supported validation keywords: type (string or array of: object, array, string, integer,
// number, boolean, null), properties, required, additionalProperties (bool or schema), items
// (schema), enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers),
// minItems, maxItems, minLength, maxLength, uniqueItems.
// Accepted annotations (no effect on validation): title, description, default, examples,
// $schema, and any keyword starting with "x-" (e.g. "x-domain": "hotels.name").
// "integer" accepts JSON integers and floats with no fractional part (1.0), as JSON Schema says.
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

// Checks that `schema` is a well-formed schema of the supported subset. The error names the
// JSON pointer of the offending keyword, e.g. "/properties/city/pattern: unsupported keyword
// 'pattern'", "/required: must be an array of strings". A required property that is not in
// "properties" while additionalProperties is false (a schema nothing can satisfy) is an error too.
Status CheckSchema(const Json& schema);

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
// Compile runs CheckSchema (same errors). Validate allocates nothing for a valid instance.
// Copies share the compiled form (cheap); an object may be used from many threads at once.
class CompiledSchema {
 public:
  CompiledSchema();  // the schema `true`: accepts every instance
  static Result<CompiledSchema> Compile(const Json& schema);
  std::vector<SchemaViolation> Validate(const Json& instance, size_t max_violations = 16) const;
  const Json& schema() const { return schema_; }

 private:
  Json schema_;
  std::shared_ptr<const internal::SchemaTree> tree_;  // null for the default (accept-all) schema
};

}  // namespace envforge::toolsets
