// Running a code task's tests and grading them.
#include "verifiers/code_validation.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <system_error>

#include "sandbox/code/code_bundle.h"
#include "sandbox/code/repo_snapshot.h"

namespace envforge::verifiers {
namespace {

namespace fs = std::filesystem;
using sandbox::code::CodeTask;

bool Passes(TestStatus status) { return status == TestStatus::kPass || status == TestStatus::kXfail; }
bool Fails(TestStatus status) {
  return status == TestStatus::kFail || status == TestStatus::kError || status == TestStatus::kMissing;
}

TestStatus StatusIn(const std::map<std::string, TestStatus>& statuses, const std::string& id) {
  auto found = statuses.find(id);
  return found == statuses.end() ? TestStatus::kMissing : found->second;
}

// A fresh run directory (work/ and junit/) removed when it goes out of scope.
struct RunDir {
  fs::path root;
  explicit RunDir(const fs::path& scratch) {
    static std::atomic<int> counter{0};
    root = scratch / ("validate-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  }
  ~RunDir() {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  }
};

Status ApplyPatch(const fs::path& work, const std::string& patch, const std::string& what) {
  if (patch.empty()) return Status::Ok();
  Result<std::string> applied =
      sandbox::code::RunGit(work, {"apply", "--whitespace=nowarn", "--recount", "-"}, patch);
  if (!applied.ok()) return FailedPreconditionError(what + " does not apply: " + applied.status().message());
  return Status::Ok();
}

// The test files back at the base commit: what the agent changed in them is undone, files it
// deleted come back, files the test patch will create are removed.
Status ResetTestFiles(const fs::path& work, const std::string& test_patch) {
  for (const std::string& path : sandbox::code::DiffPaths(test_patch)) {
    Result<std::string> at_base = sandbox::code::RunGit(work, {"cat-file", "-e", "HEAD:" + path});
    std::error_code error;
    if (at_base.ok()) {
      ENVFORGE_RETURN_IF_ERROR(sandbox::code::RunGit(work, {"checkout", "HEAD", "--", path}).status());
    } else {
      fs::remove_all(work / path, error);
    }
  }
  return Status::Ok();
}

Status ReadReports(const fs::path& junit_dir, const std::string& producer_name, TestRunResult* run) {
  ENVFORGE_ASSIGN_OR_RETURN(JunitProducer producer, JunitProducerFromName(producer_name));
  JunitOptions options;
  options.producer = producer;
  options.source_root = "/work";
  options.allow_empty_when_broken = true;
  std::vector<fs::path> files;
  std::error_code error;
  for (fs::recursive_directory_iterator it(junit_dir, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file() && it->path().extension() == ".xml") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) return DataLossError("the test command wrote no JUnit XML into $ENVFORGE_JUNIT_DIR");
  for (const fs::path& file : files) {
    ENVFORGE_ASSIGN_OR_RETURN(JunitReport report, ReadJunitFile(file.string(), options));
    for (const JunitTest& test : report.tests) {
      auto [it, inserted] = run->statuses.emplace(test.id, test.status);
      if (!inserted) it->second = WorseStatus(it->second, test.status);
    }
    for (const JunitProblem& problem : report.problems) run->problems.push_back(problem.kind + ": " + problem.detail);
  }
  run->junit_files = static_cast<int>(files.size());
  return Status::Ok();
}

Result<sandbox::code::SandboxedCommandResult> RunInSandbox(const std::string& command, const fs::path& work,
                                                           const fs::path& junit, const CodeRunOptions& options) {
  sandbox::code::SandboxedCommandOptions run;
  run.command = command;
  run.workdir = work;
  run.binds = {{junit, "/junit"}};
  run.env = {{"ENVFORGE_JUNIT_DIR", "/junit"}};
  run.limits = options.limits;
  run.scratch_root = options.scratch_root;
  return sandbox::code::RunSandboxedCommand(run);
}

std::string Tail(const std::string& text, size_t bytes = 2000) {
  return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
}

// One run; `reset_tests` marks a submission: test files go back to base before the test patch.
Result<TestRunResult> RunTests(const std::string& envdb_path, const CodeTask& task,
                               const std::vector<std::pair<std::string, std::string>>& patches, bool reset_tests,
                               const CodeRunOptions& options) {
  std::error_code error;
  fs::create_directories(options.scratch_root, error);
  RunDir dir(options.scratch_root);
  const fs::path work = dir.root / "work", junit = dir.root / "junit";
  fs::create_directories(work, error);
  fs::create_directories(junit, error);
  if (error) return InternalError("code run: mkdir " + dir.root.string() + ": " + error.message());
  ENVFORGE_ASSIGN_OR_RETURN(std::string archive, sandbox::code::LoadRepoArchive(envdb_path, task.instance.instance_id));
  ENVFORGE_RETURN_IF_ERROR(sandbox::code::ExtractTar(archive, work));
  for (const auto& [what, patch] : patches) {
    if (reset_tests && what == "the test patch") ENVFORGE_RETURN_IF_ERROR(ResetTestFiles(work, patch));
    ENVFORGE_RETURN_IF_ERROR(ApplyPatch(work, patch, what));
  }
  if (!task.instance.install.empty()) {
    ENVFORGE_ASSIGN_OR_RETURN(auto install, RunInSandbox(task.instance.install, work, junit, options));
    if (!install.succeeded()) {
      return InternalError("the install script failed (" + install.EndReason() + "): " + Tail(install.output));
    }
  }
  TestRunResult run;
  ENVFORGE_ASSIGN_OR_RETURN(run.command, RunInSandbox(task.instance.test_command, work, junit, options));
  Status read = ReadReports(junit, task.instance.junit_producer, &run);
  if (!read.ok()) {
    return Status(read.code(), read.message() + " (test command ended with " + run.command.EndReason() +
                                   "; output: " + Tail(run.command.output) + ")");
  }
  return run;
}

Json CommandJson(const sandbox::code::SandboxedCommandResult& command) {
  return {{"end", command.EndReason()}, {"seconds", command.seconds}, {"isolation", command.isolation}};
}

// F2P, P2F, P2P of one BEFORE / AFTER pair, flaky tests left out.
void Classify(const TestRunResult& before, const TestRunResult& after, const std::set<std::string>& flaky,
              CodeValidation* v) {
  std::set<std::string> ids;
  for (const auto& [id, status] : before.statuses) ids.insert(id);
  for (const auto& [id, status] : after.statuses) ids.insert(id);
  for (const std::string& id : ids) {
    if (flaky.contains(id)) continue;
    const TestStatus was = StatusIn(before.statuses, id), is = StatusIn(after.statuses, id);
    if (Fails(was) && Passes(is)) v->fail_to_pass.push_back(id);
    if (Passes(was) && Fails(is)) v->pass_to_fail.push_back(id);
    if (Passes(was) && Passes(is)) v->pass_to_pass.push_back(id);
  }
}

void Judge(const CodeTask& task, const TestRunResult& after, CodeValidation* v) {
  v->valid = !v->fail_to_pass.empty() && v->pass_to_fail.empty();
  if (v->fail_to_pass.empty()) v->reason = "no test goes from failing to passing (F2P = 0)";
  if (!v->pass_to_fail.empty()) v->reason = "the patch breaks " + std::to_string(v->pass_to_fail.size()) + " passing test(s): " + v->pass_to_fail[0];
  for (const std::string& id : task.instance.fail_to_pass) {
    if (std::find(v->fail_to_pass.begin(), v->fail_to_pass.end(), id) != v->fail_to_pass.end()) continue;
    const TestStatus status = StatusIn(after.statuses, id);
    if (!Passes(status) && v->valid) {
      v->valid = false;
      v->reason = "declared FAIL_TO_PASS test " + id + " is " + std::string(TestStatusName(status)) + " after the patch";
    }
    v->notes.push_back("declared FAIL_TO_PASS test " + id + " is not a measured fail-to-pass test");
  }
  for (const std::string& id : task.instance.pass_to_pass) {
    if (std::find(v->pass_to_pass.begin(), v->pass_to_pass.end(), id) == v->pass_to_pass.end()) {
      v->notes.push_back("declared PASS_TO_PASS test " + id + " is not a measured pass-to-pass test");
    }
  }
  if (v->valid) v->reason = "F2P > 0 and P2F = 0";
}

}  // namespace

Json CodeValidation::ToJson() const {
  return {{"valid", valid}, {"reason", reason}, {"FAIL_TO_PASS", fail_to_pass}, {"PASS_TO_FAIL", pass_to_fail},
          {"PASS_TO_PASS", pass_to_pass}, {"flaky", flaky}, {"notes", notes}, {"runs", runs},
          {"before_seconds", before_seconds}, {"after_seconds", after_seconds},
          {"before", before_command}, {"after", after_command}};
}

Json SubmissionGrade::ToJson() const { return {{"resolved", resolved}, {"failing", failing}}; }

Result<TestRunResult> RunTaskTests(const std::string& envdb_path, const std::string& task_id,
                                   const std::vector<std::string>& patches, const CodeRunOptions& options) {
  ENVFORGE_ASSIGN_OR_RETURN(CodeTask task, sandbox::code::LoadCodeTask(envdb_path, task_id));
  std::vector<std::pair<std::string, std::string>> named;
  for (size_t i = 0; i < patches.size(); ++i) named.emplace_back("patch " + std::to_string(i + 1), patches[i]);
  return RunTests(envdb_path, task, named, false, options);
}

Result<CodeValidation> ValidateCodeTask(const std::string& envdb_path, const std::string& task_id, int runs,
                                        const CodeRunOptions& options, const std::string& gold_override) {
  if (runs < 1) return InvalidArgumentError("code validate: --runs must be at least 1");
  ENVFORGE_ASSIGN_OR_RETURN(CodeTask task, sandbox::code::LoadCodeTask(envdb_path, task_id));
  const std::string& gold = gold_override.empty() ? task.instance.patch : gold_override;
  ENVFORGE_ASSIGN_OR_RETURN(TestRunResult before, RunTests(envdb_path, task, {{"the test patch", task.instance.test_patch}}, false, options));
  std::vector<TestRunResult> after;
  for (int i = 0; i < runs; ++i) {
    ENVFORGE_ASSIGN_OR_RETURN(TestRunResult run, RunTests(envdb_path, task, {{"the test patch", task.instance.test_patch}, {"the gold patch", gold}}, false, options));
    after.push_back(std::move(run));
  }
  CodeValidation v;
  v.runs = runs;
  std::set<std::string> flaky;
  for (size_t i = 1; i < after.size(); ++i) {
    std::set<std::string> ids;
    for (const auto& [id, status] : after[0].statuses) ids.insert(id);
    for (const auto& [id, status] : after[i].statuses) ids.insert(id);
    for (const std::string& id : ids) {
      if (StatusIn(after[0].statuses, id) != StatusIn(after[i].statuses, id)) flaky.insert(id);
    }
  }
  v.flaky.assign(flaky.begin(), flaky.end());
  Classify(before, after[0], flaky, &v);
  Judge(task, after[0], &v);
  v.before_seconds = before.command.seconds;
  v.after_seconds = after[0].command.seconds;
  v.before_command = CommandJson(before.command);
  v.after_command = CommandJson(after[0].command);
  return v;
}

Result<SubmissionGrade> GradeCodeSubmission(const std::string& envdb_path, const std::string& task_id,
                                            const std::string& diff, const CodeRunOptions& options) {
  ENVFORGE_ASSIGN_OR_RETURN(CodeTask task, sandbox::code::LoadCodeTask(envdb_path, task_id));
  Result<TestRunResult> run =
      RunTests(envdb_path, task, {{"the submitted diff", diff}, {"the test patch", task.instance.test_patch}}, true, options);
  SubmissionGrade grade;
  if (!run.ok() && run.status().code() == StatusCode::kFailedPrecondition &&
      run.status().message().starts_with("the submitted diff")) {
    grade.failing.push_back(run.status().message());  // a diff that does not apply resolves nothing
    return grade;
  }
  if (!run.ok()) return run.status();
  for (const auto* list : {&task.instance.fail_to_pass, &task.instance.pass_to_pass}) {
    for (const std::string& id : *list) {
      const TestStatus status = StatusIn(run->statuses, id);
      const bool ok = Passes(status) || (list == &task.instance.pass_to_pass && status == TestStatus::kSkip);
      if (!ok) grade.failing.push_back(id + ": " + std::string(TestStatusName(status)));
    }
  }
  grade.resolved = grade.failing.empty();
  return grade;
}

}  // namespace envforge::verifiers
