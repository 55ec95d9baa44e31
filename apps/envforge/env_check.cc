#include "apps/envforge/env_check.h"

#include "apps/envforge/progress.h"
#include "apps/envforge/solve_task.h"
#include "sandbox/env_bundle.h"
#include "sandbox/env_pack.h"
#include "sandbox/session_manager.h"
#include "toolsets/json_schema.h"

namespace envforge::cli {

Json EnvCheckReport::ToJson() const {
  Json items_json = Json::array();
  for (const auto& item : items) {
    Json entry{{"check", item.name}, {"ok", item.ok}, {"message", item.message}};
    if (!item.detail.is_null()) entry["detail"] = item.detail;
    items_json.push_back(std::move(entry));
  }
  return Json{{"path", path},
              {"env", env_name},
              {"hash", content_hash},
              {"ok", ok},
              {"infra_failure", infra_failure},
              {"checks", std::move(items_json)}};
}

void EnvCheckReport::PrintHuman(std::FILE* out) const {
  std::fprintf(out, "%s %s (%s)\n", ok ? "OK" : "FAILED", env_name.empty() ? path.c_str() : env_name.c_str(),
               content_hash.substr(0, 16).c_str());
  for (const auto& item : items) {
    std::fprintf(out, "  [%s] %-32s %s\n", item.ok ? "ok" : "FAIL", item.name.c_str(), item.message.c_str());
  }
}

EnvCheckReport CheckEnvironment(const std::string& envdb_path, bool show_progress,
                                const sandbox::ManagerOptions& options) {
  EnvCheckReport report;
  report.path = envdb_path;
  auto add = [&report](std::string name, bool ok, std::string message, Json detail = nullptr) {
    report.items.push_back(CheckItem{std::move(name), ok, std::move(message), std::move(detail)});
    return ok;
  };

  auto bundle = sandbox::EnvBundle::Load(envdb_path);
  if (!add("bundle", bundle.ok(),
           bundle.ok() ? "format, reserved tables and content hash verified" : bundle.status().message())) {
    return report;
  }
  report.env_name = bundle->manifest.name;
  report.content_hash = bundle->manifest.content_hash;

  std::string schema_errors;
  for (const auto& tool : bundle->tools) {
    Status status = toolsets::CheckSchema(tool.spec.input_schema);
    if (!status.ok()) schema_errors += "tool " + tool.spec.name + ": " + status.message() + "; ";
  }
  for (const auto& task : bundle->tasks) {
    Status status = toolsets::CheckSchema(task.answer_schema);
    if (!status.ok()) schema_errors += "task " + task.id + " answer_schema: " + status.message() + "; ";
  }
  bool schemas_ok = add("schemas", schema_errors.empty(),
                        schema_errors.empty() ? std::to_string(bundle->tools.size()) + " tool schemas, " +
                                                    std::to_string(bundle->tasks.size()) + " answer schemas valid"
                                              : schema_errors);

  // Code environments have no Python sources: their tools are the runtime's and their tasks are
  // graded by the repositories' tests (envforge code validate checks the instances themselves).
  const bool code = bundle->manifest.kind == "code";
  // Search environments neither: their tools are the runtime's and their verdicts answer keys.
  const bool search = bundle->manifest.kind == "search";
  auto analysis = code || search ? Result<std::vector<std::string>>(std::vector<std::string>{})
                                 : sandbox::AnalyzeBundleSources(*bundle);
  bool analysis_ok = false;
  if (code) {
    analysis_ok = add("static analysis", true, "none to do: a code environment has no Python sources");
  } else if (search) {
    analysis_ok = add("static analysis", true, "none to do: a search environment has no Python sources");
  } else if (!analysis.ok()) {
    report.infra_failure = true;
    add("static analysis", false, analysis.status().message());
  } else {
    std::string problems;
    for (const auto& problem : *analysis) problems += problem + "; ";
    analysis_ok =
        add("static analysis", problems.empty(), problems.empty() ? "sources follow the sandbox rules" : problems);
  }

  RaiseFileLimit();
  auto manager = sandbox::SessionManager::Create(options);
  if (!manager.ok()) {
    report.infra_failure = true;
    add("zygote", false, manager.status().message());
    return report;
  }
  auto env_id = (*manager)->OpenEnvironment(envdb_path);
  if (!env_id.ok()) {
    add("zygote", false, env_id.status().message());
    return report;
  }
  // A session with no task starts the zygote: a compile failure shows here, once, not per task.
  // (A code session needs a task: its working copy is that task's repository.)
  auto probe = (*manager)->CreateSession(*env_id, code && !bundle->tasks.empty() ? bundle->tasks[0].id : std::string());
  if (!add("zygote", probe.ok(),
           probe.ok() ? "tools, solutions and verifiers compiled; sessions start" : probe.status().message())) {
    return report;
  }
  (void)(*manager)->CloseSession(*probe);

  bool tasks_ok = true;
  Progress progress("env check", bundle->tasks.size());
  size_t done = 0;
  for (const auto& task : bundle->tasks) {
    if (show_progress) progress.Update(done, task.id);
    auto solved = SolveAndSubmit(**manager, *env_id, task.id);
    ++done;
    if (!solved.ok()) {
      tasks_ok = add("task " + task.id, false, solved.status().message()) && tasks_ok;
      continue;
    }
    Json detail{{"answer_text", solved->answer_text}, {"seconds", solved->seconds}};
    if (!solved->submit.ok()) {
      detail["result"] = toolsets::ToJson(solved->submit);
      tasks_ok = add("task " + task.id, false,
                     "submit_result answered " + std::string(toolsets::OutcomeName(solved->submit.outcome)) + ": " +
                         solved->submit.message,
                     detail) &&
                 tasks_ok;
      continue;
    }
    detail["verdict"] = solved->submit.content;
    if (solved->oracle) {
      const auto& oracle = *solved->oracle;
      detail["oracle"] = oracle.defect ? Json{{"defect", oracle.defect_message}}
                                       : Json{{"passed", oracle.passed}, {"reasons", oracle.reasons}};
      if (oracle.defect || !oracle.passed) {
        std::string why = oracle.defect ? oracle.defect_message : "";
        for (const auto& reason : oracle.reasons) why += (why.empty() ? "" : "; ") + reason;
        tasks_ok =
            add("task " + task.id, false, "the task's oracle rejects the gold answer: " + why, detail) && tasks_ok;
        continue;
      }
    }
    std::string reasons;
    for (const auto& reason : solved->submit.content.value("reasons", Json::array())) {
      reasons += (reasons.empty() ? "" : "; ") + reason.get<std::string>();
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.2fs", solved->seconds);
    tasks_ok = add("task " + task.id, solved->passed(),
                   solved->passed() ? std::string("gold solution passes its verifier") +
                                          (solved->oracle ? " and its oracle (" : " (") + seconds + ")"
                                    : "gold solution rejected by its verifier: " + reasons,
                   detail) &&
               tasks_ok;
  }
  if (show_progress) progress.Finish();
  report.ok = schemas_ok && analysis_ok && tasks_ok;
  return report;
}

}  // namespace envforge::cli
