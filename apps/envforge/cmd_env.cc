// envforge env pack|show|check
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/env_check.h"
#include "apps/envforge/solve_task.h"
#include "base/cleanup_registry.h"
#include "base/json.h"
#include "sandbox/env_bundle.h"
#include "sandbox/env_pack.h"

namespace envforge::cli {
namespace {

int Pack(const ParsedArgs& parsed) {
  std::string output = parsed.Option("-o").value_or(parsed.OptionOr("--output"));
  if (output.empty()) return Fail(InvalidArgumentError("envforge env pack: -o OUT.envdb is required"), kExitUsage);
  sandbox::PackOptions options;
  auto max_seconds = parsed.IntOption("--max-seconds", 1, 7 * 24 * 3600);
  if (!max_seconds.ok()) return Fail(max_seconds.status(), kExitUsage);
  options.max_time = std::chrono::seconds(*max_seconds);
  auto max_bytes = parsed.IntOption("--max-bytes", 4096, INT64_MAX);
  if (!max_bytes.ok()) return Fail(max_bytes.status(), kExitUsage);
  options.max_bytes = static_cast<uint64_t>(*max_bytes);
  if (auto provenance = parsed.Option("--provenance")) {
    auto json = ParseJson(*provenance, "--provenance");
    if (!json.ok()) return Fail(json.status(), kExitUsage);
    options.provenance = *json;
  }
  // A pack interrupted by SIGINT/SIGTERM/SIGHUP removes its temporary file (sandbox/env_pack.h).
  InstallCleanupSignalHandlers();
  Status packed = sandbox::PackEnvironment(parsed.positional[0], output, options);
  if (!packed.ok()) return Fail(packed, ExitCodeFor(packed));
  auto bundle = sandbox::EnvBundle::Load(output);
  if (!bundle.ok()) return Fail(bundle.status(), kExitInfra);
  if (parsed.Has("--json")) {
    std::printf("%s\n", DumpJson(Json{{"output", output},
                                      {"name", bundle->manifest.name},
                                      {"tools", bundle->tools.size()},
                                      {"tasks", bundle->tasks.size()},
                                      {"hash", bundle->manifest.content_hash}})
                            .c_str());
  } else {
    std::printf("packed %s: %zu tools, %zu tasks, hash %s -> %s\n", bundle->manifest.name.c_str(), bundle->tools.size(),
                bundle->tasks.size(), bundle->manifest.content_hash.c_str(), output.c_str());
  }
  return kExitOk;
}

std::string FirstLine(const std::string& text, size_t max_chars) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > max_chars) line = line.substr(0, max_chars - 3) + "...";
  return line;
}

int Show(const ParsedArgs& parsed) {
  auto bundle = sandbox::EnvBundle::Load(parsed.positional[0]);
  if (!bundle.ok()) return Fail(bundle.status(), ExitCodeFor(bundle.status()));
  if (parsed.Has("--json")) {
    std::printf("%s\n", bundle->ToJson().dump(2).c_str());
    return kExitOk;
  }
  const auto& m = bundle->manifest;
  std::printf("%s (%s, %s) format %d\n  %s\n  hash %s\n", m.name.c_str(), m.kind.c_str(), m.category.c_str(),
              m.format_version, m.description.c_str(), m.content_hash.c_str());
  std::printf("\ntools (%zu):\n", bundle->tools.size());
  for (const auto& tool : bundle->tools) {
    std::string params;
    const Json& schema = tool.spec.input_schema;
    if (schema.contains("properties")) {
      for (const auto& [name, property] : schema["properties"].items()) {
        if (!params.empty()) params += ", ";
        params += name + ": " + property.value("type", std::string("any"));
      }
    }
    std::printf("  %-28s (%s)%s\n      %s\n", tool.spec.name.c_str(), params.c_str(), tool.builtin ? " [runtime]" : "",
                FirstLine(tool.spec.description, 100).c_str());
  }
  std::printf("\ntasks (%zu):\n", bundle->tasks.size());
  for (const auto& task : bundle->tasks) {
    Json audit = sandbox::AuditStatus(task);
    std::string audited = "un-audited";
    if (!audit.is_null() && audit["current"].get<bool>()) {
      audited = "audit " + audit["verdict"].get<std::string>();
    } else if (!audit.is_null()) {
      audited = "un-audited (audit of an older version)";
    }
    std::printf("  %-28s difficulty %d%s  version %s  %s\n      %s\n", task.id.c_str(), task.difficulty,
                task.oracle_source.empty() ? "" : ", oracle", task.version.substr(0, 12).c_str(), audited.c_str(),
                FirstLine(task.prompt, 100).c_str());
  }
  return kExitOk;
}

int Check(const ParsedArgs& parsed) {
  auto options = ManagerOptionsFromLimitsOption(parsed.Option("--limits"));
  if (!options.ok()) return Fail(options.status(), kExitUsage);
  EnvCheckReport report = CheckEnvironment(parsed.positional[0], /*show_progress=*/!parsed.Has("--json"), *options);
  if (parsed.Has("--json")) {
    std::printf("%s\n", report.ToJson().dump(2).c_str());
  } else {
    report.PrintHuman(stdout);
  }
  if (report.infra_failure) return kExitInfra;
  return report.ok ? kExitOk : kExitCheckFailed;
}

}  // namespace

std::vector<Command> EnvCommands() {
  return {
      {{.name = "env pack",
        .positionals = "DIR",
        .summary = "pack an environment source directory into a bundle (X.envdb)",
        .details = "schema.sql and the analysis run within S seconds and the bundle stays within N bytes, or the pack "
                   "fails (exit 2) naming the budget and the statement; an interrupted pack leaves no temporary file.",
        .options = {{.name = "-o", .metavar = "OUT.envdb", .help = "the bundle to write (required, or --output)"},
                    {.name = "--output", .metavar = "OUT.envdb", .help = "the same as -o"},
                    {.name = "--max-seconds",
                     .metavar = "S",
                     .help = "time budget of schema.sql and the analysis",
                     .default_text = "300"},
                    {.name = "--max-bytes",
                     .metavar = "N",
                     .help = "size budget of the bundle (at least 4096)",
                     .default_text = "1073741824"},
                    {.name = "--provenance",
                     .metavar = "JSON",
                     .help = "the manifest's provenance object (generator, model, seed)"},
                    JsonOption("{output, name, tools, tasks, hash} on stdout")},
        .min_positional = 1,
        .max_positional = 1},
       Pack},
      {{.name = "env show",
        .positionals = "X.envdb",
        .summary = "manifest, tools, tasks and content hash",
        .options = {JsonOption("the whole bundle description as JSON")},
        .min_positional = 1,
        .max_positional = 1},
       Show},
      {{.name = "env check",
        .positionals = "X.envdb",
        .summary = "sources compile, schemas valid, every gold solution passes its verifier in a sandbox session",
        .details = "exit 1 when the environment does not check, 3 when the sandbox failed.",
        .options = {LimitsOption(), JsonOption("the report as JSON (no progress lines)")},
        .min_positional = 1,
        .max_positional = 1},
       Check},
  };
}

}  // namespace envforge::cli
