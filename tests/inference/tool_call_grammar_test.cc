// The DSML tool-call grammar (constrained decoding): it accepts what the encoder renders for the
// offered tools, refuses what would not parse or would call a tool wrongly, and every text a random
// walk through it reaches an end with parses into calls of offered tools with well-typed arguments;
// the token mask over a real tokenizer's vocabulary allows exactly the tokens whose bytes the
// grammar accepts. Nested JSON values follow their schemas: every argument a walk writes
// validates against its tool's schema (toolsets/json_schema.h, the sessions' validator).
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "base/json.h"
#include "inference/chat_format.h"
#include "inference/token_constraint.h"
#include "inference/tokenizer.h"
#include "inference/tool_call_grammar.h"
#include "toolsets/json_schema.h"

namespace envforge::inference {
namespace {

const std::string kEos(kEosToken);

OrderedJson Tools() {
  return OrderedJson::parse(R"([
    {"name": "get_product", "description": "One product by name.",
     "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}, "fields": {"type": "array"}},
                     "required": ["name"]}},
    {"name": "list_products",
     "inputSchema": {"type": "object", "additionalProperties": false, "required": ["category"],
                     "properties": {"category": {"type": "string", "enum": ["garden", "kitchen", "kitchenware"]},
                                    "limit": {"type": "integer"}, "max_price": {"type": "number"},
                                    "in_stock": {"type": "boolean"}, "filter": {"type": "object"},
                                    "note": {"type": ["string", "null"]}}}},
    {"name": "submit_result", "inputSchema": {"type": "object", "properties": {"answer": {}}, "required": ["answer"]}},
    {"type": "function", "function": {"name": "free_form", "parameters": {"type": "object"}}},
    {"name": "ping", "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false}}
  ])");
}

std::shared_ptr<const ToolCallGrammar> MustBuild(const ToolCallGrammarOptions& options = {}) {
  auto grammar = ToolCallGrammar::Build(Tools(), options);
  INFO(grammar.status().ToString());
  REQUIRE(grammar.ok());
  return *grammar;
}

// Whether the whole text is accepted and may end there.
bool AcceptsWhole(const ToolCallGrammar& grammar, const std::string& text) {
  auto state = grammar.Start();
  return grammar.Feed(state, text) && grammar.CanEnd(state);
}

// Whether the text stays inside the grammar (not necessarily at an end).
bool AcceptsPrefix(const ToolCallGrammar& grammar, const std::string& text) {
  auto state = grammar.Start();
  return grammar.Feed(state, text);
}

ChatToolCall Call(std::string name, Json arguments) {
  ChatToolCall call;
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  return call;
}

std::string Invoke(const std::string& tool, const std::string& params) {
  return "<｜DSML｜invoke name=\"" + tool + "\">\n" + params + "</｜DSML｜invoke>\n";
}
std::string Param(const std::string& name, bool text, const std::string& value) {
  return "<｜DSML｜parameter name=\"" + name + "\" string=\"" + (text ? "true" : "false") + "\">" + value +
         "</｜DSML｜parameter>\n";
}
std::string Block(const std::string& invokes) {
  return "\n\n<｜DSML｜function_calls>\n" + invokes + "</｜DSML｜function_calls>";
}

// A tool whose JSON arguments are typed below the top level, and one whose text carries JSON
// (contentMediaType + contentSchema, as envforge's submit_result does with a task's answer schema).
OrderedJson NestedTools() {
  return OrderedJson::parse(R"([
    {"name": "book", "inputSchema": {"type": "object", "additionalProperties": false, "required": ["trip"],
      "properties": {
        "trip": {"type": "object", "additionalProperties": false, "required": ["city", "nights"],
                 "properties": {"city": {"type": "string", "enum": ["Oslo", "Å \"x\""]},
                                "nights": {"type": "integer"},
                                "rooms": {"type": "array", "items": {"type": "object", "required": ["beds"],
                                                                     "properties": {"beds": {"type": "integer"}}}}}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "mode": {"const": "fast"}}}},
    {"name": "submit_result", "inputSchema": {"type": "object", "required": ["answer_text"], "properties": {
      "answer_text": {"type": "string", "contentMediaType": "application/json",
                      "contentSchema": {"type": "object", "additionalProperties": false, "required": ["price"],
                                        "properties": {"price": {"type": "integer"},
                                                       "notes": {"type": ["array", "null"], "items": {"type": "number"}}}}}}}}
  ])");
}

// Control bytes as '.', so a failure's text shows on one line.
std::string Printable(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20) c = '.';
  }
  return text;
}

// A random walk through the grammar to an end (at most 20000 bytes): each byte drawn from those it
// takes, toward structure half of the time (the bytes that end strings and containers).
std::string WalkToEnd(const ToolCallGrammar& grammar, std::mt19937_64& rng) {
  auto state = grammar.Start();
  std::string text;
  for (int step = 0; step < 20000 && !grammar.CanEnd(state); ++step) {
    std::vector<uint8_t> next;
    for (int byte = 1; byte < 256; ++byte) {
      auto copy = state;
      if (grammar.FeedByte(copy, static_cast<uint8_t>(byte))) next.push_back(static_cast<uint8_t>(byte));
    }
    REQUIRE_MESSAGE(!next.empty(), "dead end after: " << Printable(text));
    std::vector<uint8_t> closers;
    for (uint8_t byte : next) {
      if (byte == '"' || byte == '}' || byte == ']' || byte == '<') closers.push_back(byte);
    }
    const auto& pool = !closers.empty() && rng() % 2 == 0 ? closers : next;
    const uint8_t byte = pool[rng() % pool.size()];
    REQUIRE(grammar.FeedByte(state, byte));
    text.push_back(static_cast<char>(byte));
  }
  REQUIRE_MESSAGE(grammar.CanEnd(state), "no end within 20000 bytes: " << Printable(text.substr(text.size() - 300)));
  return text;
}

