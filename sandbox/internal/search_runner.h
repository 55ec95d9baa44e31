// The thread a search session's tool calls run on, so the manager's io thread never waits for a
// search: opening the backend (Start), search/open/find (a live API can take seconds), the gold
// solution and the verdicts run here, one job at a time, in order.
//
// Contract (as sandbox/internal/code_runner.h): Post queues a job; jobs see the runner's
// SearchToolbox (null until Start succeeded). A job returns its completion (or nothing), which
// the runner calls on its thread after the job. The destructor waits for the running job (a live
// backend's call ends at its timeout at the latest), then runs the jobs that had not started on
// its own thread with a null toolbox, so that every caller still gets its answer.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "base/status.h"
#include "base/serial_worker.h"
#include "toolsets/search/search_config.h"
#include "toolsets/search/search_toolbox.h"

namespace envforge::sandbox::internal {

class SearchRunner {
 public:
  using Completion = std::function<void()>;
  using Job = std::function<Completion(search::SearchToolbox* toolbox)>;

  SearchRunner();
  ~SearchRunner();
  SearchRunner(const SearchRunner&) = delete;
  SearchRunner& operator=(const SearchRunner&) = delete;

  // Opens the backend of `config` on the runner's thread, with the responses to serve before it
  // (search_toolbox.h); then `done` with the outcome, on the runner's thread.
  void Start(search::SearchBackendConfig config, std::vector<search::RecordedResponse> recorded,
             std::function<void(Status)> done);
  void Post(Job job);

 private:
  bool closed_ = false;                             // set by the destructor once the thread is gone
  std::unique_ptr<search::SearchToolbox> toolbox_;  // the runner thread's
  SerialWorker worker_;                             // last: its thread uses the members above
};

}  // namespace envforge::sandbox::internal
