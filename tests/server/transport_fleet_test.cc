// A fleet on loopback: `envforge serve --server-id` processes behind HAProxy (the configuration
// of scripts/fleet/haproxy.cfg.in, run in the foreground as a child), driven by `envforge bench
// serve` through HAProxy: every call reaches its session's owner and is recorded in the owner's
// store; a SIGKILLed server's episodes end infra_error while the others go on; a server drained
// and replaced mid-run loses nothing. Skipped (with a message) when haproxy is not installed.
#include <doctest/doctest.h>
#include <sys/un.h>

#include <atomic>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "base/subprocess.h"
#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {
namespace {

bool HaveHaproxy() {
  auto version = RunCommand({"haproxy", "-v"});
  return version.ok() && version->exit_code == 0;
}

#define ENVFORGE_SKIP_WITHOUT_HAPROXY()                                                        \
  if (!HaveHaproxy()) {                                                                        \
    MESSAGE("skipped: haproxy is not installed (scripts/setup.sh installs Debian's haproxy)"); \
    return;                                                                                    \
  }

// A port free right now (HAProxy cannot report the one it picks, unlike envforge serve).
uint16_t FreePort() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  socklen_t length = sizeof(address);
  REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
  return ntohs(address.sin_port);
}

void ReplaceAll(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

// One `envforge serve --server-id ID` of the fleet, recording into DIR/ID.sqlite.
struct FleetServer {
  FleetServer(const std::string& server_id, const TempDir& dir) : id(server_id) {
    trajectories = dir / (id + ".sqlite");
    std::filesystem::path port_file = dir / (id + ".port");
    child.emplace(std::vector<std::string>{Envforge(), "serve", "--envs", dir / "envs", "--server-id", id, "--port",
                                           "0", "--port-file", port_file, "--trajectories", trajectories,
                                           "--max-sessions", "2000", "--limits", R"({"wall_time_ms": 3000})"},
                  dir / (id + ".stderr"));
    bool listening = WaitFor([&] { return ReadFileToString(port_file).ok(); }, std::chrono::seconds(60));
    INFO(child->StderrText());
    REQUIRE(listening);
    port = static_cast<uint16_t>(std::stoi(*ReadFileToString(port_file)));
  }

  // server/stats, straight from this server (not through HAProxy).
  std::optional<Json> Stats() const {
    auto client = RpcClient::Connect("http://127.0.0.1:" + std::to_string(port) + "/rpc");
    if (!client.ok()) return std::nullopt;
    auto stats = (*client)->Call("server/stats");
    return stats.ok() ? std::optional<Json>(*stats) : std::nullopt;
  }

  std::string id;
  std::string trajectories;
  std::optional<ChildProcess> child;
  uint16_t port = 0;
};

// Three servers s1..s3 and HAProxy in front of them, spare slots s4 and s5 (haproxy.cfg.in).
class Fleet {
 public:
  Fleet() {
    std::filesystem::create_directories(dir / "envs");
    sandbox::testing::WriteFixtureBundle(dir / "envs/fixture.envdb");
    for (const char* id : {"s1", "s2", "s3"}) servers.emplace(id, std::make_unique<FleetServer>(id, dir));
    frontend_port = FreePort();
    WriteHaproxyConfig();
    haproxy.emplace(std::vector<std::string>{"/usr/sbin/haproxy", "-db", "-f", dir / "haproxy.cfg"},
                    dir / "haproxy.stderr");
    bool up = WaitFor([&] { return Admin("show servers state envforge").find("s3") != std::string::npos; },
                      std::chrono::seconds(20));
    INFO(haproxy->StderrText());
    REQUIRE(up);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));  // the first health checks
  }

  // One command on HAProxy's runtime API (the admin socket); its answer, "" when unreachable.
  std::string Admin(const std::string& command) const {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::string path = dir / "admin.sock";
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return "";
    std::string line = command + "\n";
    if (::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) return "";
    std::string answer;
    char buffer[4096];
    for (ssize_t got; (got = ::recv(fd.get(), buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, got);
    return answer;
  }

  // Starts server `id` and gives it the spare slot of the same name.
  FleetServer& StartReplacement(const std::string& id) {
    auto& server = servers[id] = std::make_unique<FleetServer>(id, dir);
    Admin("set server envforge/" + id + " addr 127.0.0.1 port " + std::to_string(server->port));
    Admin("set server envforge/" + id + " state ready");
    return *server;
  }

  // --trajectories of bench serve: the stores of servers `ids` as ID=PATH (a replacement's
  // included before it starts: bench serve reads them once the load is over).
  std::string Stores(const std::vector<std::string>& ids) const {
    std::string stores;
    for (const auto& id : ids) stores += (stores.empty() ? "" : ",") + id + "=" + dir / (id + ".sqlite");
    return stores;
  }

  std::string Url(const std::string& transport) const {
    return transport == "ws" ? "ws://127.0.0.1:" + std::to_string(frontend_port) + "/ws"
                             : "http://127.0.0.1:" + std::to_string(frontend_port);
  }

  TempDir dir;
  std::map<std::string, std::unique_ptr<FleetServer>> servers;
  uint16_t frontend_port = 0;
  std::optional<ChildProcess> haproxy;

 private:
  void WriteHaproxyConfig() {
    auto text = ReadFileToString(std::string(ENVFORGE_TEST_SOURCE_DIR) + "/scripts/fleet/haproxy.cfg.in");
    REQUIRE_MESSAGE(text.ok(), text.status().ToString());
    ReplaceAll(*text, "@FRONTEND_PORT@", std::to_string(frontend_port));
    ReplaceAll(*text, "@ADMIN_SOCKET@", dir / "admin.sock");
    for (const auto& [id, server] : servers) {
      ReplaceAll(*text, "@" + std::string(1, static_cast<char>(std::toupper(id[0]))) + id.substr(1) + "_PORT@",
                 std::to_string(server->port));
    }
    std::ofstream(dir / "haproxy.cfg") << *text;
  }
};

Result<CommandOutput> BenchThroughFleet(const Fleet& fleet, const std::string& transport, int sessions,
                                        const std::vector<std::string>& servers) {
  CommandOptions options;
  options.timeout = std::chrono::seconds(240);
  return RunCommand(BenchServeFixture(fleet.Url(transport), sessions, 5, 48,
                                      {"--transport", transport, "--chaos", "--chaos-drop-rate", "20",
                                       "--chaos-interval-ms", "100", "--trajectories", fleet.Stores(servers)}),
                    options);
}

// Sessions created so far by the servers still running (from each one's server/stats).
int64_t SessionsCreated(const Fleet& fleet, const std::vector<std::string>& ids) {
  int64_t created = 0;
  for (const auto& id : ids) {
    auto stats = fleet.servers.at(id)->Stats();
    if (stats) created += (*stats)["sessions"].value("created", 0);
  }
  return created;
}

// Drains s2 as an operator would while the load runs: a replacement s4 takes a spare slot, HAProxy
// sends s2 nothing new, s2 stops creating (SIGUSR1), its open sessions finish, then SIGTERM.
// Returns s2's exit code.
std::optional<int> DrainAndReplaceS2(Fleet& fleet) {
  fleet.StartReplacement("s4");
  FleetServer& s2 = *fleet.servers.at("s2");
  fleet.Admin("set server envforge/s2 state drain");
  s2.child->Signal(SIGUSR1);
  // Creates that reached it before SIGUSR1 may still be starting ("starting"): those sessions
  // are the drain's too.
  WaitFor(
      [&] {
        auto stats = s2.Stats();
        return stats && (*stats)["sessions"].value("live", 1) == 0 && (*stats)["sessions"].value("starting", 1) == 0;
      },
      std::chrono::seconds(30));
  s2.child->Signal(SIGTERM);
  auto exit_code = s2.child->Wait(std::chrono::seconds(60));
  fleet.Admin("set server envforge/s2 state maint");
  return exit_code;
}

Json ParseReport(const CommandOutput& bench) {
  auto report = ParseJson(bench.stdout_text);
  REQUIRE_MESSAGE(report.ok(), bench.stdout_text);
  return *report;
}

// What every fleet run must show: nothing lost, every episode in exactly its owner's store.
void CheckReconciled(const Json& report) {
  const Json& reconciliation = report["reconciliation"];
  CHECK(report["lost"] == 0);
  CHECK(reconciliation["episodes_missing"] == 0);
  CHECK(reconciliation["episodes_open"] == 0);
  CHECK(reconciliation["episodes_in_several_stores"] == 0);
  CHECK(reconciliation["episodes_not_in_owner_store"] == 0);
  CHECK(reconciliation["episodes_started"] == report["sessions"]["created"]);
}

// GET /health's status and body, over a connection of its own.
std::pair<int, std::string> Health(uint16_t port) {
  RawConnection probe(port);
  if (!probe.Send(HttpRequestText("GET", "/health", "", {"Connection: close"}))) return {0, ""};
  auto response = probe.ReadResponse();
  if (!response) return {0, ""};
  return {response->status, response->body};
}

TEST_SUITE("server.transport.fleet") {
  TEST_CASE("--server-id names the server in handles and answers; SIGUSR1 stops new sessions, open ones go on") {
    ServeProcess serve({"--server-id", "a1"});
    auto client = RpcClient::Connect(serve.Url() + "/rpc");
    REQUIRE(client.ok());
    Json created = MustCall(**client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
    std::string session = created["session"];
    CHECK(session.rfind("s-a1-", 0) == 0);
    CHECK(session.size() == 5 + 24);
    CHECK(created["server"] == "a1");
    CHECK(MustCall(**client, "server/stats")["server_id"] == "a1");
    CHECK(Health(serve.port).first == 200);

    serve.child->Signal(SIGUSR1);
    REQUIRE(WaitFor([&] { return MustCall(**client, "server/stats")["creating"] == false; }, std::chrono::seconds(10)));
    auto refused = (*client)->Call("session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
    REQUIRE_FALSE(refused.ok());
    CHECK(Contains(refused.status().message(), "another server"));
    // The balancer's health check now fails, so it sends this server no new sessions.
    auto [status, body] = Health(serve.port);
    CHECK(status == 503);
    CHECK(Contains(body, "not_creating"));
    CHECK(MustCall(**client, "tools/call", Json{{"session", session}, {"name", "incr"}})["outcome"] == "ok");
    MustCall(**client, "session/close", Json{{"session", session}});
    serve.child->Signal(SIGTERM);
    auto exit_code = serve.child->Wait(std::chrono::seconds(60));
    REQUIRE(exit_code.has_value());
    CHECK(*exit_code == 0);

    for (const std::string& bad : std::vector<std::string>{"a-b", "x/y", std::string(33, 'a')}) {
      CAPTURE(bad);
      auto refused_id = RunCommand({Envforge(), "serve", "--envs", "/nonexistent", "--server-id", bad});
      REQUIRE(refused_id.ok());
      CHECK(refused_id->exit_code == 2);
      CHECK(Contains(refused_id->stderr_text, "--server-id"));
    }
  }

  TEST_CASE(
      "1,000 episodes over three servers behind HAProxy (WebSocket): one SIGKILLed and one drained and replaced "
      "mid-run, nothing lost") {
    ENVFORGE_SKIP_WITHOUT_HAPROXY();
    Fleet fleet;
    auto bench = std::async(std::launch::async, [&] {
      return BenchThroughFleet(fleet, "ws", 1000, {"s1", "s2", "s3", "s4"});
    });
    // The operator, while the load runs: a kill once 200 sessions exist, the drain at 350.
    REQUIRE(WaitFor([&] { return SessionsCreated(fleet, {"s1", "s2", "s3"}) >= 200; }, std::chrono::seconds(120)));
    fleet.servers.at("s1")->child->Signal(SIGKILL);
    REQUIRE(WaitFor([&] { return SessionsCreated(fleet, {"s2", "s3"}) >= 250; }, std::chrono::seconds(120)));
    std::optional<int> s2_exit = DrainAndReplaceS2(fleet);

    auto output = bench.get();
    REQUIRE(output.ok());
    INFO(output->stderr_text, output->stdout_text, fleet.haproxy->StderrText());
    REQUIRE(s2_exit.has_value());
    CHECK(*s2_exit == 0);  // drained: every open session had ended
    CHECK(output->exit_code == 0);
    Json report = ParseReport(*output);
    CheckReconciled(report);
    const Json& servers = report["servers"];
    // The killed server's episodes in flight ended infra_error; no other server lost one.
    CHECK(report["reconciliation"]["servers_lost"] == Json::array({"s1"}));
    CHECK(servers["s1"]["owner_lost"].get<int>() >= 1);
    CHECK(report["episode_ends"].value("infra_error", 0) == servers["s1"]["owner_lost"]);
    for (const char* id : {"s2", "s3", "s4"}) {
      CAPTURE(id);
      CHECK(servers[id]["episodes"].get<int>() >= 1);
      CHECK(servers[id]["owner_lost"] == 0);
    }
    // Every other episode was submitted: none crashed or failed its submit.
    CHECK(report["episode_ends"].value("crashed", 0) == 0);
    CHECK(report["episode_ends"].value("submit_error", 0) == 0);
    CHECK(report["episode_ends"].value("submitted", 0) + report["episode_ends"].value("infra_error", 0) ==
          report["sessions"]["created"]);
    CHECK(report["sessions"]["created"].get<int>() >= 990);  // creates in flight at the kill may be lost
  }

  TEST_CASE("a WebSocket client pinned to its session reconnects to the session's owner through HAProxy") {
    ENVFORGE_SKIP_WITHOUT_HAPROXY();
    Fleet fleet;
    // Each client makes its session, then drops its connection before every call (as the
    // client's idle limit does while a model thinks); the reconnect asks for /ws?session=HANDLE,
    // which HAProxy routes to the owner, not to the least loaded server.
    std::set<std::string> owners;
    for (int client_index = 0; client_index < 4; ++client_index) {
      CAPTURE(client_index);
      auto client = RpcClient::Connect(fleet.Url("ws"));
      REQUIRE(client.ok());
      Json created = MustCall(**client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
      const std::string session = created["session"];
      owners.insert(created["server"].get<std::string>());
      (*client)->PinSession(session);
      for (int call = 0; call < 6; ++call) {
        CAPTURE(call);
        (*client)->Close();
        auto answer = (*client)->Call("tools/call", Json{{"session", session}, {"name", "incr"}});
        REQUIRE_MESSAGE(answer.ok(), answer.status().ToString());
        CHECK((*answer)["outcome"] == "ok");
        CHECK((*answer)["content"] == call + 1);
      }
      MustCall(**client, "session/close", Json{{"session", session}});
    }
    CHECK(owners.size() >= 2);  // the sessions were spread: a reconnect had somewhere else to go
  }

  TEST_CASE(
      "HTTP through HAProxy: each request is routed by its body to the session's owner; a killed owner's "
      "episodes end infra_error, never retried") {
    ENVFORGE_SKIP_WITHOUT_HAPROXY();
    Fleet fleet;
    auto bench = std::async(std::launch::async, [&] {
      return BenchThroughFleet(fleet, "http", 300, {"s1", "s2", "s3"});
    });
    // Killed once it owns episodes: a server still starting its first sessions (the others, past
    // theirs, recycle their session processes and take most creates) would lose none.
    REQUIRE(WaitFor(
        [&] {
          return SessionsCreated(fleet, {"s1", "s2", "s3"}) >= 100 && SessionsCreated(fleet, {"s3"}) >= 10;
        },
        std::chrono::seconds(120)));
    fleet.servers.at("s3")->child->Signal(SIGKILL);
    auto output = bench.get();
    REQUIRE(output.ok());
    INFO(output->stderr_text, output->stdout_text);
    CHECK(output->exit_code == 0);
    Json report = ParseReport(*output);
    CheckReconciled(report);
    CHECK(report["servers"]["s1"]["owner_lost"] == 0);
    CHECK(report["servers"]["s2"]["owner_lost"] == 0);
    CHECK(report["episode_ends"].value("infra_error", 0) == report["servers"]["s3"]["owner_lost"]);
  }
}

}  // namespace
}  // namespace envforge::server::testing
