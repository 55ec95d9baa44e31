// Running a code task's tests on a fresh copy of its repository, and grading a submission: a
// run copies the repository (repo_source.h) into a new directory, applies patches, runs the install
// script and the test command in the sandbox (sandboxed_command.h) and reads every JUnit XML file
// the command wrote (verifiers/junit_report.h, a leaf library) into one TestId -> status map (a
// test in several files: worst status wins).
//
// Grading a submission: the agent's diff on a fresh copy, then the test files reset to the base
// commit and the test patch applied (an agent cannot edit or delete the tests it is graded by);
// resolved iff every FAIL_TO_PASS test passes (or xfails) and every PASS_TO_PASS test passes,
// xfails or is skipped (a missing test fails). A submission whose diff does not apply, whose
// install script fails, or after which the test command writes no (or no readable) JUnit XML, is
// not resolved: that is the submission's failure (a build it broke), never an infrastructure error.
//
// Errors of a run: a patch that does not apply or an install script that fails (FailedPrecondition
// naming it), a test command that wrote no JUnit XML or an unparseable one (DataLoss), sandbox
// errors (infrastructure). Host git only ever touches a fresh copy of the
// repository (never a working copy an agent had), and only `git apply` / `checkout` of known paths.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/code/code_instance.h"
#include "sandbox/code/repo_source.h"
#include "sandbox/code/sandboxed_command.h"
#include "verifiers/junit_report.h"

namespace envforge::sandbox::code {

struct CodeRunOptions {
  CommandLimits limits;  // for the install script and the test command
  std::filesystem::path scratch_root = "/tmp/envforge-code";
};

struct TestRunResult {
  std::map<std::string, verifiers::TestStatus> statuses;
  std::vector<std::string> problems;  // broken-run signals of the reports
  SandboxedCommandResult command;
  int junit_files = 0;
};

// A test id's status in a run's map (missing when absent).
verifiers::TestStatus StatusIn(const std::map<std::string, verifiers::TestStatus>& statuses, const std::string& id);

// One run on a fresh copy of the repository `repo` with `patches` ((what, diff) pairs)
// applied in order. With reset_tests, the instance's test files go back to the base commit right
// before the patch named "the test patch".
Result<TestRunResult> RunTestsOnFreshCopy(const RepoSource& repo, const CodeInstance& instance,
                                          const std::vector<std::pair<std::string, std::string>>& patches,
                                          bool reset_tests, const CodeRunOptions& options);

struct SubmissionGrade {
  bool resolved = false;
  std::vector<std::string> failing;  // FAIL_TO_PASS / PASS_TO_PASS tests that did not pass, "id: status"
  Json ToJson() const;
};

// Grades an agent's diff (may be empty) against the instance's declared lists.
Result<SubmissionGrade> GradeSubmission(const RepoSource& repo, const CodeInstance& instance, const std::string& diff,
                                        const CodeRunOptions& options);

}  // namespace envforge::sandbox::code
