// The openai backend against a real local HTTP server (tests/inference/openai_test_server.py, run
// with /usr/bin/python3): request bodies as the server received them, response parsing, retries on
// 429/5xx and dead ports, timeouts, error bodies, server-sent-event streaming and the concurrency
// cap. The server echoes requests back and serves canned answers only for the failure modes.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "inference/openai_backend.h"
#include "tests/python_test_server.h"
#include "tests/temp_dir.h"

extern char** environ;

namespace envforge::inference {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The Python test server, started once per test binary; killed when the binary exits.
class TestServer {
 public:
  TestServer() : server_(std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/inference/openai_test_server.py") {}

  std::string base() const { return "http://127.0.0.1:" + std::to_string(server_.port()) + "/v1"; }
  std::string chat_url() const { return base() + "/chat/completions"; }

  // GET /stats/MODEL over a plain socket: {"attempts", "max_concurrent"} for that model string.
  Json Stats(const std::string& model) const { return server_.GetJson("/stats/" + model); }

 private:
  testing::PythonTestServer server_;
};

TestServer& Server() {
  static TestServer server;
  return server;
}

std::unique_ptr<Backend> Open(const std::string& base_url, BackendOptions options = {}) {
  Result<std::unique_ptr<Backend>> backend = OpenOpenAiBackend(base_url, options);
  INFO(backend.status().ToString());
  REQUIRE(backend.ok());
  return std::move(*backend);
}

ChatMessage Msg(std::string role, std::string content, std::string reasoning = "", std::vector<ChatToolCall> calls = {},
                std::string tool_call_id = "") {
  return ChatMessage{std::move(role), std::move(content), std::move(reasoning), std::move(calls),
                     std::move(tool_call_id)};
}

CompletionRequest Request(const std::string& model, std::vector<ChatMessage> messages = {Msg("user", "hi")}) {
  CompletionRequest request;
  request.model = model;
  request.messages = std::move(messages);
  return request;
}

// The echo mode's content: what the server received.
Json Echoed(const Completion& choice) {
  Result<Json> json = ParseJson(choice.message.content, "echo");
  REQUIRE(json.ok());
  return *json;
}

Result<CompletionResult> Complete(Backend& backend, const CompletionRequest& request) {
  return backend.Complete(request);
}

TEST_CASE("openai: the request body carries messages, tool calls with ids, tools, sampling and the key") {
  ::setenv("ENVFORGE_OPENAI_TEST_KEY", "sk-test-123", 1);
  BackendOptions options;
  options.api_key_env = "ENVFORGE_OPENAI_TEST_KEY";
  auto backend = Open(Server().base(), options);

  CompletionRequest request =
      Request("echo/body",
              {
                  Msg("system", "be brief"),
                  Msg("user", "first question"),
                  Msg("assistant", "", "old reasoning",
                      {ChatToolCall{"", "search", Json{{"q", "x"}}}, ChatToolCall{"", "lookup", Json("{\"id\": 4}")}}),
                  Msg("tool", "result 1"),
                  Msg("tool", "result 2"),
                  Msg("user", "second question"),
                  Msg("assistant", "checking", "new reasoning", {ChatToolCall{"call_x", "search", Json{{"q", "y"}}}}),
                  Msg("tool", "result 3", "", {}, "call_x"),
              });
  request.tools = Json::array({
      Json{{"name", "search"},
           {"description", "Search."},
           {"inputSchema", {{"type", "object"}, {"properties", {{"q", {{"type", "string"}}}}}}}},
      Json{{"type", "function"}, {"function", {{"name", "lookup"}, {"parameters", {{"type", "object"}}}}}},
  });
  request.n = 2;
  request.max_tokens = 64;
  request.sampling.temperature = 0.7;
  request.sampling.top_p = 0.9;
  request.sampling.seed = 42;
  request.stop = {"END"};
  request.logprobs = true;
  request.top_logprobs = 3;
  request.thinking = true;

  Result<CompletionResult> result = Complete(*backend, request);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  REQUIRE(result->choices.size() == 2);
  CHECK(result->model == "echo/body");
  CHECK(result->prompt_tokens == 7);
  CHECK(result->choices[0].finish_reason == "stop");
  CHECK(Echoed(result->choices[1])["index"] == 1);

  Json echoed = Echoed(result->choices[0]);
  CHECK(echoed["authorization"] == "Bearer sk-test-123");
  CHECK(echoed["path"] == "/v1/chat/completions");
  const Json& body = echoed["body"];
  CHECK(body["model"] == "echo/body");
  CHECK(body["n"] == 2);
  CHECK(body["max_tokens"] == 64);
  CHECK(body["temperature"] == doctest::Approx(0.7));
  CHECK(body["top_p"] == doctest::Approx(0.9));
  CHECK(body["seed"] == 42);
  CHECK(body["stop"] == Json::array({"END"}));
  CHECK(body["logprobs"] == true);
  CHECK(body["top_logprobs"] == 3);
  CHECK(body["thinking"] == Json{{"type", "enabled"}});
  CHECK_FALSE(body.contains("stream"));

  const Json& messages = body["messages"];
  REQUIRE(messages.size() == 8);
  CHECK(messages[0] == Json{{"role", "system"}, {"content", "be brief"}});
  // Reasoning before the last user message is dropped; after it, it goes back (thinking mode).
  CHECK_FALSE(messages[2].contains("reasoning_content"));
  CHECK(messages[2]["content"].is_null());
  CHECK(messages[6]["reasoning_content"] == "new reasoning");
  CHECK(messages[6]["content"] == "checking");
  // Generated ids, arguments as JSON text, tool messages answering the calls in order.
  const Json& calls = messages[2]["tool_calls"];
  REQUIRE(calls.size() == 2);
  CHECK(calls[0]["id"] == "call_0");
  CHECK(calls[0]["type"] == "function");
  CHECK(calls[0]["function"]["name"] == "search");
  REQUIRE(calls[0]["function"]["arguments"].is_string());
  CHECK(ParseJson(calls[0]["function"]["arguments"].get<std::string>()).value() == Json{{"q", "x"}});
  CHECK(calls[1]["id"] == "call_1");
  CHECK(calls[1]["function"]["arguments"] == "{\"id\": 4}");
  CHECK(messages[3] == Json{{"role", "tool"}, {"tool_call_id", "call_0"}, {"content", "result 1"}});
  CHECK(messages[4]["tool_call_id"] == "call_1");
  CHECK(messages[6]["tool_calls"][0]["id"] == "call_x");
  CHECK(messages[7]["tool_call_id"] == "call_x");

  // Tools in OpenAI's function form: MCP specs converted, OpenAI specs passed through.
  REQUIRE(body["tools"].size() == 2);
  CHECK(body["tools"][0] ==
        Json{{"type", "function"},
             {"function",
              {{"name", "search"},
               {"description", "Search."},
               {"parameters", {{"type", "object"}, {"properties", {{"q", {{"type", "string"}}}}}}}}}});
  CHECK(body["tools"][1] == request.tools[1]);
  CHECK(body["tool_choice"] == "auto");
  ::unsetenv("ENVFORGE_OPENAI_TEST_KEY");
}

TEST_CASE("openai: tools reach the server in the order the caller gave their keys") {
  auto backend = Open(Server().base());
  CompletionRequest request = Request("echo/body");
  const std::string spec_text =
      R"({"type": "function", "function": {"parameters": {"type": "object", "properties": {"z": {"type": "string"}, )"
      R"("a": {"type": "integer"}}}, "name": "lookup", "description": "Look up."}})";
  request.tools = OrderedJson::array({OrderedJson::parse(spec_text)});
  Result<CompletionResult> result = Complete(*backend, request);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  Result<OrderedJson> echoed = ParseOrderedJson(result->choices[0].message.content, "echo");
  REQUIRE(echoed.ok());
  CHECK((*echoed)["body"]["tools"][0].dump() == OrderedJson::parse(spec_text).dump());
}

TEST_CASE("openai: an MCP-style spec marked strict, or strict_tools, reaches the server as a strict function") {
  auto backend = Open(Server().base());
  CompletionRequest request = Request("echo/body");
  request.tools = OrderedJson::parse(R"([
    {"name": "lookup", "description": "Look up.", "strict": true,
     "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
                     "additionalProperties": false}},
    {"name": "loose", "description": "Not strict.", "inputSchema": {"type": "object"}}])");
  Result<CompletionResult> result = Complete(*backend, request);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  Result<OrderedJson> echoed = ParseOrderedJson(result->choices[0].message.content, "echo");
  REQUIRE(echoed.ok());
  const OrderedJson& tools = (*echoed)["body"]["tools"];
  REQUIRE(tools.size() == 2);
  CHECK(tools[0]["function"]["strict"] == true);
  CHECK(tools[0]["function"]["parameters"]["required"] == OrderedJson::array({"q"}));
  CHECK_FALSE(tools[1]["function"].contains("strict"));
  // strict_tools marks every function strict, whatever the specs say.
  request.strict_tools = true;
  Result<CompletionResult> all = Complete(*backend, request);
  REQUIRE(all.ok());
  Result<OrderedJson> all_echoed = ParseOrderedJson(all->choices[0].message.content, "echo");
  REQUIRE(all_echoed.ok());
  for (const OrderedJson& tool : (*all_echoed)["body"]["tools"]) CHECK(tool["function"]["strict"] == true);
}

