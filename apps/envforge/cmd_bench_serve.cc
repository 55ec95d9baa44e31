// envforge bench serve: drives a running `envforge serve` through real sockets and reconciles
// what the clients saw with what the server recorded.
//
// `--concurrency` asynchronous clients (Boost.Beast over one io_context and one or two threads,
// not a thread per client) each run whole episodes in turn: session/create, `--steps` tools/call,
// session/submit, session/close, one request at a time per connection (an agent waits for each
// observation). Latency is measured per method from writing the request to reading its answer.
//
// --chaos adds two faults while the load runs: (1) a killer thread SIGKILLs a random session
// process of the server every --chaos-interval-ms (found through /proc: the server is the process
// listening on the URL's port, its zygotes are its envforge-worker children, the sessions are
// theirs), so those episodes end as crashed; (2) clients drop their connection right after writing
// a tools/call (about --chaos-drop-rate of them), reconnect and go on with the same session. The
// server must stay up and still record every call it answered.
//
// --idle-connections N holds N connections that never send a byte (from --idle-peers loopback
// source addresses; --idle-reopen opens each again when the server closes it) for the whole run,
// and reports what the server did with them and its descriptors and memory (apps/envforge/
// idle_flood.h): the load's latencies are then those of authorized clients under that pressure.
//
// Reconciliation (--trajectories FILE, the server's store): once the server's store queue is
// empty, every episode the clients created must be recorded and ended, and each must hold at
// least the steps the clients saw answered (tools/call results and submits that reached the
// session). "lost" counts answered steps missing from the store and must be 0; calls whose
// connection was dropped are "uncertain" (the server ran them, the client never saw the answer)
// and may add recorded steps. Exit code 1 when lost > 0 or an episode is missing or open.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agents/trajectory_store.h"
#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/percentiles.h"
#include "apps/envforge/idle_flood.h"
#include "base/json.h"
#include "server/load_client.h"
#include "server/rpc_client.h"

namespace envforge::cli {
namespace {

using server::EpisodeTally;
using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------------------------------------
// Chaos: the server's session processes, found through /proc.

struct ProcEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  std::string comm;
};

std::vector<ProcEntry> ListProcesses() {
  std::vector<ProcEntry> all;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return all;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    ProcEntry process;
    process.pid = static_cast<pid_t>(pid);
    process.comm = line.substr(open + 1, close - open - 1);
    std::istringstream rest(line.substr(close + 2));
    char state;
    rest >> state >> process.ppid;
    all.push_back(process);
  }
  ::closedir(proc);
  return all;
}

// The process with a listening TCP socket on `port` (IPv4 or IPv6), or 0.
pid_t ListeningProcess(uint16_t port) {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state != "0A") continue;  // LISTEN
      size_t colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) inodes.insert("socket:[" + inode + "]");
    }
  }
  if (inodes.empty()) return 0;
  for (const ProcEntry& process : ListProcesses()) {
    std::string fd_dir = "/proc/" + std::to_string(process.pid) + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    pid_t found = 0;
    while (dirent* entry = ::readdir(fds)) {
      char target[256];
      ssize_t n = ::readlink((fd_dir + "/" + entry->d_name).c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (inodes.count(target)) {
        found = process.pid;
        break;
      }
    }
    ::closedir(fds);
    if (found != 0) return found;
  }
  return 0;
}

// Session processes: children of the server's envforge-worker children (its zygotes), without
// the zygotes' janitors.
std::vector<pid_t> SessionProcesses(pid_t server) {
  std::vector<ProcEntry> all = ListProcesses();
  std::set<pid_t> zygotes;
  for (const auto& process : all) {
    if (process.ppid == server && process.comm == "envforge-worker") zygotes.insert(process.pid);
  }
  std::vector<pid_t> sessions;
  for (const auto& process : all) {
    if (zygotes.count(process.ppid) && process.comm == "envforge-worker") sessions.push_back(process.pid);
  }
  return sessions;
}

// A local process's open descriptors and resident memory (from /proc), for the idle flood.
Json ProcessFootprint(pid_t pid) {
  if (pid == 0) return nullptr;
  std::string base = "/proc/" + std::to_string(pid);
  size_t fds = 0;
  if (DIR* dir = ::opendir((base + "/fd").c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') ++fds;
    }
    ::closedir(dir);
  }
  long long rss_kb = -1;
  std::ifstream status(base + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) rss_kb = std::atoll(line.c_str() + 6);
  }
  return Json{{"fds", fds}, {"rss_kb", rss_kb}};
}

