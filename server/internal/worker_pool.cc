#include "server/internal/worker_pool.h"

#include <exception>
#include <utility>

#include "base/log.h"

namespace envforge::server::internal {

WorkerPool::WorkerPool(size_t threads, size_t max_queued) : max_queued_(max_queued) {
  threads_.reserve(threads);
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  wake_.notify_all();
  for (auto& job : dropped) {
    if (job.dropped) job.dropped();
  }
  for (auto& thread : threads_) thread.join();
}

bool WorkerPool::TrySubmit(std::function<void()> job, std::function<void()> dropped) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    // Idle threads take queued jobs first; only the excess counts against the queue bound.
    size_t waiting_beyond_idle = queue_.size() >= idle_ ? queue_.size() - idle_ : 0;
    if (waiting_beyond_idle >= max_queued_) return false;
    queue_.push_back(Job{std::move(job), std::move(dropped)});
  }
  wake_.notify_one();
  return true;
}

size_t WorkerPool::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_;
}

size_t WorkerPool::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void WorkerPool::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ++idle_;
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (stopping_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    try {
      job.run();
    } catch (const std::exception& e) {
      // Jobs answer their own failures; one escaping is a bug, but must not end the thread.
      ENVFORGE_LOG(kError) << "worker job failed: " << e.what();
    }
    job = Job{};
    lock.lock();
    --running_;
  }
}

}  // namespace envforge::server::internal
