// Replay of recorded episodes (agents/replay.h): finding the recorded environment version,
// re-executing the calls on a fresh session, diffing observations and re-judging the answer.
#include "agents/replay.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "base/log.h"
#include "base/sqlite.h"
#include "sandbox/env_bundle.h"
#include "toolsets/search_tools.h"

namespace envforge::agents {
namespace {

namespace fs = std::filesystem;

// A forked episode's ancestry is short; a longer chain means the parent links loop.
constexpr int kMaxForkDepth = 64;

struct BundleIdentity {
  std::string path;
  std::string content_hash;
  std::string name;
};

// Reads the recorded hash and name only; SessionManager::OpenEnvironment verifies the hash later.
Result<BundleIdentity> ReadIdentity(const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(path, Database::Mode::kReadOnly));
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt,
                            db.Prepare("SELECT key, value FROM _env WHERE key IN ('content_hash', 'name')"));
  BundleIdentity identity{path, "", ""};
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    (stmt.ColumnText(0) == "name" ? identity.name : identity.content_hash) = stmt.ColumnText(1);
  }
  return identity;
}

// Every *.envdb bundle `envs` names: the file itself, or the directory's (not recursive), sorted.
Result<std::vector<BundleIdentity>> ScanBundles(const std::string& envs) {
  std::error_code ec;
  if (envs.empty()) return InvalidArgumentError("no environments given (an *.envdb file or a directory of them)");
  if (!fs::exists(envs, ec)) return NotFoundError("no environment file or directory " + envs);
  std::vector<std::string> paths;
  if (fs::is_directory(envs, ec)) {
    for (const auto& entry : fs::directory_iterator(envs, ec)) {
      if (entry.is_regular_file() && entry.path().extension() == ".envdb") paths.push_back(entry.path().string());
    }
    std::sort(paths.begin(), paths.end());
  } else {
    paths.push_back(envs);
  }
  std::vector<BundleIdentity> bundles;
  for (const std::string& path : paths) {
    auto identity = ReadIdentity(path);
    if (!identity.ok()) {
      // One unreadable file in a directory must not hide the others; a single named file must.
      if (paths.size() == 1 && !fs::is_directory(envs, ec)) {
        return InvalidArgumentError(path + " is not an environment bundle: " + identity.status().message());
      }
      ENVFORGE_LOG(kInfo) << "replay: skipping " << path << ": " << identity.status().message();
      continue;
    }
    bundles.push_back(std::move(*identity));
  }
  return bundles;
}

std::string Describe(const std::string& env_id, const std::string& env_name) {
  return "environment version " + env_id + (env_name.empty() ? "" : " ('" + env_name + "')");
}

using ReplayedStep = std::pair<std::string, StepRecord>;  // (recording episode, step)

// The calls to replay, in order: the parents' prefixes below each fork_step, then the episode's own.
Result<std::vector<ReplayedStep>> CollectSteps(const Episode& episode, const ReplayOptions& options, int depth) {
  std::vector<ReplayedStep> steps;
  const EpisodeStart& start = episode.summary.start;
  if (!start.parent_id.empty()) {
    if (depth >= kMaxForkDepth) {
      return DataLossError("episode " + episode.summary.id + ": fork ancestry deeper than " +
                           std::to_string(kMaxForkDepth) + " (do the parent links loop?)");
    }
    if (!options.load_episode) {
      return FailedPreconditionError("episode " + episode.summary.id + " is forked from " + start.parent_id +
                                     ", but no episode loader was given to fetch the parent");
    }
    auto parent = options.load_episode(start.parent_id);
    if (!parent.ok()) {
      if (parent.status().code() == StatusCode::kNotFound) {
        return NotFoundError("parent episode " + start.parent_id + " of forked episode " + episode.summary.id +
                             " is not in the store");
      }
      return parent.status();
    }
    ENVFORGE_ASSIGN_OR_RETURN(auto parent_steps, CollectSteps(*parent, options, depth + 1));
    for (auto& step : parent_steps) {
      if (step.second.step < start.fork_step) steps.push_back(std::move(step));
    }
    if (static_cast<int64_t>(steps.size()) < start.fork_step) {
      ENVFORGE_LOG(kWarn) << "replay: parent " << start.parent_id << " has " << steps.size()
                          << " recorded steps below fork_step " << start.fork_step;
    }
  }
  for (const StepRecord& step : episode.steps) steps.emplace_back(episode.summary.id, step);
  return steps;
}

