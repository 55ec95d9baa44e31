// `envforge serve` and `envforge bench serve` as a user runs them: the real binary on an
// ephemeral port, SIGTERM draining, and a small chaos run whose reconciliation loses nothing.
#include <doctest/doctest.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>

#include "agents/trajectory_store.h"
#include "base/subprocess.h"
#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {
namespace {

// server/stats over a connection of its own, closed by both sides once answered: the probe
// leaves nothing open that would keep the server's io threads busy.
std::optional<Json> ProbeStats(uint16_t port) {
  RawConnection probe(port);
  if (!probe.Send(HttpRequestText("POST", "/rpc", RpcText("server/stats"), {"Connection: close"}))) return std::nullopt;
  auto response = probe.ReadResponse();
  if (!response || response->status != 200) return std::nullopt;
  auto body = ParseJson(response->body);
  if (!body.ok() || !body->contains("result")) return std::nullopt;
  return (*body)["result"];
}

// A tools/call of slow_echo (`seconds` long) on a fresh session, running on its own thread; it
// returns once the server counts it in flight and the client's connection is the only one open.
struct SlowCallInFlight {
  std::string trajectory;
  std::future<Result<Json>> answer;
};

SlowCallInFlight StartSlowCall(RpcClient& client, uint16_t port, double seconds) {
  Json created = MustCall(client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
  SlowCallInFlight call;
  call.trajectory = created["trajectory"];
  std::string session = created["session"];
  call.answer = std::async(std::launch::async, [&client, session, seconds] {
    return client.Call("tools/call", Json{{"session", session},
                                          {"name", "slow_echo"},
                                          {"arguments", {{"text", "still here"}, {"seconds", seconds}}}});
  });
  // server/stats counts itself: a second request in flight is the slow call.
  bool in_flight = WaitFor(
      [&] {
        auto stats = ProbeStats(port);
        return stats && stats->value("in_flight", 0) >= 2;
      },
      std::chrono::seconds(20));
  REQUIRE(in_flight);
  // Let the server see the probe's connection end: the slow call's is then the only one, with no
  // I/O pending while its answer is computed.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return call;
}

// The call answered in full, then recorded: one step, slow_echo, ok, with its content.
void CheckAnsweredAndRecorded(ServeProcess& serve, SlowCallInFlight& call) {
  REQUIRE(call.answer.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  Result<Json> answer = call.answer.get();
  INFO(answer.status().ToString());
  REQUIRE(answer.ok());
  CHECK((*answer)["outcome"] == "ok");
  CHECK((*answer)["content"] == "still here");
  auto exit_code = serve.child->Wait(std::chrono::seconds(60));
  INFO(serve.child->StderrText());
  REQUIRE(exit_code.has_value());
  CHECK(*exit_code == 0);
  agents::Episode episode = serve.Episode(call.trajectory);
  REQUIRE(episode.steps.size() == 1);
  CHECK(episode.steps[0].tool == "slow_echo");
  CHECK(episode.steps[0].result.outcome == toolsets::Outcome::kOk);
  REQUIRE(episode.summary.outcome.has_value());
  CHECK(*episode.summary.outcome == agents::EpisodeOutcome::kShutdown);
}

TEST_SUITE("server.transport.cli") {
  TEST_CASE(
      "SIGTERM with a tool call in flight over HTTP: the client gets the answer and the trajectory has the call") {
    ServeProcess serve;
    auto client = RpcClient::Connect(serve.Url() + "/rpc");
    REQUIRE(client.ok());
    SlowCallInFlight call = StartSlowCall(**client, serve.port, 2);
    serve.child->Signal(SIGTERM);
    CheckAnsweredAndRecorded(serve, call);
  }

  TEST_CASE(
      "SIGTERM with a tool call in flight over WebSocket: the client gets the answer and the trajectory has the call") {
    ServeProcess serve;
    auto client = RpcClient::Connect("ws://127.0.0.1:" + std::to_string(serve.port) + "/ws");
    REQUIRE(client.ok());
    SlowCallInFlight call = StartSlowCall(**client, serve.port, 2);
    serve.child->Signal(SIGTERM);
    CheckAnsweredAndRecorded(serve, call);
  }

  TEST_CASE(
      "SIGTERM with a tool call in flight over stdio: its answer line is written and the trajectory has the call") {
    TempDir dir;
    std::filesystem::create_directories(dir / "envs");
    sandbox::testing::WriteFixtureBundle(dir / "envs/fixture.envdb");
    std::string trajectories = dir / "trajectories.sqlite";
    ChildProcess child({Envforge(), "serve", "--stdio", "--envs", dir / "envs", "--trajectories", trajectories,
                        "--limits", R"({"wall_time_ms": 3000})"},
                       dir / "serve.stderr", dir / "serve.stdout");
    auto AnswerWithId = [&](int id) -> std::optional<Json> {
      auto text = ReadFileToString(dir / "serve.stdout");
      if (!text.ok()) return std::nullopt;
      size_t start = 0;
      while (start < text->size()) {
        size_t end = text->find('\n', start);
        if (end == std::string::npos) break;  // a line not yet whole
        auto line = ParseJson(text->substr(start, end - start));
        if (line.ok() && line->value("id", -1) == id) return *line;
        start = end + 1;
      }
      return std::nullopt;
    };
    REQUIRE(
        child.WriteStdin(RpcText("session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}}, 1) + "\n"));
    REQUIRE(WaitFor([&] { return AnswerWithId(1).has_value(); }, std::chrono::seconds(60)));
    Json created = (*AnswerWithId(1))["result"];
    REQUIRE(child.WriteStdin(RpcText("tools/call",
                                     Json{{"session", created["session"]},
                                          {"name", "slow_echo"},
                                          {"arguments", {{"text", "still here"}, {"seconds", 1.5}}}},
                                     2) +
                             "\n"));
    REQUIRE(child.WriteStdin(RpcText("server/stats", Json::object(), 3) + "\n"));
    REQUIRE(WaitFor([&] { return AnswerWithId(3).has_value(); }, std::chrono::seconds(20)));
    CHECK((*AnswerWithId(3))["result"]["in_flight"].get<int>() >= 2);  // the slow call is running
    child.Signal(SIGTERM);
    auto exit_code = child.Wait(std::chrono::seconds(60));
    INFO(child.StderrText());
    REQUIRE(exit_code.has_value());
    CHECK(*exit_code == 0);
    auto answer = AnswerWithId(2);
    REQUIRE(answer.has_value());
    CHECK((*answer)["result"]["outcome"] == "ok");
    CHECK((*answer)["result"]["content"] == "still here");
    auto reader = agents::TrajectoryReader::Open(trajectories);
    REQUIRE(reader.ok());
    auto episode = (*reader)->Get(created["trajectory"].get<std::string>());
    REQUIRE(episode.ok());
    REQUIRE(episode->steps.size() == 1);
    CHECK(episode->steps[0].tool == "slow_echo");
  }

  TEST_CASE("envforge serve --help lists the transport's bounds; bounds out of order are a usage error") {
    auto help = RunCommand({Envforge(), "serve", "--help"});
    REQUIRE(help.ok());
    CHECK(help->exit_code == 0);
    for (const char* flag : {"--max-connections", "--max-unauthenticated", "--max-unauthenticated-per-peer",
                             "--header-timeout-ms", "--allow-origin"}) {
      CAPTURE(flag);
      CHECK(Contains(help->stdout_text, flag));
    }
    auto inverted = RunCommand(
        {Envforge(), "serve", "--envs", "/nonexistent", "--max-connections", "10", "--max-unauthenticated", "20"});
    REQUIRE(inverted.ok());
    CHECK(inverted->exit_code == 2);
    CHECK(Contains(inverted->stderr_text, "--max-unauthenticated"));
    auto bad_origin = RunCommand({Envforge(), "serve", "--envs", "/nonexistent", "--allow-origin", "example.com/path"});
    REQUIRE(bad_origin.ok());
    CHECK(bad_origin->exit_code == 2);
  }

  TEST_CASE("envforge serve --io-threads N serves on N network threads; 0 is a usage error") {
    ServeProcess serve({"--io-threads", "3"});
    std::string listening = "), 3 network threads";
    for (int attempt = 0; attempt < 500 && !Contains(serve.child->StderrText(), listening); ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(Contains(serve.child->StderrText(), listening));
    auto stats = ProbeStats(serve.port);
    REQUIRE(stats.has_value());
    auto zero = RunCommand({Envforge(), "serve", "--envs", "/nonexistent", "--io-threads", "0"});
    REQUIRE(zero.ok());
    CHECK(zero->exit_code == 2);
    CHECK(Contains(zero->stderr_text, "--io-threads"));
  }

  TEST_CASE("envforge serve: a foreign Origin is refused, a repeated --allow-origin is honoured") {
    ServeProcess serve({"--allow-origin", "https://a.example", "--allow-origin", "https://b.example"});
    for (const auto& [origin, status] : std::vector<std::pair<std::string, int>>{
             {"https://a.example", 200}, {"https://b.example", 200}, {"https://c.example", 403}}) {
      CAPTURE(origin);
      RawConnection connection(serve.port);
      REQUIRE(connection.Send(HttpRequestText("POST", "/rpc", RpcText("ping"), {"Origin: " + origin})));
      auto response = connection.ReadResponse();
      REQUIRE(response.has_value());
      CHECK(response->status == status);
    }
  }

  TEST_CASE("envforge serve answers over HTTP and WebSocket and drains on SIGTERM: exit 0, every episode ended") {
    ServeProcess serve({"--token", "tok"});
    // stderr is read by a pipe reader; give it a moment to catch up with the port file.
    std::string listening = "listening on http://127.0.0.1:" + std::to_string(serve.port);
    for (int attempt = 0; attempt < 500 && !Contains(serve.child->StderrText(), listening); ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(Contains(serve.child->StderrText(), listening));
    // --io-threads defaults to one network thread per two usable cores, at least one.
    cpu_set_t usable;
    CPU_ZERO(&usable);
    REQUIRE(sched_getaffinity(0, sizeof usable, &usable) == 0);
    const int threads = std::max(1, CPU_COUNT(&usable) / 2);
    CHECK(Contains(serve.child->StderrText(),
                   "), " + std::to_string(threads) + (threads == 1 ? " network thread," : " network threads,")));
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
      CHECK(MustCall(*client, "tools/call",
                     Json{{"session", session}, {"name", "add"}, {"arguments", {{"a", 1}, {"b", 2}}}})["content"] == 3);
      open_sessions.push_back(session);
    }
    // The first is submitted and closed; the second is left open for the shutdown to end.
    CHECK(MustCall(**http_client, "session/submit", Json{{"session", open_sessions[0]}, {"answer", "5"}})["passed"] ==
          true);
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
    auto prewarm_nothing =
        RunCommand({Envforge(), "serve", "--envs", "/nonexistent", "--prewarm", "--warm-sessions", "0"});
    REQUIRE(prewarm_nothing.ok());
    CHECK(prewarm_nothing->exit_code == 2);
    CHECK(Contains(prewarm_nothing->stderr_text, "--prewarm fills the warm pools: it needs --warm-sessions 1 or more"));
  }

  TEST_CASE("serve --prewarm: the pools are full before the port is written, and the first creates fork nothing") {
    ServeProcess serve({"--prewarm", "--warm-sessions", "8"});
    CHECK(Contains(serve.child->StderrText(), "prewarmed 1 environments: 8 of 8 warm sessions ready"));
    auto stats = ProbeStats(serve.port);
    REQUIRE(stats.has_value());
    CHECK((*stats)["manager"]["zygote_starts"].get<int>() >= 1);
    CHECK((*stats)["manager"]["warm_ready"] == 8);
    CHECK((*stats)["sessions"]["created"] == 0);

    auto client = RpcClient::Connect(serve.Url() + "/rpc");
    REQUIRE(client.ok());
    std::vector<std::string> sessions;
    for (int i = 0; i < 8; ++i) {
      Json created = MustCall(**client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
      sessions.push_back(created["session"]);
    }
    stats = ProbeStats(serve.port);
    REQUIRE(stats.has_value());
    const Json& manager = (*stats)["manager"];
    INFO("manager stats: ", manager.dump());
    CHECK(manager["warm_missed"] == 0);
    CHECK(manager["warm_taken"] == 8);
    for (const std::string& session : sessions) {
      Json verdict = MustCall(**client, "session/submit", Json{{"session", session}, {"answer", "5"}});
      CHECK(verdict["passed"] == true);
    }
  }

  TEST_CASE("serve --max-running-calls: calls past the bound wait their turn, every episode is answered") {
    ServeProcess serve({"--max-running-calls", "2"});
    CommandOptions options;
    options.timeout = std::chrono::seconds(120);
    auto bench = RunCommand(BenchServeFixture(serve.Url(), 24, 4, 8, {}), options);
    REQUIRE(bench.ok());
    INFO(bench->stderr_text, bench->stdout_text, serve.child->StderrText());
    REQUIRE(bench->exit_code == 0);
    Json report = ParseJson(bench->stdout_text).value();
    CHECK(report["episode_ends"].value("submitted", 0) == 24);
    CHECK(report["latency_ms"]["tools/call"]["n"] == 24 * 4);
    CHECK(report["tool_outcomes"].value("ok", 0) == 24 * 4);
    auto stats = ProbeStats(serve.port);
    REQUIRE(stats.has_value());
    CHECK((*stats)["manager"]["calls_gated"].get<int>() > 0);
    CHECK((*stats)["manager"]["calls_waiting"] == 0);
  }

  TEST_CASE("bench serve with chaos: the server stays up, killed episodes end crashed, nothing is lost") {
    ServeProcess serve;
    CommandOptions options;
    options.timeout = std::chrono::seconds(240);
    auto bench = RunCommand(BenchServeFixture(serve.Url(), 20, 5, 8,
                                              {"--chaos", "--chaos-interval-ms", "20", "--chaos-drop-rate", "100",
                                               "--trajectories", serve.trajectories}),
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

  TEST_CASE("10,000 idle connections: the server bounds what they hold while an authorized load runs untouched") {
    // Up to 10,000, within the descriptor limit the server and the bench inherit (raised to the
    // hard limit here): each idle connection costs the bench a descriptor, and the server one
    // until it closes it.
    rlimit files{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &files) == 0);
    files.rlim_cur = files.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &files);
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &files) == 0);
    const long long idle = std::min<long long>(10'000, static_cast<long long>(files.rlim_cur) - 1'000);
    if (idle < 2'000) {
      MESSAGE("skipped: a descriptor limit of " << files.rlim_cur << " leaves too few for the flood");
      return;
    }
    const long long max_connections = idle + 2'000;
    ServeProcess serve({"--max-connections", std::to_string(max_connections)});
    CommandOptions options;
    options.timeout = std::chrono::seconds(240);
    auto bench = RunCommand(BenchServeFixture(serve.Url(), 60, 5, 12,
                                              {"--idle-connections", std::to_string(idle), "--idle-peers", "40",
                                               "--trajectories", serve.trajectories}),
                            options);
    REQUIRE(bench.ok());
    INFO(bench->stderr_text, bench->stdout_text, serve.child->StderrText());
    REQUIRE(bench->exit_code == 0);
    Json report = ParseJson(bench->stdout_text).value();
    // The authorized clients: every episode submitted, nothing lost.
    CHECK(report["errors"].empty());
    CHECK(report["lost"] == 0);
    CHECK(report["episode_ends"].value("submitted", 0) == 60);
    const Json& flood = report["idle_flood"];
    CHECK(flood["flood_before_load"]["connected"] == idle);
    // The server keeps at most max_connections / 4 unauthenticated connections (the oldest go):
    // its descriptors stay bounded however many the flood opened. Read after the load, so that a
    // slow machine has had time to sort the flood out.
    const long long kept = max_connections / 4;
    CHECK(flood["flood_after_load"]["closed_by_server"].get<long long>() >= idle - kept);
    CHECK(flood["server_after_load"]["fds"].get<long long>() <= kept + 500);
    CHECK(flood["server_after_load"]["rss_kb"].get<long long>() <
          flood["server_before"]["rss_kb"].get<long long>() + 200 * 1024);
  }

  TEST_CASE("SIGKILL right after the answers: every answered verdict and close is on disk, steps and all") {
    ServeProcess serve;
    auto client = RpcClient::Connect(serve.Url() + "/rpc");
    REQUIRE(client.ok());
    struct Played {
      std::string trajectory;
      bool submitted = false;  // else closed
      bool passed = false;
    };
    std::vector<Played> played;
    for (int episode = 0; episode < 6; ++episode) {
      Json created = MustCall(**client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
      const std::string session = created["session"];
      Played one{created["trajectory"], episode % 3 != 2};
      MustCall(**client, "tools/call", Json{{"session", session}, {"name", "echo"}, {"arguments", {{"text", "a"}}}});
      MustCall(**client, "tools/call", Json{{"session", session}, {"name", "echo"}, {"arguments", {{"text", "b"}}}});
      if (one.submitted) {
        Json verdict =
            MustCall(**client, "session/submit", Json{{"session", session}, {"answer", episode % 2 ? "5" : "4"}});
        one.passed = verdict["passed"].get<bool>();
      } else {
        CHECK(MustCall(**client, "session/close", Json{{"session", session}})["closed"] == true);
      }
      played.push_back(one);
    }
    // The store's flush interval is 50 ms: without the commit before the answer, the last episode
    // at least would still be in its queue now.
    serve.child->Signal(SIGKILL);
    REQUIRE(serve.child->Wait(std::chrono::seconds(30)).has_value());
    for (const Played& one : played) {
      CAPTURE(one.trajectory);
      agents::Episode episode = serve.Episode(one.trajectory);
      REQUIRE(episode.summary.outcome.has_value());
      CHECK(episode.steps.size() == (one.submitted ? 3u : 2u));
      if (one.submitted) {
        CHECK(*episode.summary.outcome == agents::EpisodeOutcome::kSubmitted);
        REQUIRE(episode.summary.verdict.has_value());
        CHECK((*episode.summary.verdict)["passed"] == one.passed);
      } else {
        CHECK(*episode.summary.outcome == agents::EpisodeOutcome::kClosed);
      }
    }
  }

  TEST_CASE(
      "served verdicts: judge processes kept per task by default, closed when idle; --judgements-per-judge 1: a "
      "fresh one each") {
    for (bool fresh : {false, true}) {
      CAPTURE(fresh);
      ServeProcess serve(fresh ? std::vector<std::string>{"--judgements-per-judge", "1"}
                               : std::vector<std::string>{"--idle-judge-seconds", "1"});
      CommandOptions options;
      options.timeout = std::chrono::seconds(120);
      auto bench =
          RunCommand(BenchServeFixture(serve.Url(), 30, 2, 6, {"--trajectories", serve.trajectories}), options);
      REQUIRE(bench.ok());
      INFO(bench->stderr_text, bench->stdout_text, serve.child->StderrText());
      REQUIRE(bench->exit_code == 0);
      Json report = ParseJson(bench->stdout_text).value();
      CHECK(report["lost"] == 0);
      CHECK(report["episode_ends"].value("submitted", 0) == 30);
      // Each episode's first call is reported apart too (2 calls each: 60 in all, 30 first ones).
      CHECK(report["latency_ms"]["tools/call"]["n"] == 60);
      CHECK(report["first_tool_call_ms"]["n"] == 30);
      CHECK(report["first_tool_call_ms"]["max"].get<double>() <=
            report["latency_ms"]["tools/call"]["max"].get<double>());
      auto stats = ProbeStats(serve.port);
      REQUIRE(stats.has_value());
      int kept = (*stats)["manager"]["judgements_in_kept_process"].get<int>();
      // 30 verdicts of one task, 6 at a time: at most 6 of them need a process of their own.
      if (fresh) {
        CHECK(kept == 0);
        CHECK((*stats)["manager"]["idle_judges"] == 0);
      } else {
        CHECK(kept >= 24);
        // Idle for a second: every kept judge process closes.
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while ((*stats)["manager"]["idle_judges"] != 0 && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          stats = ProbeStats(serve.port);
          REQUIRE(stats.has_value());
        }
        CHECK((*stats)["manager"]["idle_judges"] == 0);
        CHECK((*stats)["manager"]["idle_judges_closed"].get<int>() >= 1);
      }
    }
  }

  TEST_CASE("bench burst: every round's creates answered, the sessions closed, warm sessions used") {
    ServeProcess serve;
    // The warm pool starts with the environment's first create and fills in the background:
    // full before the first burst, so that no create of it forks.
    {
      auto client = RpcClient::Connect(serve.Url() + "/rpc");
      REQUIRE(client.ok());
      auto created = (*client)->Call("session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
      REQUIRE(created.ok());
      REQUIRE((*client)->Call("session/close", Json{{"session", (*created)["session"]}}).ok());
      REQUIRE(WaitFor(
          [&] {
            auto stats = ProbeStats(serve.port);
            return stats && (*stats)["manager"]["warm_ready"].get<int>() >= 24;
          },
          std::chrono::seconds(60)));
    }
    CommandOptions options;
    options.timeout = std::chrono::seconds(120);
    auto bench = RunCommand({Envforge(), "bench", "burst", "--url", serve.Url(), "--env", "manager_fixture", "--task",
                             "sum_task", "--clients", "24", "--rounds", "3", "--pause-ms", "300", "--json"},
                            options);
    REQUIRE(bench.ok());
    INFO(bench->stderr_text, bench->stdout_text, serve.child->StderrText());
    REQUIRE(bench->exit_code == 0);
    Json report = ParseJson(bench->stdout_text).value();
    CHECK(report["failed"] == 0);
    REQUIRE(report["rounds"].size() == 3);
    for (const Json& round : report["rounds"]) {
      CHECK(round["created"] == 24);
      CHECK(round["create_ms"]["n"] == 24);
      CHECK(round["close_ms"]["n"] == 24);  // held open until all 24 were created, then closed
    }
    auto stats = ProbeStats(serve.port);
    REQUIRE(stats.has_value());
    const Json& sessions = (*stats)["sessions"];
    CHECK(sessions["created"] == 2 + 3 * 24);  // this test's and the bench's warm-ups, then the bursts'
    CHECK(sessions["live"] == 0);
    // No fork on a create's path after the first round: serve's default pool of 64 warm sessions,
    // and closed sessions recycled (--episodes-per-session 64).
    const Json& manager = (*stats)["manager"];
    INFO("manager stats: ", manager.dump());
    CHECK(manager["warm_taken"].get<int>() + manager["recycled_taken"].get<int>() >= 3 * 24);
    CHECK(manager["recycled_taken"].get<int>() >= 2 * 24);  // rounds 2 and 3: the processes round 1 closed
  }

  TEST_CASE("SIGTERM during bursts of creates: exit 0, every session a client saw created recorded and ended") {
    ServeProcess serve;
    CommandOptions options;
    options.timeout = std::chrono::seconds(180);
    auto bench = std::async(std::launch::async, [&] {
      return RunCommand({Envforge(), "bench", "burst", "--url", serve.Url(), "--env", "manager_fixture", "--task",
                         "sum_task", "--clients", "200", "--rounds", "30", "--pause-ms", "0", "--json"},
                        options);
    });
    bool bursting = WaitFor(
        [&] {
          auto stats = ProbeStats(serve.port);
          return stats && (*stats)["sessions"].value("created", 0) >= 300;
        },
        std::chrono::seconds(60));
    REQUIRE(bursting);
    serve.child->Signal(SIGTERM);
    auto exit_code = serve.child->Wait(std::chrono::seconds(60));
    INFO(serve.child->StderrText());
    REQUIRE(exit_code.has_value());
    CHECK(*exit_code == 0);
    auto output = bench.get();
    REQUIRE(output.ok());
    INFO(output->stderr_text);
    Json report = ParseJson(output->stdout_text).value();
    int64_t seen_created = 0;
    for (const Json& round : report["rounds"]) seen_created += round["created"].get<int64_t>();
    CHECK(seen_created >= 300);
    auto reader = agents::TrajectoryReader::Open(serve.trajectories);
    REQUIRE(reader.ok());
    auto counts = (*reader)->Count();
    REQUIRE(counts.ok());
    // The warm-up's session, then every burst's; a create answered as the connection closed may be
    // recorded without its client having seen it.
    CHECK(counts->episodes >= seen_created + 1);
    CHECK(counts->open_episodes == 0);
  }
}

}  // namespace
}  // namespace envforge::server::testing
