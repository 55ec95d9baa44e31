// JSON Schema validation over a compiled SchemaTree (toolsets/internal/json_schema_compile.cc
// builds it).
//
// Object validation is a merge walk over the instance's members (a std::map, sorted) and the
// node's properties (sorted the same way), which checks properties, required, patternProperties
// and additionalProperties in one pass. Instance pointers are kept as a chain of stack frames and
// only turned into strings for a violation, so a valid instance costs no allocation. Applicators
// that only ask "does it match?" (anyOf, oneOf, not, if, contains) run a probing Validator that
// stops at the first failure and builds no message.
#include "toolsets/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string_view>
#include <type_traits>
#include <utility>

#include "toolsets/internal/json_schema_tree.h"

namespace envforge::toolsets {

// The merge walk relies on object members iterating in std::string order.
static_assert(std::is_same_v<Json::object_comparator_t, std::less<>> ||
                  std::is_same_v<Json::object_comparator_t, std::less<std::string>>,
              "json_schema.cc assumes JSON objects are sorted by key");

namespace internal {

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

// Numbers by exact mathematical value, whatever their JSON representation (2 == 2.0, but
// 9007199254740993 != 9007199254740992.0, which nlohmann's == confuses by going through double;
// long double holds every int64, uint64 and double exactly on the platforms envforge builds for),
// arrays element-wise, objects key-wise, other kinds by == (so true is never 1).
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

}  // namespace internal

namespace {

using internal::Bound;
using internal::Extra;
using internal::kNoNode;
using internal::PatternRule;
using internal::PropertyRule;
using internal::SchemaNode;
using internal::SchemaTree;

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
    internal::AppendPointerToken(*frame->key, out);
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
  if (count == 1) {
    out += noun;
  } else if (noun.ends_with('y')) {  // property -> properties
    out += noun.substr(0, noun.size() - 1);
    out += "ies";
  } else {
    out += noun;
    out += 's';
  }
  return out;
}

uint8_t InstanceTypes(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object: return internal::kTypeObject;
    case Json::value_t::array: return internal::kTypeArray;
    case Json::value_t::string: return internal::kTypeString;
    case Json::value_t::boolean: return internal::kTypeBoolean;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return internal::kTypeInteger | internal::kTypeNumber;
    case Json::value_t::number_float:
      return internal::IsIntegral(value) ? internal::kTypeInteger | internal::kTypeNumber : internal::kTypeNumber;
    default: return internal::kTypeNull;
  }
}

// multipleOf: exact when both are integers (fmodl is exact); otherwise the double quotient must
// be within 1e-9 (relative) of an integer, and an overflowing quotient is not a multiple.
bool IsMultipleOf(const Json& value, const Bound& divisor) {
  long double number = internal::NumberOf(value);
  if (std::trunc(number) == number && std::trunc(divisor.value) == divisor.value) {
    return std::fmod(number, divisor.value) == 0;
  }
  double quotient = static_cast<double>(number) / static_cast<double>(divisor.value);
  if (!std::isfinite(quotient)) return false;
  return std::fabs(quotient - std::round(quotient)) <= 1e-9 * std::max(1.0, std::fabs(quotient));
}

class Validator {
 public:
  // `out` null: a probe, which only counts failures (up to max_violations) and builds no message.
  Validator(const SchemaTree& tree, size_t max_violations, std::vector<SchemaViolation>* out, int depth = 0)
      : tree_(tree), max_(max_violations), out_(out), depth_(depth) {}

  bool failed() const { return failures_ > 0; }

  void Check(uint32_t index, const Json& value, const PathFrame* at) {
    if (Full()) return;
    if (depth_ >= kMaxSchemaDepth) {
      Report(at, [] { return "schema recursion limit (" + std::to_string(kMaxSchemaDepth) + " levels) exceeded"; });
      return;
    }
    ++depth_;
    CheckNode(tree_.nodes[index], value, at);
    --depth_;
  }

 private:
  bool Full() const { return failures_ >= max_; }

  template <typename MakeMessage>
  void Report(const PathFrame* at, MakeMessage&& make_message) {
    if (Full()) return;
    ++failures_;
    if (out_ == nullptr) return;
    SchemaViolation violation;
    AppendPointer(at, violation.pointer);
    violation.message = make_message();
    out_->push_back(std::move(violation));
  }

  bool Matches(uint32_t index, const Json& value, const PathFrame* at) const {
    Validator probe(tree_, 1, nullptr, depth_);
    probe.Check(index, value, at);
    return !probe.failed();
  }

  // The first violation of `value` against node `index`, as "pointer: message" (for the messages
  // of anyOf, oneOf and propertyNames, which say why each alternative failed).
  std::string FirstViolation(uint32_t index, const Json& value, const PathFrame* at) const {
    std::vector<SchemaViolation> found;
    Validator(tree_, 1, &found, depth_).Check(index, value, at);
    if (found.empty()) return "";
    return found[0].pointer.empty() ? found[0].message : found[0].pointer + ": " + found[0].message;
  }

