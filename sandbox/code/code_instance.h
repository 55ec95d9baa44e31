// A code-environment instance: one issue of one repository, SWE-bench shaped (real-envs.md 1.4).
//
//   instance_id        plain name: letters, digits, "._-" (SWE-bench's "owner__repo-1234")
//   repo               "owner/name" (informational)
//   base_commit        the commit the agent starts from (7 to 40 hex digits)
//   problem_statement  the issue text: the task's prompt
//   patch              the gold fix (unified diff; never shown to the agent)
//   test_patch         the tests that check the fix (unified diff; applied only for grading)
//   FAIL_TO_PASS       TestIds (as verifiers/junit_report.h writes them) that fail before the fix
//                      and pass after it; PASS_TO_PASS: TestIds that pass on both sides. Either a
//                      JSON list or, as in SWE-bench's published datasets, a string holding one.
//   language           python | java | javascript | typescript | c | cpp | go | php
//   install            a shell script run once in a fresh working copy before the tests (no
//                      network); "" when there is nothing to do
//   test_command       a shell command run in the working copy root that runs the test suite and
//                      writes JUnit XML files into $ENVFORGE_JUNIT_DIR (its exit code is ignored)
//   junit_producer     the runner's dialect for verifiers/junit_report.h ("auto" by default)
//   test_subset_command  optional: like test_command, but runs only the tests whose TestIds are
//                      listed, one per line, in the file $ENVFORGE_TESTS_FILE (run_tests with
//                      `tests` uses it; without it the whole suite runs and the answer is
//                      restricted to those tests)
// Other keys (version, hints_text, created_at, ...) are kept in `extra`.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::sandbox::code {

inline constexpr const char* kCodeLanguages[] = {"python", "java", "javascript", "typescript", "c", "cpp", "go", "php"};

struct CodeInstance {
  std::string instance_id;
  std::string repo;
  std::string base_commit;
  std::string problem_statement;
  std::string patch;
  std::string test_patch;
  std::vector<std::string> fail_to_pass;
  std::vector<std::string> pass_to_pass;
  std::string language;
  std::string install;
  std::string test_command;
  std::string junit_producer = "auto";
  std::string test_subset_command;
  Json extra = Json::object();

  // Every key above (FAIL_TO_PASS / PASS_TO_PASS as lists), extra's keys beside them.
  Json ToJson() const;
};

// Reads one instance. InvalidArgument names the first missing or malformed field, prefixed with
// `where` (e.g. "instances.jsonl line 3").
Result<CodeInstance> ParseCodeInstance(const Json& json, const std::string& where);

// The instances of a file: one JSON object, a JSON array of objects, or JSON Lines. Errors name the
// file (and line); duplicate instance ids are refused.
Result<std::vector<CodeInstance>> ReadCodeInstances(const std::string& path);

// The files a unified diff touches (its "+++ b/..." paths, or "--- a/..." for deletions).
std::vector<std::string> DiffPaths(const std::string& diff);

}  // namespace envforge::sandbox::code
