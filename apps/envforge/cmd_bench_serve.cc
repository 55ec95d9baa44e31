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
//
// A fleet behind a load balancer (server/README.md, "A fleet behind HAProxy"): --url names the
// balancer and the report covers the whole fleet ("servers": episodes and calls per server id,
// from the handles); --trajectories takes every server's store, comma-separated, each as ID=PATH
// (or PATH: its id is then the one most of its episodes name). Every episode must be recorded in
// exactly one store, its owner's. An episode whose owner was lost (killed: the balancer answered
// 502/503/504 or the session was unknown) ends "infra_error" on the client's side; its answered
// steps missing from the dead server's store are reported as steps_unrecorded_owner_lost, not lost.
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
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agents/trajectory_store.h"
#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/percentiles.h"
#include "apps/envforge/idle_flood.h"
#include "apps/envforge/load_target.h"
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

// ------------------------------------------------------------------------------------------------
// Reconciliation over one store or a fleet's stores (--trajectories PATH or ID=PATH,ID=PATH,...).

// One server's store: its path and the server id its episodes' handles carry ("" when not known
// from the option: then inferred from the episodes found in it).
struct Store {
  std::string server_id;
  std::string path;
  std::map<std::string, agents::EpisodeSummary> episodes;  // by trajectory id
};

Result<std::vector<Store>> ParseStores(const std::string& spec) {
  std::vector<Store> stores;
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    size_t equals = item.find('=');
    Store store;
    if (equals != std::string::npos) store.server_id = item.substr(0, equals);
    store.path = equals == std::string::npos ? item : item.substr(equals + 1);
    if (store.path.empty()) return InvalidArgumentError("--trajectories: no path in '" + item + "'");
    stores.push_back(std::move(store));
  }
  if (stores.empty()) return InvalidArgumentError("--trajectories: no store in '" + spec + "'");
  return stores;
}

Status ReadStore(Store& store) {
  ENVFORGE_ASSIGN_OR_RETURN(auto reader, agents::TrajectoryReader::Open(store.path));
  agents::ListFilter filter;
  filter.limit = 1'000'000'000;
  ENVFORGE_ASSIGN_OR_RETURN(auto listed, reader->List(filter));
  for (auto& summary : listed) store.episodes.emplace(summary.id, std::move(summary));
  return Status::Ok();
}

// A store named by path alone belongs to the server most of its episodes name.
void InferServerId(Store& store, const std::vector<EpisodeTally>& episodes) {
  if (!store.server_id.empty()) return;
  std::map<std::string, int64_t> votes;
  for (const EpisodeTally& episode : episodes) {
    if (episode.created && store.episodes.count(episode.trajectory)) ++votes[episode.server];
  }
  auto best =
      std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (best != votes.end()) store.server_id = best->first;
}

// The counts of one reconciliation. A server the clients saw gone (an episode of it ended
// "owner lost") may have died before writing its last records: its episodes may be open or
// missing steps in its store, and those steps are reported apart (steps_unrecorded_owner_lost),
// never as lost. Every other server's episodes are held to the full check.
struct Tally {
  int64_t expected = 0, found = 0, open = 0, missing = 0, answered = 0, uncertain = 0, steps_recorded = 0, lost = 0,
          extra = 0, several = 0, wrong_store = 0, owner_lost = 0, owner_lost_unrecorded = 0;
  std::map<std::string, int64_t> outcomes;
};

void ReconcileEpisode(const EpisodeTally& episode, bool server_lost, const std::vector<Store>& stores, Tally& tally) {
  ++tally.expected;
  tally.answered += episode.answered_steps;
  tally.uncertain += episode.uncertain_steps;
  tally.owner_lost += episode.owner_lost;
  const Store* home = nullptr;
  int holders = 0;
  for (const Store& store : stores) {
    if (store.episodes.count(episode.trajectory)) {
      home = &store;
      ++holders;
    }
  }
  const bool lenient = episode.owner_lost || server_lost;
  int64_t& unrecorded = lenient ? tally.owner_lost_unrecorded : tally.lost;
  if (home == nullptr) {
    tally.missing += !lenient;
    unrecorded += episode.answered_steps;
    return;
  }
  ++tally.found;
  tally.several += holders > 1;
  tally.wrong_store += home->server_id != episode.server;
  const agents::EpisodeSummary& summary = home->episodes.at(episode.trajectory);
  if (summary.outcome) {
    ++tally.outcomes[std::string(agents::EpisodeOutcomeName(*summary.outcome))];
  } else {
    tally.open += !lenient;
  }
  tally.steps_recorded += summary.steps;
  unrecorded += std::max<int64_t>(0, episode.answered_steps - summary.steps);
  tally.extra += std::max<int64_t>(0, summary.steps - episode.answered_steps);
}

