// JSON-RPC 2.0 semantics of RpcService: parse errors, invalid envelopes, unknown methods, id
// echo, notifications and batches, and the error-response helper transports use.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "tests/server/service_test_util.h"

namespace envforge::server::testing {
namespace {

Json ParseResponse(const std::optional<std::string>& text) {
  REQUIRE(text.has_value());
  auto parsed = ParseJson(*text);
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
  return *parsed;
}

TEST_SUITE("server.jsonrpc") {
  TEST_CASE("invalid JSON is a parse error with a null id") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false});
    for (const char* payload : {"{", "not json", "{\"jsonrpc\": \"2.0\", \"method\": \"ping\", \"id\": 1", ""}) {
      Json response = ParseResponse(f.SendText(payload));
      INFO(payload << " -> " << response.dump());
      CHECK(response["jsonrpc"] == "2.0");
      CHECK(response["id"].is_null());
      CHECK(response["error"]["code"] == -32700);
      CHECK(response["error"]["data"]["kind"] == "parse_error");
    }
    // The same payload, once valid, is answered.
    Json ok = ParseResponse(f.SendText(R"({"jsonrpc": "2.0", "method": "ping", "id": 1})"));
    CHECK(ok["result"] == Json::object());
  }

  TEST_CASE("invalid request shapes answer -32600 and echo a valid id") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false});
    struct Case {
      Json message;
      Json id;
      const char* mentions;
    };
    const Case cases[] = {
        {Json{{"method", "ping"}, {"id", 1}}, 1, "jsonrpc"},
        {Json{{"jsonrpc", "1.0"}, {"method", "ping"}, {"id", 2}}, 2, "jsonrpc"},
        {Json{{"jsonrpc", 2.0}, {"method", "ping"}, {"id", "x"}}, "x", "jsonrpc"},
        {Json{{"jsonrpc", "2.0"}, {"id", 3}}, 3, "method"},
        {Json{{"jsonrpc", "2.0"}, {"method", 42}, {"id", 4}}, 4, "method"},
        {Json{{"jsonrpc", "2.0"}, {"method", "ping"}, {"params", "text"}, {"id", 5}}, 5, "params"},
        {Json{{"jsonrpc", "2.0"}, {"method", "ping"}, {"params", 7}, {"id", 6}}, 6, "params"},
        {Json{{"jsonrpc", "2.0"}, {"method", "ping"}, {"id", Json::object()}}, nullptr, "id"},
        {Json{{"jsonrpc", "2.0"}, {"method", "ping"}, {"id", true}}, nullptr, "id"},
        {Json(42), nullptr, "object"},
        {Json("ping"), nullptr, "object"},
        // A request without an id is a notification, but an invalid one is still answered.
        {Json{{"jsonrpc", "2.0"}, {"method", 1}}, nullptr, "method"},
    };
    for (const Case& c : cases) {
      auto response = f.Send(c.message);
      INFO(c.message.dump());
      REQUIRE(response.has_value());
      INFO(response->dump());
      CHECK((*response)["error"]["code"] == -32600);
      CHECK((*response)["id"] == c.id);
      CHECK(Contains((*response)["error"]["message"], c.mentions));
      CHECK_FALSE(response->contains("result"));
    }
  }

  TEST_CASE("ids are echoed exactly: numbers, strings and null") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false});
    for (const Json& id : {Json(0), Json(-17), Json(1234567890123), Json(2.5), Json("abc"), Json(""), Json(nullptr)}) {
      auto response = f.Send(Json{{"jsonrpc", "2.0"}, {"method", "ping"}, {"id", id}});
      REQUIRE(response.has_value());
      CHECK((*response)["id"] == id);
      CHECK((*response)["id"].type() == id.type());
      CHECK((*response)["result"] == Json::object());
    }
  }

  TEST_CASE("an unknown method is -32601 naming it; native methods do not exist in the MCP dialect") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false});
    Json error = f.Error("no/such/method");
    CHECK(error["code"] == -32601);
    CHECK(Contains(error["message"], "no/such/method"));
    CHECK(f.Error("initialize")["code"] == -32601);
    CHECK(f.Error("envs/list", Json::object(), Dialect::kMcp)["code"] == -32601);
  }

  TEST_CASE("notifications run but are never answered") {
    ServiceFixture f;
    CHECK_FALSE(f.Send(Json{{"jsonrpc", "2.0"}, {"method", "ping"}}).has_value());
    // Even a failing notification stays silent.
    CHECK_FALSE(f.Send(Json{{"jsonrpc", "2.0"}, {"method", "no/such/method"}}).has_value());
    CHECK_FALSE(f.SendText(R"({"jsonrpc":"2.0","method":"session/create","params":{"env":"nope"}})").has_value());
    // A notification that creates a session does create it (its handle is simply never learned).
    CHECK_FALSE(f.Send(Json{{"jsonrpc", "2.0"}, {"method", "session/create"}, {"params", {{"env", "manager_fixture"}}}})
                    .has_value());
    CHECK(f.Ok("server/stats")["sessions"]["live"] == 1);
  }

  TEST_CASE("a batch answers its requests, not its notifications; members fail independently" * doctest::timeout(60)) {
    ServiceFixture f;
    Json created = f.Create();
    std::string session = created["session"];
    Json batch = Json::array({
        Json{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}},
        Json{{"jsonrpc", "2.0"}, {"method", "ping"}},
        Json{{"jsonrpc", "2.0"},
             {"id", "call"},
             {"method", "tools/call"},
             {"params", {{"session", session}, {"name", "add"}, {"arguments", {{"a", 20}, {"b", 22}}}}}},
        Json{{"jsonrpc", "2.0"}, {"id", 3}, {"method", "no/such/method"}},
        Json(5),
        Json{{"jsonrpc", "2.0"},
             {"id", 4},
             {"method", "tools/call"},
             {"params", {{"session", "s-gone"}, {"name", "incr"}}}},
        Json{{"jsonrpc", "2.0"}, {"method", "tools/call"}, {"params", {{"session", session}, {"name", "incr"}}}},
    });
    auto response = f.Send(batch);
    REQUIRE(response.has_value());
    REQUIRE(response->is_array());
    INFO(response->dump());
    REQUIRE(response->size() == 5);
    std::map<std::string, Json> by_id;
    int null_ids = 0;
    for (const auto& answer : *response) {
      if (answer["id"].is_null()) {
        ++null_ids;
        CHECK(answer["error"]["code"] == -32600);
      } else {
        by_id[answer["id"].dump()] = answer;
      }
    }
    CHECK(null_ids == 1);
    CHECK(by_id["1"]["result"] == Json::object());
    CHECK(by_id["\"call\""]["result"]["content"] == 42);
    CHECK(by_id["3"]["error"]["code"] == -32601);
    CHECK(by_id["4"]["error"]["code"] == -32001);
    // The notification's call ran: the counter moved.
    CHECK(f.CallTool(session, "incr")["content"] == 2);
  }

  TEST_CASE("an all-notification batch gets no answer; an empty batch is -32600") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false});
    CHECK_FALSE(f.Send(Json::array({Json{{"jsonrpc", "2.0"}, {"method", "ping"}},
                                    Json{{"jsonrpc", "2.0"}, {"method", "envs/list"}}}))
                    .has_value());
    auto empty = f.Send(Json::array());
    REQUIRE(empty.has_value());
    CHECK(empty->is_object());
    CHECK((*empty)["error"]["code"] == -32600);
    CHECK((*empty)["id"].is_null());
    Json text = ParseResponse(f.SendText("[]"));
    CHECK(text["error"]["code"] == -32600);
    Json garbage = ParseResponse(f.SendText("[1, 2]"));
    REQUIRE(garbage.is_array());
    CHECK(garbage.size() == 2);
  }

  TEST_CASE("ErrorResponse builds the envelope transports answer with") {
    Json unauthorized = Json::parse(RpcService::ErrorResponse(7, -32005, "missing token"));
    CHECK(unauthorized["jsonrpc"] == "2.0");
    CHECK(unauthorized["id"] == 7);
    CHECK(unauthorized["error"]["code"] == -32005);
    CHECK(unauthorized["error"]["message"] == "missing token");
    CHECK(unauthorized["error"]["data"]["kind"] == "unauthorized");
    CHECK(unauthorized["error"]["data"]["retryable"] == false);
    Json too_large = Json::parse(RpcService::ErrorResponse(nullptr, -32008, "too large", Json{{"limit", 10}}));
    CHECK(too_large["id"].is_null());
    CHECK(too_large["error"]["data"]["kind"] == "payload_too_large");
    CHECK(too_large["error"]["data"]["limit"] == 10);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::server::testing
