// envforge's own Jupyter client (no Python in the path): the shell, iopub, control and heartbeat
// channels of one kernel over ZeroMQ, every message signed and every received signature checked.
//
// Contract:
// - The kernel is untrusted. A received message whose signature does not verify, that repeats a
//   signature already seen (replay), or that does not parse is dropped and counted
//   (rejected_messages()); it never reaches an outcome. Frames over 32 MiB are refused by ZeroMQ.
// - Execute returns the execute's outcome, never an error for what the code did: kOk, kError
//   (the code raised), kTimeout (past its wall or CPU budget: the client sent interrupt_request;
//   needs_restart says the kernel did not come back within the grace period and must be killed),
//   kCrashed (the probe said the kernel process died). An error Status means the channel itself
//   failed (ZeroMQ could not send).
// - allow_stdin is false: input() in the code raises in the kernel.
// Thread safety: one thread at a time per client (a session's). Distinct clients are
// independent; they share one process-wide ZeroMQ context.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/jupyter/execute_outputs.h"
#include "sandbox/jupyter/kernel_connection.h"

namespace envforge::sandbox::jupyter {

// What the owner of the kernel process tells the client while it waits. Either may be empty.
struct KernelProbe {
  std::function<bool()> alive;          // false once the kernel process died
  std::function<double()> cpu_seconds;  // CPU time the kernel (all its processes) used so far
};

struct ExecuteLimits {
  std::chrono::milliseconds wall{30000};
  double cpu_seconds = 0;  // per execute; <= 0: no CPU budget beyond the wall clock
  // How long an interrupted kernel has to report idle before it counts as unresponsive.
  std::chrono::milliseconds interrupt_grace{3000};
  OutputCaps caps;
};

enum class ExecuteOutcome { kOk, kError, kTimeout, kCrashed };
std::string_view ExecuteOutcomeName(ExecuteOutcome outcome);  // "ok", "error", "timeout", "crashed"

struct ExecuteResult {
  ExecuteOutcome outcome = ExecuteOutcome::kOk;
  std::string limit;           // kTimeout: "wall_time" or "cpu_time"
  bool needs_restart = false;  // kTimeout: the interrupt did not bring the kernel back
  int execution_count = 0;
  Json outputs = Json::array();  // nbformat 4 outputs
  Json error;                    // {ename, evalue, traceback} when the code raised, else null
  bool truncated = false;
  double wall_ms = 0;
};

class KernelClient {
 public:
  // Connects the sockets (nothing is sent yet). `info` addresses the kernel as this process sees
  // it. InvalidArgument for an address ZeroMQ refuses.
  static Result<std::unique_ptr<KernelClient>> Connect(const ConnectionInfo& info);
  ~KernelClient();
  KernelClient(const KernelClient&) = delete;
  KernelClient& operator=(const KernelClient&) = delete;

  // Sends kernel_info_request until the kernel answered one and its iopub status for it arrived
  // (the SUB socket has joined: nothing later is lost). DeadlineExceeded past `timeout`,
  // Unavailable when the probe says the process died.
  Status WaitReady(std::chrono::milliseconds timeout, const KernelProbe& probe = {});
  // Runs `code` (store_history true, silent false) and collects its outputs; see the contract.
  Result<ExecuteResult> Execute(std::string_view code, const ExecuteLimits& limits, const KernelProbe& probe = {});
  // interrupt_request on the control channel; OK when interrupt_reply arrived within `timeout`.
  Status Interrupt(std::chrono::milliseconds timeout);
  // One heartbeat round trip; false when no echo came back within `timeout`.
  bool Heartbeat(std::chrono::milliseconds timeout);
  // shutdown_request on the control channel; OK when shutdown_reply arrived within `timeout`.
  Status Shutdown(std::chrono::milliseconds timeout);

  const Json& kernel_info() const;  // the kernel_info_reply content (after WaitReady)
  int64_t rejected_messages() const;
  const std::string& session_id() const;

 private:
  struct Impl;
  explicit KernelClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace envforge::sandbox::jupyter