std::vector<search::RecordedResponse> RecordedSearchResponses(const std::vector<ReplayedStep>& steps) {
  std::vector<search::RecordedResponse> recorded;
  for (const auto& [episode_id, step] : steps) {
    if (toolsets::IsSearchTool(step.tool)) recorded.push_back({step.tool, step.arguments, step.result});
  }
  return recorded;
}

void Compare(StepComparison& step) {
  const toolsets::ToolResult& a = step.recorded;
  const toolsets::ToolResult& b = step.replayed;
  if (a.outcome != b.outcome) step.differences.push_back("outcome");
  if (a.content != b.content) step.differences.push_back("content");
  if (a.message != b.message) step.differences.push_back("message");
  if (a.limit != b.limit) step.differences.push_back("limit");
  if (b.outcome == toolsets::Outcome::kInfraError && a.outcome != toolsets::Outcome::kInfraError) {
    step.status = StepStatus::kInfraError;
  } else {
    step.status = step.differences.empty() ? StepStatus::kMatch : StepStatus::kDiverged;
  }
}

Json VerdictJson(const sandbox::JudgeVerdict& verdict, const std::string& verifier_version) {
  return Json{{"passed", verdict.passed},
              {"score", verdict.score},
              {"reasons", verdict.reasons},
              {"verifier_version", verifier_version}};
}

// Judges the recorded answer in a fresh session of `env_id` (see the header: the verdict depends
// on the answer and the pristine database only).
void Judge(sandbox::SessionManager& manager, const std::string& env_id, const std::string& task_id,
           const std::string& answer, VerdictComparison& verdict) {
  auto session = manager.CreateSession(env_id, task_id);
  if (!session.ok()) {
    verdict.status = VerdictStatus::kDefect;
    verdict.note = "could not start a session to judge the answer: " + session.status().ToString();
    return;
  }
  auto judged = manager.JudgeAnswers(*session, sandbox::Judge::kVerifier, {answer});
  (void)manager.CloseSession(*session);
  if (!judged.ok() || judged->size() != 1) {
    verdict.status = VerdictStatus::kDefect;
    verdict.note = "judging failed: " + (judged.ok() ? std::string("no verdict returned") : judged.status().ToString());
    return;
  }
  const sandbox::JudgeVerdict& fresh = judged->front();
  if (fresh.defect) {
    verdict.status = VerdictStatus::kDefect;
    verdict.note = fresh.defect_message;
    return;
  }
  verdict.replayed = VerdictJson(fresh, verdict.replayed_verifier_version);
  const Json& recorded = verdict.recorded;
  if (!recorded.is_object() || !recorded.contains("passed") || !recorded["passed"].is_boolean()) {
    verdict.status = VerdictStatus::kNotApplicable;
    verdict.note = "no recorded verdict to compare with";
    return;
  }
  bool passed = recorded["passed"].get<bool>();
  double score = recorded.contains("score") && recorded["score"].is_number() ? recorded["score"].get<double>() : 0.0;
  bool same = passed == fresh.passed && std::abs(score - fresh.score) <= 1e-9;
  verdict.status = same ? VerdictStatus::kSame : VerdictStatus::kChanged;
  verdict.reasons_differ = recorded.value("reasons", Json::array()) != Json(fresh.reasons);
}

}  // namespace

std::string_view StepStatusName(StepStatus status) {
  switch (status) {
    case StepStatus::kMatch: return "match";
    case StepStatus::kDiverged: return "diverged";
    case StepStatus::kInfraError: return "infra_error";
  }
  return "diverged";
}

