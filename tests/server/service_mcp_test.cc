// The MCP dialect of RpcService: initialize and version negotiation, tools/list with and without a
// session and its pages, tools/call naming the episode through _meta or arguments.session, the
// mapping of typed outcomes onto isError / JSON-RPC errors, the envforge_* session tools, and the
// messages that get no answer (notifications, responses) or -32601 (notification names with an
// id).
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "tests/server/service_test_util.h"

namespace envforge::server::testing {
namespace {

constexpr Dialect kMcp = Dialect::kMcp;

std::set<std::string> ToolNames(const Json& tools) {
  std::set<std::string> names;
  for (const auto& tool : tools) names.insert(tool["name"].get<std::string>());
  return names;
}

// Starts an episode through the MCP tool; returns the structured result.
Json McpCreate(ServiceFixture& f) {
  Json result = f.Ok(
      "tools/call",
      {{"name", "envforge_create_session"}, {"arguments", {{"env", "manager_fixture"}, {"task", "sum_task"}}}}, kMcp);
  INFO(result.dump());
  REQUIRE(result["isError"] == false);
  REQUIRE(result["structuredContent"]["session"].is_string());
  CHECK(result["content"][0]["type"] == "text");
  CHECK(Json::parse(result["content"][0]["text"].get<std::string>()) == result["structuredContent"]);
  CHECK(result["_meta"]["envforge/session"] == result["structuredContent"]["session"]);
  return result["structuredContent"];
}

TEST_SUITE("server.mcp") {
  TEST_CASE("initialize echoes a supported protocol version and answers newer ones with the latest") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false});
    for (const char* version : {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) {
      Json result = f.Ok("initialize",
                         {{"protocolVersion", version},
                          {"capabilities", Json::object()},
                          {"clientInfo", {{"name", "test"}, {"version", "1"}}}},
                         kMcp);
      CHECK(result["protocolVersion"] == version);
      CHECK(result["capabilities"].contains("tools"));
      CHECK(result["serverInfo"]["name"] == "envforge");
      // Implementation.description is 2025-11-25's.
      CHECK(result["serverInfo"].contains("description") == (std::string(version) == "2025-11-25"));
    }
    CHECK(f.Ok("initialize", {{"protocolVersion", "2099-01-01"}}, kMcp)["protocolVersion"] == "2025-11-25");
    CHECK(f.Ok("initialize", Json::object(), kMcp)["protocolVersion"] == "2025-11-25");
    CHECK(f.Error("initialize", {{"protocolVersion", 3}}, kMcp)["code"] == -32602);
    CHECK_FALSE(f.Send(Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, kMcp).has_value());
    CHECK(f.Ok("ping", Json::object(), kMcp) == Json::object());
  }

