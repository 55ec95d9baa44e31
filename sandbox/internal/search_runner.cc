// A search session's runner thread.
#include "sandbox/internal/search_runner.h"

namespace envforge::sandbox::internal {

SearchRunner::SearchRunner() = default;

SearchRunner::~SearchRunner() {
  std::deque<SerialWorker::Task> unstarted = worker_.Stop();
  // Jobs that never started still owe their callers an answer: they run here, without a toolbox.
  closed_ = true;
  toolbox_.reset();
  for (auto& job : unstarted) job();
}

void SearchRunner::Start(search::SearchBackendConfig config, std::vector<search::RecordedResponse> recorded,
                         std::function<void(Status)> done) {
  worker_.Post([this, config = std::move(config), recorded = std::move(recorded), done = std::move(done)]() mutable {
    if (closed_) return done(UnavailableError("the session closed before its search backend opened"));
    Result<std::unique_ptr<search::SearchBackend>> backend = search::OpenSearchBackend(config);
    if (backend.ok()) toolbox_ = std::make_unique<search::SearchToolbox>(std::move(*backend), std::move(recorded));
    done(backend.status());
  });
}

void SearchRunner::Post(Job job) {
  worker_.Post([this, job = std::move(job)] {
    if (Completion completion = job(toolbox_.get())) completion();
  });
}

}  // namespace envforge::sandbox::internal
