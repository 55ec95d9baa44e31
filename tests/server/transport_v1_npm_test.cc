// The official `openai` npm package as a real client of `envforge serve`'s /v1 (scripted backend):
// models.list, chat.completions.create with tools, a stream read with `for await`, and errors
// caught as APIError with their status. The package is the one scripts/setup.sh installs into
// .cache/node-clients (tests/server/node_clients.h); without it (or without node) the test says
// so and skips.
#include <doctest/doctest.h>

#include "base/subprocess.h"
#include "tests/server/node_clients.h"
#include "tests/server/v1_test_util.h"

namespace envforge::server::testing {
namespace {

constexpr const char* kClientScript = R"JS(
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const out = {};

const models = await client.models.list();
out.models = models.data.map((m) => m.id);

const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const called = await client.chat.completions.create({
  model: "tiny-scripted", messages: [{ role: "user", content: "What is the weather in Paris?" }], tools, tool_choice: "auto" });
out.finish_reason = called.choices[0].finish_reason;
out.tool_name = called.choices[0].message.tool_calls[0].function.name;
out.tool_arguments = JSON.parse(called.choices[0].message.tool_calls[0].function.arguments);
out.usage_total = called.usage.total_tokens;

const stream = await client.chat.completions.create({
  model: "tiny-scripted", messages: [{ role: "user", content: "dsml" }], stream: true,
  stream_options: { include_usage: true }, thinking: { type: "enabled" } });
out.content = ""; out.reasoning = ""; out.stream_tools = []; out.chunks = 0;
for await (const chunk of stream) {
  out.chunks += 1;
  if (chunk.usage) out.stream_usage = chunk.usage.total_tokens;
  for (const choice of chunk.choices) {
    if (choice.delta.content) out.content += choice.delta.content;
    if (choice.delta.reasoning_content) out.reasoning += choice.delta.reasoning_content;
    for (const call of choice.delta.tool_calls ?? []) out.stream_tools.push(call.function.name);
    if (choice.finish_reason) out.stream_finish = choice.finish_reason;
  }
}

try {
  await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] });
  out.unknown_model = "no error";
} catch (error) {
  out.unknown_model = { api_error: error instanceof OpenAI.APIError, status: error.status, code: error.code };
}
try {
  const stranger = new OpenAI({ baseURL, apiKey: "wrong-key", maxRetries: 0 });
  await stranger.models.list();
  out.bad_key = "no error";
} catch (error) {
  out.bad_key = { api_error: error instanceof OpenAI.APIError, status: error.status };
}
console.log(JSON.stringify(out));
)JS";

TEST_CASE("v1 npm: the openai package talks to envforge serve") {
  if (auto missing = NodeClientsMissing({"openai"})) {
    MESSAGE("skipped: " << *missing);
    return;
  }
  NodeScriptDir scripts;
  std::string script = scripts.Write("client.mjs", kClientScript);

  ScriptedServer scripted({"--token", "npm-key"});
  CommandOptions run_options;
  run_options.timeout = std::chrono::seconds(60);
  auto run = RunCommand({"node", script, scripted.server.Url() + "/v1", "npm-key"}, run_options);
  REQUIRE(run.ok());
  INFO("stdout: " << run->stdout_text << "\nstderr: " << run->stderr_text);
  REQUIRE(run->exit_code == 0);
  auto out = ParseJson(run->stdout_text, "client output");
  REQUIRE(out.ok());
  Json result = *out;
  CHECK(result["models"] == Json::array({"tiny-scripted"}));
  CHECK(result["finish_reason"] == "tool_calls");
  CHECK(result["tool_name"] == "get_weather");
  CHECK(result["tool_arguments"] == Json{{"city", "Paris"}});
  CHECK(result["usage_total"].get<int64_t>() > 0);
  CHECK(result["reasoning"] == "I should search the hotels.");
  CHECK(result["content"] == "Searching now.");
  CHECK(result["stream_tools"] == Json::array({"search"}));
  CHECK(result["stream_finish"] == "tool_calls");
  CHECK(result["stream_usage"].get<int64_t>() > 0);
  CHECK(result["chunks"].get<int64_t>() >= 5);
  CHECK(result["unknown_model"] == Json{{"api_error", true}, {"status", 404}, {"code", "model_not_found"}});
  CHECK(result["bad_key"] == Json{{"api_error", true}, {"status", 401}});
}

