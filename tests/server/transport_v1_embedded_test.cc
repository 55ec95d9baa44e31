// The /v1 endpoint of the real `envforge serve --model DIR` over the tiny embedded model
// (scripts/make_tiny_model.py): its text is random, so these tests check structure, token counts,
// seed determinism, stop strings, logprobs, the streamed pieces against the whole answer, the
// context window, and 32 concurrent clients batched by the engine.
#include <doctest/doctest.h>

#include <cctype>
#include <filesystem>
#include <future>
#include <thread>

#include "base/subprocess.h"
#include "tests/inference/model_test_util.h"
#include "tests/server/v1_test_util.h"

namespace envforge::server::testing {
namespace {

// One server for the suite (the model loads once): a context window of 256 tokens.
V1Server& Embedded() {
  static std::string model = inference::model_testing::TinyModel("fp32", "v32", /*tokenizer=*/true);
  static V1Server server({"--model", model, "--context-window", "256"});
  return server;
}

std::string ModelName() {
  return std::filesystem::path(inference::model_testing::TinyModel("fp32", "v32", true)).filename().string();
}

Json MustPost(const std::string& target, const Json& body) {
  HttpReply reply = PostJson(Embedded().port, target, body);
  INFO(reply.body);
  REQUIRE(reply.status == 200);
  return reply.json();
}

int64_t TokensOf(const Json& choice) { return static_cast<int64_t>(choice["logprobs"]["content"].size()); }

TEST_SUITE("v1 embedded") {
  TEST_CASE("v1 embedded: the model list, chat shape, n choices and usage that counts their tokens") {
    Json models = HttpCall(Embedded().port, "GET", "/v1/models").json();
    CHECK(models["data"][0]["id"] == ModelName());

    Json answer =
        MustPost("/v1/chat/completions",
                 UserChat("Find the cheapest hotel in Paris.",
                          {{"model", ModelName()}, {"n", 2}, {"max_tokens", 8}, {"seed", 5}, {"logprobs", true}}));
    CHECK(answer["object"] == "chat.completion");
    CHECK(answer["model"] == ModelName());
    REQUIRE(answer["choices"].size() == 2);
    int64_t tokens = 0;
    for (int i = 0; i < 2; ++i) {
      const Json& choice = answer["choices"][i];
      CHECK(choice["index"] == i);
      CHECK(choice["message"]["role"] == "assistant");
      CHECK(choice["message"]["content"].is_string());
      std::string finish = choice["finish_reason"];
      CHECK((finish == "stop" || finish == "length" || finish == "tool_calls"));
      CHECK(TokensOf(choice) >= 1);
      CHECK(TokensOf(choice) <= 8);
      tokens += TokensOf(choice);
    }
    CHECK(answer["usage"]["completion_tokens"] == tokens);
    CHECK(answer["usage"]["prompt_tokens"].get<int64_t>() > 8);
    CHECK(answer["usage"]["total_tokens"] == answer["usage"]["prompt_tokens"].get<int64_t>() + tokens);
  }

  TEST_CASE("v1 embedded: a seed repeats its sample; another seed samples anew") {
    Json request =
        UserChat("Tell me a story.", {{"max_tokens", 16}, {"seed", 1234}, {"temperature", 1.0}, {"logprobs", true}});
    Json first = MustPost("/v1/chat/completions", request);
    Json again = MustPost("/v1/chat/completions", request);
    CHECK(first["choices"][0]["message"] == again["choices"][0]["message"]);
    CHECK(first["choices"][0]["logprobs"] == again["choices"][0]["logprobs"]);
    request["seed"] = 4321;
    Json other = MustPost("/v1/chat/completions", request);
    CHECK(other["choices"][0]["logprobs"] != first["choices"][0]["logprobs"]);
  }

  TEST_CASE("v1 embedded: completions with stop strings and legacy logprobs; chat top_logprobs") {
    Json request{{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"seed", 11}};
    Json full = MustPost("/v1/completions", request);
    CHECK(full["object"] == "text_completion");
    std::string text = full["choices"][0]["text"];
    REQUIRE(text.size() > 8);
    // Three ASCII letters from the middle: random tokens also make invalid UTF-8, which the JSON
    // answer carries as U+FFFD, so such bytes would not stop the engine's own text.
    size_t at = text.size() / 2;
    auto ascii = [&](size_t i) { return std::isalpha(static_cast<unsigned char>(text[i])) != 0; };
    while (at + 3 <= text.size() && !(ascii(at) && ascii(at + 1) && ascii(at + 2))) ++at;
    REQUIRE(at + 3 <= text.size());
    std::string stop = text.substr(at, 3);
    request["stop"] = Json::array({stop});
    Json cut = MustPost("/v1/completions", request);
    CHECK(cut["choices"][0]["finish_reason"] == "stop");
    CHECK(cut["choices"][0]["text"] == text.substr(0, text.find(stop)));

    request.erase("stop");
    request["logprobs"] = 2;
    Json legacy = MustPost("/v1/completions", request)["choices"][0]["logprobs"];
    REQUIRE(legacy["tokens"].size() == legacy["token_logprobs"].size());
    CHECK(legacy["top_logprobs"].size() == legacy["tokens"].size());
    CHECK(legacy["text_offset"].size() == legacy["tokens"].size());

    Json chat = MustPost("/v1/chat/completions",
                         UserChat("Hi", {{"max_tokens", 10}, {"seed", 3}, {"logprobs", true}, {"top_logprobs", 3}}));
    const Json& content = chat["choices"][0]["logprobs"]["content"];
    REQUIRE(content.size() >= 1);
    CHECK(static_cast<int64_t>(content.size()) == chat["usage"]["completion_tokens"].get<int64_t>());
    for (const Json& entry : content) {
      CHECK(entry["token"].is_string());
      CHECK(entry["bytes"].is_array());
      CHECK(entry["logprob"].get<double>() <= 0);
      REQUIRE(entry["top_logprobs"].size() == 3);
      CHECK(entry["top_logprobs"][0]["logprob"].get<double>() >= entry["top_logprobs"][1]["logprob"].get<double>());
      CHECK(entry["top_logprobs"][1]["logprob"].get<double>() >= entry["top_logprobs"][2]["logprob"].get<double>());
      CHECK(entry["logprob"].get<double>() <= entry["top_logprobs"][0]["logprob"].get<double>() + 1e-9);
    }
  }

  TEST_CASE("v1 embedded: streamed pieces add up to the unstreamed answer of the same seed") {
    for (bool thinking : {false, true}) {
      CAPTURE(thinking);
      Json request = UserChat(
          "Plan a trip to Rome.",
          {{"max_tokens", 24}, {"seed", 77}, {"n", 2}, {"thinking", {{"type", thinking ? "enabled" : "disabled"}}}});
      Json whole = MustPost("/v1/chat/completions", request);
      request["stream"] = true;
      request["stream_options"] = {{"include_usage", true}};
      HttpReply streamed = PostJson(Embedded().port, "/v1/chat/completions", request);
      REQUIRE(streamed.status == 200);
      std::vector<Json> chunks = SseChunks(streamed.body);
      for (int64_t i = 0; i < 2; ++i) {
        const Json& message = whole["choices"][i]["message"];
        CHECK(Concatenated(chunks, "content", i) == message["content"].get<std::string>());
        if (thinking)
          CHECK(Concatenated(chunks, "reasoning_content", i) == message["reasoning_content"].get<std::string>());
      }
      CHECK(chunks.back()["usage"] == whole["usage"]);
    }
    Json request{{"prompt", "The weather today"}, {"max_tokens", 20}, {"seed", 9}};
    std::string text = MustPost("/v1/completions", request)["choices"][0]["text"];
    request["stream"] = true;
    HttpReply streamed = PostJson(Embedded().port, "/v1/completions", request);
    REQUIRE(streamed.status == 200);
    std::vector<Json> chunks = SseChunks(streamed.body);
    CHECK(chunks.size() >= 3);  // pieces as they were generated, then the finish chunk
    CHECK(Concatenated(chunks, "text") == text);
  }

  TEST_CASE("v1 embedded: a prompt past the context window is 400 context_length_exceeded") {
    std::string long_prompt;
    for (int i = 0; i < 300; ++i) long_prompt += "hotel room " + std::to_string(i) + " ";
    HttpReply reply = PostJson(Embedded().port, "/v1/chat/completions", UserChat(long_prompt));
    INFO(reply.body);
    CHECK(reply.status == 400);
    CHECK(reply.json()["error"]["code"] == "context_length_exceeded");
    CHECK(reply.json()["error"]["type"] == "invalid_request_error");
  }

  TEST_CASE("v1 embedded: 32 concurrent clients are all answered, each as if alone") {
    constexpr int kClients = 32;
    std::vector<std::future<HttpReply>> replies;
    auto request = [](int i) {
      return UserChat("Book a table for " + std::to_string(i % 4) + ".",
                      {{"max_tokens", 8}, {"seed", 500 + i}, {"logprobs", true}});
    };
    for (int i = 0; i < kClients; ++i) {
      replies.push_back(std::async(std::launch::async,
                                   [&, i] { return PostJson(Embedded().port, "/v1/chat/completions", request(i)); }));
    }
    std::vector<Json> answers;
    for (auto& future : replies) {
      HttpReply reply = future.get();
      INFO(reply.body);
      REQUIRE(reply.status == 200);
      answers.push_back(reply.json());
      CHECK(answers.back()["choices"].size() == 1);
    }
    for (int i : {0, 13, 31}) {
      Json alone = MustPost("/v1/chat/completions", request(i));
      CHECK(alone["choices"][0]["logprobs"]["content"].size() ==
            answers[i]["choices"][0]["logprobs"]["content"].size());
      CHECK(alone["choices"][0]["message"] == answers[i]["choices"][0]["message"]);
    }
  }

  TEST_CASE("v1 embedded: envforge bench v1 reports requests/s, tokens/s and latency with no failures") {
    CommandOptions options;
    options.timeout = std::chrono::seconds(120);
    auto bench = RunCommand({ExecutableDirectory() + "/envforge", "bench", "v1", "--url", Embedded().Url() + "/v1",
                             "--concurrency", "8", "--requests", "24", "--max-tokens", "6", "--json"},
                            options);
    REQUIRE(bench.ok());
    INFO(bench->stdout_text << bench->stderr_text);
    REQUIRE(bench->exit_code == 0);
    Json figures = ParseJson(bench->stdout_text).value();
    CHECK(figures["requests"] == 24);
    CHECK(figures["failed"] == 0);
    CHECK(figures["completion_tokens"].get<int64_t>() >= 24);
    CHECK(figures["completion_tokens"].get<int64_t>() <= 24 * 6);
    CHECK(figures["requests_per_s"].get<double>() > 0);
    CHECK(figures["latency_ms"]["p99"].get<double>() >= figures["latency_ms"]["p50"].get<double>());

    auto no_url = RunCommand({ExecutableDirectory() + "/envforge", "bench", "v1"}, options);
    REQUIRE(no_url.ok());
    CHECK(no_url->exit_code != 0);
    CHECK(no_url->stderr_text.find("--url") != std::string::npos);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::server::testing
