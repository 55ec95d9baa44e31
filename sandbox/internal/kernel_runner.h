// The thread an interpreter session's kernel work runs on, so the manager's io thread never
// waits for a kernel: Start (taking a kernel from the pool), tool calls (an execute can take its
// whole wall budget) and the gold solution run here, one job at a time, in order.
//
// Contract: Post queues a job; jobs see the runner's KernelSession (null until Start succeeded,
// or after a failed Start). A job returns its completion (or nothing), which the runner calls
// right after the job: whoever the completion tells sees info() as the job left it, since info()
// is read when asked. The destructor aborts: it stops queued jobs from starting, kills the
// kernel (a running execute then returns crashed at its next poll, within about 20 ms) and
// joins the thread. info() is KernelSession::Info read now (null before a kernel was taken), safe
// from any thread; it costs about a millisecond of /proc reads, paid by its caller.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "base/json.h"
#include "sandbox/jupyter/kernel_pool.h"
#include "sandbox/jupyter/kernel_session.h"

namespace envforge::sandbox::internal {

class KernelRunner {
 public:
  using Completion = std::function<void()>;
  using Job = std::function<Completion(jupyter::KernelSession* kernel)>;

  KernelRunner();
  ~KernelRunner();
  KernelRunner(const KernelRunner&) = delete;
  KernelRunner& operator=(const KernelRunner&) = delete;

  // Takes a kernel from `pool` (which must outlive the runner), retrying in short waits so that
  // an abort is seen; then `done` with the outcome, on the runner's thread.
  void Start(jupyter::KernelPool& pool, jupyter::KernelSessionOptions options, std::function<void(Status)> done);
  void Post(Job job);
  Json info() const;

 private:
  void Loop();

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  std::atomic<bool> aborted_{false};
  std::unique_ptr<jupyter::KernelSession> kernel_;  // set under mu_; used by jobs on the runner thread
  std::thread thread_;
};

}  // namespace envforge::sandbox::internal
