// A fixed set of threads running blocking jobs (Backend::Complete for the /v1 endpoint) off the
// io threads, with a bounded queue: a job that finds every thread busy and the queue full is
// refused at once (the caller answers 429), never queued without bound.
//
// Thread safety: TrySubmit and the counters may be called from any thread. The destructor
// refuses new jobs, drops queued ones (their `dropped` callbacks run, on the destroying thread)
// and joins the threads after their running jobs return.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace envforge::server::internal {

class WorkerPool {
 public:
  // threads >= 1; max_queued jobs may wait beyond those running.
  WorkerPool(size_t threads, size_t max_queued);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs `job` on a pool thread, or returns false (and runs nothing) when the queue is full or
  // the pool is stopping. `dropped` runs instead of `job` when the pool is destroyed before the
  // job started.
  bool TrySubmit(std::function<void()> job, std::function<void()> dropped = {});

  size_t running() const;
  size_t queued() const;
  size_t threads() const { return threads_.size(); }

 private:
  struct Job {
    std::function<void()> run;
    std::function<void()> dropped;
  };
  void Loop();

  const size_t max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  size_t running_ = 0;
  size_t idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace envforge::server::internal
