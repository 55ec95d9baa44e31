// The warm kernel pool and its refill thread.
#include "sandbox/jupyter/kernel_pool.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "base/log.h"

namespace envforge::sandbox::jupyter {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kStartTimesKept = 256;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

Json KernelPoolStats::ToJson() const {
  return {{"ready", ready},
          {"starting", starting},
          {"waiting", waiting},
          {"launched", launched},
          {"failed", failed},
          {"acquired_warm", acquired_warm},
          {"acquired_cold", acquired_cold},
          {"last_error", last_error},
          {"start_ms", start_ms}};
}

struct KernelPool::State {
  KernelPoolOptions options;
  mutable std::mutex mu;
  std::condition_variable refill_wanted;  // the refill thread waits here
  std::condition_variable kernel_ready;   // acquires wait here
  std::deque<ReadyKernel> ready;          // guarded by mu
  KernelPoolStats stats;                  // guarded by mu (ready/waiting filled in by Stats)
  size_t waiting = 0;
  bool stopping = false;
  std::thread refill;

  size_t Wanted() const { return options.size + waiting; }

  void RefillLoop() {
    for (;;) {
      size_t batch = 0;
      {
        std::unique_lock<std::mutex> lock(mu);
        refill_wanted.wait(lock, [&] { return stopping || ready.size() < Wanted(); });
        if (stopping) return;
        batch = std::min(Wanted() - ready.size(), std::max<size_t>(1, options.max_starting));
        stats.starting = batch;
      }
      StartBatch(batch);
    }
  }

  // Launches `count` kernels at once (they start in parallel), then waits for each in turn.
  void StartBatch(size_t count) {
    std::vector<std::pair<std::unique_ptr<KernelProcess>, Clock::time_point>> launched;
    for (size_t i = 0; i < count; ++i) {
      const auto start = Clock::now();
      Result<std::unique_ptr<KernelProcess>> process = KernelProcess::Launch(options.launch);
      if (!process.ok()) {
        Failed(process.status().message());
        continue;
      }
      launched.emplace_back(std::move(process).value(), start);
    }
    size_t started = 0;
    for (auto& [process, start] : launched) {
      Result<std::unique_ptr<KernelClient>> client = KernelClient::Connect(process->connection());
      KernelProbe probe = process->Probe();
      probe.alive = [this, alive = probe.alive] { return !Stopping() && alive(); };
      Status answered = client.ok() ? (*client)->WaitReady(options.ready_timeout, probe) : client.status();
      if (!answered.ok()) {
        if (Stopping()) return;  // the pool is going away: not a start failure
        const std::string log = process->LogTail(500);
        Failed(answered.message() + (log.empty() ? "" : "; kernel log: " + log));
        continue;
      }
      ++started;
      std::lock_guard<std::mutex> lock(mu);
      stats.launched += 1;
      stats.start_ms.push_back(MillisecondsSince(start));
      if (stats.start_ms.size() > kStartTimesKept) stats.start_ms.erase(stats.start_ms.begin());
      ready.push_back({std::move(process), std::move(client).value(), stats.start_ms.back()});
      kernel_ready.notify_one();
    }
    std::unique_lock<std::mutex> lock(mu);
    stats.starting = 0;
    if (started == 0) {
      // Nothing started: let waiting acquires see the error, and wait before trying again.
      kernel_ready.notify_all();
      refill_wanted.wait_for(lock, std::chrono::seconds(1), [&] { return stopping; });
    }
  }

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu);
    return stopping;
  }

  void Failed(const std::string& why) {
    ENVFORGE_LOG(kWarn) << "kernel pool: a kernel did not start: " << why;
    std::lock_guard<std::mutex> lock(mu);
    stats.failed += 1;
    stats.last_error = why;
  }
};

KernelPool::KernelPool(std::shared_ptr<State> state) : state_(std::move(state)) {}

std::unique_ptr<KernelPool> KernelPool::Create(KernelPoolOptions options) {
  auto state = std::make_shared<State>();
  state->options = std::move(options);
  state->refill = std::thread([raw = state.get()] { raw->RefillLoop(); });
  return std::unique_ptr<KernelPool>(new KernelPool(std::move(state)));
}

KernelPool::~KernelPool() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
  }
  state_->refill_wanted.notify_all();
  state_->kernel_ready.notify_all();
  if (state_->refill.joinable()) state_->refill.join();
  state_->ready.clear();  // kills them
}

Result<ReadyKernel> KernelPool::Acquire(std::chrono::milliseconds timeout) {
  State& s = *state_;
  const auto deadline = Clock::now() + timeout;
  std::unique_lock<std::mutex> lock(s.mu);
  bool waited = false;
  const uint64_t failures_before = s.stats.failed;
  for (;;) {
    if (s.stopping) return FailedPreconditionError("kernel pool: shutting down");
    while (!s.ready.empty()) {
      ReadyKernel kernel = std::move(s.ready.front());
      s.ready.pop_front();
      if (!kernel.process->Alive()) continue;  // died while waiting in the pool
      (waited ? s.stats.acquired_cold : s.stats.acquired_warm) += 1;
      s.refill_wanted.notify_one();
      return kernel;
    }
    if (s.stats.failed >= failures_before + 3 && s.stats.launched == 0) {
      return UnavailableError("kernel pool: kernels fail to start: " + s.stats.last_error);
    }
    waited = true;
    s.waiting += 1;
    s.refill_wanted.notify_one();
    const bool in_time = s.kernel_ready.wait_until(
        lock, deadline, [&] { return s.stopping || !s.ready.empty() || s.stats.failed >= failures_before + 3; });
    s.waiting -= 1;
    if (!in_time) {
      return DeadlineExceededError(
          "kernel pool: no kernel ready within " + std::to_string(timeout.count()) + " ms" +
          (s.stats.last_error.empty() ? "" : " (last start failure: " + s.stats.last_error + ")"));
    }
  }
}

KernelPoolStats KernelPool::Stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  KernelPoolStats stats = state_->stats;
  stats.ready = state_->ready.size();
  stats.waiting = state_->waiting;
  return stats;
}

const KernelPoolOptions& KernelPool::options() const { return state_->options; }

}  // namespace envforge::sandbox::jupyter