TEST_CASE("openai: thinking off sends no reasoning; tool_choice none drops the tools; a named choice is a function") {
  auto backend = Open(Server().base());
  CompletionRequest request = Request("echo/choice", {Msg("user", "q"), Msg("assistant", "a", "thought")});
  // A spec may be JSON text (as chat_format accepts); it goes out as an object.
  request.tools = Json::array({Json("{\"name\": \"search\", \"inputSchema\": {\"type\": \"object\"}}")});

  request.tool_choice = "none";
  Result<CompletionResult> none = Complete(*backend, request);
  REQUIRE(none.ok());
  Json body = Echoed(none->choices[0])["body"];
  CHECK_FALSE(body.contains("tools"));
  CHECK_FALSE(body.contains("thinking"));
  CHECK_FALSE(body["messages"][1].contains("reasoning_content"));

  request.tool_choice = "search";
  Result<CompletionResult> named = Complete(*backend, request);
  REQUIRE(named.ok());
  body = Echoed(named->choices[0])["body"];
  CHECK(body["tool_choice"] == Json{{"type", "function"}, {"function", {{"name", "search"}}}});
  CHECK(body["tools"][0]["function"]["parameters"] == Json{{"type", "object"}});
  CHECK_FALSE(body.contains("parallel_tool_calls"));  // OpenAI's default (true) goes unsaid
  request.parallel_tool_calls = false;
  Result<CompletionResult> single = Complete(*backend, request);
  REQUIRE(single.ok());
  CHECK(Echoed(single->choices[0])["body"]["parallel_tool_calls"] == false);
  request.parallel_tool_calls = true;
  // The echo made no call to "search": the choice stays, marked.
  CHECK(Contains(named->choices[0].parse_error, "'search'"));

  request.tool_choice = "required";
  Result<CompletionResult> required = Complete(*backend, request);
  REQUIRE(required.ok());
  CHECK(Contains(required->choices[0].parse_error, "required"));
}