std::string_view VerdictStatusName(VerdictStatus status) {
  switch (status) {
    case VerdictStatus::kNotApplicable: return "n/a";
    case VerdictStatus::kSame: return "same";
    case VerdictStatus::kChanged: return "changed";
    case VerdictStatus::kDefect: return "defect";
  }
  return "n/a";
}

bool ReplayReport::infra_error() const {
  return std::any_of(steps.begin(), steps.end(),
                     [](const StepComparison& s) { return s.status == StepStatus::kInfraError; });
}

bool ReplayReport::matches() const {
  bool steps_match =
      std::all_of(steps.begin(), steps.end(), [](const StepComparison& s) { return s.status == StepStatus::kMatch; });
  return steps_match && (verdict.status == VerdictStatus::kSame || verdict.status == VerdictStatus::kNotApplicable);
}

Result<std::string> FindEnvBundle(const std::string& envs, const std::string& env_id, const std::string& env_name) {
  ENVFORGE_ASSIGN_OR_RETURN(auto bundles, ScanBundles(envs));
  for (const BundleIdentity& bundle : bundles) {
    if (bundle.content_hash == env_id) return bundle.path;
  }
  std::string seen;
  for (const BundleIdentity& bundle : bundles) {
    if (!env_name.empty() && bundle.name != env_name) continue;
    seen += (seen.empty() ? "" : ", ") + bundle.content_hash.substr(0, 12) + " (" +
            fs::path(bundle.path).filename().string() + ")";
  }
  return NotFoundError(
      Describe(env_id, env_name) + " is not in " + envs +
      (seen.empty() ? std::string(" (no bundle of that environment there)") : " (versions there: " + seen + ")"));
}

Result<ReplayReport> Replay(const Episode& episode, sandbox::SessionManager& manager, const ReplayOptions& options) {
  const EpisodeSummary& summary = episode.summary;
  const EpisodeStart& start = summary.start;
  ReplayReport report;
  report.episode_id = summary.id;
  report.env_name = start.env_name;
  report.env_id = start.env_id;
  report.task_id = start.task_id;
  report.task_version = start.task_version;
  ENVFORGE_ASSIGN_OR_RETURN(auto steps, CollectSteps(episode, options, 0));

  // The environment: the exact version, or (drift allowed) the same environment by name.
  auto path = FindEnvBundle(options.envs, start.env_id, start.env_name);
  if (!path.ok()) {
    if (path.status().code() != StatusCode::kNotFound || !options.allow_version_drift) return path.status();
    ENVFORGE_ASSIGN_OR_RETURN(auto bundles, ScanBundles(options.envs));
    auto same_name = std::find_if(bundles.begin(), bundles.end(), [&](const BundleIdentity& b) {
      return !start.env_name.empty() && b.name == start.env_name;
    });
    if (same_name == bundles.end()) return path.status();
    path = same_name->path;
    report.version_drift = true;
  }
  report.env_path = *path;
  ENVFORGE_ASSIGN_OR_RETURN(report.replay_env_id, manager.OpenEnvironment(*path));
  if (report.replay_env_id != start.env_id) report.version_drift = true;
  const sandbox::EnvBundle* bundle = manager.FindEnvironment(report.replay_env_id);
  if (bundle == nullptr) return InternalError("environment " + report.replay_env_id + " vanished after opening");
  if (!start.task_id.empty()) {
    const sandbox::TaskRecord* task = bundle->FindTask(start.task_id);
    if (task == nullptr) return NotFoundError("no task '" + start.task_id + "' in " + *path);
    report.replay_task_version = task->version;
    if (!start.task_version.empty() && task->version != start.task_version) {
      if (!options.allow_version_drift) {
        return FailedPreconditionError("task '" + start.task_id + "' in " + *path + " is version " + task->version +
                                       ", the episode ran version " + start.task_version +
                                       " (allow version drift to replay anyway)");
      }
      report.version_drift = true;
    }
  }

  // The steps, on one fresh session. A search episode's search/open/find calls are answered with
  // the responses it recorded (unless live_search), so its observations do not depend on what the
  // corpus or a live API answers today.
  sandbox::SessionOptions session_options;
  session_options.task_id = start.task_id;
  if (bundle->manifest.kind == "search" && !options.live_search) {
    session_options.recorded_responses = RecordedSearchResponses(steps);
  }
  ENVFORGE_ASSIGN_OR_RETURN(auto session, manager.CreateSession(report.replay_env_id, std::move(session_options)));
  for (auto& [episode_id, recorded] : steps) {
    StepComparison step;
    step.episode_id = episode_id;
    step.step = recorded.step;
    step.tool = recorded.tool;
    step.arguments = recorded.arguments;
    step.recorded = std::move(recorded.result);
    toolsets::ToolCall call;
    call.id = "replay-" + std::to_string(step.step);
    call.name = step.tool;
    call.arguments = step.arguments;
    step.replayed = manager.CallTool(session, std::move(call));
    Compare(step);
    if (step.status == StepStatus::kDiverged && !report.first_divergence) report.first_divergence = report.steps.size();
    report.steps.push_back(std::move(step));
  }
  (void)manager.CloseSession(session);

  // The verdict.
  VerdictComparison& verdict = report.verdict;
  verdict.recorded = summary.verdict ? *summary.verdict : Json();
  verdict.recorded_verifier_version = start.verifier_version;
  if (verdict.recorded.is_object() && verdict.recorded.contains("verifier_version") &&
      verdict.recorded["verifier_version"].is_string()) {
    verdict.recorded_verifier_version = verdict.recorded["verifier_version"].get<std::string>();
  }
  if (start.task_id.empty()) {
    verdict.note = "the episode has no task";
    return report;
  }
  if (!summary.answer) {
    verdict.note = "no answer was submitted";
    return report;
  }
  std::string scoring_env = report.replay_env_id;
  verdict.scored_with = *path;
  verdict.replayed_verifier_version = report.replay_task_version;
  if (!options.verifier_of.empty()) {
    ENVFORGE_ASSIGN_OR_RETURN(scoring_env, manager.OpenEnvironment(options.verifier_of));
    const sandbox::EnvBundle* other = manager.FindEnvironment(scoring_env);
    const sandbox::TaskRecord* task = other ? other->FindTask(start.task_id) : nullptr;
    if (task == nullptr) return NotFoundError("no task '" + start.task_id + "' in " + options.verifier_of);
    verdict.scored_with = options.verifier_of;
    verdict.replayed_verifier_version = task->version;
  }
  Judge(manager, scoring_env, start.task_id, *summary.answer, verdict);
  return report;
}

