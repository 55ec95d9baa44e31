// An interpreter session's kernel, behind the one tool protocol: the tools execute(code),
// interrupt() and restart() (toolsets/interpreter_tools.h), as toolsets::ToolCall in and toolsets::ToolResult out.
//
// Results:
// - execute: content {"status": "ok"|"error"|"timeout"|"crashed", "execution_count",
//   "outputs": [nbformat 4 outputs], "truncated", "restarted"}. Outcome kOk when the code ran
//   clean; kToolError when it raised (message "Ename: evalue"); kTimeout (limit "wall_time" or
//   "cpu_time") when it ran past its budget: the kernel was interrupted, or, when it did not
//   come back, killed and replaced by a fresh one ("restarted": true, its state is gone);
//   kCrashed when the kernel died (limit "memory" when the cgroup OOM-killed it): the session
//   is over, every later call is kCrashed too.
// - interrupt: kOk {"interrupted": bool}; restart: kOk {"restarted": true} with a fresh kernel.
// - Bad arguments (code missing, not a string, over max_code_bytes) are kInvalidCall.
// Thread safety: one call at a time (the manager serializes a session's calls); Terminate,
// crashed and Info from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/jupyter/kernel_client.h"
#include "sandbox/jupyter/kernel_pool.h"
#include "toolsets/interpreter_tools.h"
#include "toolsets/tool_protocol.h"

namespace envforge::sandbox::jupyter {

struct KernelSessionOptions {
  ExecuteLimits execute;
  std::chrono::milliseconds acquire_timeout{60000};
  size_t max_code_bytes = 1 << 20;
};

class KernelSession {
 public:
  // Takes a ready kernel from `pool` (which must outlive the session).
  static Result<std::unique_ptr<KernelSession>> Start(KernelPool& pool, KernelSessionOptions options);
  ~KernelSession();

  toolsets::ToolResult Call(const toolsets::ToolCall& call);

  // Kills the kernel from any thread (a running execute returns crashed within about 20 ms);
  // later calls answer crashed and no restart takes a new kernel.
  void Terminate();
  void set_acquire_timeout(std::chrono::milliseconds timeout) { options_.acquire_timeout = timeout; }

  bool crashed() const { return crashed_; }
  // {"pid", "memory_bytes", "memory" (KernelProcess::MemoryReport), "cpu_seconds", "executes",
  // "restarts", "crashed", "isolation"}, read now. Any thread, also during a call: it takes
  // kernel_mu_ against a restart's replacement. It reads the kernel's /proc and cgroup files
  // (about a millisecond while the kernel runs), so no call pays for it.
  Json Info() const;

 private:
  KernelSession(KernelPool& pool, KernelSessionOptions options, ReadyKernel kernel);
  toolsets::ToolResult Execute(const toolsets::ToolCall& call);
  // Kills the current kernel and takes a fresh one from the pool.
  Status Replace();

  KernelPool& pool_;
  KernelSessionOptions options_;
  mutable std::mutex kernel_mu_;  // guards kernel_'s replacement against Terminate and Info
  std::atomic<bool> terminated_{false};
  ReadyKernel kernel_;
  std::atomic<bool> crashed_{false};
  std::string crash_reason_;  // the calling thread only
  std::atomic<uint64_t> executes_{0};
  std::atomic<uint64_t> restarts_{0};
};

}  // namespace envforge::sandbox::jupyter
