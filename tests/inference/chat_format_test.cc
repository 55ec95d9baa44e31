// The DeepSeek-V3.2 chat encoding and completion parser (dsa-engine.md section 6). Golden strings
// are written by hand from the section's rules (the public reference transcript is not committed:
// nothing fetched goes into the repository).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "inference/chat_format.h"

namespace envforge::inference {
namespace {

const std::string kBos(kBosToken);
const std::string kEos(kEosToken);
const std::string kUser(kUserToken);
const std::string kAssistant(kAssistantToken);

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

ChatMessage Msg(std::string role, std::string content, std::string reasoning = "",
                std::vector<ChatToolCall> calls = {}) {
  ChatMessage message;
  message.role = std::move(role);
  message.content = std::move(content);
  message.reasoning_content = std::move(reasoning);
  message.tool_calls = std::move(calls);
  return message;
}

ChatToolCall Call(std::string name, Json arguments) {
  ChatToolCall call;
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  return call;
}

std::string Encode(const std::vector<ChatMessage>& messages, bool thinking) {
  ChatEncodeOptions options;
  options.thinking = thinking;
  auto prompt = EncodeChat(messages, options);
  REQUIRE_MESSAGE(prompt.ok(), prompt.status().ToString());
  return *prompt;
}

void CheckRejected(const std::vector<ChatMessage>& messages, const std::string& part, bool thinking = false) {
  ChatEncodeOptions options;
  options.thinking = thinking;
  auto prompt = EncodeChat(messages, options);
  REQUIRE_FALSE(prompt.ok());
  CHECK(prompt.status().code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(Contains(prompt.status().message(), part), prompt.status().message());
}

std::string Param(const std::string& key, const std::string& value, bool is_string) {
  return "<｜DSML｜parameter name=\"" + key + "\" string=\"" + (is_string ? "true" : "false") + "\">" + value +
         "</｜DSML｜parameter>";
}

TEST_SUITE("inference.chat_format") {
  TEST_CASE("single turn: chat mode ends with </think>, thinking mode with <think>") {
    CHECK(Encode({Msg("user", "hello")}, false) == kBos + kUser + "hello" + kAssistant + "</think>");
    CHECK(Encode({Msg("user", "hello")}, true) == kBos + kUser + "hello" + kAssistant + "<think>");
    CHECK(Encode({Msg("system", "Be brief."), Msg("user", "hi")}, false) ==
          kBos + "Be brief." + kUser + "hi" + kAssistant + "</think>");
    ChatEncodeOptions no_bos;
    no_bos.add_bos = false;
    CHECK(*EncodeChat({Msg("user", "x")}, no_bos) == kUser + "x" + kAssistant + "</think>");
  }

  TEST_CASE("the README's two-turn prompt") {
    // README: <BOS><｜User｜>hello<｜Assistant｜></think>Hello! I am
    // DeepSeek.<EOS><｜User｜>1+1=?<｜Assistant｜><think>
    CHECK(Encode({Msg("user", "hello"), Msg("assistant", "Hello! I am DeepSeek."), Msg("user", "1+1=?")}, true) ==
          kBos + kUser + "hello" + kAssistant + "</think>Hello! I am DeepSeek." + kEos + kUser + "1+1=?" + kAssistant +
              "<think>");
  }

  TEST_CASE("tool calls and results; reasoning kept only after the last user message") {
    const std::vector<ChatMessage> messages = {
        Msg("user", "Q1"),
        Msg("assistant", "A1", "old reasoning"),
        Msg("user", "Q2"),
        Msg("assistant", "", "need data",
            {Call("lookup", {{"city", "Paris"}, {"days", 2}}), Call("ping", Json::object())}),
        Msg("tool", "R1"),
        Msg("tool", "R2"),
        Msg("assistant", "Done.", "got it"),
    };
    const std::string expected =
        kBos + kUser + "Q1" + kAssistant + "</think>" + "A1" + kEos +  // reasoning dropped
        kUser + "Q2" + kAssistant + "<think>" + "need data</think>" + "\n\n<｜DSML｜function_calls>\n" +
        "<｜DSML｜invoke name=\"lookup\">\n" + Param("city", "Paris", true) + "\n" + Param("days", "2", false) +
        "\n</｜DSML｜invoke>\n" + "<｜DSML｜invoke name=\"ping\">\n\n</｜DSML｜invoke>" +
        "\n</｜DSML｜function_calls>" + kEos +
        "\n\n<function_results>\n<result>R1</result>\n<result>R2</result>\n</function_results>\n\n<think>" +
        "got it</think>Done." + kEos;
    CHECK(Encode(messages, true) == expected);

    // Chat mode: no reasoning anywhere, results end with </think>.
    const std::string chat = Encode(messages, false);
    CHECK_FALSE(Contains(chat, "need data"));
    CHECK_FALSE(Contains(chat, "<think>"));
    CHECK(Contains(chat, "</function_results>\n\n</think>Done." + kEos));
  }

  TEST_CASE("non-string arguments are JSON the way Python's json.dumps writes it") {
    Json arguments = {{"flag", true},
                      {"items", Json::array({1, "two", nullptr})},
                      {"nested", {{"k", 1.5}}},
                      {"text", "multi\nline \"quoted\""}};
    const std::string prompt = Encode({Msg("user", "go"), Msg("assistant", "", "", {Call("f", arguments)})}, false);
    CHECK(Contains(prompt, Param("flag", "true", false)));
    CHECK(Contains(prompt, Param("items", "[1, \"two\", null]", false)));
    CHECK(Contains(prompt, Param("nested", "{\"k\": 1.5}", false)));
    CHECK(Contains(prompt, Param("text", "multi\nline \"quoted\"", true)));  // strings are raw
  }

  TEST_CASE("tools block in the system message; response_format after it") {
    ChatEncodeOptions options;
    options.tools = Json::array({
        Json::parse(
            R"({"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}})"),
        Json::parse(R"({"name": "g", "inputSchema": {"type": "object"}})"),
        // The Responses API's flat form renders as the function it names.
        Json::parse(R"({"type": "function", "name": "h", "parameters": {"type": "object"}})"),
    });
    options.response_format = Json::parse(R"({"type": "json_object"})");
    auto prompt = EncodeChat({Msg("system", "S"), Msg("user", "u")}, options);
    REQUIRE(prompt.ok());
    const std::string& text = *prompt;
    CHECK(text.rfind(kBos + "S\n\n## Tools\n\nYou have access to a set of tools", 0) == 0);
    CHECK(Contains(text,
                   "Here are the functions available in JSONSchema format:\n<functions>\n"
                   "{\"description\": \"d\", \"name\": \"f\", \"parameters\": {\"type\": \"object\"}}\n"
                   "{\"name\": \"g\", \"parameters\": {\"type\": \"object\"}}\n"
                   "{\"name\": \"h\", \"parameters\": {\"type\": \"object\"}}\n</functions>\n"
                   "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
                   "{\"type\": \"json_object\"}" +
                       kUser + "u"));

    // Without a system message one is created in front.
    ChatEncodeOptions tools_only;
    tools_only.tools = Json::array({Json::parse(R"({"name": "g"})")});
    auto created = EncodeChat({Msg("user", "u")}, tools_only);
    REQUIRE(created.ok());
    CHECK(created->rfind(kBos + "\n\n## Tools\n", 0) == 0);
    CHECK(Contains(*created, "<functions>\n{\"name\": \"g\"}\n</functions>\n" + kUser + "u" + kAssistant));
  }

