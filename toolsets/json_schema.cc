// JSON Schema subset: CheckSchema and validation.
//
// A schema is compiled once into a flat tree of SchemaNodes (children by index) that holds each
// keyword in a typed field, so Validate never looks keywords up by string. Object validation is a
// merge walk over the instance's members (a std::map, sorted) and the node's properties (sorted
// the same way), which checks properties, required and additionalProperties in one pass. Instance
// pointers are kept as a chain of stack frames and only turned into strings for a violation, so
// a valid instance costs no allocation.
#include "toolsets/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

namespace envforge::toolsets {

// The merge walk relies on object members iterating in std::string order.
static_assert(std::is_same_v<Json::object_comparator_t, std::less<>> ||
                  std::is_same_v<Json::object_comparator_t, std::less<std::string>>,
              "json_schema.cc assumes JSON objects are sorted by key");

namespace internal {

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
  Bound minimum, maximum, exclusive_minimum, exclusive_maximum;

  std::optional<uint64_t> min_length, max_length, min_items, max_items;
  bool unique_items = false;
  uint32_t items = kNoNode;

  bool has_object_rules = false;
  std::vector<PropertyRule> properties;     // sorted by name
  std::vector<std::string> required_other;  // required names with no "properties" entry
  Extra extra = Extra::kAllow;
  uint32_t extra_node = kNoNode;
};

struct SchemaTree {
  std::vector<SchemaNode> nodes;  // nodes[0] is the root
};

}  // namespace internal

namespace {

using internal::Bound;
using internal::Extra;
using internal::kNoNode;
using internal::PropertyRule;
using internal::SchemaNode;
using internal::SchemaTree;

// ---------------------------------------------------------------------------------------------
// Shared helpers

void AppendPointerToken(std::string_view token, std::string& out) {
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
}

std::string ChildPointer(const std::string& parent, std::string_view token) {
  std::string out = parent;
  out += '/';
  AppendPointerToken(token, out);
  return out;
}

struct TypeName {
  std::string_view name;
  uint8_t bit;
};
constexpr TypeName kTypeNames[] = {
    {"object", internal::kTypeObject}, {"array", internal::kTypeArray},
    {"string", internal::kTypeString}, {"integer", internal::kTypeInteger},
    {"number", internal::kTypeNumber}, {"boolean", internal::kTypeBoolean},
    {"null", internal::kTypeNull},
};

std::optional<uint8_t> TypeBitOf(std::string_view name) {
  for (const TypeName& type : kTypeNames) {
    if (type.name == name) return type.bit;
  }
  return std::nullopt;
}

bool IsIntegral(const Json& value) {
  if (value.is_number_integer()) return true;  // signed and unsigned
  if (!value.is_number_float()) return false;
  double number = value.get<double>();
  return std::isfinite(number) && std::trunc(number) == number;
}

long double NumberOf(const Json& value) {
  switch (value.type()) {
    case Json::value_t::number_integer: return static_cast<long double>(value.get<int64_t>());
    case Json::value_t::number_unsigned: return static_cast<long double>(value.get<uint64_t>());
    default: return static_cast<long double>(value.get<double>());
  }
}

// JSON Schema equality (enum, const): numbers by exact mathematical value, whatever their JSON
// representation (2 == 2.0, but 9007199254740993 != 9007199254740992.0, which nlohmann's ==
// confuses by going through double; long double holds every int64, uint64 and double exactly on
// the platforms envforge builds for), arrays element-wise, objects key-wise, other kinds by ==
// (so true is never 1).
bool InstanceEqual(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return NumberOf(a) == NumberOf(b);
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!InstanceEqual(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items()) {
      auto other = b.find(key);
      if (other == b.end() || !InstanceEqual(value, *other)) return false;
    }
    return true;
  }
  return a == b;
}

// The JSON Schema type of an instance, for "got ..." in messages.
std::string_view InstanceTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    case Json::value_t::string: return "string";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    default: return "null";
  }
}

// ---------------------------------------------------------------------------------------------
// Compilation (and CheckSchema)

class SchemaCompiler {
 public:
  explicit SchemaCompiler(SchemaTree& tree) : tree_(tree) {}

