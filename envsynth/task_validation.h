// Validation of candidate tasks (stage 4 of issue 13): the gold solution runs in a real sandbox
// session of the packed candidate bundle and its answer is judged by the verifier and by the
// oracle. A failure carries an attribution -- which artefact a repair should change:
//   solution  the gold solution raised, timed out or broke a sandbox rule (or a tool it calls
//             raised on the arguments it gave);
//   verifier  the verifier rejected the gold answer that the oracle accepts, or the verifier
//             itself is defective (raised, hung, returned a non-verdict);
//   oracle    the oracle rejected (or was defective on) a gold answer the verifier accepts;
//   task      both judges reject the gold answer: the solution does not do what the task asks;
//   toolset / database   packing failed outside any task (tools.py, schema.sql, env.json).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/session_manager.h"

namespace envforge::envsynth {

struct TaskValidation {
  std::string task_id;
  bool passed = false;
  std::string attribution;           // "" when passed
  std::vector<std::string> reasons;  // why not, for a person and for the repair request
  std::string answer_text;           // the gold answer ("" when the solution failed)
  double seconds = 0;
  Json ToJson() const;  // {"passed", "attribution", "reasons", "answer", "seconds"}
};

// Validates each task of `task_ids` in its own session of `env_id` (opened in `manager`).
// Infrastructure failures (a session that cannot be created) are the Status; a task's own
// failures are its TaskValidation.
Result<std::vector<TaskValidation>> ValidateTasks(sandbox::SessionManager& manager, const std::string& env_id,
                                                  const std::vector<std::string>& task_ids);

// Splits env pack's problem list ("path:line: message" lines under a "cannot pack DIR: N
// problems" line, sandbox/env_pack.h) by task:
// "tasks/<id>/..." lines go to <id>; every other line to the key "" (the environment: attribute
// it to the toolset when it names tools.py, else to the database).
std::map<std::string, std::vector<std::string>> SplitPackProblems(const std::string& message);

}  // namespace envforge::envsynth
