// The DSML tool-call grammar as a byte automaton: literal tables matched as sorted ranges, free
// text watched through a short tail for its terminator and the special tokens, and a
// pushdown JSON recognizer for string="false" values.
#include "inference/tool_call_grammar.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "base/percent_decode.h"
#include "inference/backend.h"
#include "inference/chat_format.h"

namespace envforge::inference {
namespace {

constexpr std::string_view kBlockLead = "\n\n<｜DSML｜function_calls>";
constexpr std::string_view kFunctionCallsRest = "function_calls>";
constexpr std::string_view kParameterRest = "parameter>";
// U+FF5C, of which every DSML tag and every ｜-delimited special token is built.
constexpr std::string_view kFullwidthBar = "｜";
constexpr std::string_view kSpecialTokens[] = {kBosToken,       kEosToken,   kUserToken,
                                               kAssistantToken, kThinkStart, kThinkEnd};
constexpr int kMaxGapWhitespace = 8;
constexpr int64_t kMaxFreeNameBytes = 64;
constexpr uint8_t kMaxIntegerDigits = 18, kMaxFractionDigits = 17, kMaxExponentDigits = 2;

// Top-level JSON kinds (Param::json_kinds).
constexpr uint8_t kObject = 1, kArray = 2, kString = 4, kNumber = 8, kBoolean = 16, kNull = 32;
constexpr uint8_t kAnyKind = 0x3F;

// JSON recognizer states (State::json).
enum Json : uint8_t {
  kJValue,         // a value is due (whitespace first)
  kJValueOrClose,  // after '[': a value or ']'
  kJKeyOrClose,    // after '{': a key or '}'
  kJKey,           // after ',' in an object: a key
  kJColon,         // after a key: ':'
  kJString,
  kJEscape,
  kJHex,
  kJMinus,    // after '-': a digit
  kJZero,     // a leading 0 (complete)
  kJInt,      // integer digits (complete)
  kJDot,      // after '.': a digit
  kJFrac,     // fraction digits (complete)
  kJExpMark,  // after 'e': a sign or a digit
  kJExpSign,  // after the sign: a digit
  kJExp,      // exponent digits (complete)
  kJLiteral,
  kJAfter,       // a value ended: ',' or a close (nested), or the closing tag (top level)
  kJKeyChoice,   // an object key matched against its object's table (Table kJsonKeys)
  kJEnumChoice,  // a string matched against its enum's table (Table kJsonEnum)
};
constexpr std::string_view kLiterals[] = {"true", "false", "null"};

bool IsSpace(uint8_t byte) { return byte == ' ' || byte == '\n' || byte == '\t' || byte == '\r'; }
bool IsDigit(uint8_t byte) { return byte >= '0' && byte <= '9'; }
bool IsHex(uint8_t byte) { return IsDigit(byte) || (byte >= 'a' && byte <= 'f') || (byte >= 'A' && byte <= 'F'); }

bool EndsWith(const ToolCallGrammar::State& state, std::string_view text) {
  return state.tail_length >= text.size() &&
         std::memcmp(state.tail + state.tail_length - text.size(), text.data(), text.size()) == 0;
}

void PushTail(ToolCallGrammar::State& state, uint8_t byte) {
  constexpr size_t kTail = sizeof(state.tail);
  if (state.tail_length == kTail) {
    std::memmove(state.tail, state.tail + 1, kTail - 1);
    state.tail_length -= 1;
  }
  state.tail[state.tail_length++] = static_cast<char>(byte);
}

}  // namespace

void ResetUtf8(ToolCallGrammar::State& state) {
  state.utf8_due = 0;
  state.utf8_lo = 0x80;
  state.utf8_hi = 0xBF;
}

// One byte of UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
bool Utf8Byte(ToolCallGrammar::State& state, uint8_t byte) {
  if (state.utf8_due > 0) {
    if (byte < state.utf8_lo || byte > state.utf8_hi) return false;
    const uint8_t due = state.utf8_due - 1;
    ResetUtf8(state);
    state.utf8_due = due;
    return true;
  }
  if (byte < 0x80) return true;
  if (byte >= 0xC2 && byte <= 0xDF) {
    state.utf8_due = 1;
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    state.utf8_due = 2;
    if (byte == 0xE0) state.utf8_lo = 0xA0;
    if (byte == 0xED) state.utf8_hi = 0x9F;
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    state.utf8_due = 3;
    if (byte == 0xF0) state.utf8_lo = 0x90;
    if (byte == 0xF4) state.utf8_hi = 0x8F;
  } else {
    return false;
  }
  return true;
}

namespace {

bool HasSpecialToken(const ToolCallGrammar::State& state, bool allow_think_end) {
  for (std::string_view token : kSpecialTokens) {
    if (allow_think_end && token == kThinkEnd) continue;
    if (EndsWith(state, token)) return true;
  }
  return false;
}

// The names of a schema's "type" (a name or a list); empty when it has none.
std::vector<std::string> TypeNames(const OrderedJson& schema) {
  std::vector<std::string> types;
  if (!schema.is_object() || !schema.contains("type")) return types;
  const OrderedJson& type = schema["type"];
  if (type.is_string()) types.push_back(type.get<std::string>());
  if (type.is_array()) {
    for (const auto& each : type) {
      if (each.is_string()) types.push_back(each.get<std::string>());
    }
  }
  return types;
}

uint8_t KindOf(const std::string& type, bool* integer) {
  if (type == "object") return kObject;
  if (type == "array") return kArray;
  if (type == "string") return kString;
  if (type == "number") return kNumber;
  if (type == "integer") {
    *integer = true;
    return kNumber;
  }
  if (type == "boolean") return kBoolean;
  if (type == "null") return kNull;
  return kAnyKind;
}

// A JSON string literal as the grammar matches it after its opening quote: the escaped text and
// the closing quote.
std::string QuotedRest(const std::string& text) { return OrderedJson(text).dump().substr(1); }

// Hops of "$ref" to "$ref" followed before a schema counts as untyped (a cycle of references).
constexpr int kMaxRefHops = 16;

// The schema a local "$ref" points to ("#", "#/$defs/Name", "#/definitions/Name": a JSON pointer
// into the document that holds it, RFC 6901, percent-escapes decoded), following references to
// references; null when the reference is not local, points nowhere, or loops.
const OrderedJson* ResolveRefs(const OrderedJson& schema, const OrderedJson& root) {
  const OrderedJson* at = &schema;
  for (int hop = 0; at->is_object() && at->contains("$ref"); ++hop) {
    const OrderedJson& ref = (*at)["$ref"];
    if (hop == kMaxRefHops || !ref.is_string()) return nullptr;
    const std::string text = ref.get<std::string>();
    if (text.empty() || text[0] != '#') return nullptr;
    try {
      const OrderedJson::json_pointer pointer(PercentDecode(std::string_view(text).substr(1)));
      if (!root.contains(pointer)) return nullptr;
      at = &root.at(pointer);
    } catch (const OrderedJson::exception&) {
      return nullptr;  // not a JSON pointer (an anchor name): untyped
    }
  }
  return at;
}

// The allowed values of a string enum or const; false when the schema lists none.
bool StringValues(const OrderedJson& schema, std::vector<std::string>& values, bool& only_strings) {
  only_strings = true;
  const OrderedJson* listed = nullptr;
  OrderedJson single;
  if (schema.contains("const")) {
    single = OrderedJson::array({schema["const"]});
    listed = &single;
  } else if (schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty()) {
    listed = &schema["enum"];
  }
  if (listed == nullptr) return false;
  for (const auto& value : *listed) {
    if (value.is_string()) {
      values.push_back(value.get<std::string>());
    } else {
      only_strings = false;
    }
  }
  return true;
}

}  // namespace

int ToolCallGrammar::AddTable(TableKind kind, std::vector<Entry> entries) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.text < b.text; });
  entries.erase(
      std::unique(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.text == b.text; }),
      entries.end());
  tables_.push_back({kind, std::move(entries)});
  return static_cast<int>(tables_.size()) - 1;
}

