// envforge session solve|run
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/solve_task.h"
#include "base/json.h"
#include "sandbox/session_manager.h"

namespace envforge::cli {
namespace {

struct OpenedEnv {
  std::unique_ptr<sandbox::SessionManager> manager;
  std::string env_id;
};

Result<OpenedEnv> OpenEnv(const std::string& path, const std::string& task_id, const ParsedArgs& args) {
  RaiseFileLimit();
  ENVFORGE_ASSIGN_OR_RETURN(auto options, ManagerOptionsFromLimitsOption(args.Option("--limits")));
  ENVFORGE_ASSIGN_OR_RETURN(auto manager, sandbox::SessionManager::Create(std::move(options)));
  ENVFORGE_ASSIGN_OR_RETURN(std::string env_id, manager->OpenEnvironment(path));
  const auto* bundle = manager->FindEnvironment(env_id);
  if (!task_id.empty() && (bundle == nullptr || bundle->FindTask(task_id) == nullptr)) {
    std::string known;
    if (bundle) {
      for (const auto& task : bundle->tasks) known += (known.empty() ? "" : ", ") + task.id;
    }
    return NotFoundError("no task '" + task_id + "' in " + path + " (tasks: " + known + ")");
  }
  return OpenedEnv{std::move(manager), std::move(env_id)};
}

int Solve(const std::vector<std::string>& args) {
  auto parsed = ParseArgs("envforge session solve", args,
                          {.value_options = {"--task", "--limits"}, .flags = {"--json"}, .min_positional = 1, .max_positional = 1});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  auto task = parsed->Option("--task");
  if (!task) return Fail(InvalidArgumentError("envforge session solve: --task ID is required"), kExitUsage);
  auto env = OpenEnv(parsed->positional[0], *task, *parsed);
  if (!env.ok()) return Fail(env.status(), ExitCodeFor(env.status()));
  auto solved = SolveAndSubmit(*env->manager, env->env_id, *task);
  if (!solved.ok()) return Fail(solved.status(), kExitCheckFailed);
  const auto& submit = solved->submit;
  if (!submit.ok()) {
    if (parsed->Has("--json")) std::printf("%s\n", DumpJson(toolsets::ToJson(submit)).c_str());
    std::fprintf(stderr, "envforge: submit_result answered %s: %s\n", std::string(toolsets::OutcomeName(submit.outcome)).c_str(),
                 submit.message.c_str());
    return submit.outcome == toolsets::Outcome::kInfraError ? kExitInfra : kExitCheckFailed;
  }
  if (parsed->Has("--json")) {
    std::printf("%s\n", DumpJson(submit.content).c_str());
  } else {
    std::printf("task %s: %s (score %.3g, %.2fs)\n", task->c_str(), solved->passed() ? "PASSED" : "FAILED",
                submit.content.value("score", 0.0), solved->seconds);
    std::printf("answer: %s\n", solved->answer_text.c_str());
    for (const auto& reason : submit.content.value("reasons", Json::array())) {
      std::printf("  - %s\n", reason.get<std::string>().c_str());
    }
  }
  return solved->passed() ? kExitOk : kExitCheckFailed;
}

// Reads FILE.jsonl: one {"name", "arguments"?, "id"?} per non-blank line. Every line is checked
// before any call runs, so a typo on line 40 does not leave a half-played episode.
Result<std::vector<toolsets::ToolCall>> ReadCalls(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read calls file " + path);
  std::vector<toolsets::ToolCall> calls;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = path + ":" + std::to_string(number);
    ENVFORGE_ASSIGN_OR_RETURN(Json json, ParseJson(line, where));
    auto call = toolsets::ToolCallFromJson(json);
    if (!call.ok()) return call.status().WithContext(where);
    if (call->id.empty()) call->id = std::to_string(number);
    calls.push_back(std::move(*call));
  }
  return calls;
}

int Run(const std::vector<std::string>& args) {
  auto parsed = ParseArgs("envforge session run", args,
                          {.value_options = {"--task", "--calls", "--limits"}, .flags = {"--json"}, .min_positional = 1, .max_positional = 1});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  auto task = parsed->Option("--task");
  auto calls_path = parsed->Option("--calls");
  if (!task || !calls_path) {
    return Fail(InvalidArgumentError("envforge session run: --task ID and --calls FILE.jsonl are required"), kExitUsage);
  }
  auto calls = ReadCalls(*calls_path);
  if (!calls.ok()) return Fail(calls.status(), kExitUsage);
  auto env = OpenEnv(parsed->positional[0], *task, *parsed);
  if (!env.ok()) return Fail(env.status(), ExitCodeFor(env.status()));
  auto session = env->manager->CreateSession(env->env_id, *task);
  if (!session.ok()) return Fail(session.status(), kExitInfra);
  int exit_code = kExitOk;
  for (auto& call : *calls) {
    std::string name = call.name;
    toolsets::ToolResult result = env->manager->CallTool(*session, std::move(call));
    if (result.outcome == toolsets::Outcome::kInfraError) exit_code = kExitInfra;
    if (parsed->Has("--json")) {
      std::printf("%s\n", DumpJson(toolsets::ToJson(result)).c_str());
    } else {
      std::string body = result.ok() ? DumpJson(result.content) : result.message;
      if (body.size() > 400) body = body.substr(0, 397) + "...";
      std::printf("[%s] %s -> %s%s%s  (%.0f us)\n    %s\n", result.call_id.c_str(), name.c_str(),
                  std::string(toolsets::OutcomeName(result.outcome)).c_str(), result.limit.empty() ? "" : " limit=",
                  result.limit.c_str(), result.duration_us, body.c_str());
      if (!result.where.empty()) std::printf("    at %s\n", result.where.c_str());
      if (!result.stdout_text.empty()) std::printf("    printed: %s\n", result.stdout_text.c_str());
    }
    std::fflush(stdout);
  }
  (void)env->manager->CloseSession(*session);
  return exit_code;
}

}  // namespace

int RunSessionCommand(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fprintf(stderr, "envforge session: expected solve or run\n");
    return kExitUsage;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "solve") return Solve(rest);
  if (args[0] == "run") return Run(rest);
  std::fprintf(stderr, "envforge session: unknown subcommand '%s' (expected solve or run)\n", args[0].c_str());
  return kExitUsage;
}

}  // namespace envforge::cli