Json ReplayReportToJson(const ReplayReport& report) {
  Json steps = Json::array();
  for (const StepComparison& step : report.steps) {
    steps.push_back(Json{{"episode_id", step.episode_id},
                         {"step", step.step},
                         {"tool", step.tool},
                         {"arguments", step.arguments},
                         {"status", StepStatusName(step.status)},
                         {"differences", step.differences},
                         {"recorded", toolsets::ToJson(step.recorded)},
                         {"replayed", toolsets::ToJson(step.replayed)}});
  }
  const VerdictComparison& verdict = report.verdict;
  Json first = report.first_divergence ? Json(report.steps[*report.first_divergence].step) : Json();
  return Json{{"episode_id", report.episode_id},
              {"env_name", report.env_name},
              {"env_id", report.env_id},
              {"replay_env_id", report.replay_env_id},
              {"env_path", report.env_path},
              {"task_id", report.task_id},
              {"task_version", report.task_version},
              {"replay_task_version", report.replay_task_version},
              {"version_drift", report.version_drift},
              {"matches", report.matches()},
              {"infra_error", report.infra_error()},
              {"first_divergence", first},
              {"steps", std::move(steps)},
              {"verdict", Json{{"status", VerdictStatusName(verdict.status)},
                               {"note", verdict.note},
                               {"recorded", verdict.recorded},
                               {"replayed", verdict.replayed},
                               {"recorded_verifier_version", verdict.recorded_verifier_version},
                               {"replayed_verifier_version", verdict.replayed_verifier_version},
                               {"scored_with", verdict.scored_with},
                               {"reasons_differ", verdict.reasons_differ}}}};
}

}  // namespace envforge::agents
