// envforge code import / code validate: code environments from SWE-bench shaped instances, and
// their validation by running the tests before and after the gold patch.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/progress.h"
#include "base/cleanup_registry.h"
#include "base/fd.h"
#include "sandbox/code/code_bundle.h"
#include "sandbox/code/code_instance.h"
#include "verifiers/code_validation.h"

namespace envforge::cli {
namespace {

constexpr const char* kImportCommand = "envforge code import";
constexpr const char* kValidateCommand = "envforge code validate";

void PrintList(const char* label, const std::vector<std::string>& ids) {
  std::printf("  %-12s %zu", label, ids.size());
  for (size_t i = 0; i < ids.size() && i < 8; ++i) std::printf("%s%s", i == 0 ? ": " : ", ", ids[i].c_str());
  if (ids.size() > 8) std::printf(", ...");
  std::printf("\n");
}

int Import(const ParsedArgs& parsed) {
  auto repo = parsed.Option("--repo");
  auto output = parsed.Option("-o");  // both required by the declaration
  auto instances = sandbox::code::ReadCodeInstances(parsed.positional[0]);
  if (!instances.ok()) return Fail(instances.status(), ExitCodeFor(instances.status()), kImportCommand);
  sandbox::code::CodeImportOptions options;
  options.env_name = parsed.OptionOr("--name");
  auto report = sandbox::code::ImportCodeInstances(*instances, *repo, *output, options);
  if (!report.ok()) return Fail(report.status(), ExitCodeFor(report.status()), kImportCommand);
  if (parsed.Has("--json")) {
    Json json = {{"bundle", *output},
                 {"tasks", report->task_ids},
                 {"base_commits", report->base_commits},
                 {"archive_bytes", report->archive_bytes},
                 {"content_hash", report->content_hash}};
    std::printf("%s\n", json.dump(2).c_str());
    return kExitOk;
  }
  std::printf("imported %zu instance(s) into %s (repositories %.1f MiB, hash %.12s)\n", report->task_ids.size(),
              output->c_str(), static_cast<double>(report->archive_bytes) / (1 << 20), report->content_hash.c_str());
  for (size_t i = 0; i < report->task_ids.size(); ++i) {
    std::printf("  %s at %.12s\n", report->task_ids[i].c_str(), report->base_commits[i].c_str());
  }
  return kExitOk;
}

int Validate(const ParsedArgs& parsed) {
  const std::string& envdb = parsed.positional[0];
  auto runs = parsed.IntOption("--runs", 1, 20);
  if (!runs.ok()) return Fail(runs.status(), kExitUsage, kValidateCommand);
  std::string gold_override;
  if (auto patch_file = parsed.Option("--patch")) {
    auto text = ReadFileToString(*patch_file);
    if (!text.ok()) return Fail(text.status(), kExitUsage, kValidateCommand);
    gold_override = *text;
  }
  auto ids = sandbox::code::CodeTaskIds(envdb);
  if (!ids.ok()) return Fail(ids.status(), ExitCodeFor(ids.status()), kValidateCommand);
  if (auto task = parsed.Option("--task")) {
    if (std::find(ids->begin(), ids->end(), *task) == ids->end()) {
      return Fail(NotFoundError(envdb + " has no code task '" + *task + "'"), kExitUsage, kValidateCommand);
    }
    *ids = {*task};
  }
  InstallCleanupSignalHandlers();
  verifiers::CodeRunOptions options;
  Json results = Json::array();
  bool all_valid = true;
  Progress progress("validate", ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    const std::string& id = (*ids)[i];
    auto validation = verifiers::ValidateCodeTask(envdb, id, *runs, options, gold_override);
    if (!validation.ok()) return Fail(validation.status().WithContext(id), kExitInfra, kValidateCommand);
    if (gold_override.empty()) {
      Status stored = sandbox::code::StoreCodeValidation(envdb, id, validation->ToJson());
      if (!stored.ok()) return Fail(stored, ExitCodeFor(stored), kValidateCommand);
    }
    all_valid = all_valid && validation->valid;
    Json entry = validation->ToJson();
    entry["task"] = id;
    results.push_back(entry);
    progress.Update(i + 1);
  }
  progress.Finish();
  if (parsed.Has("--json")) {
    std::printf("%s\n", results.dump(2).c_str());
  } else {
    for (const Json& entry : results) {
      std::printf("%s: %s (%s)\n", entry["task"].get<std::string>().c_str(),
                  entry["valid"].get<bool>() ? "valid" : "invalid", entry["reason"].get<std::string>().c_str());
      PrintList("F2P", entry["FAIL_TO_PASS"]);
      PrintList("P2F", entry["PASS_TO_FAIL"]);
      PrintList("P2P", entry["PASS_TO_PASS"]);
      PrintList("flaky", entry["flaky"]);
      for (const Json& note : entry["notes"]) std::printf("  note: %s\n", note.get<std::string>().c_str());
      std::printf("  tests: %.2f s before, %.2f s after the patch (%d run(s) after)\n",
                  entry["before_seconds"].get<double>(), entry["after_seconds"].get<double>(),
                  entry["runs"].get<int>());
    }
  }
  return all_valid ? kExitOk : kExitCheckFailed;
}

}  // namespace

std::vector<Command> CodeEnvCommands() {
  return {
      {{.name = "code import",
        .positionals = "INSTANCES.json|.jsonl",
        .summary = "a code environment: one task per SWE-bench shaped instance, its repository at base_commit with no "
                   "later history, the gold and test patches kept apart from sessions",
        .options = {{.name = "--repo", .metavar = "PATH", .help = "the instances' git repository", .required = true},
                    {.name = "-o", .metavar = "X.envdb", .help = "the bundle to write", .required = true},
                    {.name = "--name",
                     .metavar = "NAME",
                     .help = "the environment's name",
                     .default_text = "from the repository",
                     .computed = true},
                    JsonOption("{bundle, tasks, base_commits, archive_bytes, content_hash} as JSON")},
        .min_positional = 1,
        .max_positional = 1},
       Import},
      {{.name = "code validate",
        .positionals = "X.envdb",
        .summary =
            "run the tests in the sandbox before and after the gold patch (or FILE): F2P, P2F, P2P, flaky tests, "
            "valid/invalid with the reason; exit 0 valid, 1 invalid",
        .details = "The lists are stored in the bundle (not with --patch).",
        .options = {{.name = "--task",
                     .metavar = "ID",
                     .help = "only this task",
                     .default_text = "every code task",
                     .computed = true},
                    {.name = "--runs",
                     .metavar = "N",
                     .help = "test runs after the patch, for flakiness (1..20)",
                     .default_text = "3"},
                    {.name = "--patch",
                     .metavar = "FILE",
                     .help = "validate this patch instead of the gold one (nothing is stored)"},
                    JsonOption("one JSON array, an object per task")},
        .min_positional = 1,
        .max_positional = 1},
       Validate},
  };
}

}  // namespace envforge::cli
