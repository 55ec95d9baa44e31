// `envforge serve` and `envforge bench serve` as a user runs them: the real binary on an
// ephemeral port, SIGTERM draining, and a small chaos run whose reconciliation loses nothing.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "agents/trajectory_store.h"
#include "base/subprocess.h"
#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {
namespace {

std::string Envforge() { return ExecutableDirectory() + "/envforge"; }

// `envforge serve` over a directory holding the fixture environment, on an ephemeral port.
class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> extra = {}) {
    std::filesystem::create_directories(dir / "envs");
    sandbox::testing::WriteFixtureBundle(dir / "envs/fixture.envdb");
    trajectories = dir / "trajectories.sqlite";
    std::vector<std::string> argv = {Envforge(), "serve", "--envs", dir / "envs", "--port", "0", "--port-file", dir / "port",
                                     "--trajectories", trajectories, "--limits", R"({"wall_time_ms": 3000})"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child.emplace(argv, dir / "serve.stderr");
    bool listening = WaitFor([&] { return ReadFileToString(dir / "port").ok(); }, std::chrono::seconds(60));
    INFO(child->StderrText());
    REQUIRE(listening);
    port = static_cast<uint16_t>(std::stoi(*ReadFileToString(dir / "port")));
  }

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port); }

  TempDir dir;
  std::string trajectories;
  std::optional<ChildProcess> child;
  uint16_t port = 0;
};

TEST_SUITE("server.transport.cli") {
  TEST_CASE("envforge serve answers over HTTP and WebSocket and drains on SIGTERM: exit 0, every episode ended") {
    ServeProcess serve({"--token", "tok"});
    // stderr is read by a pipe reader; give it a moment to catch up with the port file.
    std::string listening = "listening on http://127.0.0.1:" + std::to_string(serve.port);
    for (int attempt = 0; attempt < 500 && !Contains(serve.child->StderrText(), listening); ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(Contains(serve.child->StderrText(), listening));
    RpcClientOptions options;
    options.token = "tok";
    auto http_client = RpcClient::Connect(serve.Url() + "/rpc", options);
    REQUIRE(http_client.ok());
    auto ws_client = RpcClient::Connect("ws://127.0.0.1:" + std::to_string(serve.port) + "/ws", options);
    REQUIRE(ws_client.ok());
    std::vector<std::string> trajectories;
    std::vector<std::string> open_sessions;
    for (RpcClient* client : {http_client->get(), ws_client->get()}) {
      Json created = MustCall(*client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
      trajectories.push_back(created["trajectory"]);
      std::string session = created["session"];
      CHECK(MustCall(*client, "tools/call", Json{{"session", session}, {"name", "add"}, {"arguments", {{"a", 1}, {"b", 2}}}})["content"] == 3);
      open_sessions.push_back(session);
    }
    // The first is submitted and closed; the second is left open for the shutdown to end.
    CHECK(MustCall(**http_client, "session/submit", Json{{"session", open_sessions[0]}, {"answer", "5"}})["passed"] == true);
    MustCall(**http_client, "session/close", Json{{"session", open_sessions[0]}});

    serve.child->Signal(SIGTERM);
    auto exit_code = serve.child->Wait(std::chrono::seconds(60));
    INFO(serve.child->StderrText());
    REQUIRE(exit_code.has_value());
    CHECK(*exit_code == 0);
    auto reader = agents::TrajectoryReader::Open(serve.trajectories);
    REQUIRE(reader.ok());
    auto counts = (*reader)->Count();
    REQUIRE(counts.ok());
    CHECK(counts->episodes == 2);
    CHECK(counts->open_episodes == 0);
    auto first = (*reader)->Get(trajectories[0]);
    REQUIRE(first.ok());
    CHECK(first->summary.outcome == agents::EpisodeOutcome::kSubmitted);
    auto second = (*reader)->Get(trajectories[1]);
    REQUIRE(second.ok());
    CHECK(second->summary.outcome == agents::EpisodeOutcome::kShutdown);
    CHECK(second->steps.size() == 1);
  }

  TEST_CASE("envforge serve refuses bad usage with exit code 2") {
    auto missing = RunCommand({Envforge(), "serve"});
    REQUIRE(missing.ok());
    CHECK(missing->exit_code == 2);
    CHECK(Contains(missing->stderr_text, "--envs"));
    auto unknown = RunCommand({Envforge(), "serve", "--envs", "/nonexistent", "--prot", "1"});
    REQUIRE(unknown.ok());
    CHECK(unknown->exit_code == 2);
    CHECK(Contains(unknown->stderr_text, "--prot"));
  }

  TEST_CASE("bench serve with chaos: the server stays up, killed episodes end crashed, nothing is lost") {
    ServeProcess serve;
    CommandOptions options;
    options.timeout = std::chrono::seconds(240);
    auto bench = RunCommand({Envforge(), "bench", "serve", "--url", serve.Url(), "--env", "manager_fixture", "--task", "sum_task",
                             "--sessions", "20", "--steps", "5", "--concurrency", "8", "--tool", "incr", "--answer", "5",
                             "--chaos", "--chaos-interval-ms", "20", "--chaos-drop-rate", "100", "--trajectories",
                             serve.trajectories, "--json"},
                            options);
    REQUIRE(bench.ok());
    INFO(bench->stderr_text, bench->stdout_text, serve.child->StderrText());
    REQUIRE(bench->exit_code == 0);
    Json report = ParseJson(bench->stdout_text).value();
    CHECK(report["lost"] == 0);
    const Json& reconciliation = report["reconciliation"];
    CHECK(reconciliation["episodes_started"] == report["sessions"]["created"]);
    CHECK(reconciliation["episodes_missing"] == 0);
    CHECK(reconciliation["episodes_open"] == 0);
    CHECK(report["sessions"]["created"].get<int>() >= 1);
    CHECK(report["latency_ms"]["tools/call"]["n"].get<int>() >= 1);
    CHECK(report["chaos"]["enabled"] == true);
    CHECK(Contains(report["chaos"]["kill_source"].get<std::string>(), "/proc"));
    // The server survived: it still answers.
    auto client = RpcClient::Connect(serve.Url());
    REQUIRE(client.ok());
    MustCall(**client, "ping");
    serve.child->Signal(SIGTERM);
    auto exit_code = serve.child->Wait(std::chrono::seconds(60));
    REQUIRE(exit_code.has_value());
    CHECK(*exit_code == 0);
  }
}

}  // namespace
}  // namespace envforge::server::testing