TEST_CASE("openai: tool calls with valid and invalid JSON arguments, and reasoning") {
  auto backend = Open(Server().base());
  Result<CompletionResult> result = Complete(*backend, Request("tools"));
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  REQUIRE(result->choices.size() == 1);
  const Completion& choice = result->choices[0];
  CHECK(choice.finish_reason == "tool_calls");
  CHECK(choice.message.role == "assistant");
  CHECK(choice.message.content.empty());
  CHECK(choice.message.reasoning_content == "I should look it up.");
  REQUIRE(choice.message.tool_calls.size() == 2);
  CHECK(choice.message.tool_calls[0].id == "call_a");
  CHECK(choice.message.tool_calls[0].name == "search");
  CHECK(choice.message.tool_calls[0].arguments == Json{{"q", "hotels"}, {"limit", 3}});
  // Invalid JSON keeps the choice: the raw text stays, parse_error names the tool.
  CHECK(choice.message.tool_calls[1].name == "book");
  CHECK(choice.message.tool_calls[1].arguments == Json("{\"hotel\": 7,"));
  CHECK(Contains(choice.parse_error, "'book'"));
  CHECK_FALSE(Contains(choice.parse_error, "'search'"));
}

TEST_CASE("openai: logprobs and top_logprobs per token") {
  auto backend = Open(Server().base());
  CompletionRequest request = Request("logprobs");
  request.logprobs = true;
  request.top_logprobs = 2;
  Result<CompletionResult> result = Complete(*backend, request);
  REQUIRE(result.ok());
  const Completion& choice = result->choices[0];
  CHECK(choice.message.content == "Hi!");
  CHECK(choice.text == "Hi!");
  CHECK(choice.token_texts == std::vector<std::string>{"Hi", "!"});
  CHECK(choice.logprobs == std::vector<double>{-0.25, -0.5});
  REQUIRE(choice.top_logprobs.size() == 2);
  REQUIRE(choice.top_logprobs[0].size() == 2);
  CHECK(choice.top_logprobs[0][1].text == "Hello");
  CHECK(choice.top_logprobs[0][1].logprob == -1.5);
  CHECK(choice.top_logprobs[0][1].token == -1);
  CHECK(choice.completion_tokens == 2);
}

