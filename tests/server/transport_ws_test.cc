// The WebSocket side of the transport (/ws) and the MCP route (POST /mcp): concurrent requests on
// one connection answered by id as they complete, the message size limit (close 1009), parse
// errors that leave the connection usable; MCP initialize, tools/list and tools/call.
#include <doctest/doctest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <set>

#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {
namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// A bare synchronous WebSocket client: the test sees every frame in the order it arrives.
class RawWebSocket {
 public:
  explicit RawWebSocket(uint16_t port) : ws_(io_) {
    tcp::resolver resolver(io_);
    net::connect(ws_.next_layer(), resolver.resolve("127.0.0.1", std::to_string(port)));
    ws_.handshake("127.0.0.1:" + std::to_string(port), "/ws");
    ws_.text(true);
    // One frame goes out in one write: the server may close as soon as it sees an oversized
    // frame's header, and a later write of the same frame would only meet a broken pipe.
    ws_.write_buffer_bytes(1 << 20);
  }
  // Errors (a connection the server already closed) show up on the next Read.
  void Send(const std::string& text) {
    beast::error_code ignored;
    ws_.write(net::buffer(text), ignored);
  }
  // The next message, or the error that ended the connection.
  std::optional<std::string> Read(beast::error_code* error = nullptr) {
    beast::flat_buffer buffer;
    beast::error_code ec;
    ws_.read(buffer, ec);
    if (error) *error = ec;
    if (ec) return std::nullopt;
    return beast::buffers_to_string(buffer.data());
  }
  websocket::close_reason reason() const { return ws_.reason(); }

 private:
  net::io_context io_;
  websocket::stream<tcp::socket> ws_;
};

