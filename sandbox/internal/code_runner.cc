// A code session's runner thread.
#include "sandbox/internal/code_runner.h"

#include "sandbox/code/code_bundle.h"

namespace envforge::sandbox::internal {

CodeRunner::CodeRunner() : thread_([this] { Loop(); }) {}

CodeRunner::~CodeRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    jobs_.clear();
  }
  wake_.notify_all();
  thread_.join();
  workspace_.reset();  // removes the working copy
}

void CodeRunner::Start(std::string envdb_path, std::string task_id, std::filesystem::path dir,
                       code::CodeWorkspaceOptions options, std::function<void(Status)> done) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back([this, envdb_path = std::move(envdb_path), task_id = std::move(task_id), dir = std::move(dir),
                   options = std::move(options), done = std::move(done)]() mutable {
    Status status = [&]() -> Status {
      ENVFORGE_ASSIGN_OR_RETURN(code::CodeTask task, code::LoadCodeTask(envdb_path, task_id));
      ENVFORGE_ASSIGN_OR_RETURN(archive_, code::LoadRepoArchive(envdb_path, task_id));
      instance_ = std::move(task.instance);
      options.test_command = instance_.test_command;
      options.junit_producer = instance_.junit_producer;
      ENVFORGE_ASSIGN_OR_RETURN(workspace_, code::CodeWorkspace::Create(archive_, dir, std::move(options)));
      return Status::Ok();
    }();
    done(status);
  });
  wake_.notify_one();
}

void CodeRunner::Post(Job job) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back([this, job = std::move(job)] {
    if (Completion completion = job(workspace_.get())) completion();
  });
  wake_.notify_one();
}

void CodeRunner::Loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace envforge::sandbox::internal