std::string BookTrip(const std::string& trip_json) {
  return "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"book\">\n"
         "<｜DSML｜parameter name=\"trip\" string=\"false\">" +
         trip_json;
}
std::string SubmitAnswer(const std::string& answer) {
  return "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"submit_result\">\n"
         "<｜DSML｜parameter name=\"answer_text\" string=\"true\">" +
         answer;
}

TEST_SUITE("inference.tool_call_grammar") {
  TEST_CASE("the encoder's renderings of calls to the offered tools are accepted, content and reasoning first") {
    auto grammar = MustBuild();
    const std::vector<ChatToolCall> calls = {
        Call("get_product", {{"name", "Pola Brush"}, {"fields", Json::array({"price", 3})}}),
        Call("list_products", {{"category", "kitchen"},
                               {"limit", 5},
                               {"max_price", -12.5e-1},
                               {"in_stock", true},
                               {"filter", {{"a", {{"b", Json::array({nullptr, false, "x\"y\\u00e9"})}}}}},
                               {"note", nullptr}}),
        Call("submit_result", {{"answer", "Ärger ✓ 🚀"}}), Call("free_form", {{"anything", 1}, {"else", "text"}}),
        Call("ping", Json::object())};
    for (const ChatToolCall& call : calls) {
      CAPTURE(call.name);
      const std::string rendered = RenderToolCalls({call});
      CHECK(AcceptsWhole(*grammar, rendered.substr(2)));               // the tag first
      CHECK(AcceptsWhole(*grammar, "Cheapest:" + rendered));           // after content
      CHECK_FALSE(AcceptsPrefix(*grammar, "Done." + rendered + " "));  // EOS right after the block
      CHECK_FALSE(AcceptsWhole(*grammar, "Done." + rendered.substr(0, rendered.size() - 3)));
    }
    CHECK(AcceptsWhole(*grammar, "Two at once." + RenderToolCalls(calls)));
    auto thinking = MustBuild({.thinking = true});
    CHECK(AcceptsWhole(*thinking, "I look it up.</think>" + RenderToolCalls({calls[0]})));
    CHECK(AcceptsWhole(*thinking, "</think>" + RenderToolCalls({calls[2]}).substr(2)));
    CHECK_FALSE(AcceptsWhole(*thinking, RenderToolCalls({calls[0]})));  // the block is reasoning until </think>
  }

  TEST_CASE("names, parameters, flags, enums, required properties and repeats are held to the tools offered") {
    auto grammar = MustBuild();
    const std::string name = Param("name", true, "Pola Brush");
    CHECK(AcceptsWhole(*grammar, Block(Invoke("get_product", name))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("get_produc", name))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("delete_everything", name))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("get_product", Param("colour", true, "red")))));  // not a property
    CHECK_FALSE(
        AcceptsPrefix(*grammar, Block(Invoke("get_product", Param("name", false, "\"x\"")))));  // a string is text
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("get_product", ""))));                     // name is required
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("get_product", name + name))));            // given twice
    CHECK(AcceptsWhole(*grammar, Block(Invoke("get_product", name) + Invoke("get_product", name))));  // two invokes
    auto single = MustBuild({.max_invokes = 1});
    CHECK(AcceptsWhole(*single, Block(Invoke("get_product", name))));
    CHECK_FALSE(AcceptsPrefix(*single, Block(Invoke("get_product", name) + Invoke("get_product", name))));
    const std::string category = Param("category", true, "kitchen");
    CHECK(AcceptsWhole(*grammar, Block(Invoke("list_products", category + Param("limit", false, "3")))));
    CHECK(AcceptsWhole(*grammar, Block(Invoke("list_products", Param("category", true, "kitchenware")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("list_products", Param("category", true, "kitch")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("list_products", Param("category", true, "toys")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("list_products", category + Param("limit", false, "3.5")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("list_products", category + Param("limit", false, "1e3")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("list_products", category + Param("limit", false, "\"3\"")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("list_products", category + Param("limit", true, "3")))));
    CHECK(AcceptsWhole(*grammar, Block(Invoke("list_products", category + Param("max_price", false, "-0.5E+2")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("list_products", category + Param("max_price", false, "01")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("list_products", category + Param("in_stock", false, "yes")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("list_products", category + Param("filter", false, "[1]")))));
    CHECK(AcceptsWhole(*grammar, Block(Invoke("list_products", category + Param("note", true, "any text")))));
    CHECK(AcceptsWhole(*grammar, Block(Invoke("list_products", category + Param("note", false, "null")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("list_products", category + Param("note", false, "1")))));
    const std::string answer =
        "<｜DSML｜invoke name=\"submit_result\">\n<｜DSML｜parameter name=\"answer\" string=\"false\">";
    CHECK(AcceptsPrefix(*grammar, Block("").substr(0, 28) + answer + "\"\\ud83d\\ude80\"</"));       // a surrogate pair
    CHECK_FALSE(AcceptsPrefix(*grammar, Block("").substr(0, 28) + answer + "\"\\ude80"));            // a lone low one
    CHECK_FALSE(AcceptsPrefix(*grammar, Block("").substr(0, 28) + answer + "\"\\ud83dx"));           // a high one alone
    CHECK_FALSE(AcceptsPrefix(*grammar, Block("").substr(0, 28) + answer + "1234567890123456789"));  // 19 digits
    CHECK_FALSE(AcceptsPrefix(*grammar, Block("").substr(0, 28) + answer + "1e100"));  // 3 exponent digits
    CHECK(AcceptsWhole(*grammar, Block(Invoke("ping", ""))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("ping", Param("x", true, "1")))));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("free_form", Param("", true, "1")))));  // an empty name

    // A named tool_choice allows that tool only.
    auto only = MustBuild({.only_tool = "submit_result"});
    CHECK(AcceptsWhole(*only, Block(Invoke("submit_result", Param("answer", true, "42")))));
    CHECK_FALSE(AcceptsPrefix(*only, Block(Invoke("get_product", name))));
    auto unknown = ToolCallGrammar::Build(Tools(), {.only_tool = "launch"});
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.status().message().find("'launch'") != std::string::npos);
    CHECK_FALSE(ToolCallGrammar::Build(OrderedJson::array(), {}).ok());
    CHECK_FALSE(ToolCallGrammar::Build(OrderedJson::parse(R"([{"name": "a"}, {"name": "a"}])"), {}).ok());
  }

  TEST_CASE("the block's structure: no empty block, no end before it closes, no special token in text, valid UTF-8") {
    auto grammar = MustBuild();
    const std::string call = Invoke("submit_result", Param("answer", true, "x"));
    CHECK_FALSE(AcceptsPrefix(*grammar, "\n\n<｜DSML｜function_calls>\n</｜DSML｜function_calls>"));
    CHECK_FALSE(AcceptsWhole(*grammar, "I am done."));                             // no call: the end is not allowed
    CHECK_FALSE(AcceptsWhole(*grammar, "\n\n<｜DSML｜function_calls>\n" + call));  // not closed
    CHECK_FALSE(AcceptsPrefix(*grammar, "Hi" + kEos));
    CHECK_FALSE(AcceptsPrefix(*grammar, "Hi<｜User｜>"));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(Invoke("submit_result", Param("answer", true, "a" + kEos)))));
    CHECK_FALSE(AcceptsPrefix(*grammar, "bad \xC3\x28 byte"));
    CHECK_FALSE(AcceptsPrefix(*grammar, "surrogate \xED\xA0\x80"));
    CHECK_FALSE(AcceptsPrefix(*grammar, Block(call) + "after"));
    CHECK_FALSE(AcceptsPrefix(*grammar, "\n\n<｜DSML｜function_calls>         "));  // at most 8 whitespace bytes
    // Markup in content only as the block's opening after "\n\n" or first (the parser reads a tag
    // after one newline as content); once begun, the opening is the only way on.
    CHECK_FALSE(AcceptsPrefix(*grammar, "x\n<｜DSML｜"));
    CHECK_FALSE(AcceptsPrefix(*grammar, "x｜DSML｜"));
    CHECK_FALSE(AcceptsPrefix(*grammar, "x\n\n<｜DSML｜invoke"));
    CHECK(AcceptsPrefix(*grammar, "x\n\n<｜DSML｜function_calls>"));
    CHECK(AcceptsPrefix(*grammar, "<｜DSML｜function_calls>"));
    // A text value holds no markup but its closing tag.
    const std::string value_head =
        "<｜DSML｜function_calls><｜DSML｜invoke name=\"submit_result\">"
        "<｜DSML｜parameter name=\"answer\" string=\"true\">";
    CHECK_FALSE(AcceptsPrefix(*grammar, value_head + "a</｜DSML｜invoke>"));
    CHECK_FALSE(AcceptsPrefix(*grammar, value_head + "a<｜DSML｜"));
    CHECK(AcceptsPrefix(*grammar, value_head + "a </ b</｜DSML｜parameter>"));
  }

  TEST_CASE("bounds: long content forces the block open, long values close at once") {
    auto grammar = MustBuild({.max_content_bytes = 16, .max_value_bytes = 12});
    auto state = grammar->Start();
    REQUIRE(grammar->Feed(state, std::string(16, 'a')));
    auto more = state;
    CHECK_FALSE(grammar->FeedByte(more, 'a'));
    CHECK(grammar->Feed(state, "\n\n<｜DSML｜function_calls>"));
    const std::string head =
        "<｜DSML｜invoke name=\"submit_result\">\n<｜DSML｜parameter name=\"answer\" string=\"false\">";
    REQUIRE(grammar->Feed(state, head + "[[{\"k\": \"abc"));
    for (char refused : std::string("d \\,1")) {
      auto next = state;
      CAPTURE(refused);
      CHECK_FALSE(grammar->FeedByte(next, static_cast<uint8_t>(refused)));
    }
    CHECK(grammar->Feed(state, "\"}]]</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜function_calls>"));
    CHECK(grammar->CanEnd(state));
  }

  TEST_CASE("calls_optional (auto over strict tools): content alone may end, unbounded; a block opened is held") {
    auto required = MustBuild({.max_content_bytes = 16});
    auto optional = MustBuild({.max_content_bytes = 16, .calls_optional = true});
    CHECK_FALSE(AcceptsWhole(*required, "The price is 12."));
    CHECK(AcceptsWhole(*optional, "The price is 12."));
    CHECK(AcceptsWhole(*optional, ""));
    // Past max_content_bytes the block is not forced: content runs on and may still end.
    const std::string long_text(200, 'a');
    CHECK_FALSE(AcceptsPrefix(*required, long_text));
    CHECK(AcceptsWhole(*optional, long_text));
    // Not inside a UTF-8 character.
    auto state = optional->Start();
    REQUIRE(optional->Feed(state, "caf\xC3"));
    CHECK_FALSE(optional->CanEnd(state));
    REQUIRE(optional->FeedByte(state, 0xA9));
    CHECK(optional->CanEnd(state));
    // Once the block opens, the calls are the grammar's as under "required".
    const std::string call = Block(Invoke("list_products", Param("category", true, "garden")));
    CHECK(AcceptsWhole(*optional, "Let me look." + call));
    CHECK_FALSE(AcceptsPrefix(*optional, "Let me look." + Block(Invoke("launch_rocket", ""))));
    auto opened = optional->Start();
    REQUIRE(optional->Feed(opened, "Let me look.\n\n<｜DSML｜function_calls>"));
    CHECK_FALSE(optional->CanEnd(opened));
    // Thinking: reasoning must close before content may end.
    auto thinking = MustBuild({.thinking = true, .calls_optional = true});
    CHECK_FALSE(AcceptsWhole(*thinking, "still thinking"));
    CHECK(AcceptsWhole(*thinking, "done</think>The answer is 3."));
  }

  // A random walk: at every step a byte the grammar accepts, drawn uniformly, until an end (taken
  // with probability 1/4 where allowed). Every such text must parse into offered, well-typed calls;
  // with calls_optional (auto over strict tools) into content alone or such calls.
  TEST_CASE("every text a random walk brings to an end parses into calls of the offered tools") {
    for (auto [thinking, optional] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
      CAPTURE(thinking);
      CAPTURE(optional);
      auto grammar =
          MustBuild({.thinking = thinking, .max_content_bytes = 12, .max_value_bytes = 24, .calls_optional = optional});
      std::mt19937_64 rng((thinking ? 7 : 11) + (optional ? 100 : 0));
      int calls_seen = 0;
      int content_only = 0;
      const std::string block_open = "\n\n<｜DSML｜function_calls>";
      for (int walk = 0; walk < 400; ++walk) {
        auto state = grammar->Start();
        std::string text;
        bool ended = false;
        for (int step = 0; step < 20000 && !ended; ++step) {
          if (grammar->CanEnd(state) && rng() % 4 == 0) {
            ended = true;
            break;
          }
          std::vector<uint8_t> next;
          for (int byte = 1; byte < 256; ++byte) {
            auto copy = state;
            if (grammar->FeedByte(copy, static_cast<uint8_t>(byte))) next.push_back(static_cast<uint8_t>(byte));
          }
          if (next.empty() && grammar->CanEnd(state)) {
            ended = true;
            break;
          }
          REQUIRE_MESSAGE(!next.empty(), "dead end after: " << text);
          // In reasoning, take the way out now and then so walks end.
          uint8_t byte = next[rng() % next.size()];
          if (state.phase == ToolCallGrammar::Phase::kReasoning && state.utf8_due == 0 && rng() % 8 == 0) {
            for (char c : std::string(kThinkEnd)) REQUIRE(grammar->FeedByte(state, static_cast<uint8_t>(c)));
            text += kThinkEnd;
            continue;
          }
          // Optional calls: content is never forced into the block, so open it now and then.
          if (optional && state.phase == ToolCallGrammar::Phase::kContent && rng() % 4 == 0) {
            auto copy = state;
            if (grammar->Feed(copy, block_open)) {
              state = copy;
              text += block_open;
              continue;
            }
          }
          REQUIRE(grammar->FeedByte(state, byte));
          text.push_back(static_cast<char>(byte));
        }
        REQUIRE_MESSAGE(ended, "no end within 20000 bytes: " << text.substr(0, 400));
        auto parsed = ParseCompletion(text + kEos, thinking);
        INFO(text);
        REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
        CHECK(parsed->finished);
        const auto& message = parsed->message;
        if (!optional) REQUIRE_FALSE(message.tool_calls.empty());
        content_only += message.tool_calls.empty() ? 1 : 0;
        CHECK_NOTHROW((void)Json(message.content).dump());
        for (const ChatToolCall& call : message.tool_calls) {
          ++calls_seen;
          const Json& args = call.arguments;
          for (auto it = args.begin(); it != args.end(); ++it) CHECK_NOTHROW((void)it.value().dump());
          if (call.name == "get_product") {
            REQUIRE(args.contains("name"));
            CHECK(args["name"].is_string());
            if (args.contains("fields")) CHECK(args["fields"].is_array());
          } else if (call.name == "list_products") {
            REQUIRE(args.contains("category"));
            const std::string category = args["category"].get<std::string>();
            CHECK((category == "garden" || category == "kitchen" || category == "kitchenware"));
            for (auto it = args.begin(); it != args.end(); ++it) {
              const std::string& key = it.key();
              CHECK((key == "category" || key == "limit" || key == "max_price" || key == "in_stock" ||
                     key == "filter" || key == "note"));
            }
            if (args.contains("limit")) CHECK(args["limit"].is_number_integer());
            if (args.contains("max_price")) CHECK(args["max_price"].is_number());
            if (args.contains("in_stock")) CHECK(args["in_stock"].is_boolean());
            if (args.contains("filter")) CHECK(args["filter"].is_object());
            if (args.contains("note")) CHECK((args["note"].is_string() || args["note"].is_null()));
          } else if (call.name == "submit_result") {
            CHECK(args.contains("answer"));
          } else if (call.name == "ping") {
            CHECK(args.empty());
          } else {
            CHECK(call.name == "free_form");
          }
        }
      }
      if (optional) {
        CHECK(content_only > 0);
        CHECK(calls_seen >= 100);
      } else {
        CHECK(calls_seen >= 400);
      }
    }
  }

  TEST_CASE(
      "nested JSON follows its schema: types, enums, required and closed objects, items, JSON in text, bounded "
      "whitespace") {
    auto built = ToolCallGrammar::Build(NestedTools(), {});
    INFO(built.status().ToString());
    REQUIRE(built.ok());
    const ToolCallGrammar& grammar = **built;
    const std::string close = "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    CHECK(AcceptsWhole(grammar, BookTrip(R"({"city": "Oslo", "nights": 3})") + close));
    CHECK(AcceptsWhole(grammar,
                       BookTrip(R"({"nights": 3, "city": "Å \"x\"", "rooms": [{"beds": 2, "x": [1]}]})") + close));
    // A free key of an open object may share a listed key's prefix.
    CHECK(
        AcceptsWhole(grammar, BookTrip(R"({"city": "Oslo", "nights": 1, "rooms": [{"be": "?", "beds": 1}]})") + close));
    for (const char* refused : {
             R"({"city": "Bergen)",                                            // not in the enum
             R"({"city": "Oslo", "nights": 3.)",                               // an integer
             R"({"city": "Oslo", "nights": "3)",                               // not a string
             R"({"city": "Oslo"})",                                            // nights is required
             R"({"city": "Oslo", "city")",                                     // a key given twice
             R"({"citizen)",                                                   // not a listed key (closed object)
             R"({"city": "Oslo", "nights": 3, "rooms": [{}])",                 // beds is required
             R"({"city": "Oslo", "nights": 3, "rooms": [{"beds": 1, "beds")",  // twice, open object
             R"({"city": "Oslo", "nights": 3, "rooms": {)",                    // an array
             R"({"city": "Oslo", "nights": 3, "rooms": [{"beds": 2.5)",
             R"({"city": "Oslo", "nights": 3}, )",  // one value only
         }) {
      CAPTURE(refused);
      CHECK_FALSE(AcceptsPrefix(grammar, BookTrip(refused)));
    }
    const std::string tags = "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"book\">\n";
    CHECK(AcceptsPrefix(grammar, tags + "<｜DSML｜parameter name=\"tags\" string=\"false\">[\"a\", \"b\""));
    CHECK_FALSE(AcceptsPrefix(grammar, tags + "<｜DSML｜parameter name=\"tags\" string=\"false\">[\"a\", 1"));
    // A const string goes as text, spelled as the schema has it.
    CHECK(AcceptsPrefix(grammar, tags + "<｜DSML｜parameter name=\"mode\" string=\"true\">fast<"));
    CHECK_FALSE(AcceptsPrefix(grammar, tags + "<｜DSML｜parameter name=\"mode\" string=\"true\">slow"));
    CHECK_FALSE(AcceptsPrefix(grammar, tags + "<｜DSML｜parameter name=\"mode\" string=\"false\">"));

    // Pretty-printed JSON fits the whitespace bound (4 + 4 per level); idling past it does not.
    CHECK(AcceptsWhole(grammar, BookTrip("{\n    \"city\": \"Oslo\",\n    \"nights\": 2,\n    \"rooms\": [\n"
                                         "        {\n            \"beds\": 1\n        }\n    ]\n}") +
                                    close));
    CHECK(AcceptsPrefix(grammar, SubmitAnswer("{\"price\":" + std::string(8, ' ') + "1" + std::string(8, '\n'))));
    CHECK_FALSE(AcceptsPrefix(grammar, SubmitAnswer("{\"price\":" + std::string(9, ' '))));
    CHECK_FALSE(AcceptsPrefix(grammar, SubmitAnswer(std::string(5, '\n'))));

    // JSON carried in a text value: the answer the task's schema asks for, nothing else.
    CHECK(AcceptsWhole(grammar, SubmitAnswer(R"( {"price": 68})") + close));
    CHECK(AcceptsWhole(grammar, SubmitAnswer(R"({"notes": [1.5, -2e3], "price": -7})") + close));
    CHECK(AcceptsWhole(grammar, SubmitAnswer(R"({"price": 0, "notes": null})") + close));
    for (const char* refused : {R"({"price":Reda)", R"({"price": 6.8)", R"({"price": 68, "x)", R"({})", R"("68)",
                                R"(68)", R"({"price": 68} x)", R"({"notes": ["a)"}) {
      CAPTURE(refused);
      CHECK_FALSE(AcceptsPrefix(grammar, SubmitAnswer(refused)));
    }
  }

  // Pydantic's shapes: models under $defs reached by $ref (a recursive one too), Optional[int] as
  // anyOf with null, Literal unions, a tagged choice as oneOf, v1's allOf around a $ref.
  OrderedJson PydanticTools() {
    return OrderedJson::parse(R"([
      {"name": "ship", "inputSchema": {"type": "object", "additionalProperties": false, "required": ["order"],
        "$defs": {
          "Address": {"type": "object", "additionalProperties": false, "required": ["city"],
                      "properties": {"city": {"type": "string", "enum": ["Oslo", "Rome"]},
                                     "zip": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}},
          "Speed": {"enum": ["slow", "fast"]},
          "Node": {"type": "object", "additionalProperties": false,
                   "properties": {"next": {"$ref": "#/$defs/Node"}, "v": {"type": "integer"}}},
          "a b": {"type": "boolean"}},
        "properties": {
          "order": {"type": "object", "additionalProperties": false, "required": ["to", "speed"], "properties": {
            "to": {"$ref": "#/$defs/Address", "description": "where"},
            "speed": {"$ref": "#/$defs/Speed"},
            "gift": {"oneOf": [{"type": "boolean"},
                               {"type": "object", "additionalProperties": false, "required": ["note"],
                                "properties": {"note": {"type": "string"}}}]},
            "chain": {"$ref": "#/$defs/Node"},
            "wrap": {"$ref": "#/$defs/a%20b"}}},
          "priority": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
          "mode": {"anyOf": [{"const": "air"}, {"const": "sea"}]},
          "label": {"allOf": [{"$ref": "#/$defs/Speed"}], "description": "Pydantic v1's field with a description"}}}}
    ])");
  }

  std::string ShipParam(const std::string& name, bool text, const std::string& value) {
    return "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"ship\">\n<｜DSML｜parameter name=\"" + name +
           "\" string=\"" + (text ? "true" : "false") + "\">" + value;
  }

  TEST_CASE("local $refs are followed and anyOf, oneOf and allOf narrow values (Pydantic's schemas)") {
    auto built = ToolCallGrammar::Build(PydanticTools(), {});
    INFO(built.status().ToString());
    REQUIRE(built.ok());
    const ToolCallGrammar& grammar = **built;
    const std::string close = "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    CHECK(AcceptsWhole(grammar,
                       ShipParam("order", false, R"({"to": {"city": "Oslo", "zip": null}, "speed": "fast"})") + close));
    CHECK(AcceptsWhole(grammar, ShipParam("order", false,
                                          R"({"speed": "slow", "to": {"city": "Rome", "zip": 101}, "gift": true, )"
                                          R"("chain": {"next": {"next": {"v": 3}}}, "wrap": false})") +
                                    close));
    CHECK(AcceptsWhole(
        grammar,
        ShipParam("order", false, R"({"to": {"city": "Rome"}, "speed": "slow", "gift": {"note": "hi"}})") + close));
    for (const char* refused : {
             R"({"to": {"city": "Bergen)",                                                // the $ref'd model's enum
             R"({"to": {"city": "Oslo", "zip": 1.5)",                                     // anyOf integer or null
             R"({"to": {"city": "Oslo", "zip": "1)",                                      // ... not a string
             R"({"to": {"city": "Oslo", "country)",                                       // the $ref'd model is closed
             R"({"to": {"city": "Oslo"}, "speed": "medium)",                              // an enum behind a $ref
             R"({"to": {"city": "Oslo"}, "speed": "fast", "gift": 3)",                    // oneOf boolean or object
             R"({"to": {"city": "Oslo"}, "speed": "fast", "gift": {"x)",                  // the object branch is closed
             R"({"to": {"city": "Oslo"}, "speed": "fast", "gift": {})",                   // ... and requires its note
             R"({"to": {"city": "Oslo"}, "speed": "fast", "chain": {"next": {"v": 1.5)",  // recursion stays typed
             R"({"to": {"city": "Oslo"}, "speed": "fast", "wrap": 1)",                    // a percent-escaped pointer
         }) {
      CAPTURE(refused);
      CHECK_FALSE(AcceptsPrefix(grammar, ShipParam("order", false, refused)));
    }
    // Optional[int]: JSON only, an integer or null.
    CHECK(AcceptsPrefix(grammar, ShipParam("priority", false, "7<")));
    CHECK(AcceptsPrefix(grammar, ShipParam("priority", false, "null<")));
    CHECK_FALSE(AcceptsPrefix(grammar, ShipParam("priority", false, "\"")));
    CHECK_FALSE(AcceptsPrefix(grammar, ShipParam("priority", true, "")));
    // Literal["air", "sea"] and an allOf around an enum's $ref: text, one of the values.
    CHECK(AcceptsPrefix(grammar, ShipParam("mode", true, "sea<")));
    CHECK_FALSE(AcceptsPrefix(grammar, ShipParam("mode", true, "bus")));
    CHECK_FALSE(AcceptsPrefix(grammar, ShipParam("mode", false, "")));
    CHECK(AcceptsPrefix(grammar, ShipParam("label", true, "slow<")));
    CHECK_FALSE(AcceptsPrefix(grammar, ShipParam("label", true, "quick")));
  }

  TEST_CASE("a remote, dangling or looping $ref leaves its value untyped; a recursive fan-out stays bounded") {
    auto built = ToolCallGrammar::Build(OrderedJson::parse(R"([
      {"name": "f", "inputSchema": {"type": "object", "$defs": {"loop": {"$ref": "#/$defs/loop"}},
        "properties": {"remote": {"$ref": "other.json#/x"}, "dangling": {"$ref": "#/$defs/missing"},
                       "loop": {"$ref": "#/$defs/loop"}, "anchor": {"$ref": "#name"}}}}
    ])"),
                                        {});
    REQUIRE(built.ok());
    for (const char* name : {"remote", "dangling", "loop", "anchor"}) {
      CAPTURE(name);
      const std::string head = "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"" +
                               std::string(name) + "\" string=\"";
      CHECK(AcceptsPrefix(**built, head + "true\">anything<"));
      CHECK(AcceptsPrefix(**built, head + "false\">[1, {\"a\": null}]<"));
    }
    // Eight properties, each the model again: 8^6 nodes unbounded; the budget cuts it.
    OrderedJson fan = OrderedJson::parse(R"({"type": "object", "additionalProperties": false, "properties": {}})");
    for (int p = 0; p < 8; ++p) fan["properties"]["p" + std::to_string(p)] = {{"$ref", "#/$defs/T"}};
    OrderedJson tool = {
        {"name", "tree"},
        {"inputSchema",
         {{"type", "object"}, {"$defs", {{"T", fan}}}, {"properties", {{"t", {{"$ref", "#/$defs/T"}}}}}}}};
    auto tree = ToolCallGrammar::Build(OrderedJson::array({tool}), {});
    REQUIRE(tree.ok());
    const std::string head =
        "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"tree\">\n<｜DSML｜parameter name=\"t\" string=\"false\">";
    CHECK(AcceptsPrefix(**tree, head + R"({"p0": {"p7": {}}, "p1": {})"));
    CHECK_FALSE(AcceptsPrefix(**tree, head + R"({"q)"));
  }

  TEST_CASE("each tool's $refs point into its own parameters, however alike the tools' schemas") {
    // The same shapes at the same places: what one tool compiled must not stand for the other's.
    auto built = ToolCallGrammar::Build(OrderedJson::parse(R"([
      {"name": "a", "inputSchema": {"type": "object", "$defs": {"T": {"type": "integer"}},
                                    "properties": {"x": {"$ref": "#/$defs/T"}}}},
      {"name": "b", "inputSchema": {"type": "object", "$defs": {"T": {"enum": ["yes", "no"]}},
                                    "properties": {"x": {"$ref": "#/$defs/T"}}}}
    ])"),
                                        {});
    REQUIRE(built.ok());
    auto head = [](const std::string& tool, bool text) {
      return "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"" + tool +
             "\">\n<｜DSML｜parameter name=\"x\" string=\"" + (text ? "true" : "false") + "\">";
    };
    CHECK(AcceptsPrefix(**built, head("a", false) + "12<"));
    CHECK_FALSE(AcceptsPrefix(**built, head("a", true)));
    CHECK(AcceptsPrefix(**built, head("b", true) + "yes<"));
    CHECK_FALSE(AcceptsPrefix(**built, head("b", true) + "maybe"));
    CHECK_FALSE(AcceptsPrefix(**built, head("b", false)));
  }

  TEST_CASE("every argument a random walk writes validates against a schema of $refs and anyOf/oneOf/allOf") {
    const OrderedJson tools = PydanticTools();
    const Json schema = Json::parse(tools[0]["inputSchema"].dump());
    auto built = ToolCallGrammar::Build(tools, {.max_content_bytes = 8, .max_value_bytes = 48});
    REQUIRE(built.ok());
    const ToolCallGrammar& grammar = **built;
    std::mt19937_64 rng(11);
    int calls = 0;
    for (int walk = 0; walk < 200; ++walk) {
      const std::string text = WalkToEnd(grammar, rng);
      auto parsed = ParseCompletion(text + kEos, false);
      INFO(Printable(text));
      REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
      for (const ChatToolCall& call : parsed->message.tool_calls) {
        ++calls;
        auto violations = toolsets::Validate(schema, call.arguments);
        CHECK_MESSAGE(violations.empty(), call.arguments.dump() << ": " << violations.front().message);
      }
    }
    CHECK(calls >= 150);
  }

  TEST_CASE("a JSON string never spells DSML markup or a special token, which would end the value early") {
    auto grammar = MustBuild();
    const std::string head =
        "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"submit_result\">\n"
        "<｜DSML｜parameter name=\"answer\" string=\"false\">";
    // U+FF5C, of which all the markup is built, is refused raw at once: a string must close
    // before the value's closing tag starts. Escaped it is a character like any other.
    CHECK_FALSE(AcceptsPrefix(*grammar, head + "{\"a\": \"x</｜"));
    CHECK_FALSE(AcceptsPrefix(*grammar, head + "{\"a\": \"x｜"));
    CHECK_FALSE(AcceptsPrefix(*grammar, head + "{\"k｜"));
    CHECK_FALSE(AcceptsPrefix(*grammar, head + "[\"" + kEos));
    CHECK_FALSE(AcceptsPrefix(*grammar, head + "[\"<｜end"));
    CHECK(AcceptsPrefix(*grammar, head + "{\"a\": \"x\\uff5cDSML\\uff5c\"}</｜DSML｜parameter>"));
    CHECK(AcceptsPrefix(*grammar, head + "[\"a</b\", \"\\uFF5C\"]</｜"));
    CHECK(AcceptsPrefix(*grammar, head + "[\"<think\"]"));
    CHECK_FALSE(AcceptsPrefix(*grammar, head + "[\"</think>"));
  }

  // Random walks through the nested tools: every call's arguments, and every answer_text parsed as
  // JSON, validate against their schemas with the sessions' own validator.
  TEST_CASE("every argument a random walk writes validates against its schema, nested and in text") {
    const OrderedJson tools = NestedTools();
    const Json book_schema = Json::parse(tools[0]["inputSchema"].dump());
    const Json answer_schema =
        Json::parse(tools[1]["inputSchema"]["properties"]["answer_text"]["contentSchema"].dump());
    for (int64_t bound : {int64_t{24}, int64_t{64}}) {
      auto built = ToolCallGrammar::Build(tools, {.max_content_bytes = 8, .max_value_bytes = bound});
      REQUIRE(built.ok());
      const ToolCallGrammar& grammar = **built;
      std::mt19937_64 rng(static_cast<uint64_t>(bound) + 3);
      int answers = 0, books = 0;
      for (int walk = 0; walk < 300; ++walk) {
        const std::string text = WalkToEnd(grammar, rng);
        auto parsed = ParseCompletion(text + kEos, false);
        INFO(text);
        REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
        for (const ChatToolCall& call : parsed->message.tool_calls) {
          if (call.name == "book") {
            ++books;
            auto violations = toolsets::Validate(book_schema, call.arguments);
            CHECK_MESSAGE(violations.empty(), call.arguments.dump() << ": " << violations.front().message);
          } else {
            REQUIRE(call.name == "submit_result");
            ++answers;
            REQUIRE(call.arguments["answer_text"].is_string());
            auto answer = ParseJson(call.arguments["answer_text"].get<std::string>(), "answer_text");
            REQUIRE_MESSAGE(answer.ok(), answer.status().ToString());
            auto violations = toolsets::Validate(answer_schema, *answer);
            CHECK_MESSAGE(violations.empty(), answer->dump() << ": " << violations.front().message);
          }
        }
      }
      CHECK(answers >= 50);
      CHECK(books >= 50);
    }
  }

  TEST_CASE("the token mask over policy-small's vocabulary allows exactly the tokens whose bytes the grammar takes") {
    auto tokenizer =
        Tokenizer::Load(std::string(ENVFORGE_TEST_SOURCE_DIR) + "/data/models/policy-small/tokenizer.json");
    REQUIRE(tokenizer.ok());
    auto trie = VocabTrie::Build(**tokenizer);
    const int32_t eos = *(*tokenizer)->eos_id();
    const auto vocab = static_cast<size_t>((*tokenizer)->vocab_size());
    CHECK(trie->plain().size() > vocab / 2);  // most tokens skip the walk in free text
    int shortcuts = 0, walks = 0;
    for (bool thinking : {false, true}) {
      CAPTURE(thinking);
      // Small bounds: content and values run into them within the text.
      auto grammar = MustBuild({.thinking = thinking, .max_content_bytes = 40, .max_value_bytes = 30});
      const std::string calls = RenderToolCalls(
          {Call("list_products", {{"category", "garden"}, {"limit", 2}, {"note", "ça coûte > 3 € ｜ cher"}})});
      const std::string text =
          (thinking ? "I list the garden > first.</think>" : "") + std::string("Cheapest:") + calls + kEos;
      const std::vector<int32_t> tokens = (*tokenizer)->Encode(text);
      REQUIRE(tokens.back() == eos);
      ToolCallConstraint constraint(grammar, trie, eos);
      for (size_t i = 0; i < tokens.size(); ++i) {
        CAPTURE(i);
        (grammar->TakesPlainText(constraint.state(), trie->longest_plain()) ? shortcuts : walks) += 1;
        std::vector<uint8_t> allowed(vocab, 0);
        constraint.Allow(allowed);
        // The mask agrees with feeding each token's bytes to a copy of the state.
        for (size_t id = 0; id < vocab; ++id) {
          const auto token = static_cast<int32_t>(id);
          bool expected = false;
          if (token == eos) {
            expected = grammar->CanEnd(constraint.state());
          } else if (!(*tokenizer)->IsSpecial(token)) {
            auto copy = constraint.state();
            expected = grammar->Feed(copy, trie->bytes(token));
          }
          if (static_cast<bool>(allowed[id]) != expected) {
            FAIL("token " << id << " (" << Json(trie->bytes(token)).dump() << ") allowed " << int(allowed[id]));
          }
        }
        CHECK(allowed[static_cast<size_t>(tokens[i])] == 1);
        INFO("token: " << Json(trie->bytes(tokens[i])).dump() << " after "
                       << Json((*tokenizer)->Decode(std::vector<int32_t>(tokens.begin(), tokens.begin() + i))).dump());
        REQUIRE(constraint.Accept(tokens[i]));
      }
      std::vector<uint8_t> after(vocab, 0);
      constraint.Allow(after);
      CHECK(std::count(after.begin(), after.end(), 1) == 0);
    }
    CHECK(shortcuts > 5);
    CHECK(walks > 20);
  }
}

}  // namespace
}  // namespace envforge::inference
