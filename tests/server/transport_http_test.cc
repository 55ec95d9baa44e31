// The HTTP side of the transport: routes, keep-alive, auth, limits and misbehaving clients, over
// real sockets against a real service with real worker sessions.
#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {
namespace {

TEST_SUITE("server.transport.http") {
  TEST_CASE("POST /rpc answers JSON-RPC and keeps the connection alive across requests") {
    TransportFixture fixture;
    RawConnection connection(fixture.port());
    REQUIRE(connection.Send(HttpRequestText("POST", "/rpc", RpcText("ping"))));
    auto first = connection.ReadResponse();
    REQUIRE(first.has_value());
    CHECK(first->status == 200);
    CHECK(first->Header("content-type: application/json"));
    Json answer = ParseJson(first->body).value();
    CHECK(answer["id"] == 1);
    CHECK(answer["result"] == Json::object());

    // The same socket serves the next request.
    REQUIRE(connection.Send(HttpRequestText("POST", "/rpc", RpcText("envs/list", Json::object(), 2))));
    auto second = connection.ReadResponse();
    REQUIRE(second.has_value());
    Json envs = ParseJson(second->body).value();
    CHECK(envs["id"] == 2);
    REQUIRE(envs["result"]["envs"].size() == 1);
    CHECK(envs["result"]["envs"][0]["name"] == "manager_fixture");
    CHECK(fixture.server->open_connections() >= 1);

    // A notification gets 204 and no body; the connection still works afterwards.
    REQUIRE(connection.Send(HttpRequestText("POST", "/rpc", RpcText("ping", Json::object(), nullptr))));
    auto notified = connection.ReadResponse();
    REQUIRE(notified.has_value());
    CHECK(notified->status == 204);
    REQUIRE(connection.Send(HttpRequestText("POST", "/rpc", RpcText("ping", Json::object(), 3))));
    auto third = connection.ReadResponse();
    REQUIRE(third.has_value());
    CHECK(ParseJson(third->body).value()["id"] == 3);
  }

  TEST_CASE("the C++ client runs a whole episode over HTTP keep-alive and pipelines requests") {
    TransportFixture fixture;
    auto client = fixture.Client(fixture.HttpUrl());
    Json created = MustCall(*client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
    std::string session = created["session"];
    Json added = MustCall(*client, "tools/call",
                          Json{{"session", session}, {"name", "add"}, {"arguments", {{"a", 2}, {"b", 3}}}});
    CHECK(added["outcome"] == "ok");
    CHECK(added["content"] == 5);

    std::vector<std::pair<std::string, Json>> calls;
    for (int i = 0; i < 5; ++i) calls.push_back({"tools/call", Json{{"session", session}, {"name", "incr"}}});
    calls.push_back({"no/such_method", Json::object()});
    auto replies = client->CallPipelined(calls);
    REQUIRE(replies.size() == 6);
    for (int i = 0; i < 5; ++i) {
      REQUIRE(replies[i].ok());
      CHECK(replies[i].result["content"] == i + 1);  // one session: FIFO, in order
    }
    REQUIRE(replies[5].error.has_value());
    CHECK(replies[5].error->code == -32601);
    CHECK(replies[5].status().code() == StatusCode::kNotFound);
    CHECK(replies[5].status().message().find("rpc error -32601") != std::string::npos);

    Json verdict = MustCall(*client, "session/submit", Json{{"session", session}, {"answer", "5"}});
    CHECK(verdict["passed"] == true);
    CHECK(MustCall(*client, "session/close", Json{{"session", session}})["closed"] == true);
    auto unknown = client->Call("tools/call", Json{{"session", session}, {"name", "incr"}});
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.status().message().find("-32001") != std::string::npos);
  }

  TEST_CASE("GET /health reports status, sessions and uptime, and draining after BeginDrain") {
    TransportFixture fixture(HttpServerOptions{.token = "s3cret"});
    RawConnection connection(fixture.port());
    REQUIRE(connection.Send(HttpRequestText("GET", "/health", "")));  // no token needed
    auto health = connection.ReadResponse();
    REQUIRE(health.has_value());
    CHECK(health->status == 200);
    Json body = ParseJson(health->body).value();
    CHECK(body["status"] == "ok");
    CHECK(body["sessions"] == 0);
    CHECK(body["uptime"].get<double>() >= 0);

    auto client = fixture.Client(fixture.HttpUrl(), "s3cret");  // accepted before the listener closes
    MustCall(*client, "ping");
    fixture.server->BeginDrain();
    REQUIRE(connection.Send(HttpRequestText("GET", "/health", "")));
    auto draining = connection.ReadResponse();
    REQUIRE(draining.has_value());
    CHECK(ParseJson(draining->body).value()["status"] == "draining");
    // New sessions are refused while draining (the service answers -32006).
    auto refused = client->CallDetailed("session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
    REQUIRE(refused.error.has_value());
    CHECK(refused.error->code == -32006);
  }

  TEST_CASE("GET /metrics exposes the service's and the transport's counters") {
    TransportFixture fixture;
    auto http_client = fixture.Client(fixture.HttpUrl());
    MustCall(*http_client, "ping");
    auto ws_client = fixture.Client(fixture.WsUrl());
    MustCall(*ws_client, "ping");
    RawConnection connection(fixture.port());
    REQUIRE(connection.Send(HttpRequestText("GET", "/nowhere", "")));
    REQUIRE(connection.ReadResponse().has_value());
    // The server counts an outgoing WebSocket message when its write completes, which may be
    // just after the client has read it: poll until the count shows (bounded), then check all.
    auto fetch = [&] {
      REQUIRE(connection.Send(HttpRequestText("GET", "/metrics", "")));
      auto response = connection.ReadResponse();
      REQUIRE(response.has_value());
      return *response;
    };
    auto metrics = std::optional(fetch());
    for (int attempt = 0; attempt < 200 && !Contains(metrics->body, "envforge_ws_messages_total{direction=\"out\"} 1");
         ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      metrics = fetch();
    }
    CHECK(metrics->status == 200);
    CHECK(metrics->Header("content-type: text/plain; version=0.0.4"));
    const std::string& text = metrics->body;
    CHECK(Contains(text, "envforge_rpc_requests_total"));
    CHECK(Contains(text, "envforge_transport_connections_total{transport=\"http\"}"));
    CHECK(Contains(text, "envforge_transport_connections_total{transport=\"ws\"} 1"));
    CHECK(Contains(text, "envforge_transport_connections_open{transport=\"ws\"} 1"));
    CHECK(Contains(text, "envforge_transport_bytes_total{transport=\"http\",direction=\"in\"}"));
    CHECK(Contains(text, "envforge_transport_bytes_total{transport=\"ws\",direction=\"out\"}"));
    CHECK(Contains(text, "envforge_http_responses_total{code=\"200\"}"));
    CHECK(Contains(text, "envforge_http_responses_total{code=\"404\"} 1"));
    CHECK(Contains(text, "envforge_http_responses_total{code=\"101\"} 1"));
    CHECK(Contains(text, "envforge_ws_messages_total{direction=\"in\"} 1"));
    CHECK(Contains(text, "envforge_ws_messages_total{direction=\"out\"} 1"));
  }

  TEST_CASE("unknown paths get 404, wrong methods 405 with Allow, malformed HTTP 400 and a close") {
    TransportFixture fixture;
    RawConnection connection(fixture.port());
    REQUIRE(connection.Send(HttpRequestText("GET", "/nowhere", "")));
    auto missing = connection.ReadResponse();
    REQUIRE(missing.has_value());
    CHECK(missing->status == 404);

    REQUIRE(connection.Send(HttpRequestText("GET", "/rpc", "")));
    auto get_rpc = connection.ReadResponse();
    REQUIRE(get_rpc.has_value());
    CHECK(get_rpc->status == 405);
    CHECK(get_rpc->Header("allow: POST"));

    REQUIRE(connection.Send(HttpRequestText("DELETE", "/health", "")));
    auto delete_health = connection.ReadResponse();
    REQUIRE(delete_health.has_value());
    CHECK(delete_health->status == 405);
    CHECK(delete_health->Header("allow: GET"));

    REQUIRE(connection.Send(HttpRequestText("GET", "/ws", "")));  // no upgrade headers
    auto plain_ws = connection.ReadResponse();
    REQUIRE(plain_ws.has_value());
    CHECK(plain_ws->status == 426);

    RawConnection broken(fixture.port());
    REQUIRE(broken.Send("THIS IS NOT HTTP\r\n\r\n"));
    auto bad = broken.ReadResponse();
    REQUIRE(bad.has_value());
    CHECK(bad->status == 400);
    CHECK(broken.WaitForClose());

    RawConnection bad_length(fixture.port());
    REQUIRE(bad_length.Send("POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n\r\n"));
    auto bad_length_response = bad_length.ReadResponse();
    REQUIRE(bad_length_response.has_value());
    CHECK(bad_length_response->status == 400);
    CHECK(bad_length.WaitForClose());

    // Invalid JSON in a well-formed request is a JSON-RPC matter: 200 with -32700.
    REQUIRE(connection.Send(HttpRequestText("POST", "/rpc", "{not json")));
    auto parse_error = connection.ReadResponse();
    REQUIRE(parse_error.has_value());
    CHECK(parse_error->status == 200);
    CHECK(ParseJson(parse_error->body).value()["error"]["code"] == -32700);
  }

  TEST_CASE("a body over max_payload_bytes gets 413 with -32008, without being read, and the connection closes") {
    TransportFixture fixture(HttpServerOptions{.max_payload_bytes = 4096});
    SUBCASE("announced by Content-Length") {
      RawConnection connection(fixture.port());
      REQUIRE(connection.Send(
          "POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"));
      REQUIRE(connection.Send(std::string(8192, ' ')));  // a first slice of the huge body
      auto response = connection.ReadResponse();
      REQUIRE(response.has_value());
      CHECK(response->status == 413);
      Json body = ParseJson(response->body).value();
      CHECK(body["error"]["code"] == -32008);
      CHECK(body["error"]["data"]["limit"] == 4096);
      CHECK(connection.WaitForClose());
    }
    SUBCASE("growing past the limit in chunks") {
      RawConnection connection(fixture.port());
      std::string chunk(3000, ' ');
      std::string request =
          "POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
      for (int i = 0; i < 3; ++i) request += "bb8\r\n" + chunk + "\r\n";
      REQUIRE(connection.Send(request));
      auto response = connection.ReadResponse();
      REQUIRE(response.has_value());
      CHECK(response->status == 413);
      CHECK(ParseJson(response->body).value()["error"]["code"] == -32008);
      CHECK(connection.WaitForClose());
    }
    // The server is unharmed.
    auto client = fixture.Client(fixture.HttpUrl());
    MustCall(*client, "ping");
  }

  TEST_CASE(
      "with a token every request but /health needs it: 401 and -32005 without or with a wrong one, then a close") {
    TransportFixture fixture(HttpServerOptions{.token = "s3cret"});
    for (const std::string& header :
         {std::string(), std::string("Authorization: Bearer wrong"), std::string("Authorization: Bearer s3cre"),
          std::string("Authorization: Basic s3cret")}) {
      CAPTURE(header);
      RawConnection connection(fixture.port());
      std::vector<std::string> headers;
      if (!header.empty()) headers.push_back(header);
      REQUIRE(connection.Send(HttpRequestText("POST", "/rpc", RpcText("ping"), headers)));
      auto response = connection.ReadResponse();
      REQUIRE(response.has_value());
      CHECK(response->status == 401);
      CHECK(response->Header("www-authenticate: Bearer"));
      CHECK(ParseJson(response->body).value()["error"]["code"] == -32005);
      CHECK(connection.WaitForClose());
      RawConnection metrics_connection(fixture.port());
      REQUIRE(metrics_connection.Send(HttpRequestText("GET", "/metrics", "", headers)));
      auto metrics = metrics_connection.ReadResponse();
      REQUIRE(metrics.has_value());
      CHECK(metrics->status == 401);
    }
    RawConnection authorized(fixture.port());
    REQUIRE(authorized.Send(HttpRequestText("POST", "/rpc", RpcText("ping"), {"Authorization: Bearer s3cret"})));
    auto ok = authorized.ReadResponse();
    REQUIRE(ok.has_value());
    CHECK(ok->status == 200);

    // The client: HTTP calls carry the token; the WebSocket upgrade is refused without it.
    auto without = RpcClient::Connect(fixture.HttpUrl());
    REQUIRE(without.ok());  // HTTP connects lazily per request: the call fails
    auto refused = (*without)->CallDetailed("ping");
    REQUIRE(refused.error.has_value());
    CHECK(refused.error->code == -32005);
    auto ws_refused = RpcClient::Connect(fixture.WsUrl());
    REQUIRE_FALSE(ws_refused.ok());
    CHECK(ws_refused.status().code() == StatusCode::kUnauthenticated);
    auto ws_client = fixture.Client(fixture.WsUrl(), "s3cret");
    MustCall(*ws_client, "ping");
    auto http_client = fixture.Client(fixture.HttpUrl(), "s3cret");
    MustCall(*http_client, "ping");
  }

  TEST_CASE("a slow client is disconnected after the read timeout while other clients are served") {
    TransportFixture fixture(HttpServerOptions{.read_timeout = std::chrono::milliseconds(300)});
    RawConnection slow(fixture.port());
    REQUIRE(slow.Send("POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Le"));  // half a header, then nothing
    auto client = fixture.Client(fixture.HttpUrl());
    for (int i = 0; i < 3; ++i) MustCall(*client, "ping");
    CHECK(slow.WaitForClose());
    CHECK(slow.pending().empty());  // closed without an answer
    MustCall(*client, "ping");
  }

  TEST_CASE("a client vanishing mid-request does not harm the server nor its session, and the call is recorded") {
    TransportFixture fixture;
    auto client = fixture.Client(fixture.HttpUrl());
    Json created = MustCall(*client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
    std::string session = created["session"];
    {
      RawConnection vanishing(fixture.port());
      REQUIRE(vanishing.Send(HttpRequestText(
          "POST", "/rpc",
          RpcText(
              "tools/call",
              Json{{"session", session}, {"name", "slow_echo"}, {"arguments", {{"text", "hi"}, {"seconds", 0.3}}}}))));
      // Gone before the answer.
    }
    REQUIRE(WaitFor([&] { return StepsRecorded(fixture, created["trajectory"]) == 1; }, std::chrono::seconds(10)));
    REQUIRE(WaitFor([&] { return fixture.server->in_flight() == 0; }, std::chrono::seconds(10)));
    MustCall(*client, "ping");
    Json incr = MustCall(*client, "tools/call", Json{{"session", session}, {"name", "incr"}});
    CHECK(incr["outcome"] == "ok");  // the session stayed open
    agents::Episode episode = fixture.service_fixture.Episode(created["trajectory"]);
    REQUIRE(episode.steps.size() == 2);
    CHECK(episode.steps[0].tool == "slow_echo");
    CHECK(episode.steps[0].result.outcome == toolsets::Outcome::kOk);
    CHECK(episode.steps[1].tool == "incr");
    CHECK_FALSE(episode.summary.outcome.has_value());  // still open
  }

  TEST_CASE("Stop closes idle keep-alive connections and WaitIdle reports no request in flight") {
    TransportFixture fixture;
    RawConnection idle(fixture.port());
    REQUIRE(idle.Send(HttpRequestText("POST", "/rpc", RpcText("ping"))));
    REQUIRE(idle.ReadResponse().has_value());
    CHECK(fixture.server->WaitIdle(std::chrono::seconds(5)));
    fixture.server->BeginDrain();
    fixture.server->Stop();
    CHECK(idle.WaitForClose());
    fixture.server->Stop();  // idempotent
  }
}

}  // namespace
}  // namespace envforge::server::testing