  TEST_CASE("tools/list without a session lists every environment's tools, prefixed and taking a session") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false});
    Json tools = f.Ok("tools/list", Json::object(), kMcp)["tools"];
    auto names = ToolNames(tools);
    CHECK(names.count("manager_fixture__add") == 1);
    CHECK(names.count("manager_fixture__submit_result") == 1);
    CHECK(names.count("envforge_create_session") == 1);
    CHECK(names.count("envforge_close_session") == 1);
    for (const auto& tool : tools) {
      CHECK(toolsets::IsValidToolName(tool["name"].get<std::string>()));
      CHECK(tool["inputSchema"]["type"] == "object");
      if (tool["name"] == "manager_fixture__add") {
        CHECK(tool["inputSchema"]["properties"].contains("session"));
        CHECK(tool["inputSchema"]["properties"].contains("a"));
      }
    }
  }

  TEST_CASE("an MCP episode: create, calls via _meta and via arguments.session, submit, close" * doctest::timeout(60)) {
    ServiceFixture f;
    Json created = McpCreate(f);
    std::string session = created["session"];
    Json meta = {{"envforge/session", session}};

    auto listed = ToolNames(f.Ok("tools/list", {{"_meta", meta}}, kMcp)["tools"]);
    CHECK(listed.count("add") == 1);
    CHECK(listed.count("submit_result") == 1);
    CHECK(listed.count("manager_fixture__add") == 0);

    // ok with a scalar: the text, no structuredContent.
    Json sum = f.Ok("tools/call", {{"name", "add"}, {"arguments", {{"a", 2}, {"b", 3}}}, {"_meta", meta}}, kMcp);
    CHECK(sum["isError"] == false);
    CHECK(sum["content"][0]["text"] == "5");
    CHECK_FALSE(sum.contains("structuredContent"));
    CHECK(sum["_meta"]["envforge/outcome"] == "ok");
    CHECK(sum["_meta"]["envforge/session"] == session);
    CHECK(sum["_meta"]["envforge/step"] == 0);

    // The session in the arguments, with the listing's prefixed name; "session" never reaches the
    // tool (whose schema forbids extra properties).
    Json echoed = f.Ok(
        "tools/call", {{"name", "manager_fixture__echo"}, {"arguments", {{"text", "hi"}, {"session", session}}}}, kMcp);
    INFO(echoed.dump());
    CHECK(echoed["isError"] == false);
    CHECK(echoed["content"][0]["text"] == "hi");

    // Any other JSON result is its JSON text; only an object is also structuredContent (below).
    Json put =
        f.Ok("tools/call", {{"name", "put"}, {"arguments", {{"key", "k"}, {"value", 1}}}, {"_meta", meta}}, kMcp);
    CHECK(put["isError"] == false);
    CHECK(put["content"][0]["text"] == "[\"k\"]");

    // tool_error and invalid_call are isError results carrying the message for the model.
    Json failed = f.Ok("tools/call", {{"name", "fail"}, {"arguments", {{"message", "broken"}}}, {"_meta", meta}}, kMcp);
    CHECK(failed["isError"] == true);
    CHECK(Contains(failed["content"][0]["text"], "broken"));
    CHECK(failed["_meta"]["envforge/outcome"] == "tool_error");
    // Arguments failing the tool's schema are a result the model can correct (invalid_call).
    Json invalid = f.Ok("tools/call", {{"name", "add"}, {"arguments", {{"a", "two"}}}, {"_meta", meta}}, kMcp);
    CHECK(invalid["isError"] == true);
    CHECK(invalid["_meta"]["envforge/outcome"] == "invalid_call");
    // An unknown tool is the protocol error MCP names, the same with a session as without one.
    Json unknown = f.Error("tools/call", {{"name", "no_such_tool"}, {"_meta", meta}}, kMcp);
    CHECK(unknown["code"] == -32602);
    CHECK(unknown == f.Error("tools/call", {{"name", "no_such_tool"}}, kMcp));
    CHECK(f.Error("tools/call", {{"name", "no_such_tool"}, {"arguments", {{"session", session}}}}, kMcp) == unknown);

    Json verdict =
        f.Ok("tools/call", {{"name", "submit_result"}, {"arguments", {{"answer_text", "5"}}}, {"_meta", meta}}, kMcp);
    CHECK(verdict["isError"] == false);
    CHECK(verdict["structuredContent"]["passed"] == true);
    CHECK(Json::parse(verdict["content"][0]["text"].get<std::string>())["passed"] == true);

    Json closed = f.Ok("tools/call", {{"name", "envforge_close_session"}, {"arguments", {{"session", session}}}}, kMcp);
    CHECK(closed["isError"] == false);
    CHECK(f.Error("tools/call", {{"name", "add"}, {"arguments", {{"a", 1}, {"b", 1}}}, {"_meta", meta}},
                  kMcp)["code"] == -32001);

    agents::Episode episode = f.Episode(created["trajectory"]);
    CHECK(episode.summary.outcome == agents::EpisodeOutcome::kSubmitted);
    CHECK(episode.steps.size() == 6);
    CHECK(episode.steps[1].arguments == Json{{"text", "hi"}});
  }

  TEST_CASE("MCP errors: a crash is isError, a missing session is -32602, bad create arguments are isError" *
            doctest::timeout(60)) {
    ServiceFixture f;
    Json created = McpCreate(f);
    Json meta = {{"envforge/session", created["session"]}};
    Json crashed = f.Ok("tools/call", {{"name", "segfault"}, {"_meta", meta}}, kMcp);
    CHECK(crashed["isError"] == true);
    CHECK(crashed["_meta"]["envforge/outcome"] == "crashed");
    CHECK(crashed["_meta"]["envforge/session_alive"] == false);

    Json no_session = f.Error("tools/call", {{"name", "add"}, {"arguments", {{"a", 1}, {"b", 2}}}}, kMcp);
    CHECK(no_session["code"] == -32602);
    CHECK(Contains(no_session["message"], "envforge_create_session"));
    CHECK(f.Error("tools/call", {{"name", "add"}, {"_meta", {{"envforge/session", 5}}}}, kMcp)["code"] == -32602);
    CHECK(f.Error("tools/call", {{"arguments", Json::object()}}, kMcp)["data"]["field"] == "params.name");

    Json unknown_env =
        f.Ok("tools/call",
             {{"name", "envforge_create_session"}, {"arguments", {{"env", "nope"}, {"task", "sum_task"}}}}, kMcp);
    CHECK(unknown_env["isError"] == true);
    CHECK(Contains(unknown_env["content"][0]["text"], "nope"));
    Json missing =
        f.Ok("tools/call", {{"name", "envforge_create_session"}, {"arguments", {{"env", "manager_fixture"}}}}, kMcp);
    CHECK(missing["isError"] == true);
    CHECK(Contains(missing["content"][0]["text"], "task"));

    // infra_error is never a tool result a trainer could score: it is a retryable JSON-RPC error.
    Json broken = f.Ok("tools/call",
                       {{"name", "envforge_create_session"},
                        {"arguments", {{"env", "manager_fixture"}, {"task", kBrokenVerifierTask}}}},
                       kMcp);
    Json broken_meta = {{"envforge/session", broken["structuredContent"]["session"]}};
    Json infra = f.Error(
        "tools/call", {{"name", "submit_result"}, {"arguments", {{"answer_text", "2"}}}, {"_meta", broken_meta}}, kMcp);
    CHECK(infra["code"] == -32007);
    CHECK(infra["data"]["outcome"] == "infra_error");
    CHECK(infra["data"]["retryable"] == true);

    f.service->BeginDrain();
    CHECK(f.Error("tools/call", {{"name", "add"}, {"_meta", meta}}, kMcp)["code"] == -32006);
  }

  TEST_CASE("MCP messages without an answer, notification names with an id, and tools/list pages") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false, 5});
    // A client's JSON-RPC responses (to requests this server never sends) are accepted silently,
    // alone or in a batch; only in the MCP dialect.
    Json response = {{"jsonrpc", "2.0"}, {"id", 7}, {"result", Json::object()}};
    Json error_response = {{"jsonrpc", "2.0"}, {"id", "x"}, {"error", {{"code", -1}, {"message", "no"}}}};
    CHECK_FALSE(f.Send(response, kMcp).has_value());
    CHECK_FALSE(f.Send(Json::array({response, error_response}), kMcp).has_value());
    CHECK(f.Send(response)->at("error")["code"] == -32600);
    Json both = {{"jsonrpc", "2.0"}, {"id", 7}, {"result", 1}, {"error", {{"code", -1}, {"message", "no"}}}};
    CHECK(f.Send(both, kMcp)->at("error")["code"] == -32600);

    // notifications/* are notifications only: with an id they are an unknown method.
    Json with_id = f.Error("notifications/initialized", Json::object(), kMcp);
    CHECK(with_id["code"] == -32601);
    CHECK(Contains(with_id["message"], "notification"));
    CHECK_FALSE(f.Send(Json{{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}}, kMcp).has_value());

    // Pages of 5 through the whole sessionless listing, then bad cursors.
    std::set<std::string> names;
    Json page = f.Ok("tools/list", Json::object(), kMcp);
    size_t pages = 1;
    while (true) {
      CHECK(page["tools"].size() <= 5);
      for (const auto& tool : page["tools"]) CHECK(names.insert(tool["name"].get<std::string>()).second);
      if (!page.contains("nextCursor")) break;
      REQUIRE(page["nextCursor"].is_string());
      page = f.Ok("tools/list", {{"cursor", page["nextCursor"]}}, kMcp);
      REQUIRE(++pages < 100);
    }
    CHECK(pages > 1);
    CHECK(names.count("manager_fixture__add") == 1);
    CHECK(names.count("envforge_create_session") == 1);
    CHECK(names.count("envforge_close_session") == 1);
    for (const Json& cursor :
         {Json("nonsense"), Json("envforge-offset-0"), Json("envforge-offset-100000"), Json(""), Json(3)}) {
      Json bad = f.Error("tools/list", {{"cursor", cursor}}, kMcp);
      INFO(cursor.dump());
      CHECK(bad["code"] == -32602);
      CHECK(bad["data"]["field"] == "params.cursor");
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::server::testing
