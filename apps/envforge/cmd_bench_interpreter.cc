// envforge bench interpreter: interpreter sessions (a sandboxed Jupyter kernel each) through the
// session manager: create latency from a warm pool and cold, execute("1+1") round trips,
// executes per second across sessions, memory per kernel with many sessions alive, and the
// pool's refill rate. JSON figures with --json (targets live here, never in timed tests).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
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
using SessionId = sandbox::SessionManager::SessionId;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

toolsets::ToolCall ExecuteCall(size_t n, const std::string& code) {
  return {std::to_string(n), "execute", {{"code", code}}};
}

// Waits until the pool holds `ready` kernels; the seconds it took, or a negative number on timeout.
double WaitForPool(const sandbox::SessionManager& manager, const std::string& env_id, size_t ready, double timeout_s) {
  const auto start = Clock::now();
  while (MsSince(start) < timeout_s * 1000) {
    Result<Json> stats = manager.KernelPoolStats(env_id);
    if (stats.ok() && (*stats)["ready"].get<size_t>() >= ready) return MsSince(start) / 1000;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

struct BenchSetup {
  std::string bundle;
  size_t sessions = 100;
  size_t pool = 8;
  size_t executes = 2000;
  size_t concurrency = 32;
  size_t cold = 8;
};

Result<std::unique_ptr<sandbox::SessionManager>> NewManager(const BenchSetup& setup, size_t pool) {
  sandbox::ManagerOptions options;
  options.kernel_pool_size = pool;
  options.max_sessions = setup.sessions + 16;
  return sandbox::SessionManager::Create(options);
}

// Cold creates: a manager whose pool keeps no kernel, so every session waits for one to start.
Result<std::vector<double>> ColdCreates(const BenchSetup& setup) {
  ENVFORGE_ASSIGN_OR_RETURN(auto manager, NewManager(setup, 0));
  ENVFORGE_ASSIGN_OR_RETURN(std::string env_id, manager->OpenEnvironment(setup.bundle));
  std::vector<double> create_ms;
  Progress progress("cold creates (no pool)", setup.cold);
  for (size_t i = 0; i < setup.cold; ++i) {
    const auto start = Clock::now();
    ENVFORGE_ASSIGN_OR_RETURN(SessionId session, manager->CreateSession(env_id));
    create_ms.push_back(MsSince(start));
    (void)manager->CloseSession(session);
    progress.Update(i + 1);
  }
  progress.Finish();
  return create_ms;
}

// `total` executes of "1+1" over the sessions, each keeping one in flight; executes per second.
Result<double> ConcurrentExecutes(sandbox::SessionManager& manager, const std::vector<SessionId>& sessions,
                                  size_t total) {
  std::atomic<size_t> issued{0}, answered{0}, failed{0};
  std::mutex mutex;
  std::condition_variable done;
  std::string first_failure;
  std::function<void(size_t)> issue = [&](size_t lane) {
    const size_t n = issued.fetch_add(1);
    if (n >= total) return;
    manager.CallToolAsync(sessions[lane], ExecuteCall(n, "1+1"), [&, lane](toolsets::ToolResult result) {
      if (!result.ok() && failed.fetch_add(1) == 0) {
        std::lock_guard<std::mutex> lock(mutex);
        first_failure = result.message;
      }
      if (answered.fetch_add(1) + 1 == total) {
        std::lock_guard<std::mutex> lock(mutex);
        done.notify_all();
        return;
      }
      issue(lane);
    });
  };
  const auto start = Clock::now();
  for (size_t lane = 0; lane < sessions.size(); ++lane) issue(lane);
  Progress progress("concurrent executes", total);
  std::unique_lock<std::mutex> lock(mutex);
  while (!done.wait_for(lock, std::chrono::milliseconds(200), [&] { return answered.load() >= total; })) {
    progress.Update(answered.load());
  }
  progress.Finish();
  if (failed.load() > 0)
    return InternalError(std::to_string(failed.load()) + " executes failed; first: " + first_failure);
  return static_cast<double>(total) / (MsSince(start) / 1000);
}

Result<Json> RunBench(const BenchSetup& setup) {
  ENVFORGE_ASSIGN_OR_RETURN(auto manager, NewManager(setup, setup.pool));
  ENVFORGE_ASSIGN_OR_RETURN(std::string env_id, manager->OpenEnvironment(setup.bundle));
  const sandbox::EnvBundle* bundle = manager->FindEnvironment(env_id);
  if (bundle->manifest.kind != "interpreter") {
    return InvalidArgumentError(setup.bundle + " is a '" + bundle->manifest.kind +
                                "' environment, not an interpreter one");
  }
  // The first session also starts the environment's zygote: not a per-session cost.
  if (WaitForPool(*manager, env_id, setup.pool, 300) < 0) return DeadlineExceededError("the kernel pool did not fill");
  ENVFORGE_ASSIGN_OR_RETURN(SessionId warmup, manager->CreateSession(env_id));
  (void)manager->CloseSession(warmup);

  // 1. Warm creates, a pool's worth at a time; between rounds the pool refills (timed). The
  // first create of a round meets a full, quiet pool ("settled"); the others run while the pool
  // already restarts kernels in the background, as they would under a burst.
  std::vector<SessionId> sessions;
  std::vector<double> warm_ms, settled_ms, refill_s;
  Progress progress("sessions (warm creates, pool refills)", setup.sessions);
  while (sessions.size() < setup.sessions) {
    const double waited = WaitForPool(*manager, env_id, setup.pool, 300);
    if (waited < 0) return DeadlineExceededError("the kernel pool did not refill");
    if (!sessions.empty()) refill_s.push_back(waited);
    for (size_t i = 0; i < setup.pool && sessions.size() < setup.sessions; ++i) {
      const auto start = Clock::now();
      ENVFORGE_ASSIGN_OR_RETURN(SessionId session, manager->CreateSession(env_id));
      warm_ms.push_back(MsSince(start));
      if (i == 0) settled_ms.push_back(warm_ms.back());
      sessions.push_back(session);
      progress.Update(sessions.size());
    }
  }
  progress.Finish();

  // 2. Memory of every live kernel (its cgroup's usage), after one execute each.
  std::vector<double> kernel_mib, rss_mib, pss_mib;
  for (SessionId session : sessions) {
    (void)manager->CallTool(session, ExecuteCall(0, "1+1"));
    Result<sandbox::SessionInfo> info = manager->GetSessionInfo(session);
    if (!info.ok() || !info->kernel.is_object()) continue;
    const Json& memory = info->kernel["memory"];
    kernel_mib.push_back(memory["cgroup_bytes"].get<double>() / (1 << 20));
    rss_mib.push_back(memory["rss_bytes"].get<double>() / (1 << 20));
    pss_mib.push_back(memory["pss_bytes"].get<double>() / (1 << 20));
  }

  // 3. Sequential execute round trips on one session, with the pool full again (no kernel start
  // competing for the CPU).
  if (WaitForPool(*manager, env_id, setup.pool, 300) < 0)
    return DeadlineExceededError("the kernel pool did not refill");
  std::vector<double> execute_ms, manager_us;
  Progress sequential("execute round trips", setup.executes / 4);
  for (size_t i = 0; i < setup.executes / 4; ++i) {
    const auto start = Clock::now();
    toolsets::ToolResult result = manager->CallTool(sessions[0], ExecuteCall(i, "1+1"));
    execute_ms.push_back(MsSince(start));
    if (!result.ok())
      return InternalError("execute answered " + std::string(toolsets::OutcomeName(result.outcome)) + ": " +
                           result.message);
    manager_us.push_back(result.duration_us);
    sequential.Update(i + 1);
  }
  sequential.Finish();

  // 4. Throughput across `concurrency` sessions.
  std::vector<SessionId> lanes(sessions.begin(),
                               sessions.begin() + static_cast<long>(std::min(setup.concurrency, sessions.size())));
  ENVFORGE_ASSIGN_OR_RETURN(double executes_per_s, ConcurrentExecutes(*manager, lanes, setup.executes));

  Json pool = manager->KernelPoolStats(env_id).value();
  for (SessionId session : sessions) (void)manager->CloseSession(session);
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<double> cold_ms, ColdCreates(setup));

  double refill_per_s = 0;
  for (double seconds : refill_s) refill_per_s += seconds;
  refill_per_s =
      refill_s.empty() || refill_per_s <= 0 ? 0 : static_cast<double>(setup.pool * refill_s.size()) / refill_per_s;
  return Json{{"env", bundle->manifest.name},
              {"sessions", sessions.size()},
              {"pool_size", setup.pool},
              {"session_create_warm_ms", Percentiles(warm_ms)},
              {"session_create_settled_ms", Percentiles(settled_ms)},
              {"session_create_cold_ms", Percentiles(cold_ms)},
              {"execute_round_trip_ms", Percentiles(execute_ms)},
              {"execute_manager_us", Percentiles(manager_us)},
              {"executes_per_s", executes_per_s},
              {"concurrency", lanes.size()},
              {"kernel_cgroup_mib", Percentiles(kernel_mib)},
              {"kernel_rss_mib", Percentiles(rss_mib)},
              {"kernel_pss_mib", Percentiles(pss_mib)},
              {"total_kernel_pss_mib",
               [&] {
                 double t = 0;
                 for (double m : pss_mib) t += m;
                 return t;
               }()},
              {"pool_refill_kernels_per_s", refill_per_s},
              {"kernel_start_ms", Percentiles(pool["start_ms"].get<std::vector<double>>())},
              {"pool",
               {{"launched", pool["launched"]},
                {"failed", pool["failed"]},
                {"acquired_warm", pool["acquired_warm"]},
                {"acquired_cold", pool["acquired_cold"]}}},
              {"cpus", std::thread::hardware_concurrency()}};
}

int Interpreter(const ParsedArgs& parsed) {
  auto sessions = parsed.IntOption("--sessions", 1, 2000);
  auto pool = parsed.IntOption("--pool", 1, 256);
  auto executes = parsed.IntOption("--executes", 8, 10'000'000);
  auto concurrency = parsed.IntOption("--concurrency", 1, 2000);
  auto cold = parsed.IntOption("--cold", 1, 1000);
  for (const auto* r : {&sessions, &pool, &executes, &concurrency, &cold}) {
    if (!r->ok()) return Fail(r->status(), kExitUsage);
  }
  RaiseFileLimit();
  BenchSetup setup{parsed.positional[0],           static_cast<size_t>(*sessions),    static_cast<size_t>(*pool),
                   static_cast<size_t>(*executes), static_cast<size_t>(*concurrency), static_cast<size_t>(*cold)};
  Result<Json> figures = RunBench(setup);
  if (!figures.ok()) {
    const StatusCode code = figures.status().code();
    return Fail(figures.status(),
                code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound ? kExitUsage : kExitInfra);
  }
  const Json& f = *figures;
  if (parsed.Has("--json")) {
    std::printf("%s\n", f.dump(2).c_str());
    return kExitOk;
  }
  auto p = [&f](const char* key, const char* q) { return f[key][q].is_null() ? 0.0 : f[key][q].get<double>(); };
  std::printf("environment %s: %zu interpreter sessions alive, pool of %zu kernels\n",
              f["env"].get<std::string>().c_str(), f["sessions"].get<size_t>(), f["pool_size"].get<size_t>());
  std::printf("  create (warm pool)  p50 %9.3f ms   p99 %9.3f ms\n", p("session_create_warm_ms", "p50"),
              p("session_create_warm_ms", "p99"));
  std::printf("  create (quiet pool) p50 %9.3f ms   p99 %9.3f ms\n", p("session_create_settled_ms", "p50"),
              p("session_create_settled_ms", "p99"));
  std::printf("  create (cold)       p50 %9.3f ms   p99 %9.3f ms\n", p("session_create_cold_ms", "p50"),
              p("session_create_cold_ms", "p99"));
  std::printf("  execute 1+1         p50 %9.3f ms   p99 %9.3f ms\n", p("execute_round_trip_ms", "p50"),
              p("execute_round_trip_ms", "p99"));
  std::printf("  throughput          %.0f executes/s over %zu sessions\n", f["executes_per_s"].get<double>(),
              f["concurrency"].get<size_t>());
  std::printf("  kernel memory       p50 RSS %.1f MiB, PSS %.1f MiB, cgroup %.1f MiB; PSS %.0f MiB for all\n",
              p("kernel_rss_mib", "p50"), p("kernel_pss_mib", "p50"), p("kernel_cgroup_mib", "p50"),
              f["total_kernel_pss_mib"].get<double>());
  std::printf("  pool refill         %.2f kernels/s (kernel start p50 %.0f ms)\n",
              f["pool_refill_kernels_per_s"].get<double>(), p("kernel_start_ms", "p50"));
  return kExitOk;
}

}  // namespace

std::vector<Command> BenchInterpreterCommands() {
  return {
      {{.name = "bench interpreter",
        .positionals = "X.envdb",
        .summary =
            "interpreter sessions (a sandboxed Jupyter kernel each): create p50/p99 from the warm pool and cold, "
            "execute(\"1+1\") round trip, executes/s across sessions, memory per kernel, pool refill rate",
        .options =
            {{.name = "--sessions",
              .metavar = "N",
              .help = "sessions created from the warm pool",
              .default_text = "100"},
             {.name = "--pool", .metavar = "N", .help = "ready kernels kept", .default_text = "8"},
             {.name = "--executes",
              .metavar = "N",
              .help = "execute calls made across the sessions",
              .default_text = "2000"},
             {.name = "--concurrency", .metavar = "C", .help = "execute calls in flight at once", .default_text = "32"},
             {.name = "--cold", .metavar = "N", .help = "sessions created with no ready kernel", .default_text = "8"},
             JsonOption("the figures as JSON")},
        .min_positional = 1,
        .max_positional = 1},
       Interpreter},
  };
}

}  // namespace envforge::cli
