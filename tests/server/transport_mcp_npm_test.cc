// MCP conformance as the official clients see it: the TypeScript SDK's Client over its
// StreamableHTTPClientTransport, and the MCP Inspector's CLI mode, against POST /mcp of the real
// `envforge serve` binary (and of an in-process server whose tools/list pages are small, so that
// the SDK follows nextCursor). Both are the versions scripts/setup.sh installs into
// .cache/node-clients (tests/server/node_clients.h); without them the tests say so and skip.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "base/subprocess.h"
#include "tests/server/node_clients.h"
#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {
namespace {

// argv: the /mcp URL and the bearer token. Prints one JSON object of what it saw.
constexpr const char* kSdkScript = R"JS(
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { EmptyResultSchema, LATEST_PROTOCOL_VERSION, McpError } from "@modelcontextprotocol/sdk/types.js";

const [url, token] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
const out = { sdk_latest: LATEST_PROTOCOL_VERSION };
const failure = async (call) => {
  try { await call(); return "no error"; }
  catch (error) { return { mcp_error: error instanceof McpError, code: error.code, message: error.message }; }
};

const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "envforge-test", version: "1.0.0" });
await client.connect(transport);
out.protocol = transport.protocolVersion;
out.server = client.getServerVersion();
out.has_tools = client.getServerCapabilities().tools !== undefined;

out.tools = []; out.pages = 0;
let cursor;
do {
  const page = await client.listTools(cursor === undefined ? {} : { cursor });
  out.pages += 1;
  out.tools.push(...page.tools.map((tool) => tool.name));
  cursor = page.nextCursor;
} while (cursor !== undefined && out.pages < 100);

const created = await client.callTool({ name: "envforge_create_session", arguments: { env: "manager_fixture", task: "sum_task" } });
const session = created.structuredContent.session;
out.created = { is_error: created.isError, session_type: typeof session, prompt: created.structuredContent.prompt };
const meta = { "envforge/session": session };
const sum = await client.callTool({ name: "add", arguments: { a: 2, b: 3 }, _meta: meta });
out.sum = { text: sum.content[0].text, is_error: sum.isError, outcome: sum._meta["envforge/outcome"] };
const echoed = await client.callTool({ name: "manager_fixture__echo", arguments: { text: "hi", session } });
out.echo = echoed.content[0].text;
const invalid = await client.callTool({ name: "add", arguments: { a: "two" }, _meta: meta });
out.invalid = { is_error: invalid.isError, outcome: invalid._meta["envforge/outcome"] };
const verdict = await client.callTool({ name: "submit_result", arguments: { answer_text: "5" }, _meta: meta });
out.verdict = verdict.structuredContent.passed;

out.unknown_with_session = await failure(() => client.callTool({ name: "no_such_tool", arguments: {}, _meta: meta }));
out.unknown_without_session = await failure(() => client.callTool({ name: "no_such_tool", arguments: {} }));
out.bad_cursor = await failure(() => client.listTools({ cursor: "not-a-cursor" }));
out.notification_with_id = await failure(() => client.request({ method: "notifications/initialized" }, EmptyResultSchema));
out.ping = await client.ping();
const closed = await client.callTool({ name: "envforge_close_session", arguments: { session } });
out.closed = closed.isError;
out.after_close = await failure(() => client.callTool({ name: "add", arguments: { a: 1, b: 1 }, _meta: meta }));
await client.close();