  // Compiles `schema` (found at `pointer` in the schema document) and returns its node index.
  Result<uint32_t> Compile(const Json& schema, const std::string& pointer) {
    uint32_t index = static_cast<uint32_t>(tree_.nodes.size());
    tree_.nodes.emplace_back();
    SchemaNode node;
    if (schema.is_boolean()) {
      node.reject_all = !schema.get<bool>();
    } else if (!schema.is_object()) {
      return Error(pointer, "a schema must be an object or a boolean, got " +
                                std::string(InstanceTypeName(schema)));
    } else {
      for (const auto& [keyword, value] : schema.items()) {
        ENVFORGE_RETURN_IF_ERROR(CompileKeyword(keyword, value, pointer, node));
      }
      ENVFORGE_RETURN_IF_ERROR(FinishObjectRules(schema, pointer, node));
    }
    tree_.nodes[index] = std::move(node);  // children were appended meanwhile; index is stable
    return index;
  }

 private:
  static Status Error(const std::string& pointer, std::string problem) {
    std::string message = pointer.empty() ? std::string("(root)") : pointer;
    message += ": ";
    message += problem;
    return InvalidArgumentError(std::move(message));
  }

  static bool IsAnnotation(std::string_view keyword) {
    return keyword == "title" || keyword == "description" || keyword == "default" ||
           keyword == "examples" || keyword == "$schema" || keyword.starts_with("x-");
  }

  Status CompileKeyword(const std::string& keyword, const Json& value, const std::string& schema_pointer,
                        SchemaNode& node) {
    const std::string at = ChildPointer(schema_pointer, keyword);
    if (keyword == "type") return CompileType(value, at, node);
    if (keyword == "properties") {
      if (!value.is_object()) return Error(at, "must be an object of schemas");
      node.has_object_rules = true;
      for (const auto& [name, child] : value.items()) {
        ENVFORGE_ASSIGN_OR_RETURN(uint32_t child_index, Compile(child, ChildPointer(at, name)));
        node.properties.push_back(PropertyRule{name, child_index, false});
      }
      return Status::Ok();
    }
    if (keyword == "required") {
      if (!value.is_array()) return Error(at, "must be an array of strings");
      for (const Json& name : value) {
        if (!name.is_string()) return Error(at, "must be an array of strings");
      }
      node.has_object_rules = true;
      return Status::Ok();  // resolved against properties in FinishObjectRules
    }
    if (keyword == "additionalProperties") {
      node.has_object_rules = true;
      if (value.is_boolean()) {
        node.extra = value.get<bool>() ? Extra::kAllow : Extra::kDeny;
        return Status::Ok();
      }
      if (!value.is_object()) return Error(at, "must be a boolean or a schema");
      ENVFORGE_ASSIGN_OR_RETURN(node.extra_node, Compile(value, at));
      node.extra = Extra::kSchema;
      return Status::Ok();
    }
    if (keyword == "items") {
      if (value.is_array()) return Error(at, "must be a schema (the array/tuple form is not supported)");
      if (!value.is_object() && !value.is_boolean()) return Error(at, "must be a schema");
      ENVFORGE_ASSIGN_OR_RETURN(node.items, Compile(value, at));
      return Status::Ok();
    }
    if (keyword == "enum") {
      // An empty enum is a schema nothing satisfies (JSON Schema says so), not a malformed one.
      if (!value.is_array()) return Error(at, "must be an array");
      node.has_enum = true;
      node.enum_values = value;
      node.enum_text = DumpJson(value);
      return Status::Ok();
    }
    if (keyword == "const") {
      node.has_const = true;
      node.const_value = value;
      node.const_text = DumpJson(value);
      return Status::Ok();
    }
    if (keyword == "minimum") return CompileBound(value, at, node.minimum, node);
    if (keyword == "maximum") return CompileBound(value, at, node.maximum, node);
    if (keyword == "exclusiveMinimum") return CompileBound(value, at, node.exclusive_minimum, node);
    if (keyword == "exclusiveMaximum") return CompileBound(value, at, node.exclusive_maximum, node);
    if (keyword == "minLength") return CompileCount(value, at, node.min_length);
    if (keyword == "maxLength") return CompileCount(value, at, node.max_length);
    if (keyword == "minItems") return CompileCount(value, at, node.min_items);
    if (keyword == "maxItems") return CompileCount(value, at, node.max_items);
    if (keyword == "uniqueItems") {
      if (!value.is_boolean()) return Error(at, "must be a boolean");
      node.unique_items = value.get<bool>();
      return Status::Ok();
    }
    if (IsAnnotation(keyword)) return CheckAnnotation(keyword, value, at);
    return Error(at, "unsupported keyword '" + keyword + "'");
  }

  static Status CheckAnnotation(const std::string& keyword, const Json& value, const std::string& at) {
    if ((keyword == "title" || keyword == "description" || keyword == "$schema") && !value.is_string()) {
      return Error(at, "must be a string");
    }
    if (keyword == "examples" && !value.is_array()) return Error(at, "must be an array");
    return Status::Ok();
  }