  TEST_CASE("tool specs given as objects keep the caller's key order, byte-equal to the same specs as text") {
    // Keys deliberately out of alphabetical order, nested too: the reference prints dicts as given.
    const std::string spec_text =
        R"({"type": "function", "function": {"name": "search", "parameters": {"type": "object", )"
        R"("required": ["query"], "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}}, )"
        R"("description": "Find things"}})";
    ChatEncodeOptions as_objects;
    as_objects.tools = OrderedJson::array({OrderedJson::parse(spec_text)});
    ChatEncodeOptions as_text;
    as_text.tools = OrderedJson::array({spec_text});
    auto from_objects = EncodeChat({Msg("user", "u")}, as_objects);
    auto from_text = EncodeChat({Msg("user", "u")}, as_text);
    REQUIRE(from_objects.ok());
    REQUIRE(from_text.ok());
    CHECK(*from_objects == *from_text);
    CHECK(Contains(*from_objects,
                   "<functions>\n{\"name\": \"search\", \"parameters\": {\"type\": \"object\", "
                   "\"required\": [\"query\"], \"properties\": {\"query\": {\"type\": \"string\"}, "
                   "\"limit\": {\"type\": \"integer\"}}}, \"description\": \"Find things\"}\n</functions>"));
  }

  TEST_CASE("rejected conversations") {
    CheckRejected({Msg("developer", "x")}, "developer");
    CheckRejected({Msg("wizard", "x")}, "unknown role 'wizard'");
    CheckRejected({Msg("user", "x"), Msg("tool", "result")}, "messages[1]: tool message without a preceding");
    CheckRejected({Msg("tool", "result")}, "messages[0]");
    CheckRejected(
        {Msg("user", "x"), Msg("assistant", "", "", {Call("f", Json::object())}), Msg("tool", "a"), Msg("tool", "b")},
        "messages[3]: tool message without a matching tool call");
    CheckRejected({Msg("user", "x"), Msg("assistant", "", "", {Call("f", Json::array({1}))})},
                  "arguments must be a JSON object");
    CheckRejected({Msg("user", "x"), Msg("assistant", "", "", {Call("f", "{not json")})}, "not valid JSON");
    CheckRejected({Msg("user", "x"), Msg("assistant", "plain answer")}, "reasoning_content or tool_calls",
                  /*thinking=*/true);
  }

  // A completion with reasoning, content and two calls (string and non-string parameters).
  const std::string kFullCompletion =
      "I should look it up.</think>Let me check." +
      RenderToolCalls({
          Call("search", {{"query", "weather Paris"}, {"limit", 3}}),
          Call("convert", {{"values", Json::array({1, 2.5})}, {"unit", "C"}, {"strict", false}}),
      }) +
      kEos;

  TEST_CASE("parse: reasoning, content and two tool calls") {
    auto parsed = ParseCompletion(kFullCompletion, /*thinking=*/true);
    REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
    CHECK(parsed->finished);
    CHECK_FALSE(parsed->truncated);
    const ChatMessage& message = parsed->message;
    CHECK(message.role == "assistant");
    CHECK(message.reasoning_content == "I should look it up.");
    CHECK(message.content == "Let me check.");
    REQUIRE(message.tool_calls.size() == 2);
    CHECK(message.tool_calls[0].name == "search");
    CHECK(message.tool_calls[0].arguments == Json({{"query", "weather Paris"}, {"limit", 3}}));
    CHECK(message.tool_calls[1].name == "convert");
    CHECK(message.tool_calls[1].arguments ==
          Json({{"values", Json::array({1, 2.5})}, {"unit", "C"}, {"strict", false}}));
  }

  TEST_CASE("parse: plain answers in both modes") {
    auto chat = ParseCompletion("The answer is 2." + kEos, false);
    REQUIRE(chat.ok());
    CHECK(chat->finished);
    CHECK(chat->message.content == "The answer is 2.");
    CHECK(chat->message.reasoning_content.empty());
    CHECK(chat->message.tool_calls.empty());
    auto thinking = ParseCompletion("1+1 is 2.</think>2" + kEos, true);
    REQUIRE(thinking.ok());
    CHECK(thinking->message.reasoning_content == "1+1 is 2.");
    CHECK(thinking->message.content == "2");
    // A block right at the start of the content (no "\n\n" before it) is read too.
    auto bare = ParseCompletion(RenderToolCalls({Call("f", Json::object())}).substr(2) + kEos, false);
    REQUIRE_MESSAGE(bare.ok(), bare.status().ToString());
    CHECK(bare->message.tool_calls.size() == 1);
  }

  TEST_CASE("parse: every cut of a completion is a truncated parse, never an error") {
    for (size_t cut = 0; cut < kFullCompletion.size(); ++cut) {
      auto parsed = ParseCompletion(kFullCompletion.substr(0, cut), true);
      REQUIRE_MESSAGE(parsed.ok(), "cut at " << cut << ": " << parsed.status().ToString());
      CHECK(parsed->truncated);
      CHECK_FALSE(parsed->finished);
      CHECK(parsed->message.tool_calls.size() <= 2);
    }
    // Cut inside the second call: the first is kept whole.
    const size_t second = kFullCompletion.find("<｜DSML｜invoke name=\"convert\"");
    auto partial = ParseCompletion(kFullCompletion.substr(0, second + 10), true);
    REQUIRE(partial.ok());
    REQUIRE(partial->message.tool_calls.size() == 1);
    CHECK(partial->message.tool_calls[0].name == "search");
    auto cut_reasoning = ParseCompletion("thinking hard</thi", true);
    REQUIRE(cut_reasoning.ok());
    CHECK(cut_reasoning->message.reasoning_content == "thinking hard");
    auto cut_content = ParseCompletion("partial answer<｜end▁of", false);
    REQUIRE(cut_content.ok());
    CHECK(cut_content->message.content == "partial answer");
  }

  TEST_CASE("parse: malformed DSML names the position and what was expected") {
    const std::string head = "ok\n\n<｜DSML｜function_calls>\n";
    auto bad_tag = ParseCompletion(head + "<｜DSML｜oops>" + kEos, false);
    REQUIRE_FALSE(bad_tag.ok());
    CHECK(Contains(bad_tag.status().message(), "at offset " + std::to_string(head.size())));
    CHECK(Contains(bad_tag.status().message(), "expected"));

    auto bad_flag = ParseCompletion(
        head + "<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"k\" string=\"maybe\">v</｜DSML｜parameter>",
        false);
    REQUIRE_FALSE(bad_flag.ok());
    CHECK(Contains(bad_flag.status().message(), "string=\"true\""));

    auto bad_json = ParseCompletion(head + "<｜DSML｜invoke name=\"f\">\n" + Param("n", "{oops", false) +
                                        "\n</｜DSML｜invoke>\n</｜DSML｜function_calls>" + kEos,
                                    false);
    REQUIRE_FALSE(bad_json.ok());
    CHECK(Contains(bad_json.status().message(), "parameter n of f"));

    auto after_eos = ParseCompletion("done" + kEos + "more", false);
    REQUIRE_FALSE(after_eos.ok());
    CHECK(Contains(after_eos.status().message(), "offset " + std::to_string(4 + kEos.size())));

    auto special = ParseCompletion("a<｜User｜>b" + kEos, false);
    REQUIRE_FALSE(special.ok());
    CHECK(Contains(special.status().message(), "special token"));

    auto after_block = ParseCompletion(RenderToolCalls({Call("f", Json::object())}) + "junk", false);
    REQUIRE_FALSE(after_block.ok());
    CHECK(Contains(after_block.status().message(), "end-of-sentence"));
  }

  TEST_CASE("RenderToolCalls -> ParseCompletion gives the calls back") {
    const std::vector<ChatToolCall> calls = {
        Call("write_file", {{"path", "/tmp/a.txt"}, {"content", "line 1\nline 2 with \"quotes\" and <tags>"}}),
        Call("run", {{"argv", Json::array({"ls", "-la"})}, {"timeout", 30}, {"env", {{"A", "1"}}}, {"dry", nullptr}}),
        Call("noop", Json::object()),
    };
    const std::string block = RenderToolCalls(calls);
    CHECK(block.rfind("\n\n<｜DSML｜function_calls>\n", 0) == 0);
    auto parsed = ParseCompletion("Working." + block + kEos, false);
    REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
    CHECK(parsed->finished);
    CHECK(parsed->message.content == "Working.");
    REQUIRE(parsed->message.tool_calls.size() == calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      CHECK(parsed->message.tool_calls[i].name == calls[i].name);
      CHECK(parsed->message.tool_calls[i].arguments == calls[i].arguments);
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
