// The stdio transport: one JSON-RPC message per line in, one answer per line out; malformed and
// oversized lines get errors without stopping the stream; end of input drains.
#include <doctest/doctest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "server/stdio_server.h"
#include "tests/server/service_test_util.h"

namespace envforge::server::testing {
namespace {

std::vector<Json> Lines(const std::string& text) {
  std::vector<Json> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto parsed = ParseJson(line);
    REQUIRE_MESSAGE(parsed.ok(), "not a JSON line: " << line);
    lines.push_back(*parsed);
  }
  return lines;
}

TEST_SUITE("server.stdio") {
  TEST_CASE("every request line is answered on its own line; malformed lines get errors; EOF drains" *
            doctest::timeout(60)) {
    ServiceFixture f;
    std::string session = f.Create()["session"];
    std::ostringstream script;
    script << R"({"jsonrpc":"2.0","id":1,"method":"ping"})"
           << "\n"
           << "this is not json\n"
           << "\n"
           << R"({"jsonrpc":"2.0","method":"ping"})"
           << "\n"
           << R"({"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"session":")" << session
           << R"(","name":"slow_echo","arguments":{"text":"late","seconds":0.2}}})"
           << "\r\n"
           << R"([{"jsonrpc":"2.0","id":3,"method":"envs/list"},{"jsonrpc":"2.0","id":4,"method":"nope"}])"
           << "\n"
           << R"({"jsonrpc":"1.0","id":5,"method":"ping"})";  // no final newline
    std::istringstream in(script.str());
    std::ostringstream out;
    Status served = RunStdioServer(*f.service, in, out);
    CHECK_MESSAGE(served.ok(), served.ToString());

    std::vector<Json> answers = Lines(out.str());
    INFO(out.str());
    REQUIRE(answers.size() == 5);
    std::map<std::string, Json> by_id;
    Json batch;
    for (const auto& answer : answers) {
      if (answer.is_array()) {
        batch = answer;
      } else {
        by_id[answer["id"].dump()] = answer;
      }
    }
    CHECK(by_id["1"]["result"] == Json::object());
    CHECK(by_id["null"]["error"]["code"] == -32700);
    CHECK(by_id["\"slow\""]["result"]["content"] == "late");
    CHECK(by_id["5"]["error"]["code"] == -32600);
    REQUIRE(batch.size() == 2);
    // The slow call was answered (its line is above) before RunStdioServer returned; the service
    // counts it done just after handing the answer over.
    CHECK(WaitFor([&] { return f.service->in_flight() == 0; }));
  }

  TEST_CASE("a line over the limit answers -32008 and the next line is served") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false});
    std::string big = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":")" + std::string(4096, 'x') + "\"}}";
    std::istringstream in(big + "\n" + R"({"jsonrpc":"2.0","id":2,"method":"ping"})" + "\n");
    std::ostringstream out;
    StdioServerOptions options;
    options.max_line_bytes = 1024;
    REQUIRE(RunStdioServer(*f.service, in, out, options).ok());
    std::vector<Json> answers = Lines(out.str());
    REQUIRE(answers.size() == 2);
    CHECK(answers[0]["error"]["code"] == -32008);
    CHECK(answers[0]["id"].is_null());
    CHECK(answers[1]["id"] == 2);
  }

  TEST_CASE("the MCP dialect over stdio") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false});
    std::istringstream in(
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{}}})"
        "\n"
        R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
        "\n");
    std::ostringstream out;
    StdioServerOptions options;
    options.dialect = Dialect::kMcp;
    REQUIRE(RunStdioServer(*f.service, in, out, options).ok());
    std::vector<Json> answers = Lines(out.str());
    REQUIRE(answers.size() == 1);
    CHECK(answers[0]["result"]["protocolVersion"] == "2025-03-26");
  }

  TEST_CASE("empty input returns at once") {
    ServiceFixture f(ServiceFixtureOptions{8, std::chrono::milliseconds(60'000), false});
    std::istringstream in("");
    std::ostringstream out;
    CHECK(RunStdioServer(*f.service, in, out).ok());
    CHECK(out.str().empty());
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::server::testing