  static Status CompileType(const Json& value, const std::string& at, SchemaNode& node) {
    auto add = [&](const Json& name) -> Status {
      if (!name.is_string()) return Error(at, "must be a type name or an array of type names");
      const std::string& text = name.get_ref<const std::string&>();
      std::optional<uint8_t> bit = TypeBitOf(text);
      if (!bit) {
        return Error(at, "unknown type '" + text +
                             "' (expected object, array, string, integer, number, boolean or null)");
      }
      if (node.types & *bit) return Error(at, "type '" + text + "' is listed twice");
      node.types |= *bit;
      if (!node.type_text.empty()) node.type_text += " or ";
      node.type_text += text;
      return Status::Ok();
    };
    if (value.is_string()) return add(value);
    if (!value.is_array() || value.empty()) {
      return Error(at, "must be a type name or a non-empty array of type names");
    }
    for (const Json& name : value) ENVFORGE_RETURN_IF_ERROR(add(name));
    return Status::Ok();
  }

  static Status CompileBound(const Json& value, const std::string& at, Bound& bound, SchemaNode& node) {
    if (!value.is_number()) {
      return Error(at, value.is_boolean() ? "must be a number (the draft-04 boolean form is not supported)"
                                          : "must be a number");
    }
    bound.set = true;
    bound.value = NumberOf(value);
    bound.text = DumpJson(value);
    node.has_bounds = true;
    return Status::Ok();
  }

  static Status CompileCount(const Json& value, const std::string& at, std::optional<uint64_t>& count) {
    if (value.is_number_unsigned()) {
      count = value.get<uint64_t>();
      return Status::Ok();
    }
    if (value.is_number() && IsIntegral(value) && NumberOf(value) >= 0 &&
        NumberOf(value) <= static_cast<long double>(std::numeric_limits<uint64_t>::max())) {
      count = static_cast<uint64_t>(NumberOf(value));
      return Status::Ok();
    }
    return Error(at, "must be a non-negative integer");
  }

  // Runs once the whole schema object has been read ("required" may precede "properties"): sorts
  // the properties for the merge walk and splits "required" into flags on properties and the
  // names no property describes.
  static Status FinishObjectRules(const Json& schema, const std::string& pointer, SchemaNode& node) {
    std::sort(node.properties.begin(), node.properties.end(),
              [](const PropertyRule& a, const PropertyRule& b) { return a.name < b.name; });
    auto required = schema.find("required");
    if (required == schema.end()) return Status::Ok();
    for (const Json& name_json : *required) {
      const std::string& name = name_json.get_ref<const std::string&>();
      auto it = std::lower_bound(node.properties.begin(), node.properties.end(), name,
                                 [](const PropertyRule& rule, const std::string& key) { return rule.name < key; });
      if (it != node.properties.end() && it->name == name) {
        it->required = true;
      } else if (node.extra == Extra::kDeny) {
        return Error(ChildPointer(pointer, "required"),
                     "required property '" + name +
                         "' is not in properties while additionalProperties is false; nothing can match");
      } else if (std::find(node.required_other.begin(), node.required_other.end(), name) ==
                 node.required_other.end()) {
        node.required_other.push_back(name);
      }
    }
    return Status::Ok();
  }

  SchemaTree& tree_;
};

// ---------------------------------------------------------------------------------------------
// Validation

// One step of the instance pointer, on the validator's stack: a member key or an array index.
struct PathFrame {
  const PathFrame* parent;
  const std::string* key;  // null for an array index
  size_t index;
};

void AppendPointer(const PathFrame* frame, std::string& out) {
  if (frame == nullptr) return;
  AppendPointer(frame->parent, out);
  out += '/';
  if (frame->key != nullptr) {
    AppendPointerToken(*frame->key, out);
  } else {
    out += std::to_string(frame->index);
  }
}

