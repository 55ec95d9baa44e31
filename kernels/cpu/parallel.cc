// The CPU kernels' thread pool. One pool per process; a ParallelFor publishes a job (function,
// range, chunk count) under the pool mutex, bumps the generation, wakes the workers, works on
// chunks itself, then waits until every chunk is done. Chunks are claimed with a compare-and-swap
// on one word holding (generation, chunk count, next chunk), so a worker only ever runs a chunk of
// the job it saw published, and the caller never waits for a worker that claimed nothing: a worker
// that another process keeps off its core (a shared machine) delays a call only when it holds a
// chunk, not by waking late. That matters because the engine issues hundreds of short ParallelFor
// calls per decode step.
//
// Workers spin briefly before sleeping on the condition variable: a futex wake-up costs more than
// the short ops themselves.
#include "kernels/cpu/parallel.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace envforge::kernels {
namespace {

thread_local bool inside_parallel_for = false;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class ThreadPool {
 public:
  explicit ThreadPool(int threads) : threads_(threads) {
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  }

  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

  // Leaves the worker threads alone: used in a forked child, where they do not exist.
  void Abandon() {
    for (std::thread& worker : workers_) worker.detach();
    workers_.clear();
  }

  int threads() const { return threads_; }

  void Run(int64_t n, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
    fn_ = &fn;
    n_ = n;
    completed_.store(0, std::memory_order_relaxed);
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mu_);
      generation = generation_.load(std::memory_order_relaxed) + 1;
      claim_.store(ClaimWord(generation, chunks, 0), std::memory_order_release);
      generation_.store(generation, std::memory_order_release);
    }
    wake_.notify_all();
    WorkOnChunks(generation);
    for (int spins = 0; completed_.load(std::memory_order_acquire) != chunks; ++spins) {
      if (spins < 4096) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  // The claim word: generation (low 32 bits) in bits 32..63, the chunk count in 16..31, the next
  // unclaimed chunk in 0..15 (chunks <= 4 x threads, far below 2^16).
  static uint64_t ClaimWord(uint64_t generation, int64_t chunks, int64_t next) {
    return (generation & 0xffffffffu) << 32 | static_cast<uint64_t>(chunks) << 16 | static_cast<uint64_t>(next);
  }

  // Claims and runs chunks of job `generation` until none is left or another job was published.
  void WorkOnChunks(uint64_t generation) {
    inside_parallel_for = true;
    uint64_t word = claim_.load(std::memory_order_acquire);
    for (;;) {
      if ((word >> 32) != (generation & 0xffffffffu)) break;
      const auto chunks = static_cast<int64_t>((word >> 16) & 0xffffu);
      const auto chunk = static_cast<int64_t>(word & 0xffffu);
      if (chunk >= chunks) break;
      if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      // The chunk is ours: the caller waits for it, so the job's fields stay valid while it runs.
      const int64_t begin = n_ * chunk / chunks;
      const int64_t end = n_ * (chunk + 1) / chunks;
      (*fn_)(begin, end);
      completed_.fetch_add(1, std::memory_order_acq_rel);
      word = claim_.load(std::memory_order_acquire);
    }
    inside_parallel_for = false;
  }

  void WorkerLoop() {
    // The generation the pool was built with, not a fresh load: a thread that starts late must
    // still take part in a job published before it ran.
    uint64_t seen = 0;
    for (;;) {
      for (int spins = 0; spins < 4000 && generation_.load(std::memory_order_acquire) == seen; ++spins) {
        CpuRelax();
      }
      if (generation_.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      }
      seen = generation_.load(std::memory_order_acquire);
      if (stop_) return;
      WorkOnChunks(seen);
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;  // written under mu_ before the last generation bump

  // The current job; written by Run before the claim word that publishes it, stable until all
  // of its chunks completed.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> completed_{0};
};

int DefaultThreadCount() {
  if (const char* text = std::getenv("ENVFORGE_THREADS")) {
    int value = std::atoi(text);
    if (value >= 1) return value;
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online >= 1 ? static_cast<int>(online) : 1;
}

// Guards the pool pointer and serialises ParallelFor calls from different threads.
std::mutex pool_mu;
std::unique_ptr<ThreadPool> pool;
int requested_threads = 0;  // SetThreadCount's value (0: the default); guarded by pool_mu
// The pool's size, readable without pool_mu: ThreadCount() is called from inside ParallelFor
// bodies (which run while pool_mu is held), so it must not lock. 0 until a pool exists.
std::atomic<int> pool_threads{0};

// A forked child has only the forking thread: drop (without joining) the parent's workers and
// start a fresh pool of the same size on first use.
void PrepareFork() { pool_mu.lock(); }
void ParentAfterFork() { pool_mu.unlock(); }
void ChildAfterFork() {
  if (pool) {
    requested_threads = pool->threads();
    pool->Abandon();
    (void)pool.release();  // its threads are gone; destroying it would join them
  }
  pool_threads.store(0);
  pool_mu.unlock();
}

void ReplacePoolLocked(int threads) {
  pool.reset();
  pool = std::make_unique<ThreadPool>(threads);
  pool_threads.store(threads);
}

ThreadPool& PoolLocked() {
  static const bool registered = [] {
    pthread_atfork(PrepareFork, ParentAfterFork, ChildAfterFork);
    return true;
  }();
  (void)registered;
  if (!pool) ReplacePoolLocked(requested_threads > 0 ? requested_threads : DefaultThreadCount());
  return *pool;
}

}  // namespace

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (inside_parallel_for || n <= grain) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> lock(pool_mu);
  ThreadPool& threads = PoolLocked();
  // Each chunk holds at least `grain` items; a few chunks per thread balance uneven work.
  int64_t chunks = std::min<int64_t>(n / grain, static_cast<int64_t>(threads.threads()) * 4);
  if (threads.threads() == 1 || chunks <= 1) {
    inside_parallel_for = true;
    fn(0, n);
    inside_parallel_for = false;
    return;
  }
  threads.Run(n, chunks, fn);
}

int ThreadCount() {
  const int threads = pool_threads.load();
  if (threads > 0) return threads;
  std::lock_guard<std::mutex> lock(pool_mu);
  return PoolLocked().threads();
}

void SetThreadCount(int threads) {
  threads = std::max(threads, 1);
  std::lock_guard<std::mutex> lock(pool_mu);
  requested_threads = threads;
  if (pool && pool->threads() == threads) return;
  ReplacePoolLocked(threads);
}

}  // namespace envforge::kernels
