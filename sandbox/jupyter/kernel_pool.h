// A warm pool of sandboxed, ready kernels for one environment: ipykernel takes about a second to
// start, which a trainer will not wait for per episode, so `size` kernels are kept started and
// answering, and refilled in the background as sessions take them.
//
// Contract:
// - Acquire hands out a ready kernel (launched, connected, kernel_info answered). When none is
//   ready it waits for the next one the refill thread finishes (a "cold" acquire, counted);
//   DeadlineExceeded past `timeout`, Unavailable with the last launch error when launches keep
//   failing, FailedPrecondition after shutdown began.
// - Every kernel is launched on the pool's refill thread, so PR_SET_PDEATHSIG ties kernels to
//   the pool: destroying the pool kills the kernels it made, handed out or not. Destroy the
//   sessions first.
// - At most `max_starting` kernels start at once (each start is about a CPU-second).
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/jupyter/kernel_client.h"
#include "sandbox/jupyter/kernel_process.h"

namespace envforge::sandbox::jupyter {

struct KernelPoolOptions {
  size_t size = 2;          // ready kernels kept (0: every acquire is cold)
  size_t max_starting = 4;  // launches in flight at once
  KernelLaunchOptions launch;
  std::chrono::milliseconds ready_timeout{60000};  // launch -> kernel_info answered
};

// A kernel that answers: its sandboxed process and a connected client.
struct ReadyKernel {
  std::unique_ptr<KernelProcess> process;
  std::unique_ptr<KernelClient> client;
  double start_ms = 0;  // launch -> ready
};

struct KernelPoolStats {
  size_t ready = 0;
  size_t starting = 0;
  size_t waiting = 0;  // acquires waiting for a kernel
  uint64_t launched = 0;
  uint64_t failed = 0;  // launches that never became ready
  uint64_t acquired_warm = 0;
  uint64_t acquired_cold = 0;
  std::vector<double> start_ms;  // launch -> ready of the last 256 kernels
  std::string last_error;

  Json ToJson() const;  // every field, start_ms as an array
};

class KernelPool {
 public:
  // Starts the refill thread; kernels start filling at once.
  static std::unique_ptr<KernelPool> Create(KernelPoolOptions options);
  ~KernelPool();
  KernelPool(const KernelPool&) = delete;
  KernelPool& operator=(const KernelPool&) = delete;

  Result<ReadyKernel> Acquire(std::chrono::milliseconds timeout);
  KernelPoolStats Stats() const;
  const KernelPoolOptions& options() const;

 private:
  struct State;
  explicit KernelPool(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace envforge::sandbox::jupyter