uint64_t CodePointCount(const std::string& text) {
  uint64_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

std::string CountText(uint64_t count, std::string_view noun) {
  std::string out = std::to_string(count);
  out += ' ';
  out += noun;
  if (count != 1) out += 's';
  return out;
}

class Validator {
 public:
  Validator(const SchemaTree& tree, size_t max_violations, std::vector<SchemaViolation>& out)
      : nodes_(tree.nodes), max_(max_violations), out_(out) {}

  void Check(uint32_t index, const Json& value, const PathFrame* at) {
    if (Full()) return;
    const SchemaNode& node = nodes_[index];
    if (node.reject_all) {
      Report(at, "no value is allowed here");
      return;
    }
    if (node.types != 0 && (node.types & InstanceTypes(value)) == 0) {
      Report(at, "expected " + node.type_text + ", got " + std::string(InstanceTypeName(value)));
      return;  // the other keywords would only repeat the mismatch
    }
    if (node.has_enum && !EnumContains(node, value)) Report(at, "must be one of " + node.enum_text);
    if (node.has_const && !InstanceEqual(value, node.const_value)) Report(at, "must equal " + node.const_text);
    switch (value.type()) {
      case Json::value_t::number_integer:
      case Json::value_t::number_unsigned:
      case Json::value_t::number_float:
        if (node.has_bounds) CheckBounds(node, value, at);
        break;
      case Json::value_t::string:
        if (node.min_length || node.max_length) CheckLength(node, value, at);
        break;
      case Json::value_t::array: CheckArray(node, value, at); break;
      case Json::value_t::object:
        if (node.has_object_rules) CheckObject(node, value, at);
        break;
      default: break;
    }
  }

 private:
  bool Full() const { return out_.size() >= max_; }

  void Report(const PathFrame* at, std::string message) {
    if (Full()) return;
    SchemaViolation violation;
    AppendPointer(at, violation.pointer);
    violation.message = std::move(message);
    out_.push_back(std::move(violation));
  }

  static uint8_t InstanceTypes(const Json& value) {
    switch (value.type()) {
      case Json::value_t::object: return internal::kTypeObject;
      case Json::value_t::array: return internal::kTypeArray;
      case Json::value_t::string: return internal::kTypeString;
      case Json::value_t::boolean: return internal::kTypeBoolean;
      case Json::value_t::number_integer:
      case Json::value_t::number_unsigned: return internal::kTypeInteger | internal::kTypeNumber;
      case Json::value_t::number_float:
        return IsIntegral(value) ? internal::kTypeInteger | internal::kTypeNumber : internal::kTypeNumber;
      default: return internal::kTypeNull;
    }
  }

  // JSON Schema equality, except that nlohmann compares numbers across representations (1 == 1.0)
  // but never a boolean with a number, which is what JSON Schema wants.
  static bool EnumContains(const SchemaNode& node, const Json& value) {
    for (const Json& option : node.enum_values) {
      if (InstanceEqual(option, value)) return true;
    }
    return false;
  }

  void CheckBounds(const SchemaNode& node, const Json& value, const PathFrame* at) {
    long double number = NumberOf(value);
    auto violate = [&](std::string_view op, const Bound& bound) {
      std::string message = "must be ";
      message += op;
      message += ' ';
      message += bound.text;
      message += ", got ";
      message += DumpJson(value);
      Report(at, std::move(message));
    };
    if (node.minimum.set && number < node.minimum.value) violate(">=", node.minimum);
    if (node.maximum.set && number > node.maximum.value) violate("<=", node.maximum);
    if (node.exclusive_minimum.set && number <= node.exclusive_minimum.value) violate(">", node.exclusive_minimum);
    if (node.exclusive_maximum.set && number >= node.exclusive_maximum.value) violate("<", node.exclusive_maximum);
  }

  void CheckLength(const SchemaNode& node, const Json& value, const PathFrame* at) {
    uint64_t length = CodePointCount(value.get_ref<const std::string&>());
    if (node.min_length && length < *node.min_length) {
      Report(at, "must have at least " + CountText(*node.min_length, "character") + ", got " +
                     std::to_string(length));
    }
    if (node.max_length && length > *node.max_length) {
      Report(at, "must have at most " + CountText(*node.max_length, "character") + ", got " +
                     std::to_string(length));
    }
  }

  void CheckArray(const SchemaNode& node, const Json& value, const PathFrame* at) {
    const auto& array = value.get_ref<const Json::array_t&>();
    uint64_t size = array.size();
    if (node.min_items && size < *node.min_items) {
      Report(at, "must have at least " + CountText(*node.min_items, "item") + ", got " + std::to_string(size));
    }
    if (node.max_items && size > *node.max_items) {
      Report(at, "must have at most " + CountText(*node.max_items, "item") + ", got " + std::to_string(size));
    }
    if (node.unique_items) CheckUnique(array, at);
    if (node.items == kNoNode) return;
    for (size_t item_idx = 0; item_idx < array.size() && !Full(); ++item_idx) {
      PathFrame frame{at, nullptr, item_idx};
      Check(node.items, array[item_idx], &frame);
    }
  }

  void CheckUnique(const Json::array_t& array, const PathFrame* at) {
    auto report = [&](size_t first, size_t second) {
      if (first > second) std::swap(first, second);
      Report(at, "must have unique items, but items " + std::to_string(first) + " and " +
                     std::to_string(second) + " are equal");
    };
    constexpr size_t kPairwiseLimit = 32;
    if (array.size() <= kPairwiseLimit) {
      for (size_t first = 0; first < array.size(); ++first) {
        for (size_t second = first + 1; second < array.size(); ++second) {
          if (array[first] == array[second]) return report(first, second);
        }
      }
      return;
    }
    // Large arrays: sort indices by value, then equal items are adjacent (O(n log n)).
    std::vector<size_t> order(array.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return array[a] < array[b]; });
    for (size_t pos = 1; pos < order.size(); ++pos) {
      if (array[order[pos - 1]] == array[order[pos]]) return report(order[pos - 1], order[pos]);
    }
  }

  void CheckObject(const SchemaNode& node, const Json& value, const PathFrame* at) {
    const auto& members = value.get_ref<const Json::object_t&>();
    auto member = members.begin();
    auto rule = node.properties.begin();
    // Merge walk: both sequences are sorted by key.
    while (!Full() && (member != members.end() || rule != node.properties.end())) {
      int order = member == members.end()           ? 1
                  : rule == node.properties.end() ? -1
                                                   : member->first.compare(rule->name);
      if (order == 0) {
        PathFrame frame{at, &member->first, 0};
        Check(rule->node, member->second, &frame);
        ++member;
        ++rule;
      } else if (order < 0) {
        CheckExtra(node, *member, at);
        ++member;
      } else {
        if (rule->required) Report(at, "missing required property '" + rule->name + "'");
        ++rule;
      }
    }
    for (const std::string& name : node.required_other) {
      if (members.find(name) == members.end()) Report(at, "missing required property '" + name + "'");
    }
  }

  void CheckExtra(const SchemaNode& node, const Json::object_t::value_type& member, const PathFrame* at) {
    if (node.extra == Extra::kDeny) {
      Report(at, "unexpected property '" + member.first + "'");
    } else if (node.extra == Extra::kSchema) {
      PathFrame frame{at, &member.first, 0};
      Check(node.extra_node, member.second, &frame);
    }
  }

  const std::vector<SchemaNode>& nodes_;
  size_t max_;
  std::vector<SchemaViolation>& out_;
};

