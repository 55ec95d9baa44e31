// JSON Schema compilation (and so CheckSchema): one pass over the schema document that turns
// each schema object into a SchemaNode, keyword by keyword through a table of handlers, then a
// second phase that resolves $refs (local JSON pointers, memoised by pointer, so a recursive
// schema becomes a cycle of node indices) and rejects cycles that would never descend into the
// instance.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <string_view>
#include <utility>

#include "base/percent_decode.h"
#include "toolsets/internal/json_schema_tree.h"

namespace envforge::toolsets::internal {
namespace {

Status Error(const std::string& pointer, std::string problem) {
  std::string message = pointer.empty() ? std::string("(root)") : pointer;
  message += ": ";
  message += problem;
  return InvalidArgumentError(std::move(message));
}

struct TypeName {
  std::string_view name;
  uint8_t bit;
};
constexpr TypeName kTypeNames[] = {
    {"object", kTypeObject}, {"array", kTypeArray},     {"string", kTypeString}, {"integer", kTypeInteger},
    {"number", kTypeNumber}, {"boolean", kTypeBoolean}, {"null", kTypeNull},
};

std::optional<uint8_t> TypeBitOf(std::string_view name) {
  for (const TypeName& type : kTypeNames) {
    if (type.name == name) return type.bit;
  }
  return std::nullopt;
}

SchemaDialect DialectOf(const Json& root, SchemaDialect fallback) {
  if (!root.is_object()) return fallback;
  auto it = root.find("$schema");
  if (it == root.end() || !it->is_string()) return fallback;
  const std::string& uri = it->get_ref<const std::string&>();
  for (std::string_view old : {"draft-04", "draft-06", "draft-07"}) {
    if (uri.find(old) != std::string::npos) return SchemaDialect::kDraft7;
  }
  for (std::string_view modern : {"2019-09", "2020-12"}) {
    if (uri.find(modern) != std::string::npos) return SchemaDialect::kDraft2020;
  }
  return fallback;
}

bool IsAnnotation(std::string_view keyword) {
  static constexpr std::string_view kAnnotations[] = {
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
      "contentSchema",  // the schema of the JSON a string carries (tool_call_grammar.h decodes by it)
      // OpenAPI's hint for a tagged union, which Pydantic emits next to oneOf; oneOf validates.
      "discriminator",
  };
  return keyword.starts_with("x-") ||
         std::find(std::begin(kAnnotations), std::end(kAnnotations), keyword) != std::end(kAnnotations);
}

Status CheckAnnotation(std::string_view keyword, const Json& value, const std::string& at) {
  static constexpr std::string_view kStrings[] = {"title",    "description",     "$schema",         "$id",
                                                  "$comment", "contentEncoding", "contentMediaType"};
  if (std::find(std::begin(kStrings), std::end(kStrings), keyword) != std::end(kStrings) && !value.is_string()) {
    return Error(at, "must be a string");
  }
  if ((keyword == "readOnly" || keyword == "writeOnly" || keyword == "deprecated") && !value.is_boolean()) {
    return Error(at, "must be a boolean");
  }
  if (keyword == "examples" && !value.is_array()) return Error(at, "must be an array");
  if (keyword == "discriminator" && !value.is_object()) return Error(at, "must be an object");
  if (keyword == "contentSchema" && !value.is_object() && !value.is_boolean()) {
    return Error(at, "must be a schema (an object or a boolean)");
  }
  return Status::Ok();
}

// The canonical pointer (as ChildPointer builds them) of a "#/a/b" fragment, resolved against
// the document so that a pointer to nothing fails here.
Result<std::string> ResolveFragment(const Json& root, std::string_view fragment, const std::string& at,
                                    const std::string& ref) {
  // A $ref is a URI, so its fragment may be percent-encoded ("%7E" -> "~").
  std::optional<std::string> decoded = PercentDecodeStrict(fragment);
  if (!decoded) return Error(at, "'" + ref + "' has a malformed percent-escape");
  std::string pointer;
  const Json* here = &root;
  size_t start = 1;  // past the leading '/'
  while (start <= decoded->size() && !decoded->empty()) {
    size_t slash = decoded->find('/', start);
    std::string token = decoded->substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    std::string key;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        key += token[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        key += token[i];
      }
    }
    if (here->is_object() && here->contains(key)) {
      here = &(*here)[key];
    } else if (here->is_array() && !key.empty() &&
               std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }) && key.size() < 10 &&
               std::stoul(key) < here->size()) {
      here = &(*here)[std::stoul(key)];
    } else {
      return Error(at, "'" + ref + "' points at nothing in this schema");
    }
    pointer = ChildPointer(pointer, key);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return pointer;
}