  void CheckNode(const SchemaNode& node, const Json& value, const PathFrame* at) {
    if (node.reject_all) return Report(at, [] { return std::string("no value is allowed here"); });
    if (node.types != 0 && (node.types & InstanceTypes(value)) == 0) {
      // The other keywords would only repeat the mismatch.
      return Report(
          at, [&] { return "expected " + node.type_text + ", got " + std::string(internal::InstanceTypeName(value)); });
    }
    if (node.has_enum && !EnumContains(node, value)) Report(at, [&] { return "must be one of " + node.enum_text; });
    if (node.has_const && !internal::InstanceEqual(value, node.const_value)) {
      Report(at, [&] { return "must equal " + node.const_text; });
    }
    switch (value.type()) {
      case Json::value_t::number_integer:
      case Json::value_t::number_unsigned:
      case Json::value_t::number_float:
        if (node.has_bounds) CheckBounds(node, value, at);
        break;
      case Json::value_t::string: CheckString(node, value.get_ref<const std::string&>(), at); break;
      case Json::value_t::array: CheckArray(node, value.get_ref<const Json::array_t&>(), at); break;
      case Json::value_t::object:
        if (node.has_object_rules) CheckObject(node, value, at);
        break;
      default: break;
    }
    CheckApplicators(node, value, at);
  }

  static bool EnumContains(const SchemaNode& node, const Json& value) {
    for (const Json& option : node.enum_values) {
      if (internal::InstanceEqual(option, value)) return true;
    }
    return false;
  }

  void CheckBounds(const SchemaNode& node, const Json& value, const PathFrame* at) {
    long double number = internal::NumberOf(value);
    auto violate = [&](std::string_view op, const Bound& bound) {
      Report(at, [&] { return "must be " + std::string(op) + " " + bound.text + ", got " + DumpJson(value); });
    };
    if (node.minimum.set && number < node.minimum.value) violate(">=", node.minimum);
    if (node.maximum.set && number > node.maximum.value) violate("<=", node.maximum);
    if (node.exclusive_minimum.set && number <= node.exclusive_minimum.value) violate(">", node.exclusive_minimum);
    if (node.exclusive_maximum.set && number >= node.exclusive_maximum.value) violate("<", node.exclusive_maximum);
    if (node.multiple_of.set && !IsMultipleOf(value, node.multiple_of)) violate("a multiple of", node.multiple_of);
  }

  void CheckString(const SchemaNode& node, const std::string& text, const PathFrame* at) {
    if (node.min_length || node.max_length) CheckLength(node, text, at);
    if (node.pattern) {
      Result<bool> found = node.pattern->regex.Search(text);
      if (!found.ok()) {
        Report(at, [&] {
          return "pattern '" + node.pattern->source + "' could not be checked: " + found.status().message();
        });
      } else if (!*found) {
        Report(at, [&] { return "must match the pattern '" + node.pattern->source + "'"; });
      }
    }
    if (node.format != internal::Format::kNone && !internal::MatchesFormat(node.format, text)) {
      Report(at, [&] { return "must be a valid " + std::string(internal::FormatName(node.format)); });
    }
  }

  void CheckLength(const SchemaNode& node, const std::string& text, const PathFrame* at) {
    uint64_t length = CodePointCount(text);
    if (node.min_length && length < *node.min_length) {
      Report(at, [&] {
        return "must have at least " + CountText(*node.min_length, "character") + ", got " + std::to_string(length);
      });
    }
    if (node.max_length && length > *node.max_length) {
      Report(at, [&] {
        return "must have at most " + CountText(*node.max_length, "character") + ", got " + std::to_string(length);
      });
    }
  }

  void CheckArray(const SchemaNode& node, const Json::array_t& array, const PathFrame* at) {
    uint64_t size = array.size();
    if (node.min_items && size < *node.min_items) {
      Report(at, [&] {
        return "must have at least " + CountText(*node.min_items, "item") + ", got " + std::to_string(size);
      });
    }
    if (node.max_items && size > *node.max_items) {
      Report(at, [&] {
        return "must have at most " + CountText(*node.max_items, "item") + ", got " + std::to_string(size);
      });
    }
    if (node.unique_items) CheckUnique(array, at);
    for (size_t item_idx = 0; item_idx < array.size() && !Full(); ++item_idx) {
      uint32_t rule = item_idx < node.prefix_items.size() ? node.prefix_items[item_idx] : node.items;
      if (rule == kNoNode) continue;
      PathFrame frame{at, nullptr, item_idx};
      Check(rule, array[item_idx], &frame);
    }
    if (node.contains != kNoNode) CheckContains(node, array, at);
  }

