// Running a code task's tests and grading them.
#include "verifiers/code_validation.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <system_error>

#include "sandbox/code/code_bundle.h"
#include "sandbox/code/code_grading.h"
#include "sandbox/code/repo_snapshot.h"

namespace envforge::verifiers {
namespace {

namespace fs = std::filesystem;
using sandbox::code::CodeTask;

using sandbox::code::StatusIn;
using sandbox::code::TestRunResult;

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
    if (CountsAsFailing(was) && CountsAsPassing(is)) v->fail_to_pass.push_back(id);
    if (CountsAsPassing(was) && CountsAsFailing(is)) v->pass_to_fail.push_back(id);
    if (CountsAsPassing(was) && CountsAsPassing(is)) v->pass_to_pass.push_back(id);
  }
}

void Judge(const CodeTask& task, const TestRunResult& after, CodeValidation* v) {
  v->valid = !v->fail_to_pass.empty() && v->pass_to_fail.empty();
  if (v->fail_to_pass.empty()) v->reason = "no test goes from failing to passing (F2P = 0)";
  if (!v->pass_to_fail.empty())
    v->reason =
        "the patch breaks " + std::to_string(v->pass_to_fail.size()) + " passing test(s): " + v->pass_to_fail[0];
  for (const std::string& id : task.instance.fail_to_pass) {
    if (std::find(v->fail_to_pass.begin(), v->fail_to_pass.end(), id) != v->fail_to_pass.end()) continue;
    const TestStatus status = StatusIn(after.statuses, id);
    if (!CountsAsPassing(status) && v->valid) {
      v->valid = false;
      v->reason =
          "declared FAIL_TO_PASS test " + id + " is " + std::string(TestStatusName(status)) + " after the patch";
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
  return {{"valid", valid},
          {"reason", reason},
          {"FAIL_TO_PASS", fail_to_pass},
          {"PASS_TO_FAIL", pass_to_fail},
          {"PASS_TO_PASS", pass_to_pass},
          {"flaky", flaky},
          {"notes", notes},
          {"runs", runs},
          {"before_seconds", before_seconds},
          {"after_seconds", after_seconds},
          {"before", before_command},
          {"after", after_command}};
}

Result<CodeValidation> ValidateCodeTask(const std::string& envdb_path, const std::string& task_id, int runs,
                                        const CodeRunOptions& options, const std::string& gold_override) {
  if (runs < 1) return InvalidArgumentError("code validate: --runs must be at least 1");
  ENVFORGE_ASSIGN_OR_RETURN(CodeTask task, sandbox::code::LoadCodeTask(envdb_path, task_id));
  const std::string& gold = gold_override.empty() ? task.instance.patch : gold_override;
  ENVFORGE_ASSIGN_OR_RETURN(std::string archive, sandbox::code::LoadRepoArchive(envdb_path, task_id));
  const sandbox::code::RepoSource repo = sandbox::code::RepoSource::FromArchive(std::move(archive));
  ENVFORGE_ASSIGN_OR_RETURN(TestRunResult before,
                            sandbox::code::RunTestsOnFreshCopy(
                                repo, task.instance, {{"the test patch", task.instance.test_patch}}, false, options));
  std::vector<TestRunResult> after;
  for (int i = 0; i < runs; ++i) {
    ENVFORGE_ASSIGN_OR_RETURN(
        TestRunResult run,
        sandbox::code::RunTestsOnFreshCopy(repo, task.instance,
                                           {{"the test patch", task.instance.test_patch}, {"the gold patch", gold}},
                                           false, options));
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

}  // namespace envforge::verifiers
