#include "apps/envforge/solve_task.h"

#include <sys/resource.h>

#include <chrono>

namespace envforge::cli {

Result<SolvedTask> SolveAndSubmit(sandbox::SessionManager& manager, const std::string& env_id,
                                  const std::string& task_id) {
  auto start = std::chrono::steady_clock::now();
  ENVFORGE_ASSIGN_OR_RETURN(auto session, manager.CreateSession(env_id, task_id));
  auto solved = manager.Solve(session);
  if (!solved.ok()) {
    (void)manager.CloseSession(session);
    return solved.status().WithContext("task " + task_id + ": gold solution failed");
  }
  SolvedTask result;
  result.answer_text = solved->answer_text;
  toolsets::ToolCall call;
  call.id = "submit";
  call.name = std::string(toolsets::kSubmitResultTool);
  call.arguments = Json{{"answer_text", solved->answer_text}};
  result.submit = manager.CallTool(session, std::move(call));
  const auto* bundle = manager.FindEnvironment(env_id);
  const auto* task = bundle ? bundle->FindTask(task_id) : nullptr;
  if (task != nullptr && !task->oracle_source.empty() && result.submit.session_alive) {
    auto judged = manager.JudgeAnswers(session, sandbox::Judge::kOracle, {result.answer_text});
    if (!judged.ok()) {
      (void)manager.CloseSession(session);
      return judged.status().WithContext("task " + task_id + ": oracle");
    }
    result.oracle = judged->front();
  }
  (void)manager.CloseSession(session);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

Result<sandbox::ManagerOptions> ManagerOptionsFromLimitsOption(const std::optional<std::string>& limits_json) {
  sandbox::ManagerOptions options;
  if (!limits_json) return options;
  ENVFORGE_ASSIGN_OR_RETURN(Json json, ParseJson(*limits_json, "--limits"));
  ENVFORGE_ASSIGN_OR_RETURN(options.limits, sandbox::SandboxLimitsFromJson(json, options.limits));
  ENVFORGE_RETURN_IF_ERROR(sandbox::ValidateLimits(options.limits));
  return options;
}

void RaiseFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace envforge::cli
