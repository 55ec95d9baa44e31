// Validating code environments by their own tests (real-envs.md section 0), on the runs of
// sandbox/code/code_grading.h (a fresh copy, patches, the sandboxed test command, JUnit).
//
// Validation (envforge code validate): BEFORE = base + test patch, AFTER = base + test patch + gold
// patch, AFTER run `runs` times.
//   F2P = {t : BEFORE in {fail, error, missing} and AFTER passes (pass or xfail)}
//   P2F = {t : BEFORE passes and AFTER in {fail, error, missing}}
//   P2P = {t : BEFORE and AFTER pass}
//   flaky = tests whose AFTER status differs between runs; they leave every list.
// Valid iff |F2P| > 0 and |P2F| = 0 and every declared FAIL_TO_PASS test passes after the gold
// patch; the reason says which rule failed.
//
// Errors (infrastructure, never a verdict): a run whose command wrote no JUnit XML or an
// unparseable one, an install script that failed, a patch of the instance that does not apply
// (Internal / DataLoss naming the step, with the command's output tail); sandbox errors.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/code/code_grading.h"
#include "verifiers/junit_report.h"

namespace envforge::verifiers {

using sandbox::code::CodeRunOptions;

struct CodeValidation {
  std::vector<std::string> fail_to_pass, pass_to_fail, pass_to_pass, flaky;
  bool valid = false;
  std::string reason;                            // why invalid, or "F2P > 0 and P2F = 0"
  std::vector<std::string> notes;                // declared lists that differ from the measured ones
  double before_seconds = 0, after_seconds = 0;  // the test command's wall time (first AFTER run)
  int runs = 0;
  Json before_command, after_command;  // isolation and end reasons

  // {"valid", "reason", "FAIL_TO_PASS", "PASS_TO_FAIL", "PASS_TO_PASS", "flaky", "notes", "runs",
  //  "before_seconds", "after_seconds", "isolation"}
  Json ToJson() const;
};

// Validates with the instance's gold patch, or with `gold_override` when not empty (to check that a
// bad patch is refused). runs >= 1.
Result<CodeValidation> ValidateCodeTask(const std::string& envdb_path, const std::string& task_id, int runs,
                                        const CodeRunOptions& options, const std::string& gold_override = "");

}  // namespace envforge::verifiers
