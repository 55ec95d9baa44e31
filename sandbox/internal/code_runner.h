// The thread a code session's working-copy work runs on, so the manager's io thread never waits
// for a test suite: Start (extracting the repository), tool calls (run_tests can take minutes),
// the gold solution and the submission's grading run here, one job at a time, in order.
//
// Contract: Post queues a job; jobs see the runner's CodeWorkspace (null until Start succeeded).
// A job returns its completion (or nothing), which the runner calls on its thread after the job.
// The destructor stops queued jobs from starting, waits for the running one (a sandboxed command
// ends at its wall clock at the latest) and removes the working copy.
#pragma once

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "sandbox/code/code_instance.h"
#include "sandbox/code/code_workspace.h"

namespace envforge::sandbox::internal {

class CodeRunner {
 public:
  using Completion = std::function<void()>;
  using Job = std::function<Completion(code::CodeWorkspace* workspace)>;

  CodeRunner();
  ~CodeRunner();
  CodeRunner(const CodeRunner&) = delete;
  CodeRunner& operator=(const CodeRunner&) = delete;

  // Loads the task's instance and repository from the bundle and extracts it into `dir`; then
  // `done` with the outcome, on the runner's thread.
  void Start(std::string envdb_path, std::string task_id, std::filesystem::path dir, code::CodeWorkspaceOptions options,
             std::function<void(Status)> done);
  void Post(Job job);
  // Set by a successful Start; read by jobs (the runner's thread).
  const code::CodeInstance& instance() const { return instance_; }
  const std::string& archive() const { return archive_; }

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::unique_ptr<code::CodeWorkspace> workspace_;  // the runner thread's
  code::CodeInstance instance_;
  std::string archive_;
  std::thread thread_;
};

}  // namespace envforge::sandbox::internal
