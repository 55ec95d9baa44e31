// The thread a code session's working-copy work runs on, so the manager's io thread never waits
// for a test suite: Start (taking the working copy), tool calls (run_tests can take minutes),
// the gold solution and the submission's grading run here, one job at a time, in order.
//
// Contract: Post queues a job; jobs see the runner's CodeWorkspace (null until Start succeeded).
// A job returns its completion (or nothing), which the runner calls on its thread after the job.
// The destructor stops queued jobs from starting, waits for the running one (a sandboxed command
// ends at its wall clock at the latest) and removes the working copy.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "sandbox/code/code_instance.h"
#include "sandbox/code/code_workspace.h"
#include "sandbox/code/repo_source.h"
#include "sandbox/code/working_copy_pool.h"
#include "base/serial_worker.h"

namespace envforge::sandbox::internal {

class CodeRunner {
 public:
  using Completion = std::function<void()>;
  using Job = std::function<Completion(code::CodeWorkspace* workspace)>;

  CodeRunner();
  ~CodeRunner();
  CodeRunner(const CodeRunner&) = delete;
  CodeRunner& operator=(const CodeRunner&) = delete;

  // Loads the task's instance from the bundle and takes a working copy of its repository from
  // `copies` at `dir` (the environment's pool, keyed by task id; the task's first session extracts
  // its template from the bundle); then `done` with the outcome, on the runner's thread.
  void Start(std::string envdb_path, std::string task_id, std::shared_ptr<code::WorkingCopyPool> copies,
             std::filesystem::path dir, code::CodeWorkspaceOptions options, std::function<void(Status)> done);
  // A fork of `parent`'s session: the parent's working copy forked to `dir` by `copies` (an
  // overlay's layer, else the tree, copied) as one of the parent's jobs (so no tool call of the
  // parent is half in it), the parent's instance and repository; then `done`. Unavailable when
  // the parent goes before its copy was made.
  void StartFork(CodeRunner& parent, std::shared_ptr<code::WorkingCopyPool> copies, std::filesystem::path dir,
                 code::CodeWorkspaceOptions options, std::function<void(Status)> done);
  void Post(Job job);
  // Set by a successful Start; read by jobs (the runner's thread).
  const code::CodeInstance& instance() const { return instance_; }
  // Fresh copies of the task's repository at its base commit, for grading.
  const code::RepoSource& repo() const { return repo_; }

 private:
  std::unique_ptr<code::CodeWorkspace> workspace_;  // the runner thread's
  code::CodeInstance instance_;
  code::RepoSource repo_;
  SerialWorker worker_;  // last: its thread uses the members above
};

}  // namespace envforge::sandbox::internal