TEST_CASE("openai: raw requests go to /completions and return the text unparsed") {
  auto backend = Open(Server().base() + "/");
  CompletionRequest request;
  request.model = "echo/raw";
  request.raw = true;
  request.prompt_text = "<tool>abc";
  Result<CompletionResult> result = Complete(*backend, request);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  CHECK(result->choices[0].text == "echo:<tool>abc");
  CHECK(result->choices[0].finish_reason == "length");
  CHECK(result->choices[0].message.tool_calls.empty());
}

TEST_CASE("openai: 429 with Retry-After is retried after the wait the server asked for") {
  auto backend = Open(Server().base());
  auto start = steady_clock::now();
  Result<CompletionResult> result = Complete(*backend, Request("retry429/a"));
  auto waited = steady_clock::now() - start;
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  CHECK(Server().Stats("retry429/a")["attempts"] == 2);
  CHECK(waited >= milliseconds(950));
  CHECK(backend->Stats()["retries"] == 1);
}

TEST_CASE("openai: 500 twice then success; 500 forever is Unavailable after max_retries") {
  BackendOptions options;
  options.max_retries = 4;
  auto backend = Open(Server().base(), options);
  Result<CompletionResult> flaky = Complete(*backend, Request("flaky500/a"));
  INFO(flaky.status().ToString());
  REQUIRE(flaky.ok());
  CHECK(Server().Stats("flaky500/a")["attempts"] == 3);

  options.max_retries = 2;
  auto impatient = Open(Server().base(), options);
  Result<CompletionResult> down = Complete(*impatient, Request("down500/a"));
  CHECK(down.status().code() == StatusCode::kUnavailable);
  CHECK(Contains(down.status().message(), Server().chat_url()));
  CHECK(Contains(down.status().message(), "HTTP 500"));
  CHECK(Contains(down.status().message(), "server overloaded"));
  CHECK(Server().Stats("down500/a")["attempts"] == 3);
}

TEST_CASE(
    "openai: a 400 is InvalidArgument with the server's message, not retried; a context overflow is "
    "ResourceExhausted") {
  auto backend = Open(Server().base());
  Result<CompletionResult> result = Complete(*backend, Request("bad400/a"));
  CHECK(result.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(result.status().message(), "400"));
  CHECK(Contains(result.status().message(), "The model `bad400` does not exist."));
  CHECK(Server().Stats("bad400/a")["attempts"] == 1);

  // A prompt past the window is the one 400 the rollout loop acts on (backend.h).
  Result<CompletionResult> too_long = Complete(*backend, Request("toolong/a"));
  CHECK(too_long.status().code() == StatusCode::kResourceExhausted);
  CHECK(too_long.status().message().rfind("context length exceeded: ", 0) == 0);
  CHECK(Contains(too_long.status().message(), "maximum context length is 4096 tokens"));
}

