// envforge bench sandbox: session creation latency, tool call latency and throughput, and memory
// per live session, printed as JSON figures (targets live here, never in timed unit tests).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/percentiles.h"
#include "apps/envforge/progress.h"
#include "apps/envforge/solve_task.h"
#include "base/json.h"
#include "sandbox/session_manager.h"

namespace envforge::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct MemoryFigures {
  long long pss_kib = 0;
  long long rss_kib = 0;
  bool ok = false;
};

// Pss is the honest figure for forked processes: shared copy-on-write pages are divided among
// the processes sharing them, so the sum over all processes is the real memory in use.
MemoryFigures ReadMemory(pid_t pid) {
  MemoryFigures figures;
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string key;
  long long value;
  std::string unit;
  while (in >> key) {
    if (key == "Pss:" && in >> value >> unit) {
      figures.pss_kib = value;
      figures.ok = true;
    } else if (key == "Rss:" && in >> value >> unit) {
      figures.rss_kib = value;
    } else {
      in.ignore(1 << 16, '\n');
    }
  }
  return figures;
}

std::string DefaultTool(const sandbox::EnvBundle& bundle) {
  for (const auto& tool : bundle.tools) {
    if (tool.builtin) continue;
    const Json& required =
        tool.spec.input_schema.contains("required") ? tool.spec.input_schema["required"] : Json::array();
    if (required.empty()) return tool.spec.name;
  }
  return {};
}