int ToolCallGrammar::AddNode(JsonNode node) {
  const bool narrows =
      node.kinds != kAnyKind || node.integer || node.strings >= 0 || node.keys >= 0 || node.closed || node.items >= 0;
  if (!narrows || nodes_.size() >= kMaxNodes) return -1;
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

// A string enum's node fields: its values and their table.
void ToolCallGrammar::SetStrings(JsonNode& node, std::vector<std::string> values) {
  std::vector<Entry> entries;
  for (const std::string& value : values) entries.push_back({QuotedRest(value), 0});
  node.string_values = std::move(values);
  node.strings = AddTable(TableKind::kJsonEnum, std::move(entries));
}

// The node of a schema (the header's file comment says which keywords narrow it); -1 when nothing
// does or it lies kTypedDepth levels deep. A local $ref is followed (its siblings ignored, as
// draft-07 does); anyOf and oneOf narrow to the union of their branches, allOf to the
// intersection with each, both a superset of the exact set where one node cannot hold it.
int ToolCallGrammar::CompileNode(const OrderedJson& schema_in, int depth, const OrderedJson& root) {
  const OrderedJson* resolved = ResolveRefs(schema_in, root);
  if (resolved == nullptr || !resolved->is_object() || depth >= kTypedDepth) return -1;
  // A schema reached again at the same depth (by $refs above all) compiles to the same node.
  const auto key = std::make_pair(resolved, depth);
  if (const auto found = compiled_.find(key); found != compiled_.end()) return found->second;
  compiled_[key] = -1;  // a cycle through anyOf/allOf at this depth: untyped
  const OrderedJson& schema = *resolved;
  int node = CompileOwn(schema, depth, root);
  for (const char* keyword : {"anyOf", "oneOf"}) {
    if (schema.contains(keyword)) node = Intersect(node, CompileUnion(schema[keyword], depth, root));
  }
  if (schema.contains("allOf") && schema["allOf"].is_array()) {
    for (const auto& branch : schema["allOf"]) node = Intersect(node, CompileNode(branch, depth, root));
  }
  compiled_[key] = node;
  return node;
}

// The keywords of the schema itself: type, enum and const, properties, items.
int ToolCallGrammar::CompileOwn(const OrderedJson& schema, int depth, const OrderedJson& root) {
  JsonNode node;
  bool has_integer = false, has_number = false;
  std::vector<std::string> types = TypeNames(schema);
  if (!types.empty()) {
    node.kinds = 0;
    for (const std::string& type : types) {
      bool integer = false;
      const uint8_t kind = KindOf(type, &integer);
      node.kinds |= kind;
      (integer ? has_integer : has_number) |= kind == kNumber;
    }
  }
  node.integer = has_integer && !has_number;
  std::vector<std::string> strings;
  bool only_strings = true;
  if (StringValues(schema, strings, only_strings) && (node.kinds & kString) != 0) {
    // A mixed enum's strings still narrow its strings; one without strings admits none (unless
    // nothing else is left: a contradictory schema stays a superset, the session reports it).
    const uint8_t narrowed = only_strings ? kString : strings.empty() ? node.kinds & ~kString : node.kinds;
    if (narrowed != 0) node.kinds = narrowed;
    if (!strings.empty()) SetStrings(node, std::move(strings));
  }
  if (schema.contains("properties") && schema["properties"].is_object()) {
    std::vector<Entry> keys;
    std::vector<std::string> names;
    for (auto it = schema["properties"].begin(); it != schema["properties"].end(); ++it) {
      keys.push_back({QuotedRest(it.key()), static_cast<int32_t>(node.properties.size())});
      names.push_back(it.key());
      node.properties.push_back(CompileNode(it.value(), depth + 1, root));
    }
    if (schema.contains("required") && schema["required"].is_array()) {
      for (const auto& name : schema["required"]) {
        for (size_t p = 0; p < names.size() && p < 64; ++p) {
          if (name.is_string() && names[p] == name.get<std::string>()) node.required |= uint64_t{1} << p;
        }
      }
    }
    if (!keys.empty()) node.keys = AddTable(TableKind::kJsonKeys, std::move(keys));
  }
  // patternProperties admits keys of its own beside the listed ones.
  node.closed = schema.contains("additionalProperties") && schema["additionalProperties"] == false &&
                !schema.contains("patternProperties");
  if (schema.contains("items") && schema["items"].is_object()) {
    node.items = CompileNode(schema["items"], depth + 1, root);
  }
  return AddNode(std::move(node));
}

// One node admitting what any branch admits. Where two branches allow objects (or arrays) their
// structure is dropped: one node cannot hold "these keys or those".
int ToolCallGrammar::CompileUnion(const OrderedJson& branches, int depth, const OrderedJson& root) {
  if (!branches.is_array() || branches.empty()) return -1;
  std::vector<int> compiled;
  for (const auto& branch : branches) {
    const int node = CompileNode(branch, depth, root);
    if (node < 0) return -1;  // a branch that admits anything
    compiled.push_back(node);
  }
  if (compiled.size() == 1) return compiled[0];
  JsonNode merged;
  merged.kinds = 0;
  bool all_integer = true, strings_open = false;
  std::vector<std::string> strings;
  int objects = 0, arrays = 0, object_from = -1, array_from = -1;
  for (const int index : compiled) {
    const JsonNode& branch = nodes_[static_cast<size_t>(index)];
    merged.kinds |= branch.kinds;
    if ((branch.kinds & kNumber) != 0) all_integer = all_integer && branch.integer;
    if ((branch.kinds & kString) != 0) {
      strings_open = strings_open || branch.strings < 0;
      strings.insert(strings.end(), branch.string_values.begin(), branch.string_values.end());
    }
    if ((branch.kinds & kObject) != 0) objects += 1, object_from = index;
    if ((branch.kinds & kArray) != 0) arrays += 1, array_from = index;
  }
  merged.integer = (merged.kinds & kNumber) != 0 && all_integer;
  if ((merged.kinds & kString) != 0 && !strings_open) SetStrings(merged, std::move(strings));
  if (objects == 1) CopyObject(merged, nodes_[static_cast<size_t>(object_from)]);
  if (arrays == 1) merged.items = nodes_[static_cast<size_t>(array_from)].items;
  return AddNode(std::move(merged));
}

void ToolCallGrammar::CopyObject(JsonNode& to, const JsonNode& from) {
  to.keys = from.keys;
  to.properties = from.properties;
  to.required = from.required;
  to.closed = from.closed;
}

// One node admitting only what both admit, where a node can say so; otherwise a superset of
// that (each side's structure, the narrower one kept). A contradiction (no kind in common)
// keeps `a`: the session's validation reports such a schema's values, not the grammar.
int ToolCallGrammar::Intersect(int a, int b) {
  if (a < 0) return b;
  if (b < 0) return a;
  JsonNode both = nodes_[static_cast<size_t>(a)];
  const JsonNode& other = nodes_[static_cast<size_t>(b)];
  const uint8_t kinds = both.kinds & other.kinds;
  if (kinds == 0) return a;
  both.kinds = kinds;
  both.integer = both.integer || other.integer;
  if (both.strings < 0) {
    both.strings = other.strings;
    both.string_values = other.string_values;
  }
  if (both.keys < 0 && !both.closed && both.required == 0) CopyObject(both, other);
  if (both.items < 0) both.items = other.items;
  return AddNode(std::move(both));
}

// Entries may be JSON text (chat_format.h's ChatEncodeOptions::tools); the specs in OpenAI form.
static Result<OrderedJson> FunctionSpecs(const OrderedJson& tools) {
  ENVFORGE_ASSIGN_OR_RETURN(OrderedJson objects, ParseToolSpecs(tools, "tool-call grammar: tools"));
  return ToOpenAiTools(objects);
}

// One property: its flags from its node's kinds (string="true" for a string, "false" for the
// rest), the enum table of its text, and the schema nodes of its JSON. `root` is the document
// its local $refs point into.
ToolCallGrammar::Param ToolCallGrammar::ReadProperty(const std::string& name, const OrderedJson& schema,
                                                     const OrderedJson& root) {
  Param param;
  param.name = name;
  const int node = CompileNode(schema, 0, root);
  if (node >= 0) {
    const JsonNode& compiled = nodes_[static_cast<size_t>(node)];
    param.allow_text = (compiled.kinds & kString) != 0;
    param.allow_json = (compiled.kinds & ~kString & kAnyKind) != 0;
    if (param.allow_text && compiled.strings >= 0) {
      std::vector<Entry> values;
      for (const std::string& value : compiled.string_values) {
        values.push_back({value + std::string(kParameterClose), 0});
      }
      param.table = AddTable(TableKind::kValueEnd, std::move(values));
    }
  }
  const OrderedJson* resolved = ResolveRefs(schema, root);
  if (param.allow_text && param.table < 0 && resolved != nullptr && resolved->is_object() &&
      resolved->value("contentMediaType", "") == "application/json") {
    param.text_json = true;
    if (resolved->contains("contentSchema")) param.content_node = CompileNode((*resolved)["contentSchema"], 0, root);
  }
  if (param.allow_json && node >= 0) {
    // A string goes as text (string="true"); JSON is then the rest.
    JsonNode json = nodes_[static_cast<size_t>(node)];
    json.kinds &= static_cast<uint8_t>(~kString);
    json.strings = -1;
    json.string_values.clear();
    param.node = AddNode(std::move(json));
  }
  return param;
}

void ToolCallGrammar::ApplyAnswerSchema(Param& param) {
  if (options_.answer_schema.is_null() || !param.allow_text) return;
  const int node = CompileNode(options_.answer_schema, 0, options_.answer_schema);
  if (node < 0 || (nodes_[static_cast<size_t>(node)].kinds & kString) != 0) return;
  param.text_json = true;
  param.content_node = node;
  param.table = -1;
}

// One tool's properties (with their enum tables), required ones and parameter heads.
Result<ToolCallGrammar::Tool> ToolCallGrammar::ReadTool(const OrderedJson& spec, size_t index) {
  const OrderedJson* function = spec.is_object() && spec.contains("function") ? &spec["function"] : nullptr;
  if (function == nullptr || !function->is_object() || !function->contains("name") ||
      !(*function)["name"].is_string() || (*function)["name"].get<std::string>().empty()) {
    return InvalidArgumentError("tool-call grammar: tools[" + std::to_string(index) + "] has no name");
  }
  Tool tool;
  tool.name = (*function)["name"].get<std::string>();
  static const OrderedJson kNoParameters = OrderedJson::object();
  const OrderedJson& parameters = function->contains("parameters") ? (*function)["parameters"] : kNoParameters;
  compiled_.clear();  // a tool's $refs resolve in its own parameters
  const bool listed =
      parameters.is_object() && parameters.contains("properties") && parameters["properties"].is_object();
  tool.open_params = !listed && !(parameters.is_object() && parameters.value("additionalProperties", true) == false);
  if (listed) {
    for (auto it = parameters["properties"].begin(); it != parameters["properties"].end(); ++it) {
      tool.params.push_back(ReadProperty(it.key(), it.value(), parameters));
      if (tool.name == "submit_result" && it.key() == "answer_text") ApplyAnswerSchema(tool.params.back());
    }
  }
  if (parameters.is_object() && parameters.contains("required") && parameters["required"].is_array()) {
    for (const auto& name : parameters["required"]) {
      for (size_t p = 0; p < tool.params.size() && p < kTrackedParams; ++p) {
        if (name.is_string() && tool.params[p].name == name.get<std::string>()) {
          tool.required.push_back(static_cast<int>(p));
        }
      }
    }
  }
  std::vector<Entry> heads;
  for (size_t p = 0; p < tool.params.size(); ++p) {
    const std::string head = tool.params[p].name + "\" string=\"";
    if (tool.params[p].allow_text) heads.push_back({head + "true\">", static_cast<int32_t>(p) * 2 + 1});
    if (tool.params[p].allow_json) heads.push_back({head + "false\">", static_cast<int32_t>(p) * 2});
  }
  tool.head_table = AddTable(TableKind::kHeads, std::move(heads));
  return tool;
}

void ToolCallGrammar::AddFixedTables() {
  block_first_ = AddTable(TableKind::kBlock, {{std::string(kInvokeOpen), 0}});
  block_next_ = AddTable(TableKind::kBlock, {{std::string(kInvokeOpen), 0}, {std::string(kFunctionCallsClose), 1}});
  block_last_ = AddTable(TableKind::kBlock, {{std::string(kFunctionCallsClose), 1}});
  invoke_both_ = AddTable(TableKind::kInvoke, {{std::string(kParameterOpen), 0}, {std::string(kInvokeClose), 1}});
  invoke_params_ = AddTable(TableKind::kInvoke, {{std::string(kParameterOpen), 0}});
  invoke_close_ = AddTable(TableKind::kInvoke, {{std::string(kInvokeClose), 1}});
  free_flags_ = AddTable(TableKind::kFreeFlags, {{"\" string=\"true\">", 1}, {"\" string=\"false\">", 0}});
  value_end_ = AddTable(TableKind::kValueEnd, {{std::string(kParameterClose), 0}});
  forced_open_ = AddTable(TableKind::kOpen, {{std::string(kBlockLead), 0}});
  block_rest_ = AddTable(TableKind::kOpen, {{std::string(kFunctionCallsRest), 0}});
  value_rest_ = AddTable(TableKind::kValueEnd, {{std::string(kParameterRest), 0}});
}

Result<std::shared_ptr<const ToolCallGrammar>> ToolCallGrammar::Build(const OrderedJson& tools,
                                                                      const ToolCallGrammarOptions& options) {
  std::shared_ptr<ToolCallGrammar> grammar(new ToolCallGrammar());
  grammar->options_ = options;
  ENVFORGE_ASSIGN_OR_RETURN(const OrderedJson specs, FunctionSpecs(tools));
  if (!specs.is_array() || specs.empty()) return InvalidArgumentError("tool-call grammar: no tools offered");
  std::vector<Entry> names;
  std::set<std::string> seen;
  for (size_t i = 0; i < specs.size(); ++i) {
    ENVFORGE_ASSIGN_OR_RETURN(Tool tool, grammar->ReadTool(specs[i], i));
    if (!seen.insert(tool.name).second) {
      return InvalidArgumentError("tool-call grammar: two tools are named '" + tool.name + "'");
    }
    if (options.only_tool.empty() || options.only_tool == tool.name) {
      names.push_back({tool.name + "\">", static_cast<int32_t>(grammar->tools_.size())});
    }
    grammar->tools_.push_back(std::move(tool));
  }
  if (names.empty()) {
    return InvalidArgumentError("tool-call grammar: tool_choice names '" + options.only_tool +
                                "', which is not among the tools offered");
  }
  grammar->names_ = grammar->AddTable(TableKind::kNames, std::move(names));
  grammar->AddFixedTables();
  grammar->compiled_.clear();  // its keys point into specs
  // State holds table indices and entry ranges in 16 bits.
  for (const Table& table : grammar->tables_) {
    if (grammar->tables_.size() > UINT16_MAX || table.entries.size() > UINT16_MAX) {
      return InvalidArgumentError("tool-call grammar: too many tools, properties or enum values (at most 65535)");
    }
  }
  return std::shared_ptr<const ToolCallGrammar>(std::move(grammar));
}

ToolCallGrammar::State ToolCallGrammar::Start() const {
  State state;
  StartFreeText(state, options_.thinking ? Phase::kReasoning : Phase::kContent);
  return state;
}

void ToolCallGrammar::StartFreeText(State& state, Phase phase) const {
  state.phase = phase;
  state.tail_length = 0;
  state.bytes = 0;
  ResetUtf8(state);
}

void ToolCallGrammar::EnterChoice(State& state, int table) const {
  state.phase = Phase::kChoice;
  state.table = static_cast<uint16_t>(table);
  state.lo = 0;
  state.hi = static_cast<uint16_t>(tables_[static_cast<size_t>(table)].entries.size());
  state.matched = 0;
  state.gap = false;
  state.whitespace = 0;
}

// A free text at its bound: the table's one literal must follow, continuing the part of it the
// text already ends with (a bound hit inside "</｜" completes that tag rather than starting anew).
void ToolCallGrammar::EnterForced(State& state, int table) const {
  const std::string& literal = tables_[static_cast<size_t>(table)].entries.front().text;
  size_t begun = 0;
  for (size_t length = std::min<size_t>(state.tail_length, literal.size() - 1); length > 0; --length) {
    if (EndsWith(state, std::string_view(literal).substr(0, length))) {
      begun = length;
      break;
    }
  }
  EnterChoice(state, table);
  state.matched = static_cast<uint16_t>(begun);
}

void ToolCallGrammar::EnterGap(State& state, int table) const {
  EnterChoice(state, table);
  state.gap = true;
}

int ToolCallGrammar::InvokeGapTable(const State& state) const {
  const Tool& tool = tools_[static_cast<size_t>(state.tool)];
  for (int required : tool.required) {
    if (!state.given[static_cast<size_t>(required)]) return invoke_params_;
  }
  if (tool.open_params) return invoke_both_;
  for (size_t p = 0; p < tool.params.size(); ++p) {
    if (p >= kTrackedParams || !state.given[p]) return invoke_both_;
  }
  return invoke_close_;
}

bool ToolCallGrammar::AnyLive(const State& state) const {
  const Table& table = tables_[state.table];
  if (table.kind != TableKind::kHeads) return state.lo < state.hi;
  for (uint16_t i = state.lo; i < state.hi; ++i) {
    const auto param = static_cast<size_t>(table.entries[i].value / 2);
    if (param >= kTrackedParams || !state.given[param]) return true;
  }
  return false;
}

void ToolCallGrammar::StartParamValue(State& state, int param, bool text) const {
  state.param = param;
  const Param* spec =
      param >= 0 ? &tools_[static_cast<size_t>(state.tool)].params[static_cast<size_t>(param)] : nullptr;
  if (text && spec != nullptr && spec->text_json) {
    StartJson(state, spec->content_node);
  } else if (text) {
    if (spec != nullptr && spec->table >= 0) {
      EnterChoice(state, spec->table);
    } else {
      StartFreeText(state, Phase::kTextValue);
    }
  } else {
    StartJson(state, spec != nullptr ? spec->node : -1);
  }
}

void ToolCallGrammar::StartJson(State& state, int node) const {
  state.phase = Phase::kJsonValue;
  state.bytes = 0;
  state.json = kJValue;
  state.json_depth = 0;
  state.json_objects = 0;
  state.json_next = static_cast<int16_t>(node);
  state.json_surrogate = 0;
  state.whitespace = 0;
  ResetUtf8(state);
}

bool ToolCallGrammar::Complete(State& state, const Entry& entry) const {
  switch (tables_[state.table].kind) {
    case TableKind::kBlock:
      if (entry.value == 0) {
        EnterChoice(state, names_);
      } else {
        state.phase = Phase::kAfterBlock;
      }
      return true;
    case TableKind::kNames:
      state.tool = entry.value;
      state.given.reset();
      EnterGap(state, InvokeGapTable(state));
      return true;
    case TableKind::kInvoke:
      if (entry.value == 1) {
        state.invokes += 1;
        const bool last = options_.max_invokes > 0 && state.invokes >= options_.max_invokes;
        EnterGap(state, last ? block_last_ : block_next_);
      } else if (tools_[static_cast<size_t>(state.tool)].open_params) {
        StartFreeText(state, Phase::kFreeName);
      } else {
        EnterChoice(state, tools_[static_cast<size_t>(state.tool)].head_table);
      }
      return true;
    case TableKind::kHeads: {
      const int param = entry.value / 2;
      if (static_cast<size_t>(param) < kTrackedParams) {
        if (state.given[static_cast<size_t>(param)]) return false;
        state.given.set(static_cast<size_t>(param));
      }
      StartParamValue(state, param, entry.value % 2 == 1);
      return true;
    }
    case TableKind::kFreeFlags: StartParamValue(state, -1, entry.value == 1); return true;
    case TableKind::kValueEnd: EnterGap(state, InvokeGapTable(state)); return true;
    case TableKind::kOpen: EnterGap(state, block_first_); return true;
    case TableKind::kJsonKeys:
    case TableKind::kJsonEnum: return false;  // matched inside JSON values (FeedJsonChoice)
  }
  return false;
}

// The entries of the sorted range [lo, hi) whose byte at `at` is `byte` (they share the bytes
// before it, so they are contiguous).
std::pair<uint16_t, uint16_t> ToolCallGrammar::Narrow(const std::vector<Entry>& entries, uint16_t lo, uint16_t hi,
                                                      size_t at, uint8_t byte) {
  while (lo < hi && entries[lo].text[at] != static_cast<char>(byte)) ++lo;
  uint16_t end = lo;
  while (end < hi && entries[end].text[at] == static_cast<char>(byte)) ++end;
  return {lo, end};
}

bool ToolCallGrammar::FeedChoice(State& state, uint8_t byte) const {
  if (state.gap && state.matched == 0 && IsSpace(byte)) return ++state.whitespace <= kMaxGapWhitespace;
  const std::vector<Entry>& entries = tables_[state.table].entries;
  const auto [lo, hi] = Narrow(entries, state.lo, state.hi, state.matched, byte);
  state.lo = lo;
  state.hi = hi;
  state.matched += 1;
  if (!AnyLive(state)) return false;
  // Entries share the matched prefix and none is a prefix of another: a complete one is alone.
  if (entries[lo].text.size() == state.matched) return Complete(state, entries[lo]);
  return true;
}

bool ToolCallGrammar::FeedFreeText(State& state, uint8_t byte) const {
  const bool continuation = state.utf8_due > 0;
  if (!Utf8Byte(state, byte)) return false;
  PushTail(state, byte);
  state.bytes += 1;
  switch (state.phase) {
    case Phase::kReasoning:
      if (EndsWith(state, kThinkEnd)) {
        StartFreeText(state, Phase::kContent);
        return true;
      }
      return !HasSpecialToken(state, true);
    case Phase::kContent:
      if (HasSpecialToken(state, false)) return false;
      // The DSML marker only as the block's opening, at the start or after "\n\n": content
      // never holds markup, and a model that starts writing it is led into the block.
      if (EndsWith(state, kDsmlMarker)) {
        const std::string_view opening = kBlockLead.substr(0, kBlockLead.size() - kFunctionCallsRest.size());
        const bool at_start = state.bytes == static_cast<int64_t>(opening.size()) - 2;
        if (!EndsWith(state, opening) && !(at_start && EndsWith(state, opening.substr(2)))) return false;
        EnterChoice(state, block_rest_);
        return true;
      }
      if (!options_.calls_optional && state.bytes >= options_.max_content_bytes && state.utf8_due == 0) {
        EnterForced(state, forced_open_);
      }
      return true;
    case Phase::kTextValue:
      if (HasSpecialToken(state, false)) return false;
      // Likewise a text value holds no markup but its closing tag.
      if (EndsWith(state, kDsmlMarker)) {
        if (!EndsWith(state, "</" + std::string(kDsmlMarker))) return false;
        EnterChoice(state, value_rest_);
        return true;
      }
      if (options_.max_value_bytes > 0 && state.bytes >= options_.max_value_bytes && state.utf8_due == 0) {
        EnterForced(state, value_end_);
      }
      return true;
    case Phase::kFreeName:
      if (byte == '\n' || byte == '<') return false;
      if (byte == '"') {
        if (state.bytes == 1) return false;  // an empty name
        EnterChoice(state, free_flags_);
        return FeedChoice(state, byte);
      }
      return state.bytes < kMaxFreeNameBytes || continuation;  // a character begun is finished
    default: return false;
  }
}

// One hex digit of a \u escape. A high surrogate (D800-DBFF) must be followed by "\\u" and a low
// one (DC00-DFFF), checked digit by digit so that no prefix leads nowhere; a lone low one is refused.
bool ToolCallGrammar::FeedEscapeHex(State& state, uint8_t byte) const {
  if (!IsHex(byte)) return false;
  const int digit = IsDigit(byte) ? byte - '0' : (byte | 0x20) - 'a' + 10;
  const int index = 4 - state.json_hex_due;
  if (state.json_surrogate == 3 && ((index == 0 && digit != 0xD) || (index == 1 && digit < 0xC))) return false;
  if (state.json_surrogate != 3 && index == 1 && state.json_code == 0xD && digit >= 0xC) return false;
  state.json_code = static_cast<uint16_t>(state.json_code * 16 + digit);
  if (--state.json_hex_due > 0) return true;
  state.json = kJString;
  const uint16_t code = state.json_code;
  if (state.json_surrogate == 3) {
    state.json_surrogate = 0;
    return true;
  }
  if (code >= 0xDC00 && code <= 0xDFFF) return false;
  if (code >= 0xD800 && code <= 0xDBFF) state.json_surrogate = 1;
  return true;
}

const ToolCallGrammar::JsonNode* ToolCallGrammar::Container(const State& state) const {
  const int index = state.json_depth - 1;
  if (index < 0 || index >= kTypedDepth || state.json_containers[index] < 0) return nullptr;
  return &nodes_[static_cast<size_t>(state.json_containers[index])];
}

namespace {

// Required properties of the innermost object not given yet.
uint64_t MissingRequired(const ToolCallGrammar::JsonNode* object, const ToolCallGrammar::State& state) {
  if (object == nullptr) return 0;
  return object->required & ~state.json_given[state.json_depth - 1];
}

void StartJsonChoice(ToolCallGrammar::State& state, int table, size_t entries) {
  state.table = static_cast<uint16_t>(table);
  state.lo = 0;
  state.hi = static_cast<uint16_t>(entries);
  state.matched = 0;
  state.json_escaped = false;
  ResetUtf8(state);
}

}  // namespace

// Opens a value with its first byte, which must be of a kind its schema node allows.
bool ToolCallGrammar::StartJsonValue(State& state, uint8_t byte) const {
  uint8_t kind = 0;
  if (byte == '{') kind = kObject;
  if (byte == '[') kind = kArray;
  if (byte == '"') kind = kString;
  if (byte == '-' || IsDigit(byte)) kind = kNumber;
  if (byte == 't' || byte == 'f') kind = kBoolean;
  if (byte == 'n') kind = kNull;
  const JsonNode* node = state.json_next >= 0 ? &nodes_[static_cast<size_t>(state.json_next)] : nullptr;
  if (kind == 0 || (node != nullptr && (node->kinds & kind) == 0)) return false;
  if (byte == '{' || byte == '[') {
    if (state.json_depth >= kMaxJsonDepth) return false;
    if (state.json_depth < kTypedDepth) {
      state.json_containers[state.json_depth] = state.json_next;
      state.json_given[state.json_depth] = 0;
    }
    const uint64_t bit = uint64_t{1} << state.json_depth;
    state.json_objects = byte == '{' ? (state.json_objects | bit) : (state.json_objects & ~bit);
    state.json_depth += 1;
    state.json = byte == '{' ? kJKeyOrClose : kJValueOrClose;
    state.json_next = static_cast<int16_t>(byte == '[' && node != nullptr ? node->items : -1);
  } else if (byte == '"') {
    state.json_key = false;
    state.tail_length = 0;
    if (node != nullptr && node->strings >= 0) {
      StartJsonChoice(state, node->strings, tables_[static_cast<size_t>(node->strings)].entries.size());
      state.json = kJEnumChoice;
    } else {
      state.json = kJString;
    }
  } else if (byte == '-' || IsDigit(byte)) {
    state.json_integer = node != nullptr && node->integer;
    if (byte == '-') {
      state.json = kJMinus;
    } else {
      state.json = byte == '0' ? kJZero : kJInt;
      state.json_digits = 1;
    }
  } else {
    state.json = kJLiteral;
    state.json_literal = byte == 't' ? 0 : byte == 'f' ? 1 : 2;
    state.json_literal_at = 1;
  }
  return true;
}

// A key's opening quote. A typed object matches its keys against its table (only listed ones
// when it is closed); in closing mode a key is due only while a required one is missing, and it
// must be a listed one not given yet, so the object ends within bounded bytes.
bool ToolCallGrammar::OpenKey(State& state, bool closing) const {
  const JsonNode* object = Container(state);
  const bool missing = MissingRequired(object, state) != 0;
  if (closing && state.json == kJKeyOrClose && !missing) return false;
  // A ',' taken before the bound with nothing required left: the shortest key, a free one (in an
  // open object), closes it.
  const bool shortest_free = closing && !missing && (object == nullptr || !object->closed);
  state.tail_length = 0;
  if (object != nullptr && object->keys >= 0 && !shortest_free) {
    StartJsonChoice(state, object->keys, tables_[static_cast<size_t>(object->keys)].entries.size());
    state.json = kJKeyChoice;
    return true;
  }
  if (object != nullptr && object->closed) return false;  // "{}" only
  state.json = kJString;
  state.json_key = true;
  state.json_next = -1;
  return true;
}

// Whether a ',' may open another key of the innermost object: a closed one needs a listed key not
// given yet (otherwise the ',' would lead nowhere).
bool ToolCallGrammar::MoreKeys(const State& state) const {
  const JsonNode* object = Container(state);
  if (object == nullptr || !object->closed) return true;
  const uint64_t given = state.json_given[state.json_depth - 1];
  for (size_t p = 0; p < object->properties.size(); ++p) {
    if (p >= 64 || ((given >> p) & 1) == 0) return true;
  }
  return false;
}

// One byte of a key or an enum string matched against its table. An open object's key that no
// listed key continues goes on as a free key (untyped value), unless an escape was matched; a
// listed key given before cannot be given again.
bool ToolCallGrammar::FeedJsonChoice(State& state, uint8_t byte, bool closing) const {
  const bool key = state.json == kJKeyChoice;
  const JsonNode* object = key ? Container(state) : nullptr;
  const bool free_allowed = key && !object->closed && !closing;
  const uint64_t given = key ? state.json_given[state.json_depth - 1] : 0;
  auto taken = [&](const Entry& entry) { return key && entry.value < 64 && ((given >> entry.value) & 1) != 0; };
  const std::vector<Entry>& entries = tables_[state.table].entries;
  const size_t at = state.matched;
  const auto [lo, hi] = Narrow(entries, state.lo, state.hi, at, byte);
  bool live = false;
  for (uint16_t i = lo; i < hi && !live; ++i) live = !taken(entries[i]);
  if (lo < hi && (live || free_allowed)) {
    if (!Utf8Byte(state, byte)) return false;
    if (byte == '\\') state.json_escaped = true;
    state.lo = lo;
    state.hi = hi;
    state.matched += 1;
    const Entry& entry = entries[lo];
    if (entry.text.size() != state.matched) return true;
    // Complete (the closing quote): alone in its range, as no entry is a prefix of another.
    if (!key) {
      state.json = kJAfter;
      return true;
    }
    if (taken(entry)) return false;
    if (entry.value < 64) state.json_given[state.json_depth - 1] |= uint64_t{1} << entry.value;
    state.json_next = static_cast<int16_t>(object->properties[static_cast<size_t>(entry.value)]);
    state.json = kJColon;
    return true;
  }
  if (!free_allowed || state.json_escaped) return false;
  // A free key from here: the matched prefix is its text so far (for the markup watch).
  const std::string& prefix = entries[state.lo].text;
  for (size_t i = 0; i < at; ++i) PushTail(state, static_cast<uint8_t>(prefix[i]));
  state.json = kJString;
  state.json_key = true;
  state.json_next = -1;
  return FeedJsonString(state, byte, closing);
}

// Strings and their escapes. In closing mode a string only closes (an escape or a UTF-8 sequence
// begun is finished, a surrogate pair completed). The raw bytes never spell DSML markup or a
// special token, which the DSML parser would take for the value's end, and never hold U+FF5C
// (written \uff5c instead): a model that starts a closing tag inside an open string is turned
// back at the tag's first "｜" to close the string, instead of being cut off mid-tag two tokens on.
bool ToolCallGrammar::FeedJsonString(State& state, uint8_t byte, bool closing) const {
  if (!FeedJsonStringByte(state, byte, closing)) return false;
  if (state.json != kJString && state.json != kJEscape && state.json != kJHex) return true;  // it closed
  PushTail(state, byte);
  // Every special token but the think tags holds a "｜", refused already: those two are left.
  return !EndsWith(state, kFullwidthBar) && !EndsWith(state, kThinkStart) && !EndsWith(state, kThinkEnd);
}

bool ToolCallGrammar::FeedJsonStringByte(State& state, uint8_t byte, bool closing) const {
  if (state.json == kJHex) return FeedEscapeHex(state, byte);
  if (state.json == kJEscape) {
    if (byte == 'u') {
      if (closing && state.json_surrogate != 2) return false;
      state.json = kJHex;
      state.json_hex_due = 4;
      state.json_code = 0;
      if (state.json_surrogate == 2) state.json_surrogate = 3;
      return true;
    }
    if (state.json_surrogate == 2 || byte == 0 || std::strchr("\"\\/bfnrt", byte) == nullptr) return false;
    state.json = kJString;
    return true;
  }
  if (state.json_surrogate == 1) {
    if (byte != '\\') return false;
    state.json_surrogate = 2;
    state.json = kJEscape;
    return true;
  }
  if (state.utf8_due == 0 && byte == '"') {
    state.json = state.json_key ? kJColon : kJAfter;
    return true;
  }
  if (closing && state.utf8_due == 0) return false;
  if (state.utf8_due == 0 && byte == '\\') {
    state.json = kJEscape;
    return true;
  }
  return byte >= 0x20 && Utf8Byte(state, byte);
}

// Numbers (RFC 8259 with bounded digit counts). kEnded: the byte does not continue a complete
// number, which ended before it (the caller feeds the byte again as what follows the value).
ToolCallGrammar::NumberStep ToolCallGrammar::FeedJsonNumber(State& state, uint8_t byte, bool closing) const {
  auto first_digit = [&](Json next) {
    if (!IsDigit(byte)) return NumberStep::kRefused;
    state.json = next;
    state.json_digits = 1;
    return NumberStep::kTaken;
  };
  auto next_digit = [&](uint8_t limit) {
    if (closing || !IsDigit(byte) || state.json_digits >= limit) return false;
    state.json_digits += 1;
    return true;
  };
  auto go = [&](Json next) {
    state.json = next;
    return NumberStep::kTaken;
  };
  const bool fraction_allowed = !closing && !state.json_integer;
  const bool exponent_mark = (byte == 'e' || byte == 'E') && fraction_allowed;
  switch (state.json) {
    case kJMinus: return first_digit(byte == '0' ? kJZero : kJInt);
    case kJDot: return first_digit(kJFrac);
    case kJExpMark:
      if (byte == '+' || byte == '-') return go(kJExpSign);
      return first_digit(kJExp);
    case kJExpSign: return first_digit(kJExp);
    case kJInt:
      if (next_digit(kMaxIntegerDigits)) return NumberStep::kTaken;
      [[fallthrough]];
    case kJZero:
      if (byte == '.' && fraction_allowed) return go(kJDot);
      if (exponent_mark) return go(kJExpMark);
      break;
    case kJFrac:
      if (next_digit(kMaxFractionDigits)) return NumberStep::kTaken;
      if (exponent_mark) return go(kJExpMark);
      break;
    case kJExp:
      if (next_digit(kMaxExponentDigits)) return NumberStep::kTaken;
      break;
    default: return NumberStep::kRefused;
  }
  state.json = kJAfter;
  return NumberStep::kEnded;
}

bool ToolCallGrammar::CloseContainer(State& state, uint8_t byte) const {
  if (state.json_depth == 0) return false;
  const bool in_object = ((state.json_objects >> (state.json_depth - 1)) & 1) != 0;
  if (byte != (in_object ? '}' : ']')) return false;
  if (in_object && MissingRequired(Container(state), state) != 0) return false;
  state.json_depth -= 1;
  state.json = kJAfter;
  return true;
}

// Whether whitespace may come here between a JSON value's tokens: not in closing mode, and at most
// 4 + 4 * depth bytes in a row (enough to pretty-print with 4-space indents; a model cannot idle).
static bool TakesJsonSpace(ToolCallGrammar::State& state, bool closing) {
  return !closing && ++state.whitespace <= 4 + 4 * state.json_depth;
}

bool ToolCallGrammar::FeedJson(State& state, uint8_t byte) const {
  state.bytes += 1;
  const bool closing = options_.max_value_bytes > 0 && state.bytes > options_.max_value_bytes;
  const bool top = state.json_depth == 0;
  const bool in_object = !top && ((state.json_objects >> (state.json_depth - 1)) & 1) != 0;
  const bool structural = state.json == kJValue || state.json == kJValueOrClose || state.json == kJKeyOrClose ||
                          state.json == kJKey || state.json == kJColon || state.json == kJAfter;
  if (structural && IsSpace(byte)) return TakesJsonSpace(state, closing);
  if (structural) state.whitespace = 0;
  switch (state.json) {
    case kJValue: return StartJsonValue(state, byte);
    case kJValueOrClose:
      if (byte == ']') return CloseContainer(state, byte);
      return !closing && StartJsonValue(state, byte);
    case kJKeyOrClose:
    case kJKey:
      if (byte == '}' && state.json == kJKeyOrClose) return CloseContainer(state, byte);
      if (byte != '"') return false;
      return OpenKey(state, closing);
    case kJColon:
      if (byte != ':') return false;
      state.json = kJValue;
      return true;
    case kJString:
    case kJEscape:
    case kJHex: return FeedJsonString(state, byte, closing);
    case kJKeyChoice:
    case kJEnumChoice: return FeedJsonChoice(state, byte, closing);
    case kJLiteral: {
      std::string_view literal = kLiterals[state.json_literal];
      if (byte != static_cast<uint8_t>(literal[state.json_literal_at])) return false;
      if (++state.json_literal_at == literal.size()) state.json = kJAfter;
      return true;
    }
    case kJAfter:
      if (top) {
        if (byte != '<') return false;
        EnterChoice(state, value_end_);
        return FeedChoice(state, byte);
      }
      if (byte == ',') {
        if (in_object) {
          // In closing mode only toward a missing required key.
          if (closing ? MissingRequired(Container(state), state) == 0 : !MoreKeys(state)) return false;
          state.json = kJKey;
        } else {
          if (closing) return false;
          const JsonNode* array = Container(state);
          state.json = kJValue;
          state.json_next = static_cast<int16_t>(array != nullptr ? array->items : -1);
        }
        return true;
      }
      return CloseContainer(state, byte);
    default: {
      NumberStep step = FeedJsonNumber(state, byte, closing);
      if (step != NumberStep::kEnded) return step == NumberStep::kTaken;
      state.bytes -= 1;  // fed again as what follows the number
      return FeedJson(state, byte);
    }
  }
}

bool ToolCallGrammar::FeedByte(State& state, uint8_t byte) const {
  switch (state.phase) {
    case Phase::kReasoning:
    case Phase::kContent:
    case Phase::kTextValue:
    case Phase::kFreeName: return FeedFreeText(state, byte);
    case Phase::kChoice: return FeedChoice(state, byte);
    case Phase::kJsonValue: return FeedJson(state, byte);
    case Phase::kAfterBlock: return false;  // EOS only
  }
  return false;
}

bool ToolCallGrammar::TakesPlainText(const State& state, int64_t max_bytes) const {
  if (state.utf8_due != 0) return false;
  switch (state.phase) {
    case Phase::kReasoning: return true;
    case Phase::kContent: return options_.calls_optional || state.bytes + max_bytes < options_.max_content_bytes;
    case Phase::kTextValue: return options_.max_value_bytes <= 0 || state.bytes + max_bytes < options_.max_value_bytes;
    default: return false;
  }
}

bool ToolCallGrammar::Feed(State& state, std::string_view bytes) const {
  for (char byte : bytes) {
    if (!FeedByte(state, static_cast<uint8_t>(byte))) return false;
  }
  return true;
}

}  // namespace envforge::inference