TEST_CASE("openai: bodies that are not the documented shape are DataLoss naming the URL and the problem") {
  auto backend = Open(Server().base());
  const std::map<std::string, std::string> expected = {
      {"garbage", "not JSON"},
      {"noarray", "no choices array"},
      {"nomessage", "choices[0] has no message object"},
      {"badtypes", "choices[0].message.content is not a string or null"},
  };
  for (const auto& [mode, problem] : expected) {
    CAPTURE(mode);
    Result<CompletionResult> result = Complete(*backend, Request(mode));
    CHECK(result.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(result.status().message(), "openai response from " + Server().chat_url() + ": " + problem));
  }
}

TEST_CASE("openai: a response slower than the timeout is DeadlineExceeded") {
  auto backend = Open(Server().base());
  CompletionRequest request = Request("slow/a");
  request.timeout = milliseconds(500);
  auto start = steady_clock::now();
  Result<CompletionResult> result = Complete(*backend, request);
  CHECK(result.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(Contains(result.status().message(), Server().chat_url()));
  CHECK(steady_clock::now() - start < milliseconds(2500));
}

TEST_CASE("openai: a closed port is Unavailable naming the URL after the retries") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  socklen_t length = sizeof(address);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);  // bound, never listening, now closed: connections are refused
  std::string base = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/v1";

  BackendOptions options;
  options.max_retries = 1;
  auto backend = Open(base, options);
  Result<CompletionResult> result = Complete(*backend, Request("echo"));
  CHECK(result.status().code() == StatusCode::kUnavailable);
  CHECK(Contains(result.status().message(), base + "/chat/completions"));
  CHECK(Contains(result.status().message(), "2 attempts"));
  CHECK(backend->Stats()["attempts"] == 2);
}

TEST_CASE("openai: streaming hands content pieces to on_text and returns what the plain call returns") {
  auto backend = Open(Server().base());
  CompletionRequest plain_request = Request("stream/plain");
  plain_request.n = 2;
  Result<CompletionResult> plain = Complete(*backend, plain_request);
  INFO(plain.status().ToString());
  REQUIRE(plain.ok());

  std::mutex mutex;
  std::map<int64_t, std::vector<std::string>> pieces;
  CompletionRequest stream_request = Request("stream/plain");
  stream_request.n = 2;
  stream_request.on_text = [&](int64_t choice, std::string_view piece) {
    std::lock_guard lock(mutex);
    pieces[choice].emplace_back(piece);
  };
  Result<CompletionResult> streamed = Complete(*backend, stream_request);
  INFO(streamed.status().ToString());
  REQUIRE(streamed.ok());

  REQUIRE(streamed->choices.size() == 2);
  REQUIRE(plain->choices.size() == 2);
  CHECK(streamed->model == plain->model);
  CHECK(streamed->prompt_tokens == 11);
  CHECK(streamed->completion_tokens == plain->completion_tokens);
  for (size_t k = 0; k < 2; ++k) {
    CAPTURE(k);
    const Completion& a = plain->choices[k];
    const Completion& b = streamed->choices[k];
    CHECK(b.message.content == a.message.content);
    CHECK(b.message.reasoning_content == a.message.reasoning_content);
    CHECK(b.finish_reason == a.finish_reason);
    CHECK(b.parse_error == a.parse_error);
    REQUIRE(b.message.tool_calls.size() == a.message.tool_calls.size());
    for (size_t j = 0; j < a.message.tool_calls.size(); ++j) {
      CHECK(b.message.tool_calls[j].id == a.message.tool_calls[j].id);
      CHECK(b.message.tool_calls[j].name == a.message.tool_calls[j].name);
      CHECK(b.message.tool_calls[j].arguments == a.message.tool_calls[j].arguments);
    }
    std::string joined;
    for (const auto& piece : pieces[static_cast<int64_t>(k)]) joined += piece;
    CHECK(joined == a.message.content);
    CHECK(pieces[static_cast<int64_t>(k)].size() > 1);
  }
  CHECK(streamed->choices[0].message.reasoning_content == "Let me think about the weather.");
  CHECK(streamed->choices[0].message.tool_calls[0].arguments == Json{{"city", "Paris"}, {"days", 3}});
  CHECK(streamed->choices[0].message.tool_calls[1].id == "call_w2");
  CHECK(streamed->choices[1].message.content == "Second choice here.");

  // A stream cut before [DONE] with unfinished choices is DataLoss, not a short answer.
  CompletionRequest cut_request = Request("streamcut/a");
  cut_request.on_text = [](int64_t, std::string_view) {};
  Result<CompletionResult> cut = Complete(*backend, cut_request);
  CHECK(cut.status().code() == StatusCode::kDataLoss);
  CHECK(Contains(cut.status().message(), "[DONE]"));
}

