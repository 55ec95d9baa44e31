// One thread per interpreter session.
#include "sandbox/internal/kernel_runner.h"

namespace envforge::sandbox::internal {

KernelRunner::KernelRunner() : thread_([this] { Loop(); }) {}

KernelRunner::~KernelRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    jobs_.clear();
    if (kernel_) kernel_->Terminate();
  }
  wake_.notify_all();
  thread_.join();
}

void KernelRunner::Start(jupyter::KernelPool& pool, jupyter::KernelSessionOptions options,
                         std::function<void(Status)> done) {
  Post([this, &pool, options = std::move(options),
        done = std::move(done)](jupyter::KernelSession*) mutable -> Completion {
    const auto deadline = std::chrono::steady_clock::now() + options.acquire_timeout;
    jupyter::KernelSessionOptions attempt = options;
    attempt.acquire_timeout = std::chrono::milliseconds(100);
    for (;;) {
      Result<std::unique_ptr<jupyter::KernelSession>> started = jupyter::KernelSession::Start(pool, attempt);
      if (started.ok()) {
        (*started)->set_acquire_timeout(options.acquire_timeout);
        std::lock_guard<std::mutex> lock(mu_);
        kernel_ = std::move(started).value();
        if (aborted_) kernel_->Terminate();
      }
      if (started.ok()) return [done] { done(Status::Ok()); };
      const bool retry = started.status().code() == StatusCode::kDeadlineExceeded &&
                         std::chrono::steady_clock::now() < deadline && !aborted_;
      if (!retry) {
        Status failed = aborted_ ? UnavailableError("the session closed while its kernel started") : started.status();
        return [done, failed] { done(failed); };
      }
    }
  });
}

void KernelRunner::Post(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

Json KernelRunner::info() const {
  std::lock_guard<std::mutex> lock(mu_);  // kernel_ is set and taken away under mu_
  return kernel_ ? kernel_->Info() : Json();
}

void KernelRunner::Loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return aborted_ || !jobs_.empty(); });
      if (aborted_) break;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Completion completion = job(kernel_.get());
    if (completion) completion();
  }
  std::unique_ptr<jupyter::KernelSession> kernel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    kernel = std::move(kernel_);
  }
  kernel.reset();  // kills the kernel, on the thread that used it
}

}  // namespace envforge::sandbox::internal