Result<std::shared_ptr<const SchemaTree>> CompileTree(const Json& schema) {
  auto tree = std::make_shared<SchemaTree>();
  SchemaCompiler compiler(*tree);
  ENVFORGE_ASSIGN_OR_RETURN(uint32_t root, compiler.Compile(schema, ""));
  (void)root;  // always 0
  return std::shared_ptr<const SchemaTree>(std::move(tree));
}

}  // namespace

Status CheckSchema(const Json& schema) { return CompileTree(schema).status(); }

std::vector<SchemaViolation> Validate(const Json& schema, const Json& instance, size_t max_violations) {
  Result<std::shared_ptr<const SchemaTree>> tree = CompileTree(schema);
  if (!tree.ok()) {
    if (max_violations == 0) return {};
    return {SchemaViolation{"", "schema is invalid: " + tree.status().message()}};
  }
  std::vector<SchemaViolation> violations;
  Validator(**tree, max_violations, violations).Check(0, instance, nullptr);
  return violations;
}

std::string DescribeViolations(const std::vector<SchemaViolation>& violations) {
  if (violations.empty()) return {};
  std::string out = "arguments invalid: ";
  for (size_t idx = 0; idx < violations.size(); ++idx) {
    if (idx > 0) out += "; ";
    if (!violations[idx].pointer.empty()) {
      out += violations[idx].pointer;
      out += ": ";
    }
    out += violations[idx].message;
  }
  return out;
}

CompiledSchema::CompiledSchema() : schema_(true) {}

Result<CompiledSchema> CompiledSchema::Compile(const Json& schema) {
  ENVFORGE_ASSIGN_OR_RETURN(auto tree, CompileTree(schema));
  CompiledSchema compiled;
  compiled.schema_ = schema;
  compiled.tree_ = std::move(tree);
  return compiled;
}

std::vector<SchemaViolation> CompiledSchema::Validate(const Json& instance, size_t max_violations) const {
  std::vector<SchemaViolation> violations;
  if (tree_ != nullptr) Validator(*tree_, max_violations, violations).Check(0, instance, nullptr);
  return violations;
}

}  // namespace envforge::toolsets
