// Running a task's gold solution in a fresh session and submitting its answer: shared by
// `env check` and `session solve`.
#pragma once

#include <optional>
#include <string>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/session_manager.h"
#include "toolsets/tool_protocol.h"

namespace envforge::cli {

struct SolvedTask {
  std::string answer_text;      // what the solution submitted
  toolsets::ToolResult submit;  // submit_result's typed result; content = verdict when ok
  // The task's independent oracle on the same answer, when the task has one.
  std::optional<sandbox::JudgeVerdict> oracle;
  double seconds = 0;  // session create -> verdict
  bool passed() const { return submit.ok() && submit.content.value("passed", false); }
};

// Fails (Status) when the session cannot be created or the solution itself fails (raises,
// breaks a sandbox rule, times out); a verdict that does not pass is a successful SolvedTask.
Result<SolvedTask> SolveAndSubmit(sandbox::SessionManager& manager, const std::string& env_id,
                                  const std::string& task_id);

// ManagerOptions with the per-session limits of a `--limits JSON` option laid over the defaults,
// e.g. --limits '{"wall_time_ms": 2000, "memory_bytes": 268435456, "max_processes": 8}'. The
// error names the offending field.
Result<sandbox::ManagerOptions> ManagerOptionsFromLimitsOption(const std::optional<std::string>& limits_json);

// Raises RLIMIT_NOFILE to its hard limit: every live session holds two descriptors here.
void RaiseFileLimit();

}  // namespace envforge::cli