// What the SDK never sends: raw POSTs.
const post = async (body, extra = {}) => {
  const response = await fetch(url, { method: "POST", body: JSON.stringify(body),
    headers: { ...headers, "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...extra } });
  return { status: response.status, body: await response.text() };
};
const ping = { jsonrpc: "2.0", id: 1, method: "ping" };
out.bad_version = await post(ping, { "MCP-Protocol-Version": "1999-01-01" });
out.good_version = await post(ping, { "MCP-Protocol-Version": "2025-06-18" });
out.response_posted = await post({ jsonrpc: "2.0", id: 5, result: {} });
out.notification_posted = await post({ jsonrpc: "2.0", method: "notifications/initialized" });
console.log(JSON.stringify(out));
)JS";

Json RunSdkClient(const std::string& url, const std::string& token) {
  NodeScriptDir scripts;
  std::string script = scripts.Write("sdk_client.mjs", kSdkScript);
  CommandOptions options;
  options.timeout = std::chrono::seconds(90);
  auto run = RunCommand({"node", script, url, token}, options);
  REQUIRE(run.ok());
  INFO("stdout: " << run->stdout_text << "\nstderr: " << run->stderr_text);
  REQUIRE(run->exit_code == 0);
  auto out = ParseJson(run->stdout_text, "sdk client output");
  REQUIRE(out.ok());
  return *out;
}

// The SDK's view of one server; `pages` tools/list pages expected.
void CheckSdkRun(const Json& out, size_t min_pages) {
  INFO(out.dump(2));
  // The SDK asks for its latest revision; we speak it.
  CHECK(out["sdk_latest"] == "2025-11-25");
  CHECK(out["protocol"] == "2025-11-25");
  CHECK(out["server"]["name"] == "envforge");
  CHECK(out["has_tools"] == true);
  CHECK(out["pages"].get<size_t>() >= min_pages);
  std::set<std::string> tools(out["tools"].begin(), out["tools"].end());
  CHECK(tools.size() == out["tools"].size());  // no tool on two pages
  CHECK(tools.count("manager_fixture__add") == 1);
  CHECK(tools.count("envforge_create_session") == 1);
  CHECK(tools.count("envforge_close_session") == 1);
  CHECK(out["created"] ==
        Json{{"is_error", false}, {"session_type", "string"}, {"prompt", "What is 2 + 3? Answer with the integer."}});
  CHECK(out["sum"] == Json{{"text", "5"}, {"is_error", false}, {"outcome", "ok"}});
  CHECK(out["echo"] == "hi");
  CHECK(out["invalid"] == Json{{"is_error", true}, {"outcome", "invalid_call"}});
  CHECK(out["verdict"] == true);
  // An unknown tool: the same -32602, with or without a session.
  CHECK(out["unknown_with_session"]["mcp_error"] == true);
  CHECK(out["unknown_with_session"]["code"] == -32602);
  CHECK(out["unknown_with_session"] == out["unknown_without_session"]);
  CHECK(out["bad_cursor"]["code"] == -32602);
  CHECK(out["notification_with_id"]["code"] == -32601);
  CHECK(out["ping"] == Json::object());
  CHECK(out["closed"] == false);
  CHECK(out["after_close"]["code"] == -32001);
  CHECK(out["bad_version"]["status"] == 400);
  CHECK(Contains(out["bad_version"]["body"], "MCP-Protocol-Version"));
  CHECK(out["good_version"]["status"] == 200);
  CHECK(out["response_posted"] == Json{{"status", 202}, {"body", ""}});
  CHECK(out["notification_posted"] == Json{{"status", 202}, {"body", ""}});
}

// The Inspector's CLI mode (`mcp-inspector --cli URL --transport http --method ...`); its stdout
// is the result's JSON. Returns {exit_code, stdout, stderr}.
Json RunInspector(const std::string& url, const std::string& token, std::vector<std::string> method_args) {
  std::vector<std::string> argv = {
      "node",        (NodeClientsDir() / "node_modules/@modelcontextprotocol/inspector/cli/build/cli.js").string(),
      "--cli",       url,
      "--transport", "http",
      "--header",    "Authorization: Bearer " + token};
  argv.insert(argv.end(), method_args.begin(), method_args.end());
  CommandOptions options;
  options.timeout = std::chrono::seconds(90);
  auto run = RunCommand(argv, options);
  REQUIRE(run.ok());
  return Json{{"exit_code", run->exit_code}, {"stdout", run->stdout_text}, {"stderr", run->stderr_text}};
}

Json InspectorResult(const Json& run) {
  INFO(run.dump(2));
  REQUIRE(run["exit_code"] == 0);
  auto parsed = ParseJson(run["stdout"].get<std::string>(), "inspector output");
  REQUIRE(parsed.ok());
  return *parsed;
}

TEST_SUITE("server.mcp_npm") {
  TEST_CASE("MCP SDK: Client + StreamableHTTPClientTransport against envforge serve" * doctest::timeout(180)) {
    if (auto missing = NodeClientsMissing({"@modelcontextprotocol/sdk"})) {
      MESSAGE("skipped: " << *missing);
      return;
    }
    ServeProcess serve({"--token", "mcp-key"});
    CheckSdkRun(RunSdkClient(serve.Url() + "/mcp", "mcp-key"), 1);
  }

  TEST_CASE("MCP SDK: tools/list pages followed through nextCursor" * doctest::timeout(180)) {
    if (auto missing = NodeClientsMissing({"@modelcontextprotocol/sdk"})) {
      MESSAGE("skipped: " << *missing);
      return;
    }
    HttpServerOptions http;
    http.token = "mcp-key";
    ServiceFixtureOptions service;
    service.mcp_page_size = 4;
    TransportFixture fixture(http, service);
    CheckSdkRun(RunSdkClient(fixture.HttpUrl("/mcp"), "mcp-key"), 5);
  }

  TEST_CASE("MCP Inspector CLI: tools/list and tools/call against envforge serve" * doctest::timeout(240)) {
    if (auto missing = NodeClientsMissing({"@modelcontextprotocol/inspector"})) {
      MESSAGE("skipped: " << *missing);
      return;
    }
    ServeProcess serve({"--token", "mcp-key"});
    std::string url = serve.Url() + "/mcp";
    Json listed = InspectorResult(RunInspector(url, "mcp-key", {"--method", "tools/list"}));
    std::set<std::string> names;
    for (const auto& tool : listed["tools"]) names.insert(tool["name"].get<std::string>());
    CHECK(names.count("manager_fixture__add") == 1);
    CHECK(names.count("envforge_create_session") == 1);

    Json created = InspectorResult(RunInspector(url, "mcp-key",
                                                {"--method", "tools/call", "--tool-name", "envforge_create_session",
                                                 "--tool-arg", "env=manager_fixture", "--tool-arg", "task=sum_task"}));
    REQUIRE(created["structuredContent"]["session"].is_string());
    std::string session = created["structuredContent"]["session"];
    Json sum =
        InspectorResult(RunInspector(url, "mcp-key",
                                     {"--method", "tools/call", "--tool-name", "manager_fixture__add", "--tool-arg",
                                      "a=2", "--tool-arg", "b=3", "--tool-arg", "session=" + session}));
    CHECK(sum["isError"] == false);
    CHECK(sum["content"][0]["text"] == "5");

    Json unknown = RunInspector(url, "mcp-key", {"--method", "tools/call", "--tool-name", "no_such_tool"});
    INFO(unknown.dump(2));
    CHECK(unknown["exit_code"] != 0);
    CHECK(Contains(unknown["stdout"].get<std::string>() + unknown["stderr"].get<std::string>(), "-32602"));
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::server::testing
