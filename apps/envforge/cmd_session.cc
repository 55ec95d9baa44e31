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

int Solve(const ParsedArgs& parsed) {
  auto task = parsed.Option("--task");  // required by the declaration
  auto env = OpenEnv(parsed.positional[0], *task, parsed);
  if (!env.ok()) return Fail(env.status(), ExitCodeFor(env.status()));
  auto solved = SolveAndSubmit(*env->manager, env->env_id, *task);
  if (!solved.ok()) return Fail(solved.status(), kExitCheckFailed);
  const auto& submit = solved->submit;
  if (!submit.ok()) {
    if (parsed.Has("--json")) std::printf("%s\n", DumpJson(toolsets::ToJson(submit)).c_str());
    std::fprintf(stderr, "envforge: submit_result answered %s: %s\n",
                 std::string(toolsets::OutcomeName(submit.outcome)).c_str(), submit.message.c_str());
    return submit.outcome == toolsets::Outcome::kInfraError ? kExitInfra : kExitCheckFailed;
  }
  if (parsed.Has("--json")) {
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

int Run(const ParsedArgs& parsed) {
  auto task = parsed.Option("--task");
  auto calls_path = parsed.Option("--calls");  // both required by the declaration
  auto calls = ReadCalls(*calls_path);
  if (!calls.ok()) return Fail(calls.status(), kExitUsage);
  auto env = OpenEnv(parsed.positional[0], *task, parsed);
  if (!env.ok()) return Fail(env.status(), ExitCodeFor(env.status()));
  auto session = env->manager->CreateSession(env->env_id, *task);
  if (!session.ok()) return Fail(session.status(), kExitInfra);
  int exit_code = kExitOk;
  for (auto& call : *calls) {
    std::string name = call.name;
    toolsets::ToolResult result = env->manager->CallTool(*session, std::move(call));
    if (result.outcome == toolsets::Outcome::kInfraError) exit_code = kExitInfra;
    if (parsed.Has("--json")) {
      std::printf("%s\n", DumpJson(toolsets::ToJson(result)).c_str());
    } else {
      std::string body = result.ok() ? DumpJson(result.content) : result.message;
      if (body.size() > 400) body = body.substr(0, 397) + "...";
      std::printf("[%s] %s -> %s%s%s  (%.0f us)\n    %s\n", result.call_id.c_str(), name.c_str(),
                  std::string(toolsets::OutcomeName(result.outcome)).c_str(),
                  result.limit.empty() ? "" : " limit=", result.limit.c_str(), result.duration_us, body.c_str());
      if (!result.where.empty()) std::printf("    at %s\n", result.where.c_str());
      if (!result.stdout_text.empty()) std::printf("    printed: %s\n", result.stdout_text.c_str());
    }
    std::fflush(stdout);
  }
  (void)env->manager->CloseSession(*session);
  return exit_code;
}

}  // namespace

std::vector<Command> SessionCommands() {
  return {
      {{.name = "session solve",
        .positionals = "X.envdb",
        .summary = "run the task's gold solution in a session, submit it, print the verifier's verdict",
        .details = "exit 0 passed, 1 failed, 3 the sandbox failed.",
        .options = {{.name = "--task", .metavar = "ID", .help = "the task", .required = true},
                    LimitsOption(),
                    JsonOption("the verdict as JSON")},
        .min_positional = 1,
        .max_positional = 1},
       Solve},
      {{.name = "session run",
        .positionals = "X.envdb",
        .summary = "play tool calls ({\"name\", \"arguments\"} per line) in one session, print each typed result",
        .options = {{.name = "--task", .metavar = "ID", .help = "the task the session is for", .required = true},
                    {.name = "--calls",
                     .metavar = "FILE.jsonl",
                     .help = "one {\"name\", \"arguments\"?, \"id\"?} per line, all checked before any runs",
                     .required = true},
                    LimitsOption(),
                    JsonOption("one JSON result per line")},
        .min_positional = 1,
        .max_positional = 1},
       Run},
  };
}

}  // namespace envforge::cli
