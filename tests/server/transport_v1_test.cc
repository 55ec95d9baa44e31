// The OpenAI-compatible /v1 endpoint of the real `envforge serve` binary with a scripted backend
// (inference/scripted_backend.h): response shapes, tool calls, reasoning, the streamed split of a
// DSV32 completion, the error shapes and statuses, auth, and the 429 of a full queue. Plus the
// stream splitter itself, fed one byte at a time.
#include <doctest/doctest.h>

#include <filesystem>
#include <future>
#include <thread>

#include "base/subprocess.h"
#include "server/internal/openai_stream.h"
#include "tests/server/v1_test_util.h"

namespace envforge::server::testing {
namespace {

void CheckError(const HttpReply& reply, int status, const std::string& type, const Json& param, const Json& code) {
  INFO(reply.body);
  CHECK(reply.status == status);
  CHECK(reply.header("content-type") == "application/json");
  Json body = reply.json();
  REQUIRE(body.contains("error"));
  CHECK(body["error"]["type"] == type);
  CHECK(body["error"]["param"] == param);
  CHECK(body["error"]["code"] == code);
  CHECK(body["error"]["message"].is_string());
  CHECK(!body["error"]["message"].get<std::string>().empty());
}

TEST_SUITE("v1") {
  TEST_CASE("stream splitter: byte-by-byte pieces give the reasoning and content, never a marker") {
    std::string text = DsmlCompletion();
    auto parsed = inference::ParseCompletion(text, true);
    REQUIRE(parsed.ok());
    internal::DeltaSplitter splitter(true, false, {});
    std::string reasoning, content;
    for (char c : text) {
      internal::TextDelta delta = splitter.Feed(std::string_view(&c, 1));
      reasoning += delta.reasoning;
      content += delta.content;
    }
    CHECK(reasoning == "I should search the hotels.");
    CHECK(content == "Searching now.");
    internal::TextDelta rest = splitter.Finish(parsed->message.reasoning_content, parsed->message.content);
    CHECK(rest.empty());

    // A stop string split over pieces is held back; Finish sends what the final text has beyond it.
    internal::DeltaSplitter raw(false, true, {"STOP"});
    std::string sent;
    for (std::string_view piece : {"abc S", "TO", "P tail"}) sent += raw.Feed(piece).content;
    CHECK(sent == "abc ");
    CHECK(raw.Finish("", "abc ").empty());
    CHECK(internal::MarkerPrefixTail("xx</th", {"</think>"}) == 4);
  }

  TEST_CASE("v1 scripted: models, a chat completion with reasoning, tool calls with JSON-text arguments, usage") {
    ScriptedServer scripted;
    uint16_t port = scripted.server.port;

    HttpReply models = HttpCall(port, "GET", "/v1/models");
    REQUIRE(models.status == 200);
    Json list = models.json();
    CHECK(list["object"] == "list");
    REQUIRE(list["data"].size() == 1);
    CHECK(list["data"][0]["id"] == "tiny-scripted");
    CHECK(list["data"][0]["object"] == "model");
    CHECK(HttpCall(port, "GET", "/v1/models/tiny-scripted").json()["id"] == "tiny-scripted");
    CheckError(HttpCall(port, "GET", "/v1/models/gpt-4"), 404, "invalid_request_error", nullptr, "model_not_found");

    HttpReply greet = PostJson(
        port, "/v1/chat/completions",
        UserChat("greet me",
                 {{"model", "tiny-scripted"}, {"thinking", {{"type", "enabled"}}}, {"some_unknown_field", 1}}));
    REQUIRE(greet.status == 200);
    Json answer = greet.json();
    CHECK(answer["object"] == "chat.completion");
    CHECK(answer["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
    CHECK(answer["created"].is_number_integer());
    CHECK(answer["model"] == "tiny-scripted");
    REQUIRE(answer["choices"].size() == 1);
    Json choice = answer["choices"][0];
    CHECK(choice["index"] == 0);
    CHECK(choice["finish_reason"] == "stop");
    CHECK(choice["logprobs"].is_null());
    CHECK(choice["message"]["role"] == "assistant");
    CHECK(choice["message"]["content"] == "Hello there!");
    CHECK(choice["message"]["reasoning_content"] == "The user greets me.");
    Json usage = answer["usage"];
    CHECK(usage["prompt_tokens"].get<int64_t>() > 0);
    CHECK(usage["completion_tokens"].get<int64_t>() > 0);
    CHECK(usage["total_tokens"] == usage["prompt_tokens"].get<int64_t>() + usage["completion_tokens"].get<int64_t>());

    // Thinking off (chat_template_kwargs): no reasoning_content in the message.
    Json plain =
        PostJson(port, "/v1/chat/completions", UserChat("greet", {{"chat_template_kwargs", {{"thinking", false}}}}))
            .json();
    CHECK(!plain["choices"][0]["message"].contains("reasoning_content"));

    // A conversation in OpenAI's full form: system, content parts, an assistant tool call with null
    // content, the tool's answer, then the question that makes the script call a tool.
    Json tools =
        ParseJson(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])")
            .value();
    Json conversation = Json::array({
        Json{{"role", "system"}, {"content", "You are helpful."}},
        Json{{"role", "user"},
             {"content", Json::array({Json{{"type", "text"}, {"text", "What is the"}},
                                      Json{{"type", "text"}, {"text", "time?"}}})}},
        Json{{"role", "assistant"},
             {"content", nullptr},
             {"tool_calls",
              Json::array({Json{{"id", "call_t"},
                                {"type", "function"},
                                {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Oslo\"}"}}}}})}},
        Json{{"role", "tool"}, {"tool_call_id", "call_t"}, {"content", "12:00"}},
        Json{{"role", "user"}, {"content", "And the weather?"}},
    });
    HttpReply called =
        PostJson(port, "/v1/chat/completions",
                 Json{{"model", ""}, {"messages", conversation}, {"tools", tools}, {"tool_choice", "auto"}, {"n", 1}});
    REQUIRE(called.status == 200);
    Json call_choice = called.json()["choices"][0];
    CHECK(call_choice["finish_reason"] == "tool_calls");
    CHECK(call_choice["message"]["content"] == "Let me check.");
    REQUIRE(call_choice["message"]["tool_calls"].size() == 1);
    Json call = call_choice["message"]["tool_calls"][0];
    CHECK(call["id"] == "call_w1");
    CHECK(call["type"] == "function");
    CHECK(call["function"]["name"] == "get_weather");
    REQUIRE(call["function"]["arguments"].is_string());
    CHECK(ParseJson(call["function"]["arguments"].get<std::string>()).value() == Json{{"city", "Paris"}});

    // n = 3: three choices, each counted.
    Json three = PostJson(port, "/v1/chat/completions", UserChat("anything", {{"n", 3}})).json();
    REQUIRE(three["choices"].size() == 3);
    for (int i = 0; i < 3; ++i) {
      CHECK(three["choices"][i]["index"] == i);
      CHECK(three["choices"][i]["message"]["content"] == "default answer");
    }

    // /v1/completions: text_completion with choices[].text.
    HttpReply completion = PostJson(port, "/v1/completions", Json{{"prompt", "greet the world"}, {"max_tokens", 20}});
    REQUIRE(completion.status == 200);
    Json text = completion.json();
    CHECK(text["object"] == "text_completion");
    CHECK(text["id"].get<std::string>().rfind("cmpl-", 0) == 0);
    CHECK(text["choices"][0]["text"] == "Hello there!");
    CHECK(text["usage"]["total_tokens"].get<int64_t>() > 0);
  }