// ------------------------------------------------------------------------------------------------

// The first tool of the environment that needs no arguments (not submit_result).
Result<std::string> DefaultTool(server::RpcClient& client, const std::string& env) {
  ENVFORGE_ASSIGN_OR_RETURN(Json described, client.Call("envs/get", Json{{"env", env}}));
  for (const auto& tool : described.value("tools", Json::array())) {
    std::string name = tool.value("name", "");
    if (name.empty() || name == "submit_result") continue;
    Json schema = tool.contains("inputSchema") ? tool["inputSchema"] : tool.value("input_schema", Json::object());
    if (!schema.is_object() || !schema.contains("required") || schema["required"].empty()) return name;
  }
  return InvalidArgumentError("envforge bench serve: environment '" + env +
                              "' has no tool without required arguments; pass --tool and --arguments");
}

// Waits until the server's trajectory queue is drained (server/stats), up to 60 s.
void WaitForTrajectoryFlush(server::RpcClient& client) {
  auto deadline = Clock::now() + std::chrono::seconds(60);
  int quiet_polls = 0;
  while (Clock::now() < deadline && quiet_polls < 2) {
    auto stats = client.Call("server/stats");
    if (!stats.ok()) return;
    const Json& trajectories = stats->value("trajectories", Json::object());
    bool drained = trajectories.value("queue_depth", 1) == 0 &&
                   trajectories.value("records_written", 0) == trajectories.value("records_enqueued", 1);
    quiet_polls = drained ? quiet_polls + 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Json Reconcile(const std::string& path, const std::vector<EpisodeTally>& episodes, bool* ok) {
  *ok = false;
  auto reader = agents::TrajectoryReader::Open(path);
  if (!reader.ok()) return Json{{"error", reader.status().message()}};
  std::map<std::string, agents::EpisodeSummary> recorded;
  agents::ListFilter filter;
  filter.limit = 1'000'000'000;
  auto listed = (*reader)->List(filter);
  if (!listed.ok()) return Json{{"error", listed.status().message()}};
  for (auto& summary : *listed) recorded.emplace(summary.id, std::move(summary));
  int64_t expected = 0, found = 0, open = 0, missing = 0, answered = 0, uncertain = 0, steps_recorded = 0, lost = 0,
          extra = 0;
  std::map<std::string, int64_t> outcomes;
  for (const EpisodeTally& episode : episodes) {
    if (!episode.created) continue;
    ++expected;
    answered += episode.answered_steps;
    uncertain += episode.uncertain_steps;
    auto it = recorded.find(episode.trajectory);
    if (it == recorded.end()) {
      ++missing;
      lost += episode.answered_steps;
      continue;
    }
    ++found;
    const agents::EpisodeSummary& summary = it->second;
    if (!summary.outcome) {
      ++open;
    } else {
      ++outcomes[std::string(agents::EpisodeOutcomeName(*summary.outcome))];
    }
    steps_recorded += summary.steps;
    lost += std::max<int64_t>(0, episode.answered_steps - summary.steps);
    extra += std::max<int64_t>(0, summary.steps - episode.answered_steps);
  }
  *ok = lost == 0 && missing == 0 && open == 0;
  return Json{{"store", path},
              {"episodes_started", expected},
              {"episodes_recorded", found},
              {"episodes_missing", missing},
              {"episodes_open", open},
              {"episode_outcomes", outcomes},
              {"steps_answered", answered},
              {"steps_uncertain", uncertain},
              {"steps_recorded", steps_recorded},
              {"steps_recorded_beyond_answered", extra},
              {"lost", lost}};
}

struct BenchConfig {
  std::string url;  // as given
  server::LoadOptions load;
  bool chaos = false;
  std::chrono::milliseconds kill_interval{100};
};

Result<BenchConfig> ConfigFrom(const ParsedArgs& parsed) {
  BenchConfig config;
  config.url = *parsed.Option("--url");  // --url, --env and --task are required by the declaration
  server::LoadOptions& load = config.load;
  load.env = *parsed.Option("--env");
  load.task = *parsed.Option("--task");
  ENVFORGE_RETURN_IF_ERROR(
      server::ParseLoadUrl(config.url, parsed.OptionOr("--transport"), &load).WithContext("--url"));
  load.token = parsed.OptionOr("--token");
  if (load.token.empty()) {
    if (const char* from_env = std::getenv("ENVFORGE_SERVE_TOKEN"); from_env != nullptr) load.token = from_env;
  }
  ENVFORGE_ASSIGN_OR_RETURN(long long sessions, parsed.IntOption("--sessions", 1, 10'000'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long steps, parsed.IntOption("--steps", 0, 100'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long concurrency, parsed.IntOption("--concurrency", 1, 20'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long io_threads, parsed.IntOption("--io-threads", 1, 16));
  ENVFORGE_ASSIGN_OR_RETURN(long long drop_permille, parsed.IntOption("--chaos-drop-rate", 0, 1000));
  ENVFORGE_ASSIGN_OR_RETURN(long long kill_interval, parsed.IntOption("--chaos-interval-ms", 1, 3'600'000));
  load.sessions = static_cast<size_t>(sessions);
  load.steps = static_cast<size_t>(steps);
  load.concurrency = static_cast<size_t>(concurrency);
  load.io_threads = static_cast<int>(io_threads);
  config.chaos = parsed.Has("--chaos");
  load.drop_rate = config.chaos ? static_cast<double>(drop_permille) / 1000.0 : 0.0;  // the drops are part of --chaos
  config.kill_interval = std::chrono::milliseconds(kill_interval);
  load.answer = parsed.OptionOr("--answer");
  load.tool = parsed.OptionOr("--tool");
  ENVFORGE_ASSIGN_OR_RETURN(load.arguments, ParseJson(parsed.OptionOr("--arguments"), "--arguments"));
  if (!load.arguments.is_object()) return InvalidArgumentError("--arguments must be a JSON object");
  return config;
}

// The idle flood (--idle-connections), held from its start to the end of the load, and what the
// server did with it.
struct IdleHold {
  std::unique_ptr<IdleFlood> flood;
  Json report = nullptr;
  pid_t server = 0;
};

Status StartIdleHold(const ParsedArgs& parsed, const server::LoadOptions& load, IdleHold* hold) {
  ENVFORGE_ASSIGN_OR_RETURN(long long connections, parsed.IntOption("--idle-connections", 0, 1'000'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long peers, parsed.IntOption("--idle-peers", 0, 250));
  if (connections == 0) return Status::Ok();
  const auto port = static_cast<uint16_t>(std::stoi(load.port));
  hold->server = ListeningProcess(port);
  hold->report = Json{{"server_pid", hold->server}, {"server_before", ProcessFootprint(hold->server)}};
  hold->flood = std::make_unique<IdleFlood>(IdleFloodOptions{.host = load.host,
                                                             .port = port,
                                                             .connections = static_cast<size_t>(connections),
                                                             .peers = static_cast<size_t>(peers),
                                                             .reopen = parsed.Has("--idle-reopen")});
  auto started = Clock::now();
  ENVFORGE_RETURN_IF_ERROR(hold->flood->Start());
  hold->report["open_seconds"] = std::chrono::duration<double>(Clock::now() - started).count();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the server accepts and sorts them out
  hold->report["server_with_idle"] = ProcessFootprint(hold->server);
  hold->report["flood_before_load"] = hold->flood->Report();
  return Status::Ok();
}

// --chaos: SIGKILLs a random session process of the server every interval until destroyed.
class SessionKiller {
 public:
  explicit SessionKiller(const BenchConfig& config) {
    if (!config.chaos) return;
    pid_t server_pid = ListeningProcess(static_cast<uint16_t>(std::stoi(config.load.port)));
    if (server_pid == 0) {
      source_ = "unavailable: no local process listens on port " + config.load.port;
      return;
    }
    source_ = "/proc: sessions of server pid " + std::to_string(server_pid);
    thread_ = std::thread([this, server_pid, interval = config.kill_interval] { Loop(server_pid, interval); });
  }
  ~SessionKiller() { Stop(); }
  void Stop() {
    running_.store(false);
    if (thread_.joinable()) thread_.join();
  }
  uint64_t killed() const { return killed_.load(); }
  const std::string& source() const { return source_; }

 private:
  void Loop(pid_t server_pid, std::chrono::milliseconds interval) {
    std::mt19937 rng(12345);
    while (running_.load()) {
      std::this_thread::sleep_for(interval);
      std::vector<pid_t> candidates = SessionProcesses(server_pid);
      if (candidates.empty()) continue;
      pid_t victim = candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng)];
      if (::kill(victim, SIGKILL) == 0) ++killed_;
    }
  }

  std::atomic<bool> running_{true};
  std::atomic<uint64_t> killed_{0};
  std::string source_ = "off";
  std::thread thread_;
};

Json LoadReport(const BenchConfig& config, const server::LoadRun& run, const server::LoadStats& stats, double seconds,
                const SessionKiller& killer) {
  uint64_t created = 0, closed = 0, answered_rpc = 0;
  for (const EpisodeTally& episode : run.episodes()) {
    created += episode.created;
    closed += episode.closed;
  }
  Json latency = Json::object();
  for (const auto& [method, samples] : stats.latency_ms) {
    answered_rpc += samples.size();
    latency[method] = Percentiles(samples);
  }
  const double tool_calls = static_cast<double>(run.tool_calls_answered());
  const server::LoadOptions& load = config.load;
  return Json{{"url", config.url},
              {"transport", load.websocket ? "ws" : "http"},
              {"env", load.env},
              {"task", load.task},
              {"tool", load.tool},
              {"concurrency", run.clients()},
              {"steps_per_session", load.steps},
              {"sessions", {{"wanted", load.sessions}, {"created", created}, {"closed", closed}}},
              {"wall_seconds", std::round(seconds * 1000) / 1000},
              {"tool_calls", run.tool_calls_answered()},
              {"calls_per_s", std::round(tool_calls / seconds)},
              {"rpc_per_s", std::round(static_cast<double>(answered_rpc) / seconds)},
              {"latency_ms", latency},
              {"tool_outcomes", stats.outcomes},
              {"errors", stats.errors},
              {"reconnects", stats.reconnects > run.clients() ? stats.reconnects - run.clients() : 0},
              {"chaos",
               {{"enabled", config.chaos},
                {"killed_sessions", killer.killed()},
                {"dropped_connections", stats.dropped},
                {"kill_source", killer.source()}}}};
}

void PrintSummary(const Json& report) {
  const Json& tool_latency = report["latency_ms"].value("tools/call", Json::object());
  std::printf("%s episodes, %s tool calls in %.2f s: %.0f calls/s; tools/call p50 %s ms, p99 %s ms\n",
              report["sessions"]["created"].dump().c_str(), report["tool_calls"].dump().c_str(),
              report["wall_seconds"].get<double>(), report["calls_per_s"].get<double>(),
              tool_latency.value("p50", Json()).dump().c_str(), tool_latency.value("p99", Json()).dump().c_str());
  if (report.contains("reconciliation"))
    std::printf("reconciliation: %s\n", DumpJson(report["reconciliation"]).c_str());
  if (!report["errors"].empty()) std::printf("errors: %s\n", DumpJson(report["errors"]).c_str());
}

// A control connection: picks the default tool, warms the zygote up (its first session starts
// the interpreter; not a cost of the load) and later reads server/stats.
Result<std::unique_ptr<server::RpcClient>> Prepare(BenchConfig& config) {
  server::LoadOptions& load = config.load;
  ENVFORGE_ASSIGN_OR_RETURN(auto control,
                            server::RpcClient::Connect("http://" + load.host_header + "/rpc", {.token = load.token}));
  if (load.tool.empty()) {
    ENVFORGE_ASSIGN_OR_RETURN(load.tool, DefaultTool(*control, load.env));
  }
  auto warm = control->Call("session/create", Json{{"env", load.env}, {"task", load.task}});
  if (!warm.ok()) return warm.status().WithContext("warm-up session");
  (void)control->Call("session/close", Json{{"session", warm->value("session", "")}});
  return control;
}

int BenchServe(const ParsedArgs& parsed) {
  auto config = ConfigFrom(parsed);
  if (!config.ok()) return Fail(config.status(), kExitUsage, "envforge bench serve");
  auto control = Prepare(*config);
  if (!control.ok()) return Fail(control.status(), ExitCodeFor(control.status()), "envforge bench serve");
  IdleHold idle;
  if (Status held = StartIdleHold(parsed, config->load, &idle); !held.ok())
    return Fail(held, kExitUsage, "envforge bench serve");
  auto run = server::LoadRun::Create(config->load);
  if (!run.ok()) return Fail(run.status(), ExitCodeFor(run.status()), "envforge bench serve");

  SessionKiller killer(*config);
  const auto started = Clock::now();
  (*run)->Run([&](const server::LoadProgress& p) {
    std::fprintf(stderr, "bench serve: %zu/%zu episodes, %llu tool calls (%.0f/s), %llu sessions killed\n",
                 p.episodes_done, config->load.sessions, static_cast<unsigned long long>(p.tool_calls_answered),
                 static_cast<double>(p.tool_calls_answered) / p.seconds,
                 static_cast<unsigned long long>(killer.killed()));
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (idle.flood) {
    idle.report["server_after_load"] = ProcessFootprint(idle.server);
    idle.report["flood_after_load"] = idle.flood->Report();
    idle.flood->Stop();
  }
  killer.Stop();

  Json report = LoadReport(*config, **run, (*run)->Stats(), seconds, killer);
  report["idle_flood"] = idle.report;
  bool reconciled = true;
  if (auto trajectories = parsed.Option("--trajectories")) {
    WaitForTrajectoryFlush(**control);
    report["reconciliation"] = Reconcile(*trajectories, (*run)->episodes(), &reconciled);
    report["lost"] = report["reconciliation"].value("lost", -1);
  }
  if (parsed.Has("--json")) {
    std::printf("%s\n", report.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    PrintSummary(report);
  }
  return reconciled ? kExitOk : kExitCheckFailed;
}

}  // namespace

std::vector<Command> BenchServeCommands() {
  const std::string chaos = "chaos", idle = "idle connections";
  return {
      {{.name = "bench serve",
        .summary =
            "load a running server through real sockets: latency per method, calls/s, errors by kind, trajectory "
            "reconciliation (lost must be 0)",
        .details =
            "C asynchronous clients each run whole episodes in turn: session/create, --steps tools/call, "
            "session/submit, session/close, one request at a time per connection. Latency is measured per method "
            "from writing the request to reading its answer.\n"
            "--chaos: a killer SIGKILLs a random session process of the server (found through /proc) every "
            "--chaos-interval-ms, and clients drop their connection right after writing a tools/call (about "
            "--chaos-drop-rate of them), reconnect and go on with the same session.\n"
            "--idle-connections N holds N connections that never send a byte for the whole run and reports the "
            "server's descriptors and memory.\n"
            "--trajectories FILE (the server's store): every episode the clients created must be recorded and "
            "ended with at least the steps the clients saw answered; exit 1 when lost > 0 or an episode is missing "
            "or open.",
        .options =
            {{.name = "--url",
              .metavar = "URL",
              .help = "ws://HOST:PORT[/ws] or http://HOST:PORT[/rpc] of a running envforge serve",
              .required = true},
             {.name = "--env", .metavar = "E", .help = "the environment's name", .required = true},
             {.name = "--task", .metavar = "T", .help = "the task of every session", .required = true},
             {.name = "--sessions", .metavar = "N", .help = "episodes in all", .default_text = "1000"},
             {.name = "--steps", .metavar = "N", .help = "tools/call per episode", .default_text = "20"},
             {.name = "--concurrency", .metavar = "C", .help = "clients (connections) at once", .default_text = "256"},
             {.name = "--transport",
              .metavar = "ws|http",
              .help = "WebSocket or HTTP keep-alive",
              .default_text = "ws"},
             {.name = "--io-threads",
              .metavar = "N",
              .help = "threads running the clients (1..16)",
              .default_text = "1"},
             {.name = "--tool",
              .metavar = "NAME",
              .help = "the tool called",
              .default_text = "the environment's first tool with no required argument",
              .computed = true},
             {.name = "--arguments",
              .metavar = "JSON",
              .help = "the tool's arguments, a JSON object",
              .default_text = "{}"},
             {.name = "--answer", .metavar = "TEXT", .help = "the answer each episode submits", .default_text = "0"},
             {.name = "--token", .metavar = "T", .help = "the server's bearer token (or ENVFORGE_SERVE_TOKEN)"},
             {.name = "--trajectories",
              .metavar = "FILE.sqlite",
              .help = "the server's trajectory store: reconcile what the clients saw with it"},
             {.name = "--chaos", .help = "kill sessions and drop connections while the load runs", .section = chaos},
             {.name = "--chaos-drop-rate",
              .metavar = "PERMILLE",
              .help = "tools/call connections dropped after the write, per thousand",
              .default_text = "10",
              .section = chaos},
             {.name = "--chaos-interval-ms",
              .metavar = "MS",
              .help = "time between two session kills",
              .default_text = "100",
              .section = chaos},
             {.name = "--idle-connections",
              .metavar = "N",
              .help = "silent connections held during the load",
              .default_text = "0",
              .section = idle},
             {.name = "--idle-peers",
              .metavar = "K",
              .help = "loopback source addresses they come from",
              .default_text = "1",
              .section = idle},
             {.name = "--idle-reopen", .help = "open each again when the server closes it", .section = idle},
             JsonOption("the report as JSON")}},
       BenchServe},
  };
}

}  // namespace envforge::cli