// Waits (progress on stderr) until the pool has made `wanted` copies ahead of the warm-up session
// (none are made where sessions get overlays).
void WaitForReadyCopies(sandbox::SessionManager& manager, const std::string& env_id, long long wanted) {
  Result<Json> method = manager.CodeCopyStats(env_id);
  if (!method.ok() || (*method)["method"] == "overlay") return;
  Progress progress("working copies made ahead", static_cast<size_t>(wanted));
  for (;;) {
    Result<Json> stats = manager.CodeCopyStats(env_id);
    const long long made = stats.ok() ? (*stats)["copies_made_ahead"].get<long long>() : wanted;
    progress.Update(static_cast<size_t>(std::min(made, wanted)));
    if (made >= wanted) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  progress.Finish();
}

// Waits (up to 60 s) until `wanted` warm sessions are ready: a server that has been up a while
// has a full pool.
void WaitForWarmSessions(sandbox::SessionManager& manager, size_t wanted) {
  if (wanted == 0) return;
  Progress progress("warm sessions", wanted);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (manager.Stats().warm_ready < wanted && Clock::now() < deadline) {
    progress.Update(manager.Stats().warm_ready);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  progress.Finish();
}

int BenchSandbox(const ParsedArgs& parsed) {
  auto sessions_wanted = parsed.IntOption("--sessions", 1, 20000);
  auto calls_wanted = parsed.IntOption("--calls", 10, 10'000'000);
  auto concurrency = parsed.IntOption("--concurrency", 1, 4096);
  auto ready_copies = parsed.IntOption("--code-ready-copies", 0, 4096);
  auto warm_sessions = parsed.IntOption("--warm-sessions", 0, 20000);
  for (const auto* r : {&sessions_wanted, &calls_wanted, &concurrency, &ready_copies, &warm_sessions}) {
    if (!r->ok()) return Fail(r->status(), kExitUsage);
  }
  bool json_output = parsed.Has("--json");

  RaiseFileLimit();
  auto limited = ManagerOptionsFromLimitsOption(parsed.Option("--limits"));
  if (!limited.ok()) return Fail(limited.status(), kExitUsage);
  sandbox::ManagerOptions options = *limited;
  options.max_sessions = static_cast<size_t>(*sessions_wanted) + 8;
  options.code_ready_copies = static_cast<size_t>(*ready_copies);
  options.warm_sessions = static_cast<size_t>(*warm_sessions);
  auto manager = sandbox::SessionManager::Create(options);
  if (!manager.ok()) return Fail(manager.status(), kExitInfra);
  auto env_id = (*manager)->OpenEnvironment(parsed.positional[0]);
  if (!env_id.ok()) return Fail(env_id.status(), kExitUsage);
  const auto* bundle = (*manager)->FindEnvironment(*env_id);
  std::string tool = parsed.Option("--tool").value_or(DefaultTool(*bundle));
  if (tool.empty() || bundle->FindTool(tool) == nullptr) {
    return Fail(InvalidArgumentError("envforge bench sandbox: pass --tool NAME of a tool of this environment"),
                kExitUsage);
  }
  auto arguments = ParseJson(parsed.OptionOr("--arguments"), "--arguments");
  if (!arguments.ok()) return Fail(arguments.status(), kExitUsage);
  // --task: every session is one of this task, so `--tool submit_result` measures a verdict.
  std::string task = parsed.OptionOr("--task");
  if (!task.empty() && bundle->FindTask(task) == nullptr) {
    return Fail(InvalidArgumentError("envforge bench sandbox: no task '" + task + "' in this environment"), kExitUsage);
  }

  // Warm-up: the first session starts the zygote (interpreter start, compile) -- not a session cost.
  // A code environment's sessions need a task (the working copy is its repository).
  const bool code = bundle->manifest.kind == "code";
  if (code && task.empty()) {
    return Fail(InvalidArgumentError("envforge bench sandbox: a code environment needs --task ID"), kExitUsage);
  }
  auto warm = (*manager)->CreateSession(*env_id, code ? task : std::string());
  if (!warm.ok()) return Fail(warm.status(), kExitInfra);
  (void)(*manager)->CloseSession(*warm);
  // A code task's first session extracted its template; its ready copies are being made: a
  // service that has been up a while has them, so the creates below start from a full pool.
  if (code) WaitForReadyCopies(**manager, *env_id, *ready_copies);
  // Likewise the warm sessions the warm-up's create asked for.
  WaitForWarmSessions(**manager, options.warm_sessions);

  // 1. Session creation, keeping every session alive for the memory figure.
  std::vector<sandbox::SessionManager::SessionId> sessions;
  std::vector<double> create_ms;
  Progress create_progress("creating sessions", static_cast<size_t>(*sessions_wanted));
  for (long long i = 0; i < *sessions_wanted; ++i) {
    auto start = Clock::now();
    auto session = (*manager)->CreateSession(*env_id, task);
    create_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!session.ok()) return Fail(session.status().WithContext("session " + std::to_string(i)), kExitInfra);
    sessions.push_back(*session);
    create_progress.Update(sessions.size());
  }
  create_progress.Finish();

  // 2. Memory of the live sessions and of the zygote they share.
  long long pss_total = 0, rss_total = 0, measured = 0;
  for (auto id : sessions) {
    auto info = (*manager)->GetSessionInfo(id);
    if (!info.ok()) continue;
    MemoryFigures figures = ReadMemory(info->pid);
    if (!figures.ok) continue;
    pss_total += figures.pss_kib;
    rss_total += figures.rss_kib;
    ++measured;
  }
  long long zygote_pss = 0;
  Json isolation;
  for (const auto& zygote : (*manager)->Zygotes()) {
    zygote_pss += ReadMemory(zygote.pid).pss_kib;
    isolation = zygote.isolation;
  }

  // 3. Sequential tool calls on one session: the round trip a single agent sees.
  auto make_call = [&](size_t n) {
    toolsets::ToolCall call;
    call.id = std::to_string(n);
    call.name = tool;
    call.arguments = *arguments;
    return call;
  };
  std::vector<double> call_us, manager_us;
  size_t sequential = static_cast<size_t>(std::min<long long>(*calls_wanted, 20000));
  Progress call_progress("sequential tool calls", sequential);
  for (size_t i = 0; i < sequential; ++i) {
    auto start = Clock::now();
    auto result = (*manager)->CallTool(sessions[0], make_call(i));
    call_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (!result.ok()) {
      return Fail(InternalError("tool call " + tool + " answered " +
                                std::string(toolsets::OutcomeName(result.outcome)) + ": " + result.message),
                  kExitInfra);
    }
    manager_us.push_back(result.duration_us);
    call_progress.Update(i + 1);
  }
  call_progress.Finish();

  // 4. Throughput: `concurrency` sessions, each keeping one call in flight, until calls_wanted.
  size_t lanes = std::min(sessions.size(), static_cast<size_t>(*concurrency));
  std::atomic<size_t> issued{0}, answered{0}, failed{0};
  std::mutex mutex;
  std::condition_variable all_done;
  std::string first_failure;  // guarded by mutex
  size_t total_calls = static_cast<size_t>(*calls_wanted);
  std::function<void(size_t)> issue = [&](size_t lane) {
    size_t n = issued.fetch_add(1);
    if (n >= total_calls) return;
    (*manager)->CallToolAsync(sessions[lane], make_call(n), [&, lane](toolsets::ToolResult result) {
      if (!result.ok() && failed.fetch_add(1) == 0) {
        std::lock_guard<std::mutex> lock(mutex);
        first_failure = std::string(toolsets::OutcomeName(result.outcome)) + ": " + result.message;
      }
      if (answered.fetch_add(1) + 1 == total_calls) {
        std::lock_guard<std::mutex> lock(mutex);
        all_done.notify_all();
        return;
      }
      issue(lane);
    });
  };
  auto throughput_start = Clock::now();
  for (size_t lane = 0; lane < lanes; ++lane) issue(lane);
  {
    Progress throughput_progress("concurrent tool calls", total_calls);
    std::unique_lock<std::mutex> lock(mutex);
    while (!all_done.wait_for(lock, std::chrono::milliseconds(200), [&] { return answered.load() >= total_calls; })) {
      throughput_progress.Update(answered.load());
    }
    throughput_progress.Finish();
  }
  double throughput_seconds = std::chrono::duration<double>(Clock::now() - throughput_start).count();

  // 5. Fork latency: a copy of a live session (its worker, and a code session's working copy),
  // closed again at once.
  std::vector<double> fork_ms;
  for (size_t i = 0; i < std::min<size_t>(sessions.size(), 50); ++i) {
    auto start = Clock::now();
    auto forked = (*manager)->ForkSession(sessions[i]);
    fork_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!forked.ok()) return Fail(forked.status().WithContext("fork"), kExitInfra);
    (void)(*manager)->CloseSession(*forked);
  }

  // 6. Reset latency (the episode ends, a fresh fork of the zygote replaces it), then close all.
  std::vector<double> reset_ms;
  for (size_t i = 0; i < std::min<size_t>(sessions.size(), 200); ++i) {
    auto start = Clock::now();
    auto fresh = (*manager)->ResetSession(sessions[i]);
    reset_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!fresh.ok()) return Fail(fresh.status().WithContext("reset"), kExitInfra);
    sessions[i] = *fresh;
  }
  for (auto id : sessions) (void)(*manager)->CloseSession(id);

  Json figures{
      {"env", bundle->manifest.name},
      {"tool", tool},
      {"task", task},
      {"sessions", sessions_wanted.value()},
      {"session_create_ms", Percentiles(create_ms)},
      {"session_reset_ms", Percentiles(reset_ms)},
      {"session_fork_ms", Percentiles(fork_ms)},
      {"tool_call_us", Percentiles(call_us)},
      {"tool_call_manager_us", Percentiles(manager_us)},
      {"calls_per_s", static_cast<long long>(static_cast<double>(total_calls) / throughput_seconds)},
      {"concurrency", lanes},
      {"calls_failed", failed.load()},
      {"first_failure", first_failure},
      {"rss_per_session_kib", measured ? rss_total / measured : 0},
      {"pss_per_session_kib", measured ? pss_total / measured : 0},
      {"total_pss_mib", (pss_total + zygote_pss) / 1024},
      {"zygote_pss_kib", zygote_pss},
      {"isolation", isolation},
  };
  if (code) {
    Result<Json> copies = (*manager)->CodeCopyStats(*env_id);
    if (copies.ok()) figures["code_copies"] = *copies;
  }
  if (json_output) {
    std::printf("%s\n", figures.dump(2).c_str());
  } else {
    auto p = [&figures](const char* key, const char* q) { return figures[key][q].get<double>(); };
    std::printf("environment %s, tool %s, %lld live sessions\n", bundle->manifest.name.c_str(), tool.c_str(),
                sessions_wanted.value());
    std::printf("  session create   p50 %8.3f ms   p99 %8.3f ms\n", p("session_create_ms", "p50"),
                p("session_create_ms", "p99"));
    std::printf("  session reset    p50 %8.3f ms   p99 %8.3f ms\n", p("session_reset_ms", "p50"),
                p("session_reset_ms", "p99"));
    std::printf("  session fork     p50 %8.3f ms   p99 %8.3f ms\n", p("session_fork_ms", "p50"),
                p("session_fork_ms", "p99"));
    std::printf("  tool call        p50 %8.1f us   p99 %8.1f us\n", p("tool_call_us", "p50"), p("tool_call_us", "p99"));
    std::printf("  throughput       %lld calls/s at concurrency %zu\n", figures["calls_per_s"].get<long long>(), lanes);
    std::printf("  memory           %lld KiB PSS per session, %lld MiB in total (zygote included)\n",
                figures["pss_per_session_kib"].get<long long>(), figures["total_pss_mib"].get<long long>());
    if (figures.contains("code_copies")) {
      const Json& copies = figures["code_copies"];
      std::printf(
          "  working copies   %s: %lld overlays (%lld forks), %lld ready when asked for, %lld copied while "
          "the session waited\n",
          copies["method"].get<std::string>().c_str(), copies["overlay_checkouts"].get<long long>(),
          copies["overlay_forks"].get<long long>(), copies["ready_checkouts"].get<long long>(),
          copies["copied_checkouts"].get<long long>());
    }
  }
  return failed.load() == 0 ? kExitOk : kExitInfra;
}

}  // namespace