  TEST_CASE("v1 scripted: streaming splits reasoning, content and tool calls; usage chunk; [DONE]") {
    ScriptedServer scripted;
    uint16_t port = scripted.server.port;
    Json request = UserChat(
        "dsml please",
        {{"thinking", {{"type", "enabled"}}}, {"stream", true}, {"stream_options", {{"include_usage", true}}}});
    HttpReply streamed = PostJson(port, "/v1/chat/completions", request);
    REQUIRE(streamed.status == 200);
    CHECK(streamed.header("content-type") == "text/event-stream");
    CHECK(streamed.header("transfer-encoding") == "chunked");
    std::vector<Json> chunks = SseChunks(streamed.body);
    REQUIRE(chunks.size() >= 5);
    for (const Json& chunk : chunks) {
      CHECK(chunk["object"] == "chat.completion.chunk");
      CHECK(chunk["id"] == chunks[0]["id"]);
    }
    CHECK(chunks[0]["choices"][0]["delta"]["role"] == "assistant");
    CHECK(Concatenated(chunks, "reasoning_content") == "I should search the hotels.");
    CHECK(Concatenated(chunks, "content") == "Searching now.");
    CHECK(streamed.body.find("DSML") == std::string::npos);
    CHECK(streamed.body.find("think>") == std::string::npos);

    // Tool calls come whole, indexed, after the text; then the finish chunk; then usage.
    const Json& usage_chunk = chunks.back();
    CHECK(usage_chunk["choices"].empty());
    CHECK(usage_chunk["usage"]["total_tokens"].get<int64_t>() > 0);
    const Json& finish = chunks[chunks.size() - 2]["choices"][0];
    CHECK(finish["finish_reason"] == "tool_calls");
    const Json& calls = chunks[chunks.size() - 3]["choices"][0]["delta"]["tool_calls"];
    REQUIRE(calls.size() == 1);
    CHECK(calls[0]["index"] == 0);
    CHECK(calls[0]["type"] == "function");
    CHECK(calls[0]["id"].get<std::string>().size() > 0);
    CHECK(calls[0]["function"]["name"] == "search");
    CHECK(ParseJson(calls[0]["function"]["arguments"].get<std::string>()).value() ==
          Json{{"q", "hotels in Paris"}, {"limit", 3}});

    // The same request unstreamed says the same.
    request["stream"] = false;
    Json whole = PostJson(port, "/v1/chat/completions", request).json();
    CHECK(whole["choices"][0]["message"]["reasoning_content"] == "I should search the hotels.");
    CHECK(whole["choices"][0]["message"]["content"] == "Searching now.");
    CHECK(whole["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "search");
    CHECK(whole["choices"][0]["finish_reason"] == "tool_calls");

    // A scripted answer given as content + reasoning_content streams the same way.
    std::vector<Json> greet =
        SseChunks(PostJson(port, "/v1/chat/completions",
                           UserChat("greet", {{"thinking", {{"type", "enabled"}}}, {"stream", true}}))
                      .body);
    CHECK(Concatenated(greet, "reasoning_content") == "The user greets me.");
    CHECK(Concatenated(greet, "content") == "Hello there!");

    // A keep-alive connection serves a streamed answer and then another request.
    namespace beast = boost::beast;
    namespace http = beast::http;
    boost::asio::io_context io;
    beast::tcp_stream connection(io);
    connection.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    beast::flat_buffer buffer;
    for (bool stream : {true, false}) {
      http::request<http::string_body> request_on_connection{http::verb::post, "/v1/chat/completions", 11};
      request_on_connection.set(http::field::host, "127.0.0.1");
      request_on_connection.set(http::field::content_type, "application/json");
      request_on_connection.body() = DumpJson(UserChat("greet", {{"stream", stream}}));
      request_on_connection.prepare_payload();
      http::write(connection, request_on_connection);
      http::response<http::string_body> response;
      http::read(connection, buffer, response);
      CHECK(response.result_int() == 200);
      CHECK(response.keep_alive());
      CHECK(response.body().find("Hello there!") != std::string::npos);
    }
  }

  TEST_CASE("v1 scripted: errors in OpenAI's shape with the right status") {
    ScriptedServer scripted;
    uint16_t port = scripted.server.port;
    CheckError(HttpCall(port, "POST", "/v1/chat/completions", "{\"messages\": [}"), 400, "invalid_request_error",
               nullptr, nullptr);
    CheckError(PostJson(port, "/v1/chat/completions", Json::array()), 400, "invalid_request_error", nullptr, nullptr);
    CheckError(PostJson(port, "/v1/chat/completions", Json{{"model", "tiny-scripted"}}), 400, "invalid_request_error",
               "messages", nullptr);
    Json bad_role = Json{{"messages", Json::array({Json{{"role", "user"}, {"content", "a"}},
                                                   Json{{"role", "assistant"}, {"content", "b"}},
                                                   Json{{"role", "wizard"}, {"content", "c"}}})}};
    HttpReply role = PostJson(port, "/v1/chat/completions", bad_role);
    CheckError(role, 400, "invalid_request_error", "messages[2].role", nullptr);
    CHECK(role.json()["error"]["message"].get<std::string>().find("wizard") != std::string::npos);
    CheckError(PostJson(port, "/v1/chat/completions", UserChat("x", {{"max_tokens", "ten"}})), 400,
               "invalid_request_error", "max_tokens", nullptr);
    CheckError(PostJson(port, "/v1/chat/completions", UserChat("x", {{"temperature", 7}})), 400,
               "invalid_request_error", "temperature", nullptr);
    CheckError(PostJson(port, "/v1/chat/completions", UserChat("x", {{"top_logprobs", 21}, {"logprobs", true}})), 400,
               "invalid_request_error", "top_logprobs", nullptr);
    CheckError(PostJson(port, "/v1/chat/completions", UserChat("x", {{"stop", Json::array({"ok", 3})}})), 400,
               "invalid_request_error", "stop[1]", nullptr);
    CheckError(PostJson(port, "/v1/chat/completions",
                        UserChat("x", {{"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}})),
               400, "invalid_request_error", "tool_choice.function.name", nullptr);
    Json bad_arguments = Json{
        {"messages",
         Json::array(
             {Json{{"role", "user"}, {"content", "a"}},
              Json{{"role", "assistant"},
                   {"content", nullptr},
                   {"tool_calls", Json::array({Json{{"id", "c"},
                                                    {"type", "function"},
                                                    {"function", {{"name", "f"}, {"arguments", "{not json"}}}}})}}})}};
    CheckError(PostJson(port, "/v1/chat/completions", bad_arguments), 400, "invalid_request_error",
               "messages[1].tool_calls[0].function.arguments", nullptr);
    CheckError(PostJson(port, "/v1/chat/completions", UserChat("x", {{"model", "gpt-4o"}})), 404,
               "invalid_request_error", "model", "model_not_found");
    CheckError(PostJson(port, "/v1/chat/completions", UserChat("very long prompt")), 400, "invalid_request_error",
               "messages", "context_length_exceeded");

    HttpReply unavailable = PostJson(port, "/v1/chat/completions", UserChat("please fall over"));
    CheckError(unavailable, 503, "server_error", nullptr, "unavailable");
    CHECK(unavailable.header("retry-after") == "1");
    CHECK(unavailable.json()["error"]["message"].get<std::string>().find("upstream fell over") != std::string::npos);
    // Streamed: the failure comes before any chunk, so it is a plain error status too.
    CheckError(PostJson(port, "/v1/chat/completions", UserChat("please fall over", {{"stream", true}})), 503,
               "server_error", nullptr, "unavailable");

    CheckError(HttpCall(port, "GET", "/v1/embeddings"), 404, "invalid_request_error", nullptr, "unknown_url");
    HttpReply wrong_method = HttpCall(port, "GET", "/v1/chat/completions");
    CheckError(wrong_method, 405, "invalid_request_error", nullptr, "method_not_allowed");
    CHECK(wrong_method.header("allow") == "POST");
    CheckError(HttpCall(port, "POST", "/v1/completions", "{\"prompt\": \"x\"}", {{"Content-Type", "text/plain"}}), 415,
               "invalid_request_error", nullptr, "unsupported_media_type");
  }

  TEST_CASE(
      "v1 scripted: the Bearer token guards /v1, a body past --max-payload is 413; JSON-RPC keeps its own shape") {
    ScriptedServer scripted({"--token", "s3cret", "--max-payload", "4096"});
    uint16_t port = scripted.server.port;
    HttpReply missing = HttpCall(port, "GET", "/v1/models");
    CheckError(missing, 401, "invalid_request_error", nullptr, "invalid_api_key");
    CHECK(missing.header("www-authenticate") == "Bearer");
    CheckError(PostJson(port, "/v1/chat/completions", UserChat("greet"), {{"Authorization", "Bearer wrong"}}), 401,
               "invalid_request_error", nullptr, "invalid_api_key");
    HttpReply allowed = PostJson(port, "/v1/chat/completions", UserChat("greet"), {{"Authorization", "Bearer s3cret"}});
    CHECK(allowed.status == 200);
    // A body over --max-payload: 413 in OpenAI's shape too.
    HttpReply too_large =
        PostJson(port, "/v1/chat/completions", UserChat(std::string(5000, 'x')), {{"Authorization", "Bearer s3cret"}});
    CheckError(too_large, 413, "invalid_request_error", nullptr, "payload_too_large");
    HttpReply rpc = HttpCall(port, "POST", "/rpc", RpcText("envs/list"));
    CHECK(rpc.status == 401);
    CHECK(rpc.json()["error"]["code"] == -32005);
  }

  TEST_CASE("v1: without a backend every /v1 request is 503 naming the missing flag; JSON-RPC still serves") {
    V1Server server({});
    HttpReply none = PostJson(server.port, "/v1/chat/completions", UserChat("hi"));
    CheckError(none, 503, "server_error", nullptr, "no_backend");
    CHECK(none.json()["error"]["message"].get<std::string>().find("--model") != std::string::npos);
    CheckError(HttpCall(server.port, "GET", "/v1/models"), 503, "server_error", nullptr, "no_backend");
    CHECK(HttpCall(server.port, "POST", "/rpc", RpcText("envs/list")).status == 200);
  }

  TEST_CASE("v1 scripted: a full queue answers 429 with Retry-After; the rest are served") {
    ScriptedServer scripted({"--v1-workers", "1", "--v1-max-queue", "1"});
    uint16_t port = scripted.server.port;
    std::vector<std::future<HttpReply>> replies;
    for (int i = 0; i < 4; ++i) {
      replies.push_back(std::async(std::launch::async,
                                   [port] { return PostJson(port, "/v1/chat/completions", UserChat("slow please")); }));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // in order: running, queued, refused, refused
    }
    int ok = 0, refused = 0;
    for (auto& future : replies) {
      HttpReply reply = future.get();
      if (reply.status == 200) {
        ++ok;
        CHECK(reply.json()["choices"][0]["message"]["content"] == "slow answer");
      } else {
        ++refused;
        CheckError(reply, 429, "server_error", nullptr, "server_overloaded");
        CHECK(reply.header("retry-after") == "1");
      }
    }
    CHECK(ok == 2);
    CHECK(refused == 2);
    // The metrics count the endpoint's answers by status.
    HttpReply metrics = HttpCall(port, "GET", "/metrics");
    CHECK(metrics.body.find("envforge_v1_requests_total{endpoint=\"chat\",code=\"429\"} 2") != std::string::npos);
  }

  TEST_CASE("v1: envforge serve refuses a bad backend before serving, naming what is wrong") {
    envforge::testing::TempDir dir;
    std::filesystem::create_directories(dir / "envs");
    auto serve = [&](std::vector<std::string> extra) {
      std::vector<std::string> argv = {
          ExecutableDirectory() + "/envforge", "serve", "--envs", dir / "envs", "--port", "0"};
      argv.insert(argv.end(), extra.begin(), extra.end());
      auto run = RunCommand(argv);
      REQUIRE(run.ok());
      INFO(run->stderr_text);
      CHECK(run->exit_code == 2);
      return run->stderr_text;
    };
    CHECK(serve({"--backend", "foo:bar"}).find("unknown backend scheme 'foo'") != std::string::npos);
    CHECK(serve({"--model", dir / "no-model"}).find("no-model") != std::string::npos);
    CHECK(serve({"--model", "a", "--backend", "scripted:b"}).find("not both") != std::string::npos);
    CHECK(serve({"--model-name", "x"}).find("--model-name needs --model or --backend") != std::string::npos);
    CHECK(serve({"--backend", "scripted:" + (dir / "missing.jsonl")}).find("missing.jsonl") != std::string::npos);
  }

  TEST_CASE("v1: envforge serve --backend openai: in front of another envforge serve's /v1") {
    ScriptedServer upstream;
    V1Server proxy({"--backend", "openai:" + upstream.server.Url() + "/v1", "--model-name", "tiny-scripted"});
    uint16_t port = proxy.port;
    CHECK(HttpCall(port, "GET", "/v1/models").json()["data"][0]["id"] == "tiny-scripted");

    Json called = PostJson(port, "/v1/chat/completions", UserChat("the weather, please")).json();
    CHECK(called["choices"][0]["finish_reason"] == "tool_calls");
    CHECK(called["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather");
    CHECK(ParseJson(called["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>())
              .value() == Json{{"city", "Paris"}});

    // Content streamed through both servers; reasoning and tool calls in thinking mode too.
    std::vector<Json> plain =
        SseChunks(PostJson(port, "/v1/chat/completions", UserChat("greet", {{"stream", true}})).body);
    CHECK(Concatenated(plain, "content") == "Hello there!");
    std::vector<Json> dsml =
        SseChunks(PostJson(port, "/v1/chat/completions",
                           UserChat("dsml", {{"stream", true}, {"thinking", {{"type", "enabled"}}}}))
                      .body);
    CHECK(Concatenated(dsml, "reasoning_content") == "I should search the hotels.");
    CHECK(Concatenated(dsml, "content") == "Searching now.");
    CHECK(dsml.back()["choices"][0]["finish_reason"] == "tool_calls");

    // The upstream's context-length refusal keeps its meaning.
    CheckError(PostJson(port, "/v1/chat/completions", UserChat("a very long prompt")), 400, "invalid_request_error",
               "messages", "context_length_exceeded");
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::server::testing
