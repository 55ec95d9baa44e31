// The compiled form of a JSON Schema (private to toolsets/json_schema*.cc): a flat vector of
// SchemaNodes whose children are indices, so a recursive schema ($ref back to an ancestor) is a
// cycle of indices, not of pointers. Each keyword sits in a typed field; validation never looks a
// keyword up by string.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/regex.h"
#include "base/status.h"
#include "toolsets/internal/json_schema_format.h"
#include "toolsets/json_schema.h"

namespace envforge::toolsets::internal {

enum TypeBit : uint8_t {
  kTypeObject = 1 << 0,
  kTypeArray = 1 << 1,
  kTypeString = 1 << 2,
  kTypeInteger = 1 << 3,
  kTypeNumber = 1 << 4,
  kTypeBoolean = 1 << 5,
  kTypeNull = 1 << 6,
};

inline constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();

struct Bound {
  bool set = false;
  long double value = 0;  // long double holds every int64, uint64 and double exactly
  std::string text;       // the bound as written, for messages
};

struct PropertyRule {
  std::string name;
  uint32_t node = kNoNode;
  bool required = false;
};

// A compiled `pattern` with its source as the schema wrote it (for messages).
struct Pattern {
  Regex regex;
  std::string source;
};

struct PatternRule {
  Pattern pattern;
  uint32_t node = kNoNode;
};

// dependentRequired / dependencies (array form): when `name` is present, so must `required` be.
struct RequiredDependency {
  std::string name;
  std::vector<std::string> required;
};

// dependentSchemas / dependencies (schema form): when `name` is present, the object must match.
struct SchemaDependency {
  std::string name;
  uint32_t node = kNoNode;
};

enum class Extra : uint8_t { kAllow, kDeny, kSchema };

struct SchemaNode {
  bool reject_all = false;  // the boolean schema `false`
  uint8_t types = 0;        // TypeBit mask; 0 = any type
  std::string type_text;    // "string or null"

  bool has_enum = false;
  Json enum_values;
  std::string enum_text;
  bool has_const = false;
  Json const_value;
  std::string const_text;

  bool has_bounds = false;
  Bound minimum, maximum, exclusive_minimum, exclusive_maximum, multiple_of;

  // Strings.
  std::optional<uint64_t> min_length, max_length;
  std::optional<Pattern> pattern;
  Format format = Format::kNone;

  // Arrays: prefix_items[i] checks item i, items every later item (all items when there is no
  // prefix); draft-07's tuple `items` + `additionalItems` compile to the same two fields.
  std::optional<uint64_t> min_items, max_items, min_contains, max_contains;
  bool unique_items = false;
  std::vector<uint32_t> prefix_items;
  uint32_t items = kNoNode;
  uint32_t contains = kNoNode;

  // Objects.
  bool has_object_rules = false;
  std::vector<PropertyRule> properties;     // sorted by name
  std::vector<std::string> required_other;  // required names with no "properties" entry
  std::vector<PatternRule> pattern_properties;
  Extra extra = Extra::kAllow;
  uint32_t extra_node = kNoNode;
  uint32_t property_names = kNoNode;
  std::optional<uint64_t> min_properties, max_properties;
  std::vector<RequiredDependency> dependent_required;
  std::vector<SchemaDependency> dependent_schemas;

  // In-place applicators: they check the same instance, not a part of it.
  uint32_t ref = kNoNode;
  std::vector<uint32_t> all_of, any_of, one_of;
  uint32_t not_node = kNoNode;
  uint32_t if_node = kNoNode, then_node = kNoNode, else_node = kNoNode;
};

struct SchemaTree {
  std::vector<SchemaNode> nodes;  // nodes[0] is the root
};

// Shared by the compiler and the validator.
bool IsIntegral(const Json& value);
long double NumberOf(const Json& value);
// JSON Schema equality (enum, const, uniqueItems): numbers by exact value, true is never 1.
bool InstanceEqual(const Json& a, const Json& b);
std::string_view InstanceTypeName(const Json& value);
void AppendPointerToken(std::string_view token, std::string& out);
std::string ChildPointer(const std::string& parent, std::string_view token);

// Compiles a whole schema document (toolsets/internal/json_schema_compile.cc); CheckSchema's
// errors. nodes[0] is the root.
Result<std::shared_ptr<const SchemaTree>> CompileSchemaTree(const Json& schema, const SchemaOptions& options);

}  // namespace envforge::toolsets::internal
