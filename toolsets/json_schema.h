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

#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::toolsets {

// Checks that `schema` is a well-formed schema of the supported subset. The error names the
// JSON pointer of the offending keyword, e.g. "/properties/city: unsupported keyword 'pattern'".
Status CheckSchema(const Json& schema);

struct SchemaViolation {
  std::string pointer;  // JSON pointer into the instance, "" for the root
  std::string message;  // e.g. "expected integer, got string"
};

// Validates `instance` against a schema that passed CheckSchema. Returns every violation found
// (empty = valid), at most `max_violations`.
std::vector<SchemaViolation> Validate(const Json& schema, const Json& instance, size_t max_violations = 16);

// One line for a model: "arguments invalid: /city: expected string, got integer; ...".
std::string DescribeViolations(const std::vector<SchemaViolation>& violations);

// A validator compiled once per schema, for the hot path (one tools/call = one Validate).
class CompiledSchema {
 public:
  static Result<CompiledSchema> Compile(const Json& schema);
  std::vector<SchemaViolation> Validate(const Json& instance, size_t max_violations = 16) const;
  const Json& schema() const { return schema_; }

 private:
  Json schema_;
};

}  // namespace envforge::toolsets