Json StoresJson(const std::vector<Store>& stores, const std::vector<EpisodeTally>& episodes) {
  Json listed = Json::array();
  for (const Store& store : stores) {
    int64_t ours = 0;
    for (const EpisodeTally& episode : episodes) ours += episode.created && store.episodes.count(episode.trajectory);
    listed.push_back(Json{{"path", store.path}, {"server", store.server_id}, {"episodes_of_this_run", ours}});
  }
  return listed;
}

// One pass over the stores as they are now.
Json ReconcileOnce(const std::string& spec, const std::vector<EpisodeTally>& episodes, bool* ok) {
  *ok = false;
  auto stores = ParseStores(spec);
  if (!stores.ok()) return Json{{"error", stores.status().message()}};
  for (Store& store : *stores) {
    if (Status read = ReadStore(store); !read.ok()) return Json{{"error", store.path + ": " + read.message()}};
    InferServerId(store, episodes);
  }
  std::set<std::string> servers_lost;
  for (const EpisodeTally& episode : episodes) {
    if (episode.owner_lost && !episode.server.empty()) servers_lost.insert(episode.server);
  }
  Tally tally;
  for (const EpisodeTally& episode : episodes) {
    if (episode.created) ReconcileEpisode(episode, servers_lost.count(episode.server) > 0, *stores, tally);
  }
  *ok = tally.lost == 0 && tally.missing == 0 && tally.open == 0 && tally.several == 0 && tally.wrong_store == 0;
  return Json{{"store", spec},
              {"stores", StoresJson(*stores, episodes)},
              {"episodes_started", tally.expected},
              {"episodes_recorded", tally.found},
              {"episodes_missing", tally.missing},
              {"episodes_open", tally.open},
              {"episodes_in_several_stores", tally.several},
              {"episodes_not_in_owner_store", tally.wrong_store},
              {"episodes_owner_lost", tally.owner_lost},
              {"servers_lost", servers_lost},
              {"episode_outcomes", tally.outcomes},
              {"steps_answered", tally.answered},
              {"steps_uncertain", tally.uncertain},
              {"steps_recorded", tally.steps_recorded},
              {"steps_recorded_beyond_answered", tally.extra},
              {"steps_unrecorded_owner_lost", tally.owner_lost_unrecorded},
              {"lost", tally.lost}};
}

// Reconciles once the stores have settled: a fleet's servers flush on their own (each every
// 100 ms) and the control connection reaches only one of them, so the stores are read again
// until the reconciliation succeeds or stays the same for a second (30 s at most).
Json Reconcile(const std::string& spec, const std::vector<EpisodeTally>& episodes, bool* ok) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  Json last = ReconcileOnce(spec, episodes, ok);
  int unchanged = 0;
  while (!*ok && !last.contains("error") && unchanged < 5 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Json again = ReconcileOnce(spec, episodes, ok);
    unchanged = again == last ? unchanged + 1 : 0;
    last = std::move(again);
  }
  return last;
}

struct BenchConfig {
  std::string url;  // as given
  server::LoadOptions load;
  bool chaos = false;
  std::chrono::milliseconds kill_interval{100};
};

