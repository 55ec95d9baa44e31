// Constrained decoding of DSML tool calls: the grammar of a completion that must call a tool, as
// bytes, so the embedded engine can mask every token that would leave it (tool_choice "required"
// or a named tool; what vLLM's guided decoding and OpenAI's strict function calling do for JSON).
//
// The language accepted is the one ParseCompletion (chat_format.h) reads as a completion that
// calls at least one tool, narrowed by the tools offered:
//   [thinking: reasoning "</think>"] content "\n\n<｜DSML｜function_calls>"   (or the tag first)
//   ws ( "<｜DSML｜invoke name=\"" TOOL "\">" ws
//        ( "<｜DSML｜parameter name=\"" PARAM "\" string=\"" FLAG "\">" VALUE "</｜DSML｜parameter>" ws )*
//        "</｜DSML｜invoke>" ws )+
//   "</｜DSML｜function_calls>" EOS
// where
//   - TOOL is one of the tools' names (only the named tool's when tool_choice names one);
//   - PARAM is a property of the tool's parameters schema not given before in that invoke (any
//     name without '"' or a newline when the schema lists no properties), and "</｜DSML｜invoke>"
//     comes only once every `required` property was given;
//   - FLAG is "true" for a property of type "string" and "false" for one of another type (either,
//     when the schema gives no single type);
//   - VALUE with FLAG "true" is text (one of the `enum` strings when the property lists them), or
//     one JSON value of its `contentSchema` when the property says `"contentMediaType":
//     "application/json"` (JSON Schema 2019-09's keywords for JSON carried in a string); with
//     "false" it is one JSON value (RFC 8259, nesting at most 32 deep) typed by the property's
//     schema (below); numbers have at most 18 integer digits, 17 fraction digits and 2 exponent
//     digits, so every one parses to a finite double; \u escapes pair their surrogates (as strict
//     JSON parsers require); JSON strings hold neither the chat's special tokens nor a raw
//     U+FF5C ("｜", of which DSML markup is built; the escape \uff5c writes it);
//   - reasoning, content and text values are valid UTF-8 without the chat's special tokens;
//     content and text values hold no DSML markup ("｜DSML｜") but the block's opening and the
//     value's closing tag: once content has written "\n\n<｜DSML｜" (or "<｜DSML｜" first) the
//     block opening is the only way on, and likewise "</｜DSML｜" in a value closes it;
//   - ws is at most 8 whitespace bytes (the parser skips any; a bound keeps a model from idling);
//     likewise between a JSON value's tokens at most 4 + 4 * depth in a row (pretty-printing with
//     4-space indents fits).
//
// JSON values are typed by their schema down to kTypedDepth levels of nesting: `type` (a name or
// a list; "integer": no fraction or exponent), `enum` and `const` (their strings written as the
// schema spells them, JSON-escaped; a string type with no string listed admits no string), and
// for objects `properties`, `required` (an object closes only once its first 64 properties'
// required ones were given) and `additionalProperties: false` (then only listed keys, each once;
// listed keys are written as the schema spells them). An array's `items` types its elements. A
// local `$ref` (a JSON pointer into the tool's parameters schema: "#/$defs/Name",
// "#/definitions/Name", "#") is followed and its siblings ignored, as draft-07 does; a remote one
// leaves the value untyped. `anyOf` and `oneOf` narrow to the union of their branches (kinds,
// string enums, and the object or array structure of the only branch that allows one), `allOf`
// to the intersection with each branch (the narrower structure kept); `not`, `if`, bounds,
// patterns and formats are not enforced. What the grammar takes is a superset of what validates,
// narrowed only where the schema says so, and the session still validates the arguments.
// `patternProperties` keeps an object open.
//
// With calls_optional (tool_choice "auto" over strict tools) the block is optional: the language
// is then also [thinking: reasoning "</think>"] content EOS, content unbounded.
//
// Bounds: content longer than max_content_bytes continues only with the block opening. With
// max_value_bytes > 0, a text value longer than that continues only with its closing tag and a
// JSON value only with the shortest way to close it (strings close, containers close, an expected
// value is 0); by default values, like reasoning, are bounded by max_tokens alone.
//
// State is a small copyable value: the token mask (token_constraint.h) copies it along a trie of
// the vocabulary. Thread safety: a grammar is immutable after Build and may be shared.
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::inference {

struct ToolCallGrammarOptions {
  bool thinking = false;  // the completion starts with reasoning up to "</think>"
  std::string only_tool;  // non-empty: the only tool that may be invoked (tool_choice names it)
  int64_t max_content_bytes = 1024;
  // Calls per completion, 0: any (1: OpenAI's parallel_tool_calls false).
  int64_t max_invokes = 0;
  int64_t max_value_bytes = 0;  // 0: unbounded (a file's contents may be long); max_tokens bounds it
  // tool_choice "auto" with strict tools (OpenAI's `strict: true`): the completion may also end
  // after its content, calling nothing, and content is then unbounded here (max_tokens bounds it);
  // once it opens the block, the calls are held to the grammar as under "required".
  bool calls_optional = false;
  // envforge's episodes: the task's answer schema (null: none). When it admits no string (a
  // structured answer), submit_result's answer_text is one JSON value of it, as a property with
  // contentMediaType application/json and this contentSchema would be. A string answer stays
  // free text, which the verifier takes as it is.
  OrderedJson answer_schema;
};

class ToolCallGrammar {
 public:
  // Largest number of properties per tool whose repetition is tracked; further properties may
  // repeat (the parser then keeps the last value given).
  static constexpr size_t kTrackedParams = 128;
  static constexpr int kMaxJsonDepth = 32;
  // Nesting levels of a JSON value typed by its schema (the top level is 0).
  static constexpr int kTypedDepth = 6;
  // Schema nodes per grammar (State holds a node in 16 bits); past it values are untyped.
  static constexpr size_t kMaxNodes = INT16_MAX;

  enum class Phase : uint8_t {
    kReasoning,
    kContent,
    kChoice,      // one of a sorted table of literals (tags, tool names, parameter heads, enums)
    kFreeName,    // a parameter name of a schema without properties
    kTextValue,   // a string="true" value up to "</｜DSML｜parameter>"
    kJsonValue,   // a string="false" value
    kAfterBlock,  // EOS
  };

  struct State {
    Phase phase = Phase::kContent;
    // kChoice: which table, the live range [lo, hi) of its sorted entries, bytes matched.
    uint16_t table = 0;
    uint16_t lo = 0, hi = 0;
    uint16_t matched = 0;
    bool gap = false;                   // kChoice: whitespace may come before the first byte
    uint8_t whitespace = 0;             // whitespace bytes in the current gap (or JSON run)
    int32_t tool = -1;                  // the tool being invoked
    int32_t invokes = 0;                // invokes completed
    std::bitset<kTrackedParams> given;  // properties given in this invoke
    int32_t param = -1;                 // the property whose value is being read (-1: untyped)
    int64_t bytes = 0;                  // bytes of the current free text or value
    // The last bytes of free text (reasoning, content, text values, free names), for the
    // terminator and the special tokens.
    char tail[32] = {};
    uint8_t tail_length = 0;
    // UTF-8: continuation bytes still due, and the range allowed for the next one.
    uint8_t utf8_due = 0;
    uint8_t utf8_lo = 0x80, utf8_hi = 0xBF;
    // kJsonValue: the JSON recognizer (tool_call_grammar.cc).
    uint8_t json = 0;
    uint8_t json_depth = 0;
    uint64_t json_objects = 0;  // bit d: the container at depth d is an object
    uint8_t json_literal = 0;   // which literal (true/false/null), and its bytes matched
    uint8_t json_literal_at = 0;
    uint8_t json_hex_due = 0;
    uint16_t json_code = 0;      // the \u escape being read
    uint8_t json_surrogate = 0;  // after a high surrogate: 1 '\\' due, 2 'u' due, 3 reading the low one
    uint8_t json_digits = 0;     // digits of the number part being read (bounded: no overflow)
    bool json_key = false;       // the string being read is an object key
    bool json_integer = false;   // the number being read is an integer: no fraction or exponent
    bool json_escaped = false;   // the key being matched against its object's table had an escape
    // Schema nodes (JsonNode): of the value due or being read, and of each open container down
    // to kTypedDepth (-1: untyped); per open object, its properties given (the first 64).
    int16_t json_next = -1;
    int16_t json_containers[kTypedDepth] = {};
    uint64_t json_given[kTypedDepth] = {};
  };

  // tools: MCP or OpenAI tool specs (backend.h's CompletionRequest::tools). InvalidArgument for
  // no tools, a spec without a name, two tools of one name, or only_tool naming none of them.
  static Result<std::shared_ptr<const ToolCallGrammar>> Build(const OrderedJson& tools,
                                                              const ToolCallGrammarOptions& options);

  State Start() const;
  // Advances by one byte; false when the byte leaves the grammar (the state is then unusable).
  bool FeedByte(State& state, uint8_t byte) const;
  bool Feed(State& state, std::string_view bytes) const;
  // Whether the completion may end here (EOS): after the block's closing tag, or with
  // calls_optional after whole UTF-8 characters of content.
  bool CanEnd(const State& state) const {
    return state.phase == Phase::kAfterBlock ||
           (options_.calls_optional && state.phase == Phase::kContent && state.utf8_due == 0);
  }
  // Whether any run of at most `max_bytes` bytes of whole UTF-8 characters without '>' and 0xEF
  // is accepted from here (free text away from its bounds): the token mask's shortcut.
  bool TakesPlainText(const State& state, int64_t max_bytes) const;

  struct Param {
    std::string name;
    bool allow_text = true;  // string="true"
    bool allow_json = true;  // string="false"
    int node = -1;           // string="false": the value's schema node (-1: any JSON)
    int table = -1;          // enum: the table of its values (each followed by the closing tag)
    bool text_json = false;  // string="true" holds JSON (contentMediaType application/json)
    int content_node = -1;   // ... of this contentSchema node (-1: any JSON)
  };
  // A schema compiled for the JSON recognizer (the file comment says which keywords count).
  struct JsonNode {
    uint8_t kinds = 0x3F;                    // allowed kinds (bits: tool_call_grammar.cc)
    bool integer = false;                    // numbers without fraction or exponent
    int items = -1;                          // array: its elements' node
    int keys = -1;                           // object with properties: the table of their keys (value: property index)
    std::vector<int> properties;             // node of each property
    uint64_t required = 0;                   // required properties among the first 64
    bool closed = false;                     // only listed keys (additionalProperties false)
    int strings = -1;                        // string enum: the table of its values
    std::vector<std::string> string_values;  // ... and the values themselves
  };
  struct Tool {
    std::string name;
    std::vector<Param> params;  // empty with open_params: any name
    bool open_params = false;
    std::vector<int> required;  // indices into params
    int head_table = -1;        // the table of its parameter heads
  };
  struct Entry {
    std::string text;
    int32_t value = -1;  // what completing it means: see TableKind
  };
  enum class TableKind : uint8_t {
    kBlock,      // 0: an invoke opens, 1: the block closes
    kNames,      // a tool's index
    kInvoke,     // 0: a parameter opens, 1: the invoke closes
    kHeads,      // parameter index * 2 + (1: string="true", 0: string="false")
    kFreeFlags,  // 1: string="true", 0: string="false" (a name of an open schema)
    kValueEnd,   // an enum value with its closing tag, or the closing tag alone
    kOpen,       // the block opening forced after long content
    kJsonKeys,   // an object's keys, JSON-escaped, each with its closing quote (a property index)
    kJsonEnum,   // a string enum's values, likewise
  };
  struct Table {
    TableKind kind;
    std::vector<Entry> entries;  // sorted by text, no entry a prefix of another
  };

 private:
  ToolCallGrammar() = default;
  bool FeedChoice(State& state, uint8_t byte) const;
  static std::pair<uint16_t, uint16_t> Narrow(const std::vector<Entry>& entries, uint16_t lo, uint16_t hi, size_t at,
                                              uint8_t byte);
  bool Complete(State& state, const Entry& entry) const;
  void EnterChoice(State& state, int table) const;
  void EnterGap(State& state, int table) const;
  void EnterForced(State& state, int table) const;
  bool FeedFreeText(State& state, uint8_t byte) const;
  enum class NumberStep : uint8_t { kTaken, kRefused, kEnded };
  bool FeedJson(State& state, uint8_t byte) const;
  bool StartJsonValue(State& state, uint8_t byte) const;
  bool FeedJsonChoice(State& state, uint8_t byte, bool closing) const;
  bool OpenKey(State& state, bool closing) const;
  bool CloseContainer(State& state, uint8_t byte) const;
  bool MoreKeys(const State& state) const;
  const JsonNode* Container(const State& state) const;
  int CompileNode(const OrderedJson& schema, int depth, const OrderedJson& root);
  int CompileOwn(const OrderedJson& schema, int depth, const OrderedJson& root);
  int CompileUnion(const OrderedJson& branches, int depth, const OrderedJson& root);
  int Intersect(int a, int b);
  int AddNode(JsonNode node);
  void SetStrings(JsonNode& node, std::vector<std::string> values);
  static void CopyObject(JsonNode& to, const JsonNode& from);
  bool FeedJsonString(State& state, uint8_t byte, bool closing) const;
  bool FeedJsonStringByte(State& state, uint8_t byte, bool closing) const;
  NumberStep FeedJsonNumber(State& state, uint8_t byte, bool closing) const;
  bool FeedEscapeHex(State& state, uint8_t byte) const;
  int InvokeGapTable(const State& state) const;
  bool AnyLive(const State& state) const;
  int AddTable(TableKind kind, std::vector<Entry> entries);
  Result<Tool> ReadTool(const OrderedJson& spec, size_t index);
  Param ReadProperty(const std::string& name, const OrderedJson& schema, const OrderedJson& root);
  void ApplyAnswerSchema(Param& param);
  void AddFixedTables();
  void StartFreeText(State& state, Phase phase) const;
  void StartParamValue(State& state, int param, bool text) const;
  void StartJson(State& state, int node) const;

  ToolCallGrammarOptions options_;
  std::vector<Tool> tools_;
  std::vector<Table> tables_;
  std::vector<JsonNode> nodes_;                                 // immutable once added: nodes are shared
  std::map<std::pair<const OrderedJson*, int>, int> compiled_;  // (schema, depth) -> node, while building
  int block_first_ = -1;                                        // "<｜DSML｜invoke name=\""
  int block_next_ = -1;                                         // that or "</｜DSML｜function_calls>"
  int block_last_ = -1;     // "</｜DSML｜function_calls>" only (max_invokes reached)
  int names_ = -1;          // tool names + "\">"
  int invoke_both_ = -1;    // parameter opening or "</｜DSML｜invoke>"
  int invoke_params_ = -1;  // parameter opening only (a required property is missing)
  int invoke_close_ = -1;   // "</｜DSML｜invoke>" only (every property given)
  int free_flags_ = -1;     // `" string="true">` or `" string="false">`
  int value_end_ = -1;      // "</｜DSML｜parameter>"
  int forced_open_ = -1;    // "\n\n<｜DSML｜function_calls>"
  int block_rest_ = -1;     // "function_calls>" (content wrote "\n\n<｜DSML｜")
  int value_rest_ = -1;     // "parameter>" (a text value wrote "</｜DSML｜")
};

// One byte of UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF) on the state's
// utf8_* fields; false when it cannot come next. ResetUtf8: at a character boundary.
bool Utf8Byte(ToolCallGrammar::State& state, uint8_t byte);
void ResetUtf8(ToolCallGrammar::State& state);

}  // namespace envforge::inference
