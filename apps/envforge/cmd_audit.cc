// envforge audit X.envdb: per task, how often the verifier accepts wrong answers and rejects
// right ones (verifiers/audit.h). Prints a table (or --json), stores each task's result in the
// bundle's _tasks.audit (unless --no-store) and exits 1 when any task is broken -- a hang or a
// spent --task-budget-seconds included. SIGINT/SIGTERM/SIGHUP remove the lanes' scratch roots.
#include <chrono>
#include <cinttypes>
#include <functional>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/progress.h"
#include "apps/envforge/solve_task.h"
#include "base/cleanup_registry.h"
#include "base/json.h"
#include "sandbox/env_bundle.h"
#include "verifiers/audit.h"
#include "verifiers/judge_lane.h"

namespace envforge::cli {
namespace {

int Audit(const ParsedArgs& parsed) {
  const std::string path = parsed.positional[0];

  verifiers::AuditOptions options;
  struct IntOption {
    const char* name;
    long long min, max;
    std::function<void(long long)> set;
  };
  long long lanes = 2;
  const std::vector<IntOption> int_options = {
      {"--seed", 0, INT64_MAX, [&](long long v) { options.seed = static_cast<uint64_t>(v); }},
      {"--k", 1, 1000, [&](long long v) { options.k = static_cast<int>(v); }},
      {"--samples", 0, 100'000'000, [&](long long v) { options.samples = static_cast<size_t>(v); }},
      {"--max-enumerate", 0, 100'000'000, [&](long long v) { options.max_enumerate = static_cast<uint64_t>(v); }},
      {"--neighbourhood", 0, 100'000'000, [&](long long v) { options.neighbourhood = static_cast<size_t>(v); }},
      {"--boundary", 0, 100'000'000, [&](long long v) { options.boundary = static_cast<size_t>(v); }},
      {"--walk", 0, 100'000'000, [&](long long v) { options.walk = static_cast<size_t>(v); }},
      {"--rejudge", 0, 100'000'000, [&](long long v) { options.rejudge_samples = static_cast<size_t>(v); }},
      {"--lanes", 1, 16, [&](long long v) { lanes = v; }},
      {"--batch", 1, 100'000, [&](long long v) { options.batch_size = static_cast<size_t>(v); }},
      {"--task-budget-seconds", 1, 7 * 24 * 3600, [&](long long v) { options.task_budget = std::chrono::seconds(v); }},
  };
  for (const IntOption& option : int_options) {
    auto value = parsed.IntOption(option.name, option.min, option.max);  // the declared default when not given
    if (!value.ok()) return Fail(value.status(), kExitUsage, "envforge audit");
    option.set(*value);
  }
  if (auto tasks = parsed.Option("--task")) options.tasks = SplitCommas(*tasks);

  // Judges answer in milliseconds; a short wall time keeps a hanging verifier cheap to expose.
  sandbox::ManagerOptions manager_options;
  manager_options.limits.wall_time = std::chrono::milliseconds(3000);
  if (auto limits = parsed.Option("--limits")) {
    auto json = ParseJson(*limits, "--limits");
    if (!json.ok()) return Fail(json.status(), kExitUsage, "envforge audit");
    auto with_limits = sandbox::SandboxLimitsFromJson(*json, manager_options.limits);
    if (!with_limits.ok()) return Fail(with_limits.status(), kExitUsage, "envforge audit");
    Status valid = sandbox::ValidateLimits(*with_limits);
    if (!valid.ok()) return Fail(valid, kExitUsage, "envforge audit");
    manager_options.limits = *with_limits;
  }

  auto bundle = sandbox::EnvBundle::Load(path);
  if (!bundle.ok()) return Fail(bundle.status(), ExitCodeFor(bundle.status()), "envforge audit");
  for (const auto& id : options.tasks) {
    if (bundle->FindTask(id) == nullptr)
      return Fail(NotFoundError("no task '" + id + "' in " + path), kExitUsage, "envforge audit");
  }

  RaiseFileLimit();
  InstallCleanupSignalHandlers();
  std::vector<std::unique_ptr<verifiers::SessionJudgeLane>> owned;
  std::vector<verifiers::JudgeLane*> lane_ptrs;
  for (long long i = 0; i < lanes; ++i) {
    auto lane = verifiers::SessionJudgeLane::Create(path, manager_options);
    if (!lane.ok()) return Fail(lane.status(), ExitCodeFor(lane.status()), "envforge audit");
    lane_ptrs.push_back(lane->get());
    owned.push_back(std::move(lane).value());
  }

  size_t total = options.tasks.empty() ? bundle->tasks.size() : options.tasks.size();
  Progress progress("audit", total);
  auto report = verifiers::RunAudit(*bundle, lane_ptrs, options, [&](const verifiers::AuditProgress& p) {
    char detail[160];
    std::snprintf(detail, sizeof detail, "%s %s, %" PRIu64 " judgements, %.0f/s", p.task.c_str(), p.phase.c_str(),
                  p.judgements, p.judgements_per_second);
    progress.Update(p.tasks_done, detail);
  });
  if (!report.ok()) return Fail(report.status(), ExitCodeFor(report.status()), "envforge audit");
  progress.Finish(std::to_string(report->judgements) + " judgements");
  owned.clear();

  if (!parsed.Has("--no-store")) {
    for (const auto& task : report->tasks) {
      Status stored = sandbox::StoreTaskAudit(path, task.id, verifiers::StoredAudit(task, options));
      if (!stored.ok())
        return Fail(stored.WithContext("storing the audit of task " + task.id), kExitInfra, "envforge audit");
    }
  }

  if (parsed.Has("--json")) {
    std::printf("%s\n", report->ToJson().dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    report->PrintTable(stdout);
  }
  return report->AnyBroken() ? kExitCheckFailed : kExitOk;
}

}  // namespace

std::vector<Command> AuditCommands() {
  auto count = [](const char* name, const char* help, const char* fallback) {
    return OptionDecl{.name = name, .metavar = "N", .help = help, .default_text = fallback};
  };
  return {
      {{.name = "audit",
        .positionals = "X.envdb",
        .summary = "per task: how often the verifier accepts wrong answers and rejects right ones; verdict "
                   "sound|suspect|broken stored in _tasks.audit; exit 1 when any is broken",
        .details =
            "Per task: gold runs, trivial probes, the answer space (x-domain annotations) and mutants judged by the "
            "verifier and the oracle; false accepts/rejects, determinism, defects.\n"
            "A judge that never returns (hang) or a task whose audit outlasts --task-budget-seconds stops that "
            "task's audit at once: broken, with \"stopped\" in the report. SIGINT/SIGTERM/SIGHUP remove the "
            "lanes' scratch roots.",
        .options =
            {{.name = "--task",
              .metavar = "ID[,ID...]",
              .help = "audit only these tasks",
              .default_text = "all",
              .computed = true},
             {.name = "--seed", .metavar = "S", .help = "the audit's seed", .default_text = "1"},
             {.name = "--k", .metavar = "K", .help = "gold runs in a row, per lane (1..1000)", .default_text = "5"},
             count("--samples", "distinct answers sampled when the space is too large to enumerate", "20000"),
             count("--max-enumerate", "enumerate the answer space up to this size", "200000"),
             count("--neighbourhood", "perturbations of the gold answer", "4000"),
             count("--boundary", "threshold probes around the gold answer", "4000"),
             count("--walk", "moves from accepted answers and near misses", "8000"),
             count("--rejudge", "answers re-judged on the other lane", "1000"),
             count("--lanes", "judge lanes (sandbox sessions) at once, 1..16", "2"),
             count("--batch", "answers per judge call", "256"),
             {.name = "--task-budget-seconds",
              .metavar = "S",
              .help = "a task's audit stops (broken) past this",
              .default_text = "600"},
             {.name = "--limits", .metavar = "JSON", .help = LimitsOption().help + " (here: 3 s per answer)"},
             {.name = "--no-store", .help = "do not store the results in the bundle's _tasks.audit"},
             JsonOption("the report as JSON")},
        .min_positional = 1,
        .max_positional = 1},
       Audit},
  };
}

}  // namespace envforge::cli