  void CheckContains(const SchemaNode& node, const Json::array_t& array, const PathFrame* at) {
    uint64_t matches = 0;
    for (size_t item_idx = 0; item_idx < array.size(); ++item_idx) {
      PathFrame frame{at, nullptr, item_idx};
      matches += Matches(node.contains, array[item_idx], &frame);
    }
    uint64_t least = node.min_contains.value_or(1);
    if (matches < least) {
      Report(at, [&] {
        return "must contain at least " + CountText(least, "item") + " matching 'contains', got " +
               std::to_string(matches);
      });
    }
    if (node.max_contains && matches > *node.max_contains) {
      Report(at, [&] {
        return "must contain at most " + CountText(*node.max_contains, "item") + " matching 'contains', got " +
               std::to_string(matches);
      });
    }
  }

  void CheckUnique(const Json::array_t& array, const PathFrame* at) {
    auto report = [&](size_t first, size_t second) {
      if (first > second) std::swap(first, second);
      Report(at, [&] {
        return "must have unique items, but items " + std::to_string(first) + " and " + std::to_string(second) +
               " are equal";
      });
    };
    constexpr size_t kPairwiseLimit = 32;
    if (array.size() <= kPairwiseLimit) {
      for (size_t first = 0; first < array.size(); ++first) {
        for (size_t second = first + 1; second < array.size(); ++second) {
          if (internal::InstanceEqual(array[first], array[second])) return report(first, second);
        }
      }
      return;
    }
    // Large arrays: sort indices by value, then equal items are adjacent (O(n log n)).
    std::vector<size_t> order(array.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return array[a] < array[b]; });
    for (size_t pos = 1; pos < order.size(); ++pos) {
      if (internal::InstanceEqual(array[order[pos - 1]], array[order[pos]])) return report(order[pos - 1], order[pos]);
    }
  }

  void CheckObject(const SchemaNode& node, const Json& value, const PathFrame* at) {
    const auto& members = value.get_ref<const Json::object_t&>();
    auto rule = node.properties.begin();
    auto missing = [&](const std::string& name) {
      Report(at, [&] { return "missing required property '" + name + "'"; });
    };
    // Merge walk: both sequences are sorted by key.
    for (auto member = members.begin(); member != members.end() && !Full(); ++member) {
      for (; rule != node.properties.end() && rule->name < member->first; ++rule) {
        if (rule->required) missing(rule->name);
      }
      PathFrame frame{at, &member->first, 0};
      bool named = rule != node.properties.end() && rule->name == member->first;
      if (named) Check((rule++)->node, member->second, &frame);
      bool patterned = !node.pattern_properties.empty() && CheckPatterns(node, *member, &frame);
      if (!named && !patterned) CheckExtra(node, *member, at, &frame);
    }
    for (; rule != node.properties.end(); ++rule) {
      if (rule->required) missing(rule->name);
    }
    for (const std::string& name : node.required_other) {
      if (members.find(name) == members.end()) missing(name);
    }
    CheckPropertyCount(node, members.size(), at);
    if (node.property_names != kNoNode) CheckPropertyNames(node, members, at);
    CheckDependencies(node, value, members, at);
  }

  // Applies every patternProperties schema whose regex matches the member's name; returns
  // whether any matched (then additionalProperties does not apply).
  bool CheckPatterns(const SchemaNode& node, const Json::object_t::value_type& member, const PathFrame* frame) {
    bool any = false;
    for (const PatternRule& rule : node.pattern_properties) {
      Result<bool> found = rule.pattern.regex.Search(member.first);
      if (!found.ok()) {
        Report(frame, [&] {
          return "pattern '" + rule.pattern.source + "' could not be checked: " + found.status().message();
        });
        any = true;
      } else if (*found) {
        Check(rule.node, member.second, frame);
        any = true;
      }
    }
    return any;
  }

  void CheckExtra(const SchemaNode& node, const Json::object_t::value_type& member, const PathFrame* at,
                  const PathFrame* frame) {
    if (node.extra == Extra::kDeny) {
      Report(at, [&] { return "unexpected property '" + member.first + "'"; });
    } else if (node.extra == Extra::kSchema) {
      Check(node.extra_node, member.second, frame);
    }
  }

  void CheckPropertyCount(const SchemaNode& node, uint64_t count, const PathFrame* at) {
    if (node.min_properties && count < *node.min_properties) {
      Report(at, [&] {
        return "must have at least " + CountText(*node.min_properties, "property") + ", got " + std::to_string(count);
      });
    }
    if (node.max_properties && count > *node.max_properties) {
      Report(at, [&] {
        return "must have at most " + CountText(*node.max_properties, "property") + ", got " + std::to_string(count);
      });
    }
  }

  void CheckPropertyNames(const SchemaNode& node, const Json::object_t& members, const PathFrame* at) {
    for (const auto& member : members) {
      if (Full()) return;
      Json name(member.first);
      if (Matches(node.property_names, name, at)) continue;
      Report(at,
             [&] { return "property name '" + member.first + "': " + FirstViolation(node.property_names, name, at); });
    }
  }

  void CheckDependencies(const SchemaNode& node, const Json& value, const Json::object_t& members,
                         const PathFrame* at) {
    for (const internal::RequiredDependency& dependency : node.dependent_required) {
      if (members.find(dependency.name) == members.end()) continue;
      for (const std::string& name : dependency.required) {
        if (members.find(name) != members.end()) continue;
        Report(at, [&] { return "property '" + dependency.name + "' requires property '" + name + "'"; });
      }
    }
    for (const internal::SchemaDependency& dependency : node.dependent_schemas) {
      if (members.find(dependency.name) != members.end()) Check(dependency.node, value, at);
    }
  }

  void CheckApplicators(const SchemaNode& node, const Json& value, const PathFrame* at) {
    if (node.ref != kNoNode) Check(node.ref, value, at);
    for (uint32_t branch : node.all_of) Check(branch, value, at);
    if (!node.any_of.empty()) CheckAnyOf(node, value, at);
    if (!node.one_of.empty()) CheckOneOf(node, value, at);
    if (node.not_node != kNoNode && Matches(node.not_node, value, at)) {
      Report(at, [] { return std::string("must not match the schema in 'not'"); });
    }
    if (node.if_node != kNoNode) {
      uint32_t next = Matches(node.if_node, value, at) ? node.then_node : node.else_node;
      if (next != kNoNode) Check(next, value, at);
    }
  }

  // Why each branch failed, for a model to fix its value: "(0) expected string, got integer;
  // (1) expected null, got integer".
  std::string BranchFailures(const std::vector<uint32_t>& branches, const Json& value, const PathFrame* at) const {
    constexpr size_t kShown = 4;
    std::string out;
    for (size_t i = 0; i < branches.size() && i < kShown; ++i) {
      if (i > 0) out += "; ";
      out += "(" + std::to_string(i) + ") " + FirstViolation(branches[i], value, at);
    }
    if (branches.size() > kShown) out += "; ...";
    return out;
  }

  void CheckAnyOf(const SchemaNode& node, const Json& value, const PathFrame* at) {
    for (uint32_t branch : node.any_of) {
      if (Matches(branch, value, at)) return;
    }
    Report(at, [&] { return "must match at least one schema in anyOf: " + BranchFailures(node.any_of, value, at); });
  }

  void CheckOneOf(const SchemaNode& node, const Json& value, const PathFrame* at) {
    size_t matched[2] = {0, 0};  // the first two matching branches (no allocation)
    size_t count = 0;
    for (size_t i = 0; i < node.one_of.size() && count < 2; ++i) {
      if (Matches(node.one_of[i], value, at)) matched[count++] = i;
    }
    if (count == 1) return;
    if (count == 0) {
      return Report(at, [&] {
        return "must match exactly one schema in oneOf, matched none: " + BranchFailures(node.one_of, value, at);
      });
    }
    Report(at, [&] {
      return "must match exactly one schema in oneOf, but matches schemas " + std::to_string(matched[0]) + " and " +
             std::to_string(matched[1]);
    });
  }

  const SchemaTree& tree_;
  size_t max_;
  std::vector<SchemaViolation>* out_;
  int depth_;
  size_t failures_ = 0;
};

}  // namespace