// ECMA-262's "\uHHHH" escape, common in JSON Schema patterns ("^[\u0000-\u007F]*$"), is not
// Perl_NG syntax (Oniguruma reads it as a literal "u0041"): rewrite it as "\x{HHHH}", which is.
// An escaped backslash ("\\u0041") stays as it is.
std::string TranslateEcmaEscapes(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size());
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 >= pattern.size()) {
      out += pattern[i];
      continue;
    }
    bool unicode = pattern[i + 1] == 'u' && i + 5 < pattern.size() &&
                   std::all_of(pattern.begin() + static_cast<long>(i) + 2, pattern.begin() + static_cast<long>(i) + 6,
                               [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
    if (unicode) {
      out += "\\x{" + pattern.substr(i + 2, 4) + "}";
      i += 5;
    } else {
      out += pattern.substr(i, 2);  // any other escape, kept whole so "\\\\" cannot start one
      ++i;
    }
  }
  return out;
}

class SchemaCompiler;

// The schema object being compiled, for handlers that need its other keywords.
struct NodeContext {
  SchemaNode& node;
  const Json& schema;
  const std::string& pointer;
  bool under_id;  // below a nested "$id" that changes the base URI
  uint32_t additional_items = kNoNode;
};

using Handler = Status (SchemaCompiler::*)(const Json& value, const std::string& at, NodeContext& ctx);

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, SchemaDialect dialect, SchemaTree& tree)
      : root_(root), dialect_(dialect), tree_(tree) {}

  Status CompileDocument() {
    ENVFORGE_ASSIGN_OR_RETURN(uint32_t root, Compile(root_, "", false));
    (void)root;  // always 0
    ENVFORGE_RETURN_IF_ERROR(ResolveRefs());
    return CheckInPlaceCycles();
  }

  // Compiles `schema` (found at `pointer` in the document) once and returns its node index.
  Result<uint32_t> Compile(const Json& schema, const std::string& pointer, bool under_id) {
    if (auto known = by_pointer_.find(pointer); known != by_pointer_.end()) return known->second;
    uint32_t index = static_cast<uint32_t>(tree_.nodes.size());
    tree_.nodes.emplace_back();
    pointers_.push_back(pointer);
    by_pointer_.emplace(pointer, index);
    SchemaNode node;
    if (schema.is_boolean()) {
      node.reject_all = !schema.get<bool>();
    } else if (!schema.is_object()) {
      return Error(pointer, "a schema must be an object or a boolean, got " + std::string(InstanceTypeName(schema)));
    } else {
      ENVFORGE_RETURN_IF_ERROR(CompileObject(schema, pointer, under_id || ChangesBase(schema, pointer), node));
    }
    tree_.nodes[index] = std::move(node);  // children were appended meanwhile; index is stable
    return index;
  }

 private:
  struct PendingRef {
    uint32_t node;
    std::string ref;
    std::string at;
  };

  static bool ChangesBase(const Json& schema, const std::string& pointer) {
    if (pointer.empty()) return false;  // the root's $id is the document's own base
    auto id = schema.find("$id");
    return id != schema.end() && id->is_string() && !id->get_ref<const std::string&>().starts_with("#");
  }

  Status CompileObject(const Json& schema, const std::string& pointer, bool under_id, SchemaNode& node) {
    NodeContext ctx{node, schema, pointer, under_id};
    for (const auto& [keyword, value] : schema.items()) {
      const std::string at = ChildPointer(pointer, keyword);
      if (Handler handler = HandlerFor(keyword)) {
        ENVFORGE_RETURN_IF_ERROR((this->*handler)(value, at, ctx));
      } else if (IsAnnotation(keyword)) {
        ENVFORGE_RETURN_IF_ERROR(CheckAnnotation(keyword, value, at));
      } else {
        return Error(at, "unsupported keyword '" + keyword + "'");
      }
    }
    ENVFORGE_RETURN_IF_ERROR(FinishArrayRules(ctx));
    ENVFORGE_RETURN_IF_ERROR(FinishObjectRules(ctx));
    return Status::Ok();
  }

  Handler HandlerFor(std::string_view keyword) const {
    struct Entry {
      std::string_view keyword;
      Handler handler;
    };
    static const Entry kHandlers[] = {
        {"type", &SchemaCompiler::OnType},
        {"enum", &SchemaCompiler::OnEnum},
        {"const", &SchemaCompiler::OnConst},
        {"minimum", &SchemaCompiler::OnMinimum},
        {"maximum", &SchemaCompiler::OnMaximum},
        {"exclusiveMinimum", &SchemaCompiler::OnExclusiveMinimum},
        {"exclusiveMaximum", &SchemaCompiler::OnExclusiveMaximum},
        {"multipleOf", &SchemaCompiler::OnMultipleOf},
        {"minLength", &SchemaCompiler::OnMinLength},
        {"maxLength", &SchemaCompiler::OnMaxLength},
        {"pattern", &SchemaCompiler::OnPattern},
        {"format", &SchemaCompiler::OnFormat},
        {"items", &SchemaCompiler::OnItems},
        {"prefixItems", &SchemaCompiler::OnPrefixItems},
        {"additionalItems", &SchemaCompiler::OnAdditionalItems},
        {"minItems", &SchemaCompiler::OnMinItems},
        {"maxItems", &SchemaCompiler::OnMaxItems},
        {"uniqueItems", &SchemaCompiler::OnUniqueItems},
        {"contains", &SchemaCompiler::OnContains},
        {"minContains", &SchemaCompiler::OnMinContains},
        {"maxContains", &SchemaCompiler::OnMaxContains},
        {"properties", &SchemaCompiler::OnProperties},
        {"required", &SchemaCompiler::OnRequired},
        {"additionalProperties", &SchemaCompiler::OnAdditionalProperties},
        {"patternProperties", &SchemaCompiler::OnPatternProperties},
        {"propertyNames", &SchemaCompiler::OnPropertyNames},
        {"minProperties", &SchemaCompiler::OnMinProperties},
        {"maxProperties", &SchemaCompiler::OnMaxProperties},
        {"dependentRequired", &SchemaCompiler::OnDependentRequired},
        {"dependentSchemas", &SchemaCompiler::OnDependentSchemas},
        {"dependencies", &SchemaCompiler::OnDependencies},
        {"$ref", &SchemaCompiler::OnRef},
        {"allOf", &SchemaCompiler::OnAllOf},
        {"anyOf", &SchemaCompiler::OnAnyOf},
        {"oneOf", &SchemaCompiler::OnOneOf},
        {"not", &SchemaCompiler::OnNot},
        {"if", &SchemaCompiler::OnIf},
        {"then", &SchemaCompiler::OnThen},
        {"else", &SchemaCompiler::OnElse},
        {"$defs", &SchemaCompiler::OnDefinitions},
        {"definitions", &SchemaCompiler::OnDefinitions},
    };
    if ((keyword == "prefixItems" && dialect_ == SchemaDialect::kDraft7) ||
        (keyword == "additionalItems" && dialect_ == SchemaDialect::kDraft2020)) {
      return nullptr;  // not a keyword of that dialect
    }
    for (const Entry& entry : kHandlers) {
      if (entry.keyword == keyword) return entry.handler;
    }
    return nullptr;
  }

  // A subschema: `value` at `at`, under the context's base.
  Result<uint32_t> Sub(const Json& value, const std::string& at, const NodeContext& ctx) {
    return Compile(value, at, ctx.under_id);
  }

  // --- any type ------------------------------------------------------------------------------

  Status OnType(const Json& value, const std::string& at, NodeContext& ctx) {
    SchemaNode& node = ctx.node;
    auto add = [&](const Json& name) -> Status {
      if (!name.is_string()) return Error(at, "must be a type name or an array of type names");
      const std::string& text = name.get_ref<const std::string&>();
      std::optional<uint8_t> bit = TypeBitOf(text);
      if (!bit) {
        return Error(at,
                     "unknown type '" + text + "' (expected object, array, string, integer, number, boolean or null)");
      }
      if (node.types & *bit) return Error(at, "type '" + text + "' is listed twice");
      node.types |= *bit;
      if (!node.type_text.empty()) node.type_text += " or ";
      node.type_text += text;
      return Status::Ok();
    };
    if (value.is_string()) return add(value);
    if (!value.is_array() || value.empty()) return Error(at, "must be a type name or a non-empty array of type names");
    for (const Json& name : value) ENVFORGE_RETURN_IF_ERROR(add(name));
    return Status::Ok();
  }

  Status OnEnum(const Json& value, const std::string& at, NodeContext& ctx) {
    // An empty enum is a schema nothing satisfies (JSON Schema says so), not a malformed one.
    if (!value.is_array()) return Error(at, "must be an array");
    ctx.node.has_enum = true;
    ctx.node.enum_values = value;
    ctx.node.enum_text = DumpJson(value);
    return Status::Ok();
  }

  Status OnConst(const Json& value, const std::string&, NodeContext& ctx) {
    ctx.node.has_const = true;
    ctx.node.const_value = value;
    ctx.node.const_text = DumpJson(value);
    return Status::Ok();
  }

  Status OnRef(const Json& value, const std::string& at, NodeContext& ctx) {
    if (!value.is_string()) return Error(at, "must be a string (a URI reference)");
    if (ctx.under_id) {
      return Error(at,
                   "a $ref below a nested \"$id\" (a different base URI) is not supported; use \"$defs\" "
                   "in the root schema and \"#/$defs/...\" references");
    }
    // Resolved after the walk (the target may not be compiled yet); Compile registered this
    // node's index under its pointer before compiling its keywords.
    pending_refs_.push_back(PendingRef{by_pointer_.at(ctx.pointer), value.get<std::string>(), at});
    return Status::Ok();
  }

  Status OnSchemaList(const Json& value, const std::string& at, NodeContext& ctx, std::vector<uint32_t>& out) {
    if (!value.is_array() || value.empty()) return Error(at, "must be a non-empty array of schemas");
    for (size_t i = 0; i < value.size(); ++i) {
      ENVFORGE_ASSIGN_OR_RETURN(uint32_t child, Sub(value[i], ChildPointer(at, std::to_string(i)), ctx));
      out.push_back(child);
    }
    return Status::Ok();
  }
  Status OnAllOf(const Json& v, const std::string& at, NodeContext& ctx) {
    return OnSchemaList(v, at, ctx, ctx.node.all_of);
  }
  Status OnAnyOf(const Json& v, const std::string& at, NodeContext& ctx) {
    return OnSchemaList(v, at, ctx, ctx.node.any_of);
  }
  Status OnOneOf(const Json& v, const std::string& at, NodeContext& ctx) {
    return OnSchemaList(v, at, ctx, ctx.node.one_of);
  }

  Status OnSingle(const Json& value, const std::string& at, NodeContext& ctx, uint32_t& out) {
    ENVFORGE_ASSIGN_OR_RETURN(out, Sub(value, at, ctx));
    return Status::Ok();
  }
  Status OnNot(const Json& v, const std::string& at, NodeContext& ctx) {
    return OnSingle(v, at, ctx, ctx.node.not_node);
  }
  Status OnIf(const Json& v, const std::string& at, NodeContext& ctx) { return OnSingle(v, at, ctx, ctx.node.if_node); }
  Status OnThen(const Json& v, const std::string& at, NodeContext& ctx) {
    return OnSingle(v, at, ctx, ctx.node.then_node);
  }
  Status OnElse(const Json& v, const std::string& at, NodeContext& ctx) {
    return OnSingle(v, at, ctx, ctx.node.else_node);
  }

  Status OnDefinitions(const Json& value, const std::string& at, NodeContext& ctx) {
    if (!value.is_object()) return Error(at, "must be an object of schemas");
    for (const auto& [name, child] : value.items()) {
      ENVFORGE_RETURN_IF_ERROR(Sub(child, ChildPointer(at, name), ctx).status());
    }
    return Status::Ok();
  }

  // --- numbers and strings -------------------------------------------------------------------

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
  Status OnMinimum(const Json& v, const std::string& at, NodeContext& ctx) {
    return CompileBound(v, at, ctx.node.minimum, ctx.node);
  }
  Status OnMaximum(const Json& v, const std::string& at, NodeContext& ctx) {
    return CompileBound(v, at, ctx.node.maximum, ctx.node);
  }
  Status OnExclusiveMinimum(const Json& v, const std::string& at, NodeContext& ctx) {
    return CompileBound(v, at, ctx.node.exclusive_minimum, ctx.node);
  }
  Status OnExclusiveMaximum(const Json& v, const std::string& at, NodeContext& ctx) {
    return CompileBound(v, at, ctx.node.exclusive_maximum, ctx.node);
  }
  Status OnMultipleOf(const Json& value, const std::string& at, NodeContext& ctx) {
    if (!value.is_number() || NumberOf(value) <= 0) return Error(at, "must be a number greater than 0");
    return CompileBound(value, at, ctx.node.multiple_of, ctx.node);
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
  Status OnMinLength(const Json& v, const std::string& at, NodeContext& ctx) {
    return CompileCount(v, at, ctx.node.min_length);
  }
  Status OnMaxLength(const Json& v, const std::string& at, NodeContext& ctx) {
    return CompileCount(v, at, ctx.node.max_length);
  }
  Status OnMinItems(const Json& v, const std::string& at, NodeContext& ctx) {
    return CompileCount(v, at, ctx.node.min_items);
  }
  Status OnMaxItems(const Json& v, const std::string& at, NodeContext& ctx) {
    return CompileCount(v, at, ctx.node.max_items);
  }
  Status OnMinContains(const Json& v, const std::string& at, NodeContext& ctx) {
    return CompileCount(v, at, ctx.node.min_contains);
  }
  Status OnMaxContains(const Json& v, const std::string& at, NodeContext& ctx) {
    return CompileCount(v, at, ctx.node.max_contains);
  }
  Status OnMinProperties(const Json& v, const std::string& at, NodeContext& ctx) {
    ctx.node.has_object_rules = true;
    return CompileCount(v, at, ctx.node.min_properties);
  }
  Status OnMaxProperties(const Json& v, const std::string& at, NodeContext& ctx) {
    ctx.node.has_object_rules = true;
    return CompileCount(v, at, ctx.node.max_properties);
  }

  static Result<Pattern> CompilePattern(const Json& value, const std::string& at) {
    if (!value.is_string()) return Error(at, "must be a string (a regular expression)");
    const std::string& source = value.get_ref<const std::string&>();
    const std::string translated = TranslateEcmaEscapes(source);
    Result<Regex> regex = Regex::Compile(translated, RegexSyntax::kPerl);
    if (!regex.ok()) {
      // base/regex.h's message names the translated pattern; name the one the schema wrote.
      std::string reason = regex.status().message();
      const std::string prefix = "regex '" + translated + "': ";
      if (reason.starts_with(prefix)) reason = reason.substr(prefix.size());
      return Error(at, "regex '" + source + "': " + reason);
    }
    return Pattern{std::move(*regex), source};
  }

  Status OnPattern(const Json& value, const std::string& at, NodeContext& ctx) {
    ENVFORGE_ASSIGN_OR_RETURN(Pattern pattern, CompilePattern(value, at));
    ctx.node.pattern = std::move(pattern);
    return Status::Ok();
  }

  Status OnFormat(const Json& value, const std::string& at, NodeContext& ctx) {
    if (!value.is_string()) return Error(at, "must be a string");
    // Formats outside the asserted list are annotations (2020-12's default).
    ctx.node.format = FormatByName(value.get_ref<const std::string&>()).value_or(Format::kNone);
    return Status::Ok();
  }

  // --- arrays --------------------------------------------------------------------------------

  Status OnItems(const Json& value, const std::string& at, NodeContext& ctx) {
    if (value.is_object() || value.is_boolean()) return OnSingle(value, at, ctx, ctx.node.items);
    if (!value.is_array()) return Error(at, "must be a schema");
    if (dialect_ == SchemaDialect::kDraft2020) {
      return Error(at, "must be a schema (the array form is draft-07's; 2020-12 uses prefixItems)");
    }
    if (ctx.schema.contains("prefixItems")) return Error(at, "the array form cannot be combined with prefixItems");
    for (size_t i = 0; i < value.size(); ++i) {
      ENVFORGE_ASSIGN_OR_RETURN(uint32_t child, Sub(value[i], ChildPointer(at, std::to_string(i)), ctx));
      ctx.node.prefix_items.push_back(child);
    }
    return Status::Ok();
  }

  Status OnPrefixItems(const Json& value, const std::string& at, NodeContext& ctx) {
    return OnSchemaList(value, at, ctx, ctx.node.prefix_items);
  }

  Status OnAdditionalItems(const Json& value, const std::string& at, NodeContext& ctx) {
    return OnSingle(value, at, ctx, ctx.additional_items);
  }

  Status OnUniqueItems(const Json& value, const std::string& at, NodeContext& ctx) {
    if (!value.is_boolean()) return Error(at, "must be a boolean");
    ctx.node.unique_items = value.get<bool>();
    return Status::Ok();
  }

  Status OnContains(const Json& value, const std::string& at, NodeContext& ctx) {
    return OnSingle(value, at, ctx, ctx.node.contains);
  }

  // additionalItems applies only after draft-07's tuple `items`; it is ignored (checked, though)
  // next to a schema `items` or none. min/maxContains apply only with contains.
  static Status FinishArrayRules(NodeContext& ctx) {
    auto items = ctx.schema.find("items");
    if (items != ctx.schema.end() && items->is_array()) ctx.node.items = ctx.additional_items;
    if (ctx.node.contains == kNoNode) {
      ctx.node.min_contains.reset();
      ctx.node.max_contains.reset();
    }
    return Status::Ok();
  }

  // --- objects -------------------------------------------------------------------------------

  Status OnProperties(const Json& value, const std::string& at, NodeContext& ctx) {
    if (!value.is_object()) return Error(at, "must be an object of schemas");
    ctx.node.has_object_rules = true;
    for (const auto& [name, child] : value.items()) {
      ENVFORGE_ASSIGN_OR_RETURN(uint32_t child_index, Sub(child, ChildPointer(at, name), ctx));
      ctx.node.properties.push_back(PropertyRule{name, child_index, false});
    }
    return Status::Ok();
  }

  static Status CheckNames(const Json& value, const std::string& at) {
    if (!value.is_array()) return Error(at, "must be an array of strings");
    for (const Json& name : value) {
      if (!name.is_string()) return Error(at, "must be an array of strings");
    }
    return Status::Ok();
  }

  Status OnRequired(const Json& value, const std::string& at, NodeContext& ctx) {
    ENVFORGE_RETURN_IF_ERROR(CheckNames(value, at));
    ctx.node.has_object_rules = true;
    return Status::Ok();  // resolved against properties in FinishObjectRules
  }

  Status OnAdditionalProperties(const Json& value, const std::string& at, NodeContext& ctx) {
    ctx.node.has_object_rules = true;
    if (value.is_boolean()) {
      ctx.node.extra = value.get<bool>() ? Extra::kAllow : Extra::kDeny;
      return Status::Ok();
    }
    if (!value.is_object()) return Error(at, "must be a boolean or a schema");
    ctx.node.extra = Extra::kSchema;
    return OnSingle(value, at, ctx, ctx.node.extra_node);
  }

  Status OnPatternProperties(const Json& value, const std::string& at, NodeContext& ctx) {
    if (!value.is_object()) return Error(at, "must be an object of schemas keyed by regular expressions");
    ctx.node.has_object_rules = true;
    for (const auto& [source, child] : value.items()) {
      const std::string child_at = ChildPointer(at, source);
      ENVFORGE_ASSIGN_OR_RETURN(Pattern pattern, CompilePattern(Json(source), child_at));
      ENVFORGE_ASSIGN_OR_RETURN(uint32_t child_index, Sub(child, child_at, ctx));
      ctx.node.pattern_properties.push_back(PatternRule{std::move(pattern), child_index});
    }
    return Status::Ok();
  }

  Status OnPropertyNames(const Json& value, const std::string& at, NodeContext& ctx) {
    ctx.node.has_object_rules = true;
    return OnSingle(value, at, ctx, ctx.node.property_names);
  }

  Status OnDependentRequired(const Json& value, const std::string& at, NodeContext& ctx) {
    if (!value.is_object()) return Error(at, "must be an object of string arrays");
    ctx.node.has_object_rules = true;
    for (const auto& [name, names] : value.items())
      ENVFORGE_RETURN_IF_ERROR(AddRequiredDependency(name, names, at, ctx));
    return Status::Ok();
  }

  Status AddRequiredDependency(const std::string& name, const Json& names, const std::string& at, NodeContext& ctx) {
    ENVFORGE_RETURN_IF_ERROR(CheckNames(names, ChildPointer(at, name)));
    ctx.node.dependent_required.push_back(RequiredDependency{name, names.get<std::vector<std::string>>()});
    return Status::Ok();
  }

  Status OnDependentSchemas(const Json& value, const std::string& at, NodeContext& ctx) {
    if (!value.is_object()) return Error(at, "must be an object of schemas");
    ctx.node.has_object_rules = true;
    for (const auto& [name, child] : value.items()) ENVFORGE_RETURN_IF_ERROR(AddSchemaDependency(name, child, at, ctx));
    return Status::Ok();
  }

  Status AddSchemaDependency(const std::string& name, const Json& child, const std::string& at, NodeContext& ctx) {
    ENVFORGE_ASSIGN_OR_RETURN(uint32_t child_index, Sub(child, ChildPointer(at, name), ctx));
    ctx.node.dependent_schemas.push_back(SchemaDependency{name, child_index});
    return Status::Ok();
  }

  // draft-07: each value is an array of names (dependentRequired) or a schema (dependentSchemas).
  Status OnDependencies(const Json& value, const std::string& at, NodeContext& ctx) {
    if (!value.is_object()) return Error(at, "must be an object of string arrays or schemas");
    ctx.node.has_object_rules = true;
    for (const auto& [name, dependency] : value.items()) {
      ENVFORGE_RETURN_IF_ERROR(dependency.is_array() ? AddRequiredDependency(name, dependency, at, ctx)
                                                     : AddSchemaDependency(name, dependency, at, ctx));
    }
    return Status::Ok();
  }

  // Runs once the whole schema object has been read ("required" may precede "properties"): sorts
  // the properties for the merge walk and splits "required" into flags on properties and the
  // names no property describes.
  static Status FinishObjectRules(NodeContext& ctx) {
    SchemaNode& node = ctx.node;
    std::sort(node.properties.begin(), node.properties.end(),
              [](const PropertyRule& a, const PropertyRule& b) { return a.name < b.name; });
    auto required = ctx.schema.find("required");
    if (required == ctx.schema.end()) return Status::Ok();
    for (const Json& name_json : *required) {
      const std::string& name = name_json.get_ref<const std::string&>();
      auto it = std::lower_bound(node.properties.begin(), node.properties.end(), name,
                                 [](const PropertyRule& rule, const std::string& key) { return rule.name < key; });
      if (it != node.properties.end() && it->name == name) {
        it->required = true;
        continue;
      }
      if (node.extra == Extra::kDeny && !MatchesAnyPattern(node, name)) {
        return Error(ChildPointer(ctx.pointer, "required"),
                     "required property '" + name +
                         "' is not in properties while additionalProperties is false; nothing can match");
      }
      if (std::find(node.required_other.begin(), node.required_other.end(), name) == node.required_other.end()) {
        node.required_other.push_back(name);
      }
    }
    return Status::Ok();
  }

  static bool MatchesAnyPattern(const SchemaNode& node, const std::string& name) {
    for (const PatternRule& rule : node.pattern_properties) {
      Result<bool> found = rule.pattern.regex.Search(name);
      if (!found.ok() || *found) return true;  // unknown counts as possible
    }
    return false;
  }

  // --- $ref resolution and cycles --------------------------------------------------------------

  Result<std::string> RefTarget(const PendingRef& pending) const {
    std::string_view ref = pending.ref;
    if (auto id = root_.is_object() ? root_.find("$id") : root_.end();
        root_.is_object() && id != root_.end() && id->is_string()) {
      std::string_view base = id->get_ref<const std::string&>();
      if (base.ends_with('#')) base.remove_suffix(1);
      if (!base.empty() && ref.starts_with(base)) ref.remove_prefix(base.size());  // the document itself
    }
    if (!ref.starts_with('#')) {
      return Error(pending.at,
                   "'" + pending.ref + "' is a remote reference; only local references (\"#/...\") are supported");
    }
    if (ref.size() > 1 && ref[1] != '/') {
      return Error(pending.at,
                   "'" + pending.ref + "' names an anchor; only JSON-pointer references (\"#/...\") are supported");
    }
    return ResolveFragment(root_, ref.substr(1), pending.at, pending.ref);
  }

  // Links every $ref to its target's node, compiling targets the walk did not reach (a pointer
  // into an "x-" annotation, say); those may add refs of their own.
  Status ResolveRefs() {
    for (size_t i = 0; i < pending_refs_.size(); ++i) {
      PendingRef pending = pending_refs_[i];  // a copy: Compile may grow the vector
      ENVFORGE_ASSIGN_OR_RETURN(std::string pointer, RefTarget(pending));
      const Json& target = pointer.empty() ? root_ : root_.at(Json::json_pointer(pointer));
      ENVFORGE_ASSIGN_OR_RETURN(uint32_t node, Compile(target, pointer, false));
      tree_.nodes[pending.node].ref = node;
      if (dialect_ == SchemaDialect::kDraft7) KeepOnlyRef(tree_.nodes[pending.node]);
    }
    return Status::Ok();
  }

  // draft-07: "All other properties in a "$ref" object MUST be ignored."
  static void KeepOnlyRef(SchemaNode& node) {
    SchemaNode only;
    only.ref = node.ref;
    node = std::move(only);
  }

  static void InPlaceEdges(const SchemaNode& node, std::vector<uint32_t>& out) {
    out.clear();
    for (uint32_t child : {node.ref, node.not_node, node.if_node, node.then_node, node.else_node}) {
      if (child != kNoNode) out.push_back(child);
    }
    for (const auto* list : {&node.all_of, &node.any_of, &node.one_of})
      out.insert(out.end(), list->begin(), list->end());
    for (const SchemaDependency& dependency : node.dependent_schemas) out.push_back(dependency.node);
  }

  // A cycle through in-place applicators only would check the same instance forever: depth-first
  // search (iterative: chains of $refs can be long) with the usual three colours.
  Status CheckInPlaceCycles() const {
    enum Colour : uint8_t { kWhite, kGrey, kBlack };
    std::vector<Colour> colour(tree_.nodes.size(), kWhite);
    std::vector<uint32_t> edges;
    for (uint32_t start = 0; start < tree_.nodes.size(); ++start) {
      if (colour[start] != kWhite) continue;
      std::vector<std::pair<uint32_t, std::vector<uint32_t>>> stack;
      InPlaceEdges(tree_.nodes[start], edges);
      stack.emplace_back(start, edges);
      colour[start] = kGrey;
      while (!stack.empty()) {
        auto& [node, pending] = stack.back();
        if (pending.empty()) {
          colour[node] = kBlack;
          stack.pop_back();
          continue;
        }
        uint32_t next = pending.back();
        pending.pop_back();
        if (colour[next] == kGrey) return CycleError(stack, next);
        if (colour[next] == kWhite) {
          colour[next] = kGrey;
          InPlaceEdges(tree_.nodes[next], edges);
          stack.emplace_back(next, edges);
        }
      }
    }
    return Status::Ok();
  }

  Status CycleError(const std::vector<std::pair<uint32_t, std::vector<uint32_t>>>& stack, uint32_t back_to) const {
    std::string chain;
    bool in_cycle = false;
    for (const auto& frame : stack) {
      in_cycle = in_cycle || frame.first == back_to;
      if (!in_cycle) continue;
      chain += (pointers_[frame.first].empty() ? "#" : "#" + pointers_[frame.first]) + " -> ";
    }
    chain += pointers_[back_to].empty() ? "#" : "#" + pointers_[back_to];
    return Error(pointers_[back_to],
                 "circular schema: " + chain + " applies to the same value forever without descending into it");
  }

  const Json& root_;
  SchemaDialect dialect_;
  SchemaTree& tree_;
  std::map<std::string, uint32_t, std::less<>> by_pointer_;  // schema pointer -> node
  std::vector<std::string> pointers_;                        // node -> schema pointer
  std::vector<PendingRef> pending_refs_;
};

}  // namespace

Result<std::shared_ptr<const SchemaTree>> CompileSchemaTree(const Json& schema, const SchemaOptions& options) {
  auto tree = std::make_shared<SchemaTree>();
  SchemaCompiler compiler(schema, DialectOf(schema, options.dialect), *tree);
  ENVFORGE_RETURN_IF_ERROR(compiler.CompileDocument());
  return std::shared_ptr<const SchemaTree>(std::move(tree));
}

}  // namespace envforge::toolsets::internal
