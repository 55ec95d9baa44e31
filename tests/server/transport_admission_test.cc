// What the HTTP server refuses before serving anyone, over real sockets: foreign Origins (403),
// non-JSON POST bodies (415), requests without the token (401 on the header, body unread), slow
// unauthenticated headers, and the connection bounds that keep room for authorized clients.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {
namespace {

constexpr const char* kToken = "s3cret";
const std::string kAuthorization = std::string("Authorization: Bearer ") + kToken;

// One request on a fresh connection; the response (nullopt when none came).
std::optional<RawResponse> RequestOnce(uint16_t port, const std::string& text, RawConnection** kept = nullptr) {
  auto connection = std::make_unique<RawConnection>(port);
  REQUIRE(connection->Send(text));
  auto response = connection->ReadResponse();
  if (kept != nullptr) *kept = connection.release();
  return response;
}

std::string WsUpgradeText(const std::vector<std::string>& headers) {
  std::string text =
      "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";
  for (const auto& header : headers) text += header + "\r\n";
  return text + "\r\n";
}

// The value of a counter series in the server's Prometheus text (0 when absent).
double CounterValue(TransportFixture& fixture, const std::string& series) {
  std::string text = fixture.service().metrics().RenderPrometheus();
  size_t at = text.find(series + " ");
  if (at == std::string::npos) return 0;
  return std::stod(text.substr(at + series.size() + 1));
}

TEST_SUITE("server.transport.admission") {
  TEST_CASE(
      "a foreign Origin gets 403 naming it on every route and on the WebSocket upgrade; loopback and allowed origins "
      "pass") {
    HttpServerOptions options;
    options.token = kToken;
    options.allowed_origins = {"https://App.Example.com/"};
    TransportFixture fixture(options);
    for (const std::string& origin :
         {std::string("https://evil.example"), std::string("null"), std::string("http://localhost.evil.example"),
          std::string("https://app.example.com:444")}) {
      CAPTURE(origin);
      RawConnection connection(fixture.port());
      REQUIRE(connection.Send(HttpRequestText("POST", "/rpc", RpcText("ping"), {kAuthorization, "Origin: " + origin})));
      auto response = connection.ReadResponse();
      REQUIRE(response.has_value());
      CHECK(response->status == 403);
      CHECK(Contains(response->body, origin));
      CHECK(connection.WaitForClose());
    }
    // Every route: /health and the upgrade too (browsers send Origin on WebSocket upgrades, which
    // no CORS rule protects).
    auto health = RequestOnce(fixture.port(), HttpRequestText("GET", "/health", "", {"Origin: https://evil.example"}));
    REQUIRE(health.has_value());
    CHECK(health->status == 403);
    auto upgrade = RequestOnce(fixture.port(), WsUpgradeText({kAuthorization, "Origin: https://evil.example"}));
    REQUIRE(upgrade.has_value());
    CHECK(upgrade->status == 403);

    for (const std::string& origin :
         {std::string("http://localhost:3000"), std::string("https://127.0.0.1"), std::string("http://[::1]:8080"),
          std::string("HTTP://LOCALHOST"), std::string("https://app.example.com")}) {
      CAPTURE(origin);
      auto response = RequestOnce(
          fixture.port(), HttpRequestText("POST", "/rpc", RpcText("ping"), {kAuthorization, "Origin: " + origin}));
      REQUIRE(response.has_value());
      CHECK(response->status == 200);
    }
    auto allowed_upgrade =
        RequestOnce(fixture.port(), WsUpgradeText({kAuthorization, "Origin: http://localhost:5173"}));
    REQUIRE(allowed_upgrade.has_value());
    CHECK(allowed_upgrade->status == 101);
    // No Origin at all (every non-browser client): served.
    auto plain = RequestOnce(fixture.port(), HttpRequestText("POST", "/rpc", RpcText("ping"), {kAuthorization}));
    REQUIRE(plain.has_value());
    CHECK(plain->status == 200);
  }

  TEST_CASE("an allowed origin that is not scheme://host[:port] is refused at Create") {
    ServiceFixture service;
    for (const std::string& origin :
         {std::string("example.com"), std::string("https://example.com/path"), std::string("*")}) {
      CAPTURE(origin);
      HttpServerOptions options;
      options.allowed_origins = {origin};
      auto server = HttpServer::Create(*service.service, options);
      REQUIRE_FALSE(server.ok());
      CHECK(server.status().code() == StatusCode::kInvalidArgument);
      CHECK(Contains(server.status().message(), origin));
    }
  }

  TEST_CASE("POST /rpc and /mcp need Content-Type application/json: anything else gets 415 at once and a close") {
    TransportFixture fixture;
    std::string body = RpcText("ping");
    auto Post = [&](const std::string& path, const std::string& content_type) {
      std::string text = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
      if (!content_type.empty()) text += "Content-Type: " + content_type + "\r\n";
      return text + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    };
    for (const std::string& path : {std::string("/rpc"), std::string("/mcp")}) {
      for (const std::string& content_type :
           {std::string("text/plain"), std::string(""), std::string("application/x-www-form-urlencoded"),
            std::string("application/jsonp")}) {
        CAPTURE(path);
        CAPTURE(content_type);
        RawConnection connection(fixture.port());
        REQUIRE(connection.Send(Post(path, content_type)));
        auto response = connection.ReadResponse();
        REQUIRE(response.has_value());
        CHECK(response->status == 415);
        CHECK(Contains(response->body, "application/json"));
        CHECK(connection.WaitForClose());
      }
    }
    for (const std::string& content_type :
         {std::string("application/json"), std::string("Application/JSON; charset=utf-8")}) {
      CAPTURE(content_type);
      auto response = RequestOnce(fixture.port(), Post("/rpc", content_type));
      REQUIRE(response.has_value());
      CHECK(response->status == 200);
    }
  }

  TEST_CASE("a request without the token is answered 401 on its header, its body never read, then closed") {
    TransportFixture fixture(HttpServerOptions{.token = kToken});
    RawConnection connection(fixture.port());
    // 16 MiB announced; not one byte of it is sent: the answer must come anyway.
    REQUIRE(connection.Send(
        "POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 16777216\r\n\r\n"));
    auto response = connection.ReadResponse(std::chrono::seconds(10));
    REQUIRE(response.has_value());
    CHECK(response->status == 401);
    CHECK(ParseJson(response->body).value()["error"]["code"] == -32005);
    CHECK(connection.WaitForClose());
    // The WebSocket upgrade is judged on its own headers the same way.
    auto upgrade = RequestOnce(fixture.port(), WsUpgradeText({"Authorization: Bearer wrong"}));
    REQUIRE(upgrade.has_value());
    CHECK(upgrade->status == 401);
  }

  TEST_CASE("an unauthenticated connection must send its header within header_timeout; an authenticated one may idle") {
    HttpServerOptions options;
    options.token = kToken;
    options.header_timeout = std::chrono::milliseconds(300);
    TransportFixture fixture(options);
    RawConnection silent(fixture.port());
    RawConnection trickling(fixture.port());
    REQUIRE(trickling.Send("POST /rpc HTTP/1.1\r\nHost: x\r\n"));  // half a header, then nothing
    RawConnection authorized(fixture.port());
    REQUIRE(authorized.Send(HttpRequestText("POST", "/rpc", RpcText("ping"), {kAuthorization})));
    REQUIRE(authorized.ReadResponse().has_value());
    CHECK(silent.WaitForClose(std::chrono::seconds(10)));
    CHECK(silent.pending().empty());
    CHECK(trickling.WaitForClose(std::chrono::seconds(10)));
    CHECK(trickling.pending().empty());
    // The authorized connection outlived the header timeout and still serves.
    CHECK(authorized.StaysOpen(std::chrono::milliseconds(600)));
    REQUIRE(authorized.Send(HttpRequestText("POST", "/rpc", RpcText("ping", Json::object(), 2), {kAuthorization})));
    auto second = authorized.ReadResponse();
    REQUIRE(second.has_value());
    CHECK(second->status == 200);
  }

  TEST_CASE(
      "idle unauthenticated connections past the bounds are evicted oldest first; an authorized client still gets in") {
    HttpServerOptions options;
    options.token = kToken;
    options.max_connections = 16;
    options.max_unauthenticated_connections = 4;
    options.max_unauthenticated_per_peer = 2;
    TransportFixture fixture(options);

    // One peer past its bound: its oldest idle connection makes room.
    std::vector<std::unique_ptr<RawConnection>> peer_a;
    for (size_t i = 0; i < 2; ++i) {  // one at a time, so that "oldest" is well defined
      peer_a.push_back(std::make_unique<RawConnection>(fixture.port(), "127.0.0.2"));
      REQUIRE(WaitFor([&] { return fixture.server->open_connections() == i + 1; }, std::chrono::seconds(5)));
    }
    peer_a.push_back(std::make_unique<RawConnection>(fixture.port(), "127.0.0.2"));
    REQUIRE(WaitFor(
        [&] {
          return CounterValue(fixture, "envforge_transport_connections_refused_total{reason=\"peer_limit\"}") == 1;
        },
        std::chrono::seconds(5)));
    CHECK(peer_a[0]->WaitForClose(std::chrono::seconds(5)));
    CHECK(peer_a[0]->pending().empty());
    CHECK(peer_a[1]->StaysOpen(std::chrono::milliseconds(100)));
    CHECK(fixture.server->open_connections() == 2);

    // Other peers fill the unauthenticated pool (4): the oldest of all goes.
    std::vector<std::unique_ptr<RawConnection>> others;
    for (const char* source : {"127.0.0.3", "127.0.0.4"}) {
      others.push_back(std::make_unique<RawConnection>(fixture.port(), source));
      size_t expected = others.size() + 2;
      REQUIRE(WaitFor([&] { return fixture.server->open_connections() == expected; }, std::chrono::seconds(5)));
    }
    // The pool is full of idle sockets; an authorized client connects anyway and is served.
    for (int round = 0; round < 3; ++round) {
      RawConnection authorized(fixture.port());
      REQUIRE(authorized.Send(HttpRequestText("POST", "/rpc", RpcText("ping"), {kAuthorization})));
      auto response = authorized.ReadResponse();
      REQUIRE(response.has_value());
      CHECK(response->status == 200);
    }
    CHECK(peer_a[1]->WaitForClose(std::chrono::seconds(5)));  // the oldest idle one made room
    CHECK(CounterValue(fixture, "envforge_transport_connections_refused_total{reason=\"unauthenticated_limit\"}") >= 1);
    auto client = fixture.Client(fixture.WsUrl(), kToken);
    MustCall(*client, "ping");
  }

  TEST_CASE("at max_connections with every connection authenticated, a new one gets 503 with -32003 and a close") {
    HttpServerOptions options;
    options.token = kToken;
    options.max_connections = 2;
    options.max_unauthenticated_connections = 1;
    options.max_unauthenticated_per_peer = 1;
    TransportFixture fixture(options);
    std::vector<std::unique_ptr<RawConnection>> held;
    for (int i = 0; i < 2; ++i) {
      held.push_back(std::make_unique<RawConnection>(fixture.port()));
      REQUIRE(held.back()->Send(HttpRequestText("POST", "/rpc", RpcText("ping"), {kAuthorization})));
      REQUIRE(held.back()->ReadResponse().has_value());
    }
    RawConnection refused(fixture.port());
    auto response = refused.ReadResponse(std::chrono::seconds(10));  // answered before any request
    REQUIRE(response.has_value());
    CHECK(response->status == 503);
    Json error = ParseJson(response->body).value()["error"];
    CHECK(error["code"] == -32003);
    CHECK(error["data"]["retryable"] == true);
    CHECK(Contains(error["message"], "connection limit"));
    CHECK(refused.WaitForClose());
    CHECK(CounterValue(fixture, "envforge_transport_connections_refused_total{reason=\"connection_limit\"}") == 1);
    // A slot freed is a slot for the next client.
    held[0]->Close();
    REQUIRE(WaitFor([&] { return fixture.server->open_connections() == 1; }, std::chrono::seconds(5)));
    auto client = fixture.Client(fixture.HttpUrl(), kToken);
    MustCall(*client, "ping");
  }

  TEST_CASE("admission bounds out of order are refused at Create") {
    ServiceFixture service;
    HttpServerOptions options;
    options.max_connections = 10;
    options.max_unauthenticated_connections = 20;
    auto server = HttpServer::Create(*service.service, options);
    REQUIRE_FALSE(server.ok());
    CHECK(server.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(server.status().message(), "max_unauthenticated_connections (20)"));
  }
}

}  // namespace
}  // namespace envforge::server::testing