TEST_SUITE("server.transport.ws") {
  TEST_CASE("requests in flight on one connection are answered as they complete, matched by id") {
    TransportFixture fixture;
    auto client = fixture.Client(fixture.HttpUrl());
    std::string slow =
        MustCall(*client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}})["session"];
    std::string fast =
        MustCall(*client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}})["session"];

    RawWebSocket ws(fixture.port());
    ws.Send(RpcText("tools/call",
                    Json{{"session", slow}, {"name", "slow_echo"}, {"arguments", {{"text", "late"}, {"seconds", 0.5}}}},
                    "slow-1"));
    ws.Send(
        RpcText("tools/call", Json{{"session", fast}, {"name", "echo"}, {"arguments", {{"text", "early"}}}}, "fast-2"));
    ws.Send(RpcText("ping", Json::object(), 3));
    std::vector<Json> answers;
    for (int i = 0; i < 3; ++i) {
      auto text = ws.Read();
      REQUIRE(text.has_value());
      answers.push_back(ParseJson(*text).value());
    }
    // The slow call was sent first and answered last.
    CHECK(answers.back()["id"] == "slow-1");
    CHECK(answers.back()["result"]["content"] == "late");
    std::set<Json> early_ids{answers[0]["id"], answers[1]["id"]};
    CHECK(early_ids == std::set<Json>{Json("fast-2"), Json(3)});
    for (const auto& answer : answers) {
      if (answer["id"] == "fast-2") CHECK(answer["result"]["content"] == "early");
    }
  }

  TEST_CASE("the C++ client pipelines over one WebSocket and gets each reply in call order") {
    TransportFixture fixture;
    auto client = fixture.Client(fixture.WsUrl());
    CHECK(client->websocket());
    std::vector<std::string> sessions;
    for (int i = 0; i < 3; ++i) {
      sessions.push_back(
          MustCall(*client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}})["session"]);
    }
    std::vector<std::pair<std::string, Json>> calls;
    for (int i = 0; i < 3; ++i) {
      calls.push_back(
          {"tools/call", Json{{"session", sessions[i]},
                              {"name", "slow_echo"},
                              {"arguments", {{"text", "s" + std::to_string(i)}, {"seconds", 0.3 - 0.1 * i}}}}});
    }
    calls.push_back({"tools/call", Json{{"session", "s-nope"}, {"name", "incr"}}});
    auto replies = client->CallPipelined(calls);
    REQUIRE(replies.size() == 4);
    for (int i = 0; i < 3; ++i) {
      REQUIRE(replies[i].ok());
      CHECK(replies[i].result["content"] == "s" + std::to_string(i));
    }
    REQUIRE(replies[3].error.has_value());
    CHECK(replies[3].error->code == -32001);
    Json verdict = MustCall(*client, "session/submit", Json{{"session", sessions[0]}, {"answer", 5}});
    CHECK(verdict["passed"] == true);
    for (const auto& session : sessions) MustCall(*client, "session/close", Json{{"session", session}});
  }

  TEST_CASE("a message over the limit closes the connection with 1009; the server goes on") {
    TransportFixture fixture(HttpServerOptions{.max_payload_bytes = 2048});
    RawWebSocket ws(fixture.port());
    ws.Send(RpcText("ping", Json::object(), 1));
    REQUIRE(ws.Read().has_value());
    ws.Send(RpcText("tools/call", Json{{"session", "s-x"}, {"name", std::string(4096, 'x')}}, 2));
    beast::error_code ec;
    CHECK_FALSE(ws.Read(&ec).has_value());
    // The client sees the close frame (and, answering it, may find the socket already shut).
    CHECK(ec);
    CHECK(ws.reason().code == websocket::close_code::too_big);
    CHECK(ws.reason().code == 1009);
    RawWebSocket next(fixture.port());
    next.Send(RpcText("ping", Json::object(), 3));
    CHECK(next.Read().has_value());
  }

  TEST_CASE("bad JSON answers -32700 with id null and the connection stays usable") {
    TransportFixture fixture;
    RawWebSocket ws(fixture.port());
    ws.Send("{\"jsonrpc\": \"2.0\", \"method\": ");
    auto answer = ws.Read();
    REQUIRE(answer.has_value());
    Json error = ParseJson(*answer).value();
    CHECK(error["id"].is_null());
    CHECK(error["error"]["code"] == -32700);
    ws.Send(RpcText("ping", Json::object(), 7));
    auto pong = ws.Read();
    REQUIRE(pong.has_value());
    CHECK(ParseJson(*pong).value()["id"] == 7);
    // Through the client, a raw payload too.
    auto client = fixture.Client(fixture.WsUrl());
    auto raw = client->SendRaw("[]");
    REQUIRE(raw.ok());
    REQUIRE(raw->has_value());
    CHECK(ParseJson(**raw).value()["error"]["code"] == -32600);
    MustCall(*client, "ping");
  }

  TEST_CASE("a WebSocket client that vanishes with requests in flight leaves the server and the session intact") {
    TransportFixture fixture;
    auto client = fixture.Client(fixture.WsUrl());
    Json created = MustCall(*client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
    std::string session = created["session"];
    {
      RawWebSocket ws(fixture.port());
      ws.Send(
          RpcText("tools/call",
                  Json{{"session", session}, {"name", "slow_echo"}, {"arguments", {{"text", "x"}, {"seconds", 0.3}}}}));
    }  // dropped without a close frame or waiting
    // The server read the request before the connection went away: it runs and is recorded.
    REQUIRE(WaitFor([&] { return StepsRecorded(fixture, created["trajectory"]) == 1; }, std::chrono::seconds(10)));
    REQUIRE(WaitFor([&] { return fixture.server->in_flight() == 0; }, std::chrono::seconds(10)));
    CHECK(MustCall(*client, "tools/call", Json{{"session", session}, {"name", "incr"}})["outcome"] == "ok");
    CHECK(fixture.service_fixture.Episode(created["trajectory"]).steps.size() == 2);
  }

  TEST_CASE(
      "MCP over POST /mcp: initialize, notifications and responses get 202, MCP-Protocol-Version, tools/list and "
      "tools/call") {
    TransportFixture fixture;
    auto mcp = fixture.Client(fixture.HttpUrl("/mcp"));
    Json initialized = MustCall(*mcp, "initialize",
                                Json{{"protocolVersion", "2025-06-18"},
                                     {"capabilities", Json::object()},
                                     {"clientInfo", {{"name", "transport-test"}, {"version", "1"}}}});
    CHECK(initialized.contains("protocolVersion"));
    CHECK(initialized["capabilities"].contains("tools"));
    CHECK(mcp->Notify("notifications/initialized").ok());

    RawConnection raw(fixture.port());
    REQUIRE(raw.Send(HttpRequestText("POST", "/mcp", RpcText("notifications/initialized", Json::object(), nullptr))));
    auto accepted = raw.ReadResponse();
    REQUIRE(accepted.has_value());
    CHECK(accepted->status == 202);
    CHECK(accepted->body.empty());
    REQUIRE(raw.Send(HttpRequestText("GET", "/mcp", "", {"Accept: text/event-stream"})));
    auto no_stream = raw.ReadResponse();
    REQUIRE(no_stream.has_value());
    CHECK(no_stream->status == 405);

    // A JSON-RPC response (to a request this server never sends) is accepted as a notification
    // is; a revision the server does not speak in MCP-Protocol-Version is 400, a known one served.
    auto post = [&](const std::string& body, std::vector<std::string> headers) {
      RawConnection connection(fixture.port());
      REQUIRE(connection.Send(HttpRequestText("POST", "/mcp", body, headers)));
      auto response = connection.ReadResponse();
      REQUIRE(response.has_value());
      return *response;
    };
    auto answered = post(R"({"jsonrpc":"2.0","id":9,"result":{}})", {});
    CHECK(answered.status == 202);
    CHECK(answered.body.empty());
    auto bad_version = post(RpcText("ping", Json::object(), 3), {"MCP-Protocol-Version: 1999-01-01"});
    CHECK(bad_version.status == 400);
    CHECK(ParseJson(bad_version.body).value()["error"]["code"] == -32600);
    CHECK(Contains(bad_version.body, "2025-11-25"));
    CHECK(post(RpcText("ping", Json::object(), 4), {"MCP-Protocol-Version: 2025-11-25"}).status == 200);

    Json listed = MustCall(*mcp, "tools/list");
    bool has_create = false;
    for (const auto& tool : listed["tools"]) {
      CHECK(tool.contains("inputSchema"));
      if (tool["name"] == "envforge_create_session") has_create = true;
    }
    CHECK(has_create);

    Json created = MustCall(
        *mcp, "tools/call",
        Json{{"name", "envforge_create_session"}, {"arguments", {{"env", "manager_fixture"}, {"task", "sum_task"}}}});
    CHECK(created["isError"] == false);
    REQUIRE(created.contains("structuredContent"));
    std::string session = created["structuredContent"]["session"];
    Json echoed = MustCall(
        *mcp, "tools/call",
        Json{{"name", "echo"}, {"arguments", {{"text", "over mcp"}}}, {"_meta", {{"envforge/session", session}}}});
    CHECK(echoed["isError"] == false);
    CHECK(echoed["content"][0]["type"] == "text");
    CHECK(Contains(echoed["content"][0]["text"].get<std::string>(), "over mcp"));
    Json session_tools = MustCall(*mcp, "tools/list", Json{{"_meta", {{"envforge/session", session}}}});
    CHECK(session_tools["tools"].size() >= 2);
    Json closed =
        MustCall(*mcp, "tools/call", Json{{"name", "envforge_close_session"}, {"arguments", {{"session", session}}}});
    CHECK(closed["isError"] == false);
  }
}

}  // namespace
}  // namespace envforge::server::testing
