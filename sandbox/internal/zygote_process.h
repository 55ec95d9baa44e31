// One worker zygote: launching `envforge-worker zygote` (base/subprocess.h), and the manager's
// side of its control channel (sandbox/internal/wire.h, "CONTROL CHANNEL").
//
// Lifecycle:
//
//   Launch() --> kStarting --"ready"--> kReady --Shutdown()--> kStopping --exit--> kDead
//                    |                     |
//                    +----- EOF, "fatal", protocol error, startup or request timeout,
//                           unexpected exit ----------------------------------> kDead
//
// Invariants:
//   1. The zygote is this process's child and is reaped here (waitpid after its pidfd polls
//      readable).
//   2. Only the control socket (as fd 3), stdin (/dev/null), stdout and stderr (both the write
//      end of a pipe the manager drains) are open in the zygote after exec (SpawnProcess closes
//      every other descriptor at exec).
//   5. The zygote's output never reaches the manager's stderr raw: a StderrCapture drains the
//      pipe and logs each line escaped, at warn level, as "zygote P for <label> stderr: ...",
//      at most 20 lines a second. Sessions that do not install a pipe of their own (wire.h,
//      "ready") write there too.
//   6. The control channel carries no descriptor from the zygote: one is closed on arrival and
//      is a protocol violation (the zygote is killed as broken).
//   3. Every Spawn/Adopt callback is called exactly once: with the answer, or with Unavailable
//      when the zygote dies or does not answer within request_timeout (the zygote is then
//      killed as broken).
//   4. on_death is called at most once, when the zygote dies on its own or is killed as broken;
//      never after Shutdown().
//
// Thread safety: none; everything runs on the manager's io thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/fd.h"
#include "base/json.h"
#include "base/status.h"

namespace envforge::sandbox::internal {

class FrameChannel;
class StderrCapture;

// The zygote's {"op":"exited"} report for one reaped session process.
struct ExitReport {
  int pid = 0;
  std::optional<int> exit_code;
  std::string signal;  // "SIGSEGV"; empty when the process exited normally
  std::string limit;   // "memory", "cpu_time", "processes" or empty
  // "session process killed by SIGSEGV", "session process exited with code 3",
  // "... (memory limit)".
  std::string Describe() const;
};
// Accepts "signal" as a number or a name ("SIGSEGV" or "SEGV").
Result<ExitReport> ParseExitReport(const Json& frame);

struct ZygoteOptions {
  std::string worker_path;
  std::string bundle_path;
  std::string scratch_root;
  std::string label;  // for messages: "environment trip_planning (3f2a9c01)"
  std::chrono::milliseconds startup_timeout{60'000};
  std::chrono::milliseconds request_timeout{15'000};
};

class ZygoteProcess : public std::enable_shared_from_this<ZygoteProcess> {
 public:
  enum class State { kStarting, kReady, kStopping, kDead };
  struct Callbacks {
    std::function<void(const ExitReport&)> on_exited;
    std::function<void(const Status&)> on_death;
  };

  // Starts the process; the "ready" report arrives later. Unavailable when it cannot be started.
  static Result<std::shared_ptr<ZygoteProcess>> Launch(boost::asio::io_context& io, ZygoteOptions options,
                                                       Callbacks callbacks);
  ~ZygoteProcess();

  // Forks a session serving `session_end`. done(pid) after "spawned"; Unavailable after
  // "spawn_failed" (with the zygote's message) or when the zygote dies. May be called while
  // starting: the request waits in the socket until the zygote serves it.
  void Spawn(uint64_t id, const std::string& task_id, const Json& limits, UniqueFd session_end,
             std::function<void(Result<int>)> done);
  // Moves a session forked from a session into its own cgroup and scratch directory.
  void Adopt(uint64_t id, int pid, const Json& limits, std::function<void(Status)> done);
  // Asks the zygote to kill and reap its sessions and exit; SIGKILL after `grace`. done() once
  // the zygote is reaped (at once when already dead).
  void Shutdown(std::chrono::milliseconds grace, std::function<void()> done);

  State state() const { return state_; }
  int pid() const { return pid_; }
  // Its --scratch-root: every session of this zygote works below it.
  const std::string& scratch_root() const { return options_.scratch_root; }
  // The "isolation" object of the ready report (null until ready).
  const Json& isolation() const { return isolation_; }

  ZygoteProcess(boost::asio::io_context& io, ZygoteOptions options, Callbacks callbacks, int pid, UniqueFd pidfd,
                std::shared_ptr<FrameChannel> control, UniqueFd stderr_read);

 private:
  struct Pending {
    std::function<void(Result<int>)> spawn_done;
    std::function<void(Status)> adopt_done;
    std::chrono::steady_clock::time_point sent;
  };

  void Start();
  void OnFrame(const std::string& payload);
  void OnControlClosed(const Status& why);
  // Waits for the zygote's exit on its pidfd (again after a completion that was not one).
  void WatchPidfd();
  void ArmWatchdog();
  void OnWatchdog();
  // Something went wrong: stop talking, let the process exit (SIGKILL after `wait`), then
  // report death.
  void Fail(std::string why, std::chrono::milliseconds wait);
  void OnProcessExited();
  void FailPending(const Status& status);

  boost::asio::io_context& io_;
  ZygoteOptions options_;
  Callbacks callbacks_;
  int pid_;
  boost::asio::posix::stream_descriptor pidfd_;
  std::shared_ptr<FrameChannel> control_;
  std::shared_ptr<StderrCapture> stderr_;
  boost::asio::steady_timer watchdog_;
  boost::asio::steady_timer kill_timer_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point ready_at_;

  State state_ = State::kStarting;
  bool exited_ = false;
  std::string failure_;  // why the zygote is being torn down (empty for a clean shutdown)
  std::string fatal_;    // the zygote's own "fatal" message
  Json isolation_;
  std::string python_;
  std::map<uint64_t, Pending> pending_;
  std::function<void()> shutdown_done_;
};

}  // namespace envforge::sandbox::internal
