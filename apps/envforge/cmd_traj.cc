// envforge traj ls|show|export, and envforge replay: browsing a trajectory store
// (agents/trajectory_store.h) and replaying one episode (agents/replay.h).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agents/replay.h"
#include "agents/trajectory_store.h"
#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/solve_task.h"
#include "base/json.h"
#include "sandbox/session_manager.h"

namespace envforge::cli {
namespace {

using agents::Episode;
using agents::EpisodeSummary;

// One line of at most `max_chars` characters (newlines shown as spaces).
std::string Excerpt(std::string text, size_t max_chars) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (text.size() > max_chars) text = text.substr(0, max_chars - 3) + "...";
  return text;
}

// What a model saw from a result: its content when ok, else the message.
std::string Observation(const toolsets::ToolResult& result, size_t max_chars) {
  return Excerpt(result.ok() || result.message.empty() ? DumpJson(result.content) : result.message, max_chars);
}

std::string FormatTime(int64_t micros) {
  std::time_t seconds = static_cast<std::time_t>(micros / 1'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &utc);
  return text;
}

std::string VerdictText(const std::optional<Json>& verdict) {
  if (!verdict || !verdict->is_object() || !verdict->contains("passed")) return "-";
  const Json& v = *verdict;
  char text[48];
  std::snprintf(text, sizeof(text), "%s %.3g", v["passed"] == true ? "pass" : "fail", v.value("score", 0.0));
  return text;
}

std::string OutcomeText(const EpisodeSummary& summary) {
  return summary.outcome ? std::string(agents::EpisodeOutcomeName(*summary.outcome)) : "open";
}

// --env/--task/--outcome of ls and export.
Result<agents::ListFilter> FilterFrom(const ParsedArgs& parsed) {
  agents::ListFilter filter;
  filter.env_id = parsed.OptionOr("--env", "");
  filter.task_id = parsed.OptionOr("--task", "");
  if (auto outcome = parsed.Option("--outcome")) {
    filter.outcome = agents::EpisodeOutcomeFromName(*outcome);
    if (!filter.outcome) {
      return InvalidArgumentError("--outcome must be one of submitted, closed, crashed, expired, infra_error, shutdown, "
                                  "reset; got '" + *outcome + "'");
    }
  }
  return filter;
}

int List(const std::vector<std::string>& args) {
  auto parsed = ParseArgs("envforge traj ls", args,
                          {.value_options = {"--env", "--task", "--outcome", "--limit"}, .flags = {"--json"},
                           .min_positional = 1, .max_positional = 1});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  auto filter = FilterFrom(*parsed);
  if (!filter.ok()) return Fail(filter.status(), kExitUsage);
  auto limit = parsed->IntOption("--limit", 50, 1, 1'000'000);
  if (!limit.ok()) return Fail(limit.status(), kExitUsage);
  filter->limit = *limit;
  auto reader = agents::TrajectoryReader::Open(parsed->positional[0]);
  if (!reader.ok()) return Fail(reader.status(), ExitCodeFor(reader.status()));
  auto episodes = (*reader)->List(*filter);
  if (!episodes.ok()) return Fail(episodes.status(), ExitCodeFor(episodes.status()));
  if (parsed->Has("--json")) {
    Json list = Json::array();
    for (const auto& summary : *episodes) list.push_back(agents::EpisodeSummaryToJson(summary));
    std::printf("%s\n", list.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%-26s  %-20s  %-24s  %5s  %-11s  %-9s  %s\n", "ID", "ENV", "TASK", "STEPS", "OUTCOME", "VERDICT",
              "STARTED (UTC)");
  for (const auto& summary : *episodes) {
    std::printf("%-26s  %-20s  %-24s  %5lld  %-11s  %-9s  %s\n", summary.id.c_str(),
                Excerpt(summary.start.env_name, 20).c_str(),
                Excerpt(summary.start.task_id.empty() ? "-" : summary.start.task_id, 24).c_str(),
                static_cast<long long>(summary.steps), OutcomeText(summary).c_str(), VerdictText(summary.verdict).c_str(),
                FormatTime(summary.started_at_us).c_str());
  }
  auto counts = (*reader)->Count();
  if (counts.ok() && counts->episodes > static_cast<int64_t>(episodes->size())) {
    std::printf("(%zu shown of %lld episodes in the store)\n", episodes->size(), static_cast<long long>(counts->episodes));
  }
  return kExitOk;
}

int Show(const std::vector<std::string>& args) {
  auto parsed = ParseArgs("envforge traj show", args, {.flags = {"--json"}, .min_positional = 2, .max_positional = 2});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  auto reader = agents::TrajectoryReader::Open(parsed->positional[0]);
  if (!reader.ok()) return Fail(reader.status(), ExitCodeFor(reader.status()));
  auto episode = (*reader)->Get(parsed->positional[1]);
  if (!episode.ok()) return Fail(episode.status(), ExitCodeFor(episode.status()));
  if (parsed->Has("--json")) {
    std::printf("%s\n", agents::EpisodeToJson(*episode).dump(2).c_str());
    return kExitOk;
  }
  const EpisodeSummary& s = episode->summary;
  std::printf("episode %s\n", s.id.c_str());
  std::printf("  env      %s (version %s)\n", s.start.env_name.c_str(), s.start.env_id.c_str());
  if (!s.start.task_id.empty()) {
    std::printf("  task     %s (version %s)\n", s.start.task_id.c_str(), s.start.task_version.c_str());
  }
  if (!s.start.parent_id.empty()) {
    std::printf("  forked   from %s at step %lld\n", s.start.parent_id.c_str(), static_cast<long long>(s.start.fork_step));
  }
  if (s.start.seed) std::printf("  seed     %lld\n", static_cast<long long>(*s.start.seed));
  std::printf("  client   %s\n", s.start.client.c_str());
  std::printf("  started  %s UTC", FormatTime(s.started_at_us).c_str());
  if (s.ended_at_us) std::printf(", ended %s UTC", FormatTime(*s.ended_at_us).c_str());
  std::printf("\n  outcome  %s\n", OutcomeText(s).c_str());
  if (s.answer) std::printf("  answer   %s\n", Excerpt(*s.answer, 200).c_str());
  if (s.verdict) {
    std::printf("  verdict  %s (verifier %s)\n", VerdictText(s.verdict).c_str(),
                s.verdict->value("verifier_version", s.start.verifier_version).c_str());
    for (const auto& reason : s.verdict->value("reasons", Json::array())) {
      std::printf("           - %s\n", Excerpt(reason.is_string() ? reason.get<std::string>() : reason.dump(), 200).c_str());
    }
  }
  std::printf("\nsteps (%zu):\n", episode->steps.size());
  for (const auto& step : episode->steps) {
    std::printf("  #%-3lld %s %s -> %s%s%s  (%.1f ms)\n", static_cast<long long>(step.step), step.tool.c_str(),
                Excerpt(DumpJson(step.arguments), 160).c_str(), std::string(toolsets::OutcomeName(step.result.outcome)).c_str(),
                step.result.limit.empty() ? "" : " limit=", step.result.limit.c_str(), step.duration_us / 1000.0);
    std::printf("        %s\n", Observation(step.result, 200).c_str());
  }
  return kExitOk;
}

int Export(const std::vector<std::string>& args) {
  auto parsed = ParseArgs("envforge traj export", args,
                          {.value_options = {"-o", "--output", "--env", "--task", "--outcome"}, .flags = {"--jsonl"},
                           .min_positional = 1, .max_positional = 1});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  auto filter = FilterFrom(*parsed);
  if (!filter.ok()) return Fail(filter.status(), kExitUsage);
  filter->limit = 0;  // every matching episode
  auto reader = agents::TrajectoryReader::Open(parsed->positional[0]);
  if (!reader.ok()) return Fail(reader.status(), ExitCodeFor(reader.status()));
  auto episodes = (*reader)->List(*filter);
  if (!episodes.ok()) return Fail(episodes.status(), ExitCodeFor(episodes.status()));

  // A named output is written beside itself and renamed at the end: never a half-written file.
  std::string output = parsed->OptionOr("-o", parsed->OptionOr("--output", ""));
  std::string temporary = output.empty() ? "" : output + ".tmp." + std::to_string(::getpid());
  std::ofstream file;
  if (!output.empty()) {
    file.open(temporary, std::ios::binary | std::ios::trunc);
    if (!file) return Fail(InvalidArgumentError("cannot write " + output), kExitUsage);
  }
  // Oldest first: the order episodes were recorded in.
  for (auto it = episodes->rbegin(); it != episodes->rend(); ++it) {
    auto episode = (*reader)->Get(it->id);
    if (!episode.ok()) {
      if (!output.empty()) std::filesystem::remove(temporary);
      return Fail(episode.status(), ExitCodeFor(episode.status()));
    }
    std::string line = DumpJson(agents::EpisodeToJson(*episode)) + "\n";
    if (output.empty()) {
      std::fwrite(line.data(), 1, line.size(), stdout);
    } else {
      file << line;
    }
  }
  if (!output.empty()) {
    file.close();
    std::error_code ec;
    if (!file || (std::filesystem::rename(temporary, output, ec), ec)) {
      std::filesystem::remove(temporary, ec);
      return Fail(InternalError("cannot write " + output), kExitInfra);
    }
    std::fprintf(stderr, "exported %zu episodes to %s\n", episodes->size(), output.c_str());
  }
  return kExitOk;
}

// --- replay ------------------------------------------------------------------------------------

void PrintSide(const char* field, const std::string& recorded, const std::string& replayed) {
  std::printf("  %-9s recorded: %s\n  %-9s replayed: %s\n", field, recorded.c_str(), "", replayed.c_str());
}

std::string VerdictLine(const Json& verdict, const std::string& version) {
  if (!verdict.is_object() || !verdict.contains("passed")) return "none";
  char text[64];
  std::snprintf(text, sizeof(text), "%s (score %.3g)", verdict["passed"] == true ? "PASSED" : "FAILED",
                verdict.value("score", 0.0));
  return std::string(text) + ", verifier " + (version.empty() ? "?" : version.substr(0, 12));
}

void PrintReport(const agents::ReplayReport& report) {
  std::printf("replay of %s: %s, task %s, on %s%s\n", report.episode_id.c_str(), report.env_name.c_str(),
              report.task_id.empty() ? "-" : report.task_id.c_str(), report.env_path.c_str(),
              report.version_drift ? " (VERSION DRIFT: not the recorded version)" : "");
  size_t diverged = 0;
  for (const auto& step : report.steps) {
    std::string differences;
    for (const auto& field : step.differences) differences += (differences.empty() ? "" : ", ") + field;
    if (step.status != agents::StepStatus::kMatch) ++diverged;
    std::printf("  step %-4lld %-32s %s%s%s%s\n", static_cast<long long>(step.step), step.tool.c_str(),
                std::string(agents::StepStatusName(step.status)).c_str(), differences.empty() ? "" : " (",
                differences.c_str(), differences.empty() ? "" : ")");
  }
  if (report.first_divergence) {
    const auto& step = report.steps[*report.first_divergence];
    std::printf("\nfirst divergent step: %lld, %s %s%s\n", static_cast<long long>(step.step), step.tool.c_str(),
                Excerpt(DumpJson(step.arguments), 200).c_str(),
                step.episode_id != report.episode_id ? (" (recorded by parent " + step.episode_id + ")").c_str() : "");
    PrintSide("outcome", std::string(toolsets::OutcomeName(step.recorded.outcome)),
              std::string(toolsets::OutcomeName(step.replayed.outcome)));
    PrintSide("content", Observation(step.recorded, 300), Observation(step.replayed, 300));
    if (!step.recorded.ok() || !step.replayed.ok()) PrintSide("message", step.recorded.message, step.replayed.message);
  }
  const auto& verdict = report.verdict;
  std::printf("\nverdict: %s", std::string(agents::VerdictStatusName(verdict.status)).c_str());
  if (!verdict.note.empty()) std::printf(" (%s)", verdict.note.c_str());
  std::printf("\n  recorded: %s\n", VerdictLine(verdict.recorded, verdict.recorded_verifier_version).c_str());
  if (!verdict.replayed.is_null()) {
    std::printf("  replayed: %s, by %s\n", VerdictLine(verdict.replayed, verdict.replayed_verifier_version).c_str(),
                verdict.scored_with.c_str());
    if (verdict.reasons_differ) {
      for (const auto& reason : verdict.replayed.value("reasons", Json::array())) {
        std::printf("    - %s\n", Excerpt(reason.get<std::string>(), 200).c_str());
      }
    }
  }
  std::printf("\n%zu of %zu steps match; verdict %s%s\n", report.steps.size() - diverged, report.steps.size(),
              std::string(agents::VerdictStatusName(verdict.status)).c_str(),
              report.matches() ? ": the episode replays identically" : "");
}

}  // namespace

int RunTrajCommand(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fprintf(stderr, "envforge traj: expected ls, show or export\n");
    return kExitUsage;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "ls") return List(rest);
  if (args[0] == "show") return Show(rest);
  if (args[0] == "export") return Export(rest);
  std::fprintf(stderr, "envforge traj: unknown subcommand '%s' (expected ls, show or export)\n", args[0].c_str());
  return kExitUsage;
}

int RunReplayCommand(const std::vector<std::string>& args) {
  auto parsed = ParseArgs("envforge replay", args,
                          {.value_options = {"--envs", "--verifier-of", "--limits"},
                           .flags = {"--json", "--allow-version-drift"}, .min_positional = 2, .max_positional = 2});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  agents::ReplayOptions options;
  options.envs = parsed->OptionOr("--envs", "");
  if (options.envs.empty()) {
    return Fail(InvalidArgumentError("envforge replay: --envs DIR|X.envdb is required (where the recorded environment is)"),
                kExitUsage);
  }
  options.verifier_of = parsed->OptionOr("--verifier-of", "");
  options.allow_version_drift = parsed->Has("--allow-version-drift");
  auto reader = agents::TrajectoryReader::Open(parsed->positional[0]);
  if (!reader.ok()) return Fail(reader.status(), ExitCodeFor(reader.status()));
  auto episode = (*reader)->Get(parsed->positional[1]);
  if (!episode.ok()) return Fail(episode.status(), ExitCodeFor(episode.status()));
  agents::TrajectoryReader* store = reader->get();
  options.load_episode = [store](const std::string& id) { return store->Get(id); };

  RaiseFileLimit();
  auto manager_options = ManagerOptionsFromLimitsOption(parsed->Option("--limits"));
  if (!manager_options.ok()) return Fail(manager_options.status(), kExitUsage);
  auto manager = sandbox::SessionManager::Create(std::move(*manager_options));
  if (!manager.ok()) return Fail(manager.status(), kExitInfra);
  auto report = agents::Replay(*episode, **manager, options);
  if (!report.ok()) {
    // A version mismatch is the user's input (the wrong bundle), not an infrastructure failure.
    bool bad_input = report.status().code() == StatusCode::kFailedPrecondition || ExitCodeFor(report.status()) == kExitUsage;
    return Fail(report.status(), bad_input ? kExitUsage : kExitInfra);
  }
  if (parsed->Has("--json")) {
    std::printf("%s\n", agents::ReplayReportToJson(*report).dump(2).c_str());
  } else {
    PrintReport(*report);
  }
  if (report->infra_error()) return kExitInfra;
  bool diverged = std::any_of(report->steps.begin(), report->steps.end(),
                              [](const agents::StepComparison& s) { return s.status == agents::StepStatus::kDiverged; });
  if (diverged || report->verdict.status == agents::VerdictStatus::kChanged) return kExitCheckFailed;
  if (report->verdict.status == agents::VerdictStatus::kDefect) return kExitInfra;
  return kExitOk;
}

}  // namespace envforge::cli