TEST_CASE("openai: at most max_concurrency requests are in flight at once") {
  auto run = [](const std::string& model, int cap, int threads) {
    BackendOptions options;
    options.max_concurrency = cap;
    auto backend = Open(Server().base(), options);
    std::vector<std::thread> workers;
    std::atomic<int> ok{0};
    for (int i = 0; i < threads; ++i) {
      workers.emplace_back([&] { ok += backend->Complete(Request(model)).ok() ? 1 : 0; });
    }
    for (auto& worker : workers) worker.join();
    CHECK(ok == threads);
    return Server().Stats(model)["max_concurrent"].get<int>();
  };
  CHECK(run("slowcount/capped", 2, 6) == 2);
  // The same load without a tight cap reaches the server at once (so the cap is what held it).
  CHECK(run("slowcount/open", 6, 6) > 2);
}

TEST_CASE(
    "openai: OpenBackend opens openai:URL; bad specs, unset key variables and bad requests are InvalidArgument naming "
    "them") {
  BackendOptions options;
  CHECK(OpenOpenAiBackend("", options).status().code() == StatusCode::kInvalidArgument);
  Result<std::unique_ptr<Backend>> ftp = OpenOpenAiBackend("ftp://example.com/v1", options);
  CHECK(ftp.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(ftp.status().message(), "ftp://example.com/v1"));
  options.api_key_env = "ENVFORGE_OPENAI_TEST_UNSET_KEY";
  ::unsetenv("ENVFORGE_OPENAI_TEST_UNSET_KEY");
  Result<std::unique_ptr<Backend>> keyless = OpenOpenAiBackend(Server().base(), options);
  CHECK(keyless.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(keyless.status().message(), "ENVFORGE_OPENAI_TEST_UNSET_KEY"));

  options = BackendOptions{};
  options.model_name = "served-model";
  options.context_window = 4096;
  Result<std::unique_ptr<Backend>> opened = OpenBackend("openai:" + Server().base(), options);
  REQUIRE(opened.ok());
  std::unique_ptr<Backend> backend = std::move(*opened);
  BackendInfo info = backend->info();
  CHECK(info.kind == "openai");
  CHECK(info.spec == "openai:" + Server().base());
  CHECK(info.model == "served-model");
  CHECK(info.context_window == 4096);
  CHECK(backend->CountTokens("") == 0);
  CHECK(backend->CountTokens("abcde") == 2);

  Result<CompletionResult> orphan = Complete(*backend, Request("echo", {Msg("user", "q"), Msg("tool", "result")}));
  CHECK(orphan.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(orphan.status().message(), "message 1 (tool)"));
  Result<CompletionResult> developer = Complete(*backend, Request("echo", {Msg("developer", "x")}));
  CHECK(developer.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(developer.status().message(), "'developer'"));
  CompletionRequest hot = Request("echo");
  hot.sampling.temperature = -1;
  CHECK(Contains(Complete(*backend, hot).status().message(), "temperature"));
  // An empty request model falls back to --model.
  Result<CompletionResult> fallback = Complete(*backend, Request(""));
  REQUIRE(fallback.ok());
  CHECK(Echoed(fallback->choices[0])["body"]["model"] == "served-model");
}

}  // namespace
}  // namespace envforge::inference
