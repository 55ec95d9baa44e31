// Running a code task's tests and grading a submission.
#include "sandbox/code/code_grading.h"

#include <unistd.h>

#include <algorithm>
#include <system_error>

#include "sandbox/code/repo_snapshot.h"
#include "sandbox/code/scoped_directory.h"

namespace envforge::sandbox::code {
namespace {

namespace fs = std::filesystem;
using verifiers::JunitOptions;
using verifiers::JunitProblem;
using verifiers::JunitProducer;
using verifiers::JunitReport;
using verifiers::JunitTest;
using verifiers::TestStatus;

Status ApplyPatch(const fs::path& work, const std::string& patch, const std::string& what) {
  if (patch.empty()) return Status::Ok();
  Result<std::string> applied = RunGit(work, {"apply", "--whitespace=nowarn", "--recount", "-"}, patch);
  if (!applied.ok()) return FailedPreconditionError(what + " does not apply: " + applied.status().message());
  return Status::Ok();
}

// The test files back at the base commit: what the agent changed in them is undone, files it
// deleted come back, files the test patch will create are removed.
Status ResetTestFiles(const fs::path& work, const std::string& test_patch) {
  for (const std::string& path : DiffPaths(test_patch)) {
    Result<std::string> at_base = RunGit(work, {"cat-file", "-e", "HEAD:" + path});
    std::error_code error;
    if (at_base.ok()) {
      ENVFORGE_RETURN_IF_ERROR(RunGit(work, {"checkout", "HEAD", "--", path}).status());
    } else {
      fs::remove_all(work / path, error);
    }
  }
  return Status::Ok();
}

Status ReadReports(const fs::path& junit_dir, const std::string& producer_name, TestRunResult* run) {
  ENVFORGE_ASSIGN_OR_RETURN(JunitProducer producer, verifiers::JunitProducerFromName(producer_name));
  JunitOptions options;
  options.producer = producer;
  options.source_root = "/work";
  options.allow_empty = true;  // a file may hold none; the files together must (below)
  std::vector<fs::path> files;
  std::error_code error;
  for (fs::recursive_directory_iterator it(junit_dir, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file() && it->path().extension() == ".xml") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) return DataLossError("the test command wrote no JUnit XML into $ENVFORGE_JUNIT_DIR");
  for (const fs::path& file : files) {
    ENVFORGE_ASSIGN_OR_RETURN(JunitReport report, verifiers::ReadJunitFile(file.string(), options));
    for (const JunitTest& test : report.tests) {
      auto [it, inserted] = run->statuses.emplace(test.id, test.status);
      if (!inserted) it->second = verifiers::WorseStatus(it->second, test.status);
    }
    for (const JunitProblem& problem : report.problems) run->problems.push_back(problem.kind + ": " + problem.detail);
  }
  run->junit_files = static_cast<int>(files.size());
  if (run->statuses.empty() && run->problems.empty()) {
    return DataLossError("the JUnit XML files in $ENVFORGE_JUNIT_DIR hold no test");
  }
  return Status::Ok();
}

Result<SandboxedCommandResult> RunInSandbox(const std::string& command, const fs::path& work, const fs::path& junit,
                                            const CodeRunOptions& options) {
  SandboxedCommandOptions run;
  run.command = command;
  run.workdir = work;
  run.binds = {{junit, "/junit"}};
  run.env = {{"ENVFORGE_JUNIT_DIR", "/junit"}};
  run.limits = options.limits;
  run.scratch_root = options.scratch_root;
  return RunSandboxedCommand(run);
}

// Hands a fresh copy back to its source on every return path of a run.
struct ReleaseOnExit {
  const RepoSource& repo;
  fs::path dir;
  ~ReleaseOnExit() { repo.Release(dir); }
};

std::string Tail(const std::string& text, size_t bytes = 2000) {
  return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
}

}  // namespace

Result<TestRunResult> RunTestsOnFreshCopy(const RepoSource& repo, const CodeInstance& instance,
                                          const std::vector<std::pair<std::string, std::string>>& patches,
                                          bool reset_tests, const CodeRunOptions& options) {
  std::error_code error;
  fs::create_directories(options.scratch_root, error);
  const ScopedDirectory dir(UniqueScratchPath(options.scratch_root, "validate"));  // work/ and junit/
  const fs::path work = dir.path() / "work", junit = dir.path() / "junit";
  fs::create_directories(junit, error);
  if (error) return InternalError("code run: mkdir " + dir.path().string() + ": " + error.message());
  ENVFORGE_RETURN_IF_ERROR(repo.MaterializeAt(work));
  const ReleaseOnExit release{repo, work};  // before `dir` goes: an overlay is unmounted first
  for (const auto& [what, patch] : patches) {
    if (reset_tests && what == "the test patch") ENVFORGE_RETURN_IF_ERROR(ResetTestFiles(work, patch));
    ENVFORGE_RETURN_IF_ERROR(ApplyPatch(work, patch, what));
  }
  if (!instance.install.empty()) {
    ENVFORGE_ASSIGN_OR_RETURN(auto install, RunInSandbox(instance.install, work, junit, options));
    if (!install.succeeded()) {
      return FailedPreconditionError("the install script failed (" + install.EndReason() +
                                     "): " + Tail(install.output));
    }
  }
  TestRunResult run;
  ENVFORGE_ASSIGN_OR_RETURN(run.command, RunInSandbox(instance.test_command, work, junit, options));
  Status read = ReadReports(junit, instance.junit_producer, &run);
  if (!read.ok()) {
    return Status(read.code(), read.message() + " (test command ended with " + run.command.EndReason() +
                                   "; output: " + Tail(run.command.output) + ")");
  }
  return run;
}

TestStatus StatusIn(const std::map<std::string, TestStatus>& statuses, const std::string& id) {
  auto found = statuses.find(id);
  return found == statuses.end() ? TestStatus::kMissing : found->second;
}

Json SubmissionGrade::ToJson() const { return {{"resolved", resolved}, {"failing", failing}}; }

Result<SubmissionGrade> GradeSubmission(const RepoSource& repo, const CodeInstance& instance, const std::string& diff,
                                        const CodeRunOptions& options) {
  Result<TestRunResult> run = RunTestsOnFreshCopy(
      repo, instance, {{"the submitted diff", diff}, {"the test patch", instance.test_patch}}, true, options);
  SubmissionGrade grade;
  // On a submission, a run that cannot build or report is the submission's doing: the instance's
  // own runs (validated) build and report. A diff that does not apply, an install script that fails,
  // a test command that writes no report or a broken one: nothing is resolved.
  if (!run.ok() &&
      (run.status().code() == StatusCode::kFailedPrecondition || run.status().code() == StatusCode::kDataLoss)) {
    grade.failing.push_back(run.status().message());
    return grade;
  }
  if (!run.ok()) return run.status();
  for (const auto* list : {&instance.fail_to_pass, &instance.pass_to_pass}) {
    for (const std::string& id : *list) {
      const TestStatus status = StatusIn(run->statuses, id);
      const bool ok =
          verifiers::CountsAsPassing(status) || (list == &instance.pass_to_pass && status == TestStatus::kSkip);
      if (!ok) grade.failing.push_back(id + ": " + std::string(verifiers::TestStatusName(status)));
    }
  }
  grade.resolved = grade.failing.empty();
  return grade;
}

}  // namespace envforge::sandbox::code