Result<BenchConfig> ConfigFrom(const ParsedArgs& parsed) {
  BenchConfig config;
  config.url = *parsed.Option("--url");  // required by the declaration
  server::LoadOptions& load = config.load;
  ENVFORGE_RETURN_IF_ERROR(LoadTargetFrom(parsed, &load));
  ENVFORGE_ASSIGN_OR_RETURN(long long sessions, parsed.IntOption("--sessions", 1, 10'000'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long steps, parsed.IntOption("--steps", 0, 100'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long concurrency, parsed.IntOption("--concurrency", 1, 20'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long drop_permille, parsed.IntOption("--chaos-drop-rate", 0, 1000));
  ENVFORGE_ASSIGN_OR_RETURN(long long kill_interval, parsed.IntOption("--chaos-interval-ms", 1, 3'600'000));
  load.sessions = static_cast<size_t>(sessions);
  load.steps = static_cast<size_t>(steps);
  load.concurrency = static_cast<size_t>(concurrency);
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

// How the episodes ended as the clients saw them, and per server id (a fleet's handles name
// their owner): episodes and answered steps.
Json EpisodeEnds(const std::vector<EpisodeTally>& episodes) {
  std::map<std::string, int64_t> ends;
  for (const EpisodeTally& episode : episodes) ++ends[episode.created ? episode.end : "not_created"];
  return ends;
}

Json PerServer(const std::vector<EpisodeTally>& episodes) {
  Json servers = Json::object();
  for (const EpisodeTally& episode : episodes) {
    if (!episode.created || episode.server.empty()) continue;
    Json& server = servers[episode.server];
    if (server.is_null()) server = Json{{"episodes", 0}, {"steps_answered", 0}, {"owner_lost", 0}};
    server["episodes"] = server.value("episodes", 0) + 1;
    server["steps_answered"] = server.value("steps_answered", int64_t{0}) + episode.answered_steps;
    server["owner_lost"] = server.value("owner_lost", 0) + (episode.owner_lost ? 1 : 0);
  }
  return servers;
}

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
              {"first_tool_call_ms", Percentiles(stats.first_call_latency_ms)},
              {"tool_outcomes", stats.outcomes},
              {"episode_ends", EpisodeEnds(run.episodes())},
              {"servers", PerServer(run.episodes())},
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
  const Json& first = report.value("first_tool_call_ms", Json::object());
  if (first.value("n", 0) > 0) {
    std::printf("  an episode's first tools/call: p50 %s ms, p99 %s ms\n", first.value("p50", Json()).dump().c_str(),
                first.value("p99", Json()).dump().c_str());
  }
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

// Runs the load until every episode ended, printing progress to stderr; the seconds it took.
double RunWithProgress(server::LoadRun& run, const BenchConfig& config, const SessionKiller& killer) {
  const auto started = Clock::now();
  run.Run([&](const server::LoadProgress& p) {
    std::fprintf(stderr, "bench serve: %zu/%zu episodes, %llu tool calls (%.0f/s), %llu sessions killed\n",
                 p.episodes_done, config.load.sessions, static_cast<unsigned long long>(p.tool_calls_answered),
                 static_cast<double>(p.tool_calls_answered) / p.seconds,
                 static_cast<unsigned long long>(killer.killed()));
  });
  return std::chrono::duration<double>(Clock::now() - started).count();
}

// One load against config's server: its report, reconciled with the server's store when
// `trajectories` is given (*reconciled is false when that reconciliation failed).
Result<Json> MeasureLoad(const ParsedArgs& parsed, BenchConfig& config, const std::optional<std::string>& trajectories,
                         bool* reconciled) {
  ENVFORGE_ASSIGN_OR_RETURN(auto control, Prepare(config));
  IdleHold idle;
  ENVFORGE_RETURN_IF_ERROR(StartIdleHold(parsed, config.load, &idle));
  ENVFORGE_ASSIGN_OR_RETURN(auto run, server::LoadRun::Create(config.load));

  SessionKiller killer(config);
  const double seconds = RunWithProgress(*run, config, killer);
  if (idle.flood) {
    idle.report["server_after_load"] = ProcessFootprint(idle.server);
    idle.report["flood_after_load"] = idle.flood->Report();
    idle.flood->Stop();
  }
  killer.Stop();

  Json report = LoadReport(config, *run, run->Stats(), seconds, killer);
  report["idle_flood"] = idle.report;
  *reconciled = true;
  if (trajectories) {
    WaitForTrajectoryFlush(*control);
    report["reconciliation"] = Reconcile(*trajectories, run->episodes(), reconciled);
    report["lost"] = report["reconciliation"].value("lost", -1);
  }
  return report;
}

// ------------------------------------------------------------------------------------------------
// --compare URL: the same load against --url (envforge) and then against a peer server
// (bench/peers/), both reports and their ratios.

// The peer's configuration: envforge's with the peer's URL (same transport, token and load).
Result<BenchConfig> PeerConfigFrom(const ParsedArgs& parsed, const BenchConfig& envforge) {
  BenchConfig peer = envforge;
  peer.url = *parsed.Option("--compare");
  ENVFORGE_RETURN_IF_ERROR(
      server::ParseLoadUrl(peer.url, parsed.OptionOr("--transport"), &peer.load).WithContext("--compare"));
  return peer;
}

// A figure of a report: latency_ms[method][quantile], or calls_per_s when `method` is empty;
// 0 when the report has none.
double Figure(const Json& report, const std::string& method, const std::string& quantile = "") {
  if (method.empty()) return report.value("calls_per_s", 0.0);
  const Json& latency = report["latency_ms"].value(method, Json::object());
  auto it = latency.find(quantile);
  return it != latency.end() && it->is_number() ? it->get<double>() : 0.0;
}

// numerator / denominator rounded to 3 decimals; null when either is missing (0).
Json Ratio(double numerator, double denominator) {
  if (numerator <= 0 || denominator <= 0) return nullptr;
  return std::round(numerator / denominator * 1000) / 1000;
}

// The latencies compared (method, the stem of its ratios' keys), each at p50 and p99.
constexpr std::pair<const char*, const char*> kComparedLatencies[] = {{"tools/call", "tools_call"},
                                                                      {"session/create", "session_create"}};
constexpr const char* kComparedQuantiles[] = {"p50", "p99"};

std::string LatencyRatioKey(const char* stem, const char* quantile) {
  return std::string(stem) + "_" + quantile + "_peer_over_envforge";
}

// Every ratio reads "above 1: envforge is better" (more calls/s, lower latency).
Json Ratios(const Json& envforge, const Json& peer) {
  Json ratios{{"calls_per_s_envforge_over_peer", Ratio(Figure(envforge, ""), Figure(peer, ""))}};
  for (const auto& [method, stem] : kComparedLatencies) {
    for (const char* quantile : kComparedQuantiles) {
      ratios[LatencyRatioKey(stem, quantile)] =
          Ratio(Figure(peer, method, quantile), Figure(envforge, method, quantile));
    }
  }
  return ratios;
}

void PrintComparison(const Json& comparison) {
  for (const char* side : {"envforge", "peer"}) {
    std::printf("%s (%s):\n  ", side, comparison[side]["url"].get<std::string>().c_str());
    PrintSummary(comparison[side]);
  }
  const Json& envforge = comparison["envforge"];
  const Json& peer = comparison["peer"];
  const Json& ratios = comparison["ratios"];
  std::printf("%-22s %12s %12s %10s\n", "", "envforge", "peer", "ratio");
  std::printf("%-22s %12.0f %12.0f %10s  (envforge/peer)\n", "calls/s", Figure(envforge, ""), Figure(peer, ""),
              ratios["calls_per_s_envforge_over_peer"].dump().c_str());
  for (const auto& [method, stem] : kComparedLatencies) {
    for (const char* quantile : kComparedQuantiles) {
      std::string label = std::string(method) + " " + quantile + " ms";
      std::printf("%-22s %12.3f %12.3f %10s  (peer/envforge)\n", label.c_str(), Figure(envforge, method, quantile),
                  Figure(peer, method, quantile), ratios[LatencyRatioKey(stem, quantile)].dump().c_str());
    }
  }
}

// The peer keeps no trajectories: --trajectories reconciles the envforge run only. Chaos is
// refused: killing sessions through /proc only means something for envforge's processes.
int BenchServeCompare(const ParsedArgs& parsed) {
  const char* prefix = "envforge bench serve --compare";
  if (parsed.Has("--chaos"))
    return Fail(InvalidArgumentError("--chaos cannot be combined with --compare (the comparison runs without faults)"),
                kExitUsage, prefix);
  auto envforge_config = ConfigFrom(parsed);
  if (!envforge_config.ok()) return Fail(envforge_config.status(), kExitUsage, prefix);
  auto peer_config = PeerConfigFrom(parsed, *envforge_config);
  if (!peer_config.ok()) return Fail(peer_config.status(), kExitUsage, prefix);
  bool reconciled = true, unused = true;
  auto envforge = MeasureLoad(parsed, *envforge_config, parsed.Option("--trajectories"), &reconciled);
  if (!envforge.ok()) return Fail(envforge.status(), ExitCodeFor(envforge.status()), "envforge bench serve (envforge)");
  peer_config->load.tool = envforge_config->load.tool;  // the tool envforge's run resolved, default included
  auto peer = MeasureLoad(parsed, *peer_config, std::nullopt, &unused);
  if (!peer.ok()) return Fail(peer.status(), ExitCodeFor(peer.status()), "envforge bench serve (peer)");
  Json comparison{{"envforge", *envforge}, {"peer", *peer}, {"ratios", Ratios(*envforge, *peer)}};
  if (parsed.Has("--json")) {
    std::printf("%s\n", comparison.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    PrintComparison(comparison);
  }
  return reconciled ? kExitOk : kExitCheckFailed;
}

int BenchServe(const ParsedArgs& parsed) {
  if (parsed.Given("--compare")) return BenchServeCompare(parsed);
  auto config = ConfigFrom(parsed);
  if (!config.ok()) return Fail(config.status(), kExitUsage, "envforge bench serve");
  bool reconciled = true;
  auto report = MeasureLoad(parsed, *config, parsed.Option("--trajectories"), &reconciled);
  if (!report.ok()) return Fail(report.status(), ExitCodeFor(report.status()), "envforge bench serve");
  if (parsed.Has("--json")) {
    std::printf("%s\n", report->dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    PrintSummary(*report);
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
            "from writing the request to reading its answer; each episode's first tools/call is also reported "
            "apart (first_tool_call_ms), since it meets a session process fresh from its start or recycle.\n"
            "--chaos: a killer SIGKILLs a random session process of the server (found through /proc) every "
            "--chaos-interval-ms, and clients drop their connection right after writing a tools/call (about "
            "--chaos-drop-rate of them), reconnect and go on with the same session.\n"
            "--idle-connections N holds N connections that never send a byte for the whole run and reports the "
            "server's descriptors and memory.\n"
            "--trajectories FILE (the server's store): every episode the clients created must be recorded and "
            "ended with at least the steps the clients saw answered; exit 1 when lost > 0 or an episode is missing "
            "or open. Behind a load balancer give every server's store, ID=PATH,ID=PATH,...: each episode must be "
            "in exactly one, its owner's (the id in its handle); episodes whose server was lost end infra_error and "
            "are not counted lost.\n"
            "--compare URL runs the same load (same options, same clients) against --url and then against the "
            "peer server at URL (bench/peers/aiohttp_env_server.py), prints both reports and the ratios (calls/s "
            "envforge/peer; tools/call and session/create p50 and p99 peer/envforge: above 1, envforge is better); "
            "with --json one object {envforge, peer, ratios}. --trajectories reconciles the envforge run only; "
            "--chaos is refused.",
        .options = WithLoadTarget(
            {{.name = "--sessions", .metavar = "N", .help = "episodes in all", .default_text = "1000"},
             {.name = "--steps", .metavar = "N", .help = "tools/call per episode", .default_text = "20"},
             {.name = "--concurrency", .metavar = "C", .help = "clients (connections) at once", .default_text = "256"},
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
             {.name = "--trajectories",
              .metavar = "FILE.sqlite|ID=FILE,...",
              .help = "the server's trajectory store (a fleet's: every server's, comma-separated, ID=FILE or FILE): "
                      "reconcile what the clients saw with it"},
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
             {.name = "--compare",
              .metavar = "URL",
              .help = "run the same load against this peer server after --url and report both and their ratios "
                      "(bench/peers/); not with --chaos",
              .section = "comparison"},
             JsonOption("the report as JSON")})},
       BenchServe},
  };
}

}  // namespace envforge::cli
