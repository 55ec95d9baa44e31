// envforge bench frames: the session manager's memory while hostile sessions announce frames
// they never send. Packs a small environment of its own whose tool writes a frame header on the
// session's socket (announcing the largest frame the manager accepts, or one byte more) and then
// sleeps; every session calls it at once; the figures are the manager's RSS before and while the
// headers are pending, and how sessions over the limit end. JSON figures, never a timed test.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/percentiles.h"
#include "apps/envforge/solve_task.h"
#include "base/fd.h"
#include "base/json.h"
#include "sandbox/env_pack.h"
#include "sandbox/session_manager.h"

namespace envforge::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using sandbox::SessionManager;

constexpr const char* kFloodTools = R"PY(
"""Sessions that announce a frame on their own socket and never send it (envforge bench frames)."""
import os
import struct
import time


def announce(size: int, seconds: float) -> str:
    """Writes a frame header announcing `size` bytes to the session socket, then sleeps."""
    for fd in range(3, 256):
        try:
            if os.fstat(fd).st_mode & 0o170000 == 0o140000:
                os.write(fd, struct.pack("<I", size))
                break
        except OSError:
            pass
    with open("announced", "w") as marker:
        marker.write(str(size))
    time.sleep(seconds)
    return "slept"
)PY";

Status WriteFloodEnvironment(const fs::path& dir) {
  fs::create_directories(dir / "tasks" / "noop");
  ENVFORGE_RETURN_IF_ERROR(WriteFileAtomically(
      (dir / "env.json").string(),
      R"({"name":"bench_frames","kind":"general","category":"benchmarks","description":"Sessions that announce frames they never send."})"));
  ENVFORGE_RETURN_IF_ERROR(
      WriteFileAtomically((dir / "schema.sql").string(), "CREATE TABLE notes(id INTEGER PRIMARY KEY);\n"));
  ENVFORGE_RETURN_IF_ERROR(WriteFileAtomically((dir / "tools.py").string(), kFloodTools));
  ENVFORGE_RETURN_IF_ERROR(
      WriteFileAtomically((dir / "tasks" / "noop" / "task.json").string(),
                          R"({"prompt":"Answer 1.","answer_schema":{"type":"integer"},"difficulty":1,"knobs":{}})"));
  ENVFORGE_RETURN_IF_ERROR(
      WriteFileAtomically((dir / "tasks" / "noop" / "solution.py").string(), "def solve(tools):\n    return 1\n"));
  return WriteFileAtomically((dir / "tasks" / "noop" / "verifier.py").string(),
                             "def verify(answer, db):\n    return answer == 1\n");
}

// VmRSS (now) or VmHWM (the peak so far) of this process, in KiB.
long long StatusKib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == field) {
      long long kib = 0;
      in >> kib;
      return kib;
    }
    in.ignore(1 << 16, '\n');
  }
  return 0;
}

long long ResidentKib() { return StatusKib("VmRSS:"); }

// Waits until the manager's RSS has not grown by more than 1 MiB for a second (it has read and
// acted on every header), at most `limit`.
long long SettledResidentKib(std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  long long last = ResidentKib();
  auto stable_since = Clock::now();
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    long long now = ResidentKib();
    if (now > last + 1024) {
      last = now;
      stable_since = Clock::now();
    } else if (Clock::now() - stable_since >= std::chrono::seconds(1)) {
      return now;
    }
  }
  return ResidentKib();
}

struct PhaseResult {
  Json figures;
  Status status;
};

