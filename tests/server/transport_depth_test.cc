// The JSON nesting bound (base/json.h) on every transport of the server: a request nested past
// kMaxJsonDepth answers -32700 naming the bound and the connection, the session and the server go
// on; at the bound it parses, and tool arguments past kMaxJsonValueDepth answer invalid_call.
// 100,000 levels in 200 KB crashed the server before the bound.
#include <doctest/doctest.h>

#include <map>
#include <sstream>
#include <string>

#include "server/stdio_server.h"
#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {
namespace {

std::string NestedArrayText(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// tools/call put(key, value) with the value's JSON text as given: the document nests three levels
// (request, params, arguments) around the value.
std::string PutRequest(const std::string& session, const std::string& value_text, int id,
                       const std::string& method = "tools/call") {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method + R"(","params":{"session":")" +
         session + R"(","name":"put","arguments":{"key":"k","value":)" + value_text + "}}}";
}

constexpr int kEnvelopeDepth = 3;

// The answers every transport must give, for a function that sends one raw request and returns
// the raw answer text.
template <typename Send>
void CheckDepthBound(const std::string& session, Send send) {
  // Within both bounds: the tool runs.
  Json fits = ParseJson(send(PutRequest(session, NestedArrayText(kMaxJsonValueDepth - 2), 1))).value();
  INFO(fits.dump().substr(0, 300));
  CHECK(fits["result"]["outcome"] == "ok");

  // The document at its bound parses; the arguments inside are past theirs: invalid_call.
  Json at_bound = ParseJson(send(PutRequest(session, NestedArrayText(kMaxJsonDepth - kEnvelopeDepth), 2))).value();
  INFO(at_bound.dump().substr(0, 300));
  CHECK(at_bound["id"] == 2);
  CHECK(at_bound["result"]["outcome"] == "invalid_call");
  CHECK(at_bound["result"]["message"] == "arguments of 'put' nest deeper than 100 levels of arrays and objects");

  // One level past the document bound, and 100,000 levels: a parse error that names the bound.
  for (int depth : {kMaxJsonDepth - kEnvelopeDepth + 1, 100'000}) {
    CAPTURE(depth);
    Json refused = ParseJson(send(PutRequest(session, NestedArrayText(depth), 3))).value();
    CHECK(refused["id"].is_null());
    CHECK(refused["error"]["code"] == -32700);
    CHECK(refused["error"]["message"].get<std::string>().find(
              "request nests deeper than 128 levels of arrays and objects") != std::string::npos);
  }

  // The same connection and session still serve.
  Json after = ParseJson(send(R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"session":")" + session +
                              R"(","name":"incr","arguments":{}}})"))
                   .value();
  CHECK(after["result"]["outcome"] == "ok");
  CHECK(after["result"]["content"] == 1);
}

TEST_SUITE("server.transport.depth") {
  TEST_CASE("HTTP POST /rpc" * doctest::timeout(60)) {
    TransportFixture fixture;
    auto client = fixture.Client(fixture.HttpUrl());
    std::string session = MustCall(*client, "session/create", Json{{"env", "manager_fixture"}})["session"];
    RawConnection connection(fixture.port());
    CheckDepthBound(session, [&](const std::string& request) {
      REQUIRE(connection.Send(HttpRequestText("POST", "/rpc", request)));
      auto response = connection.ReadResponse();
      REQUIRE(response.has_value());
      CHECK(response->status == 200);
      return response->body;
    });
  }

  TEST_CASE("WebSocket /ws" * doctest::timeout(60)) {
    TransportFixture fixture;
    auto client = fixture.Client(fixture.WsUrl());
    std::string session = MustCall(*client, "session/create", Json{{"env", "manager_fixture"}})["session"];
    CheckDepthBound(session, [&](const std::string& request) {
      auto answer = client->SendRaw(request);
      REQUIRE_MESSAGE(answer.ok(), answer.status().ToString());
      REQUIRE(answer->has_value());
      return **answer;
    });
  }

  TEST_CASE("MCP over POST /mcp: the episode named by the session argument" * doctest::timeout(60)) {
    TransportFixture fixture;
    auto native = fixture.Client(fixture.HttpUrl());
    std::string session = MustCall(*native, "session/create", Json{{"env", "manager_fixture"}})["session"];
    RawConnection connection(fixture.port());
    auto send = [&](const std::string& request) {
      REQUIRE(connection.Send(HttpRequestText("POST", "/mcp", request)));
      auto response = connection.ReadResponse();
      REQUIRE(response.has_value());
      return response->body;
    };
    for (int depth : {kMaxJsonDepth - kEnvelopeDepth + 1, 100'000}) {
      Json refused = ParseJson(send(PutRequest(session, NestedArrayText(depth), 1))).value();
      CHECK(refused["error"]["code"] == -32700);
      CHECK(refused["error"]["message"].get<std::string>().find("nests deeper than 128 levels") != std::string::npos);
    }
    Json echoed = ParseJson(send(R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo",)"
                                 R"("arguments":{"text":"still here","session":")" +
                                 session + R"("}}})"))
                      .value();
    INFO(echoed.dump());
    CHECK(echoed["result"]["isError"] == false);
  }

  TEST_CASE("stdio, line by line" * doctest::timeout(60)) {
    ServiceFixture f;
    std::string session = f.Create()["session"];
    std::ostringstream script;
    script << PutRequest(session, NestedArrayText(kMaxJsonValueDepth - 2), 1) << "\n"
           << PutRequest(session, NestedArrayText(kMaxJsonDepth - kEnvelopeDepth), 2) << "\n"
           << PutRequest(session, NestedArrayText(100'000), 3) << "\n"
           << R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"session":")" << session
           << R"(","name":"incr","arguments":{}}})"
           << "\n";
    std::istringstream in(script.str());
    std::ostringstream out;
    REQUIRE(RunStdioServer(*f.service, in, out).ok());
    std::map<std::string, Json> by_id;
    std::istringstream lines(out.str());
    for (std::string line; std::getline(lines, line);) {
      Json answer = ParseJson(line).value();
      by_id[answer["id"].dump()] = answer;
    }
    INFO(out.str().substr(0, 2000));
    CHECK(by_id["1"]["result"]["outcome"] == "ok");
    CHECK(by_id["2"]["result"]["outcome"] == "invalid_call");
    CHECK(by_id["null"]["error"]["code"] == -32700);
    CHECK(by_id["4"]["result"]["content"] == 1);
  }
}

}  // namespace
}  // namespace envforge::server::testing
