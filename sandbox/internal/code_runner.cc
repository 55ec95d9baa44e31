// A code session's runner thread.
#include "sandbox/internal/code_runner.h"

#include <future>

#include "sandbox/code/code_bundle.h"

namespace envforge::sandbox::internal {

CodeRunner::CodeRunner() = default;

CodeRunner::~CodeRunner() {
  worker_.Stop();      // queued jobs are dropped (a fork's copy job among them: its child hears so)
  workspace_.reset();  // disposes of the working copy
}

void CodeRunner::Start(std::string envdb_path, std::string task_id, std::shared_ptr<code::WorkingCopyPool> copies,
                       std::filesystem::path dir, code::CodeWorkspaceOptions options,
                       std::function<void(Status)> done) {
  worker_.Post([this, envdb_path = std::move(envdb_path), task_id = std::move(task_id), copies = std::move(copies),
                dir = std::move(dir), options = std::move(options), done = std::move(done)]() mutable {
    Status status = [&]() -> Status {
      ENVFORGE_ASSIGN_OR_RETURN(code::CodeTask task, code::LoadCodeTask(envdb_path, task_id));
      ENVFORGE_RETURN_IF_ERROR(
          copies->Template(task_id, [&] { return code::LoadRepoArchive(envdb_path, task_id); }).status());
      repo_ = code::RepoSource::FromPool(copies, task_id);
      ENVFORGE_RETURN_IF_ERROR(repo_.MaterializeAt(dir));
      instance_ = std::move(task.instance);
      options.test_command = instance_.test_command;
      options.junit_producer = instance_.junit_producer;
      options.test_subset_command = instance_.test_subset_command;
      options.discard = [copies](const std::filesystem::path& used) { copies->Discard(used); };
      Result<std::unique_ptr<code::CodeWorkspace>> opened = code::CodeWorkspace::Open(dir, std::move(options));
      if (!opened.ok()) return opened.status();  // the workspace disposed of the copy as it went
      workspace_ = std::move(opened).value();
      return Status::Ok();
    }();
    done(status);
  });
}

namespace {

// What a fork takes from its parent, handed from the parent's thread to the child's.
struct ForkSource {
  code::CodeInstance instance;
  code::RepoSource repo;
};

}  // namespace

void CodeRunner::StartFork(CodeRunner& parent, std::shared_ptr<code::WorkingCopyPool> copies, std::filesystem::path dir,
                           code::CodeWorkspaceOptions options, std::function<void(Status)> done) {
  auto handoff = std::make_shared<std::promise<Result<ForkSource>>>();
  std::shared_future<Result<ForkSource>> copied = handoff->get_future().share();
  parent.Post([&parent, copies, handoff, dir](code::CodeWorkspace* workspace) -> Completion {
    if (workspace == nullptr) {
      handoff->set_value(UnavailableError("the parent session has no working copy"));
      return nullptr;
    }
    Status copy = copies->Fork(workspace->dir(), dir);
    if (copy.ok()) {
      handoff->set_value(ForkSource{parent.instance_, parent.repo_});
    } else {
      handoff->set_value(copy.WithContext("copying the parent's working copy"));
    }
    return nullptr;
  });
  worker_.Post([this, copied, dir = std::move(dir), options = std::move(options), done = std::move(done)]() mutable {
    Status status = [&]() -> Status {
      Result<ForkSource> source = UnavailableError("the parent session closed before its working copy was copied");
      try {
        source = copied.get();
      } catch (const std::future_error&) {
        // The parent's queue was dropped (it closed): the job above never ran.
      }
      ENVFORGE_RETURN_IF_ERROR(source.status());
      instance_ = source->instance;
      repo_ = source->repo;
      options.test_command = instance_.test_command;
      options.junit_producer = instance_.junit_producer;
      options.test_subset_command = instance_.test_subset_command;
      ENVFORGE_ASSIGN_OR_RETURN(workspace_, code::CodeWorkspace::Open(dir, std::move(options)));
      return Status::Ok();
    }();
    done(status);
  });
}

void CodeRunner::Post(Job job) {
  worker_.Post([this, job = std::move(job)] {
    if (Completion completion = job(workspace_.get())) completion();
  });
}

}  // namespace envforge::sandbox::internal