std::vector<Command> BenchSandboxCommands() {
  return {
      {{.name = "bench sandbox",
        .positionals = "X.envdb",
        .summary = "session create and tool call latency, memory per session",
        .details = "Creates N sessions (kept alive for the memory figure: PSS per session), then makes calls across "
                   "them, C at a time. Exit 3 when a call failed.",
        .options =
            {{.name = "--sessions", .metavar = "N", .help = "sessions created (1..20000)", .default_text = "200"},
             {.name = "--calls", .metavar = "N", .help = "tool calls made (at least 10)", .default_text = "5000"},
             {.name = "--concurrency", .metavar = "C", .help = "calls in flight at once", .default_text = "32"},
             {.name = "--tool",
              .metavar = "NAME",
              .help = "the tool called",
              .default_text = "the first of the environment's own tools with no required argument",
              .computed = true},
             {.name = "--arguments", .metavar = "JSON", .help = "the tool's arguments", .default_text = "{}"},
             {.name = "--task",
              .metavar = "ID",
              .help = "every session is one of this task (so --tool submit_result measures a verdict); a code "
                      "environment needs it"},
             {.name = "--warm-sessions",
              .metavar = "N",
              .help = "sessions forked ahead of demand (a full pool before the creates start); 0: each create forks",
              .default_text = "0"},
             {.name = "--code-ready-copies",
              .metavar = "N",
              .help = "code environments: working copies made ahead per task",
              .default_text = "2"},
             LimitsOption(),
             JsonOption("the figures as JSON")},
        .min_positional = 1,
        .max_positional = 1},
       BenchSandbox},
  };
}

}  // namespace envforge::cli