// tool_choice "required" and a named tool against the embedded policy-small: the engine decodes
// under the tool-call grammar, so every choice the client reads is a call with JSON arguments
// (exactly one with parallel_tool_calls false); tool_choice "auto" over tools marked `strict: true`
// decodes under the same grammar with the calls optional, so every call the client reads parses.
constexpr const char* kRequiredScript = R"JS(
import OpenAI from "openai";

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const tools = [
  { type: "function", function: { name: "get_product", description: "One product by name.",
    parameters: { type: "object", properties: { name: { type: "string" } }, required: ["name"] } } },
  { type: "function", function: { name: "submit_result", description: "The final answer.",
    parameters: { type: "object", properties: { answer_text: { type: "string" } }, required: ["answer_text"] } } }];
const strictTools = tools.map((t) => ({ ...t, function: { ...t.function, strict: true } }));
const out = [];
const requests = [{ tool_choice: "required" }, { tool_choice: { type: "function", function: { name: "submit_result" } } },
                  { tool_choice: "required", parallel_tool_calls: false }, { tool_choice: "auto", tools: strictTools }];
for (const extra of requests) {
  const reply = await client.chat.completions.create({
    model: "policy-small", n: 6, seed: 4, max_tokens: 300, tools, ...extra,
    messages: [{ role: "user", content: "Stock check: how many units of the Pola Brush are there?" }] });
  for (const choice of reply.choices) {
    out.push({ finish_reason: choice.finish_reason,
               calls: (choice.message.tool_calls ?? []).map((c) => ({ name: c.function.name,
                                                                      arguments: JSON.parse(c.function.arguments) })) });
  }
}
console.log(JSON.stringify(out));
)JS";

TEST_CASE(
    "v1 npm: tool_choice required, or auto over strict tools, from the openai package decodes under the grammar") {
  if (auto missing = NodeClientsMissing({"openai"})) {
    MESSAGE("skipped: " << *missing);
    return;
  }
  NodeScriptDir scripts;
  std::string script = scripts.Write("required.mjs", kRequiredScript);
  V1Server server({"--model", std::string(ENVFORGE_TEST_SOURCE_DIR) + "/data/models/policy-small"});
  CommandOptions run_options;
  run_options.timeout = std::chrono::seconds(120);
  auto run = RunCommand({"node", script, server.Url() + "/v1"}, run_options);
  REQUIRE(run.ok());
  INFO("stdout: " << run->stdout_text << "\nstderr: " << run->stderr_text);
  REQUIRE(run->exit_code == 0);
  auto out = ParseJson(run->stdout_text, "client output");
  REQUIRE(out.ok());
  REQUIRE(out->size() == 24);
  size_t strict_calling = 0;
  for (size_t i = 0; i < out->size(); ++i) {
    const Json& choice = (*out)[i];
    CAPTURE(choice.dump());
    if (i >= 18) {  // auto over strict tools: content alone, or calls that parsed (JSON.parse above)
      CHECK(choice["finish_reason"] == (choice["calls"].empty() ? "stop" : "tool_calls"));
      strict_calling += choice["calls"].empty() ? 0 : 1;
    } else {
      CHECK(choice["finish_reason"] == "tool_calls");
      REQUIRE_FALSE(choice["calls"].empty());
    }
    for (const Json& call : choice["calls"]) {
      if (i >= 6 && i < 12) CHECK(call["name"] == "submit_result");
      if (call["name"] == "get_product") CHECK(call["arguments"]["name"].is_string());
      if (call["name"] == "submit_result") CHECK(call["arguments"]["answer_text"].is_string());
      CHECK((call["name"] == "get_product" || call["name"] == "submit_result"));
    }
    if (i >= 12 && i < 18) CHECK(choice["calls"].size() == 1);  // parallel_tool_calls: false
  }
  CHECK(strict_calling > 0);
}

}  // namespace
}  // namespace envforge::server::testing