Status CheckSchema(const Json& schema, const SchemaOptions& options) {
  return internal::CompileSchemaTree(schema, options).status();
}

std::vector<SchemaViolation> Validate(const Json& schema, const Json& instance, size_t max_violations) {
  Result<std::shared_ptr<const SchemaTree>> tree = internal::CompileSchemaTree(schema, SchemaOptions{});
  if (!tree.ok()) {
    if (max_violations == 0) return {};
    return {SchemaViolation{"", "schema is invalid: " + tree.status().message()}};
  }
  std::vector<SchemaViolation> violations;
  Validator(**tree, max_violations, &violations).Check(0, instance, nullptr);
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

Result<CompiledSchema> CompiledSchema::Compile(const Json& schema, const SchemaOptions& options) {
  ENVFORGE_ASSIGN_OR_RETURN(auto tree, internal::CompileSchemaTree(schema, options));
  CompiledSchema compiled;
  compiled.schema_ = schema;
  compiled.tree_ = std::move(tree);
  return compiled;
}

std::vector<SchemaViolation> CompiledSchema::Validate(const Json& instance, size_t max_violations) const {
  std::vector<SchemaViolation> violations;
  if (tree_ != nullptr) Validator(*tree_, max_violations, &violations).Check(0, instance, nullptr);
  return violations;
}

}  // namespace envforge::toolsets
