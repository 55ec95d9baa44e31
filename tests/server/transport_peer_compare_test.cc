// The aiohttp peer (bench/peers/aiohttp_env_server.py) and `envforge bench serve --compare`, as a
// user runs them: the peer on an ephemeral port over a packed trip_planning bundle, loaded by bench
// serve over WebSocket and HTTP; a small comparison against a real `envforge serve` beside it; and
// --compare with --chaos refused. The tests that start the peer skip, saying why, when
// /usr/bin/python3 has no aiohttp.
#include <doctest/doctest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/subprocess.h"
#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {
namespace {

const char* const kPython = "/usr/bin/python3";  // Debian's, with python3-aiohttp; never a pyenv one

std::string SourceDir() { return ENVFORGE_TEST_SOURCE_DIR; }

// Why the peer cannot run here, or nullopt when it can.
std::optional<std::string> AiohttpMissing() {
  auto probe = RunCommand({kPython, "-c", "import aiohttp"});
  if (!probe.ok()) return "cannot run " + std::string(kPython) + ": " + probe.status().message();
  if (probe->exit_code != 0) return std::string(kPython) + " has no aiohttp (apt-get install python3-aiohttp)";
  return std::nullopt;
}

// A server started as a child process that writes its port to `port_file` once listening.
struct ServerChild {
  ServerChild(const std::vector<std::string>& argv, const std::string& port_file, const std::string& stderr_path) {
    child.emplace(argv, stderr_path);
    bool listening = WaitFor([&] { return ReadFileToString(port_file).ok(); }, std::chrono::seconds(60));
    INFO(child->StderrText());
    REQUIRE(listening);
    port = static_cast<uint16_t>(std::stoi(*ReadFileToString(port_file)));
  }

  // The URL bench serve takes for `transport` (ws or http).
  std::string Url(const std::string& transport) const {
    std::string address = "127.0.0.1:" + std::to_string(port);
    return transport == "ws" ? "ws://" + address + "/ws" : "http://" + address;
  }

  // SIGTERM, then the exit status (nullopt when still running after 60 s).
  std::optional<int> Stop() {
    child->Signal(SIGTERM);
    return child->Wait(std::chrono::seconds(60));
  }

  std::optional<ChildProcess> child;
  uint16_t port = 0;
};

// A directory with data/envs/trip_planning packed into envs/, and the servers over it.
struct TripPlanning {
  TripPlanning() {
    std::filesystem::create_directories(dir / "envs");
    auto packed = RunCommand(
        {Envforge(), "env", "pack", SourceDir() + "/data/envs/trip_planning", "-o", dir / "envs/trip_planning.envdb"});
    REQUIRE(packed.ok());
    INFO(packed->stderr_text);
    REQUIRE(packed->exit_code == 0);
  }

  ServerChild StartPeer() {
    return ServerChild({kPython, SourceDir() + "/bench/peers/aiohttp_env_server.py", "--envs", dir / "envs", "--port",
                        "0", "--port-file", dir / "peer.port"},
                       dir / "peer.port", dir / "peer.stderr");
  }

  ServerChild StartEnvforge() {
    return ServerChild({Envforge(), "serve", "--envs", dir / "envs", "--port", "0", "--port-file", dir / "serve.port"},
                       dir / "serve.port", dir / "serve.stderr");
  }