// Creates `count` sessions, has each announce `size` bytes, and measures the manager meanwhile.
PhaseResult RunPhase(SessionManager& manager, const std::string& env_id, size_t count, uint32_t size) {
  PhaseResult result;
  std::vector<SessionManager::SessionId> sessions;
  for (size_t i = 0; i < count; ++i) {
    auto id = manager.CreateSession(env_id, std::string());
    if (!id.ok()) {
      result.status = id.status().WithContext("session " + std::to_string(i));
      for (auto created : sessions) (void)manager.CloseSession(created);
      return result;
    }
    sessions.push_back(*id);
  }
  std::vector<std::string> markers;
  // Session files live in the zygote's private scratch mount (sandbox/worker/README.md): the host
  // reaches them through the zygote's root.
  for (auto id : sessions) {
    auto info = manager.GetSessionInfo(id);
    markers.push_back("/proc/" + std::to_string(info->zygote_pid) + "/root" + info->scratch_dir + "/announced");
  }
  long long rss_before = ResidentKib();

  std::mutex mutex;
  std::vector<double> answer_ms;
  size_t violations = 0;
  std::atomic<size_t> answered{0};
  auto start = Clock::now();
  for (auto id : sessions) {
    toolsets::ToolCall call;
    call.name = "announce";
    call.arguments = Json{{"size", size}, {"seconds", 30}};
    manager.CallToolAsync(id, std::move(call), [&, start](toolsets::ToolResult answer) {
      std::lock_guard lock(mutex);
      answer_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      if (answer.message.find("protocol violation") != std::string::npos) ++violations;
      answered.fetch_add(1);
    });
  }
  // Every header written (the tool drops its marker right after) or every call answered, then a
  // moment for the manager's io thread to read what is left.
  size_t announced = 0;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    announced = static_cast<size_t>(
        std::count_if(markers.begin(), markers.end(), [](const std::string& path) { return fs::exists(path); }));
    // Over the limit, the manager kills each session on its header, before the marker.
    if (announced == markers.size() || answered.load() == markers.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  long long rss_pending = SettledResidentKib(std::chrono::seconds(60));
  long long peak_kib = StatusKib("VmHWM:");
  size_t answered_then = answered.load();
  for (auto id : sessions) (void)manager.CloseSession(id);
  while (answered.load() < sessions.size()) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  std::lock_guard lock(mutex);
  std::vector<double> early(answer_ms.begin(), answer_ms.begin() + static_cast<long>(answered_then));
  result.figures = Json{
      {"announced_bytes", size},
      {"sessions", sessions.size()},
      {"headers_written", announced},
      {"manager_rss_kib_before", rss_before},
      {"manager_rss_kib_headers_pending", rss_pending},
      {"manager_peak_rss_kib_so_far", peak_kib},
      {"manager_rss_growth_kib_per_session",
       static_cast<double>(rss_pending - rss_before) / static_cast<double>(std::max<size_t>(1, sessions.size()))},
      {"answered_while_pending", answered_then},
      {"protocol_violations", violations},
      {"answer_ms_of_those_answered_early", Percentiles(early)},
  };
  return result;
}

int Frames(const ParsedArgs& parsed) {
  auto sessions = parsed.IntOption("--sessions", 1, 20000);
  auto max_frame = parsed.IntOption("--max-frame-bytes", 4096, 64ll << 20);
  for (const auto* r : {&sessions, &max_frame}) {
    if (!r->ok()) return Fail(r->status(), kExitUsage);
  }
  RaiseFileLimit();
  char dir_template[] = "/tmp/envforge-bench-frames-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return Fail(ErrnoError("mkdtemp", errno), kExitInfra);
  fs::path dir = dir_template;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{dir};
  if (Status written = WriteFloodEnvironment(dir / "src"); !written.ok()) return Fail(written, kExitInfra);
  if (Status packed = sandbox::PackEnvironment((dir / "src").string(), (dir / "frames.envdb").string()); !packed.ok()) {
    return Fail(packed, kExitInfra);
  }

  sandbox::ManagerOptions options;
  options.max_sessions = static_cast<size_t>(*sessions) + 8;
  options.max_frame_bytes = static_cast<uint32_t>(*max_frame);
  options.limits.wall_time = std::chrono::seconds(120);  // the calls stay in flight while measured
  options.limits.memory_bytes = int64_t{128} << 20;
  auto manager = SessionManager::Create(options);
  if (!manager.ok()) return Fail(manager.status(), kExitInfra);
  auto env_id = (*manager)->OpenEnvironment((dir / "frames.envdb").string());
  if (!env_id.ok()) return Fail(env_id.status(), kExitInfra);
  auto warm = (*manager)->CreateSession(*env_id, std::string());  // starts the zygote
  if (!warm.ok()) return Fail(warm.status(), kExitInfra);
  (void)(*manager)->CloseSession(*warm);

  size_t count = static_cast<size_t>(*sessions);
  PhaseResult at_limit = RunPhase(**manager, *env_id, count, static_cast<uint32_t>(*max_frame));
  if (!at_limit.status.ok()) return Fail(at_limit.status, kExitInfra);
  PhaseResult over_limit = RunPhase(**manager, *env_id, count, static_cast<uint32_t>(*max_frame) + 1);
  if (!over_limit.status.ok()) return Fail(over_limit.status, kExitInfra);

  Json figures{{"max_frame_bytes", *max_frame},
               {"sessions", count},
               {"announce_largest_frame", at_limit.figures},
               {"announce_over_limit", over_limit.figures}};
  if (parsed.Has("--json")) {
    std::printf("%s\n", figures.dump(2).c_str());
  } else {
    for (const char* phase : {"announce_largest_frame", "announce_over_limit"}) {
      const Json& f = figures[phase];
      std::printf(
          "%s: %zu sessions announced %lld bytes each: manager RSS %lld -> %lld KiB (%.1f KiB per session); "
          "%zu answered while pending, %zu as protocol violations\n",
          phase, f["sessions"].get<size_t>(), f["announced_bytes"].get<long long>(),
          f["manager_rss_kib_before"].get<long long>(), f["manager_rss_kib_headers_pending"].get<long long>(),
          f["manager_rss_growth_kib_per_session"].get<double>(), f["answered_while_pending"].get<size_t>(),
          f["protocol_violations"].get<size_t>());
    }
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> BenchFramesCommands() {
  return {
      {{.name = "bench frames",
        .summary = "the manager's RSS while N hostile sessions each announce the largest frame (and one byte more) and "
                   "send nothing; how the over-limit ones end",
        .options =
            {{.name = "--sessions", .metavar = "N", .help = "hostile sessions (1..20000)", .default_text = "1000"},
             {.name = "--max-frame-bytes",
              .metavar = "N",
              .help = "the frame limit under test (4096..64 MiB)",
              .default_text = "67108864"},
             JsonOption("the figures as JSON")}},
       Frames},
  };
}

}  // namespace envforge::cli