  TempDir dir;
};

// `envforge bench serve` of trip_planning's cheapest_rated_hotel (get_all_cities, like
// scripts/demo.sh) with `extra` options; the JSON report.
Json BenchServe(const std::vector<std::string>& extra, int sessions, int steps) {
  std::vector<std::string> argv = {Envforge(),
                                   "bench",
                                   "serve",
                                   "--env",
                                   "trip_planning",
                                   "--task",
                                   "cheapest_rated_hotel",
                                   "--tool",
                                   "get_all_cities",
                                   "--sessions",
                                   std::to_string(sessions),
                                   "--steps",
                                   std::to_string(steps),
                                   "--concurrency",
                                   "4",
                                   "--json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  CommandOptions options;
  options.timeout = std::chrono::seconds(180);
  auto bench = RunCommand(argv, options);
  REQUIRE(bench.ok());
  INFO(bench->stderr_text, bench->stdout_text);
  REQUIRE(bench->exit_code == 0);
  auto report = ParseJson(bench->stdout_text);
  REQUIRE(report.ok());
  return *report;
}

// Every episode of a bench serve report created, played to its end and closed, without an error.
void CheckEveryEpisodeCompleted(const Json& report, int sessions, int steps) {
  INFO(report.dump(2));
  CHECK(report["sessions"]["created"] == sessions);
  CHECK(report["sessions"]["closed"] == sessions);
  CHECK(report["tool_calls"] == sessions * steps);
  CHECK(report["tool_outcomes"] == Json{{"ok", sessions * steps}});
  CHECK(report["errors"].empty());
  CHECK(report["latency_ms"]["session/submit"]["n"] == sessions);
  CHECK(report["calls_per_s"].get<double>() > 0);
}

TEST_SUITE("server.transport.peer") {
  TEST_CASE("the aiohttp peer serves bench serve's episodes over WebSocket and HTTP, then stops on SIGTERM") {
    if (auto missing = AiohttpMissing()) {
      MESSAGE("skipped: " << *missing);
      return;
    }
    TripPlanning envs;
    ServerChild peer = envs.StartPeer();
    for (const std::string transport : {"ws", "http"}) {
      CAPTURE(transport);
      Json report = BenchServe({"--url", peer.Url(transport), "--transport", transport}, 12, 5);
      CHECK(report["transport"] == transport);
      CheckEveryEpisodeCompleted(report, 12, 5);
    }
    auto exit_code = peer.Stop();
    INFO(peer.child->StderrText());
    REQUIRE(exit_code.has_value());
    CHECK(*exit_code == 0);
  }

  TEST_CASE("bench serve --compare: one JSON object with both reports and positive ratios") {
    if (auto missing = AiohttpMissing()) {
      MESSAGE("skipped: " << *missing);
      return;
    }
    TripPlanning envs;
    ServerChild envforge = envs.StartEnvforge();
    ServerChild peer = envs.StartPeer();
    Json comparison = BenchServe({"--url", envforge.Url("ws"), "--compare", peer.Url("ws")}, 8, 4);
    INFO(comparison.dump(2));
    CHECK(comparison["envforge"]["url"] == envforge.Url("ws"));
    CHECK(comparison["peer"]["url"] == peer.Url("ws"));
    for (const char* side : {"envforge", "peer"}) {
      CAPTURE(side);
      CheckEveryEpisodeCompleted(comparison[side], 8, 4);
      CHECK(comparison[side]["tool"] == "get_all_cities");
    }
    const Json& ratios = comparison["ratios"];
    for (const char* key :
         {"calls_per_s_envforge_over_peer", "tools_call_p50_peer_over_envforge", "tools_call_p99_peer_over_envforge",
          "session_create_p50_peer_over_envforge", "session_create_p99_peer_over_envforge"}) {
      CAPTURE(key);
      REQUIRE(ratios.contains(key));
      REQUIRE(ratios[key].is_number());
      CHECK(ratios[key].get<double>() > 0);
    }
    for (ServerChild* server : {&envforge, &peer}) {
      auto exit_code = server->Stop();
      REQUIRE(exit_code.has_value());
      CHECK(*exit_code == 0);
    }
  }

  TEST_CASE("bench serve --compare with --chaos is a usage error (exit 2), before any connection") {
    auto bench = RunCommand({Envforge(), "bench", "serve", "--url", "http://127.0.0.1:1", "--compare",
                             "http://127.0.0.1:2", "--env", "trip_planning", "--task", "t", "--chaos"});
    REQUIRE(bench.ok());
    INFO(bench->stderr_text);
    CHECK(bench->exit_code == 2);
    CHECK(Contains(bench->stderr_text, "--chaos"));
    CHECK(Contains(bench->stderr_text, "--compare"));
    auto help = RunCommand({Envforge(), "bench", "serve", "--help"});
    REQUIRE(help.ok());
    CHECK(Contains(help->stdout_text, "--compare URL"));
  }
}

}  // namespace
}  // namespace envforge::server::testing
