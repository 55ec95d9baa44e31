// Replay: re-executes a recorded episode (agents/trajectory_store.h) on a fresh session of the
// exact environment version it ran on, compares every observation with the recording, and
// re-scores the recorded answer -- with the recorded verifier, or with another environment's
// (`envforge replay --verifier-of`), to see how a verifier change re-scores old data.
//
// Steps. The session is created from the bundle whose content hash equals the episode's env_id
// and runs the episode's task. Each recorded call is sent again, in order, with the same tool and
// arguments; a forked episode (parent_id set) first replays its parent's steps below fork_step
// (recursively, through ReplayOptions::load_episode), then its own. Each replayed result is
// compared with the recorded one on outcome, content, message and limit; call ids, durations,
// what the tool printed and where an error came from are ignored. A step is
//   match       all four equal;
//   diverged    any differs (the differing fields are listed);
//   infra_error the replayed call answered infra_error where the recording did not: the runtime
//               failed now, which says nothing about the episode.
// Replay goes on past a divergence, so the report shows every step.
//
// Verdict. When the episode has a submitted answer and a task, the answer text is judged again
// with SessionManager::JudgeAnswers(Judge::kVerifier) in a fresh session of the scoring
// environment (the recorded one, or ReplayOptions::verifier_of). A verifier sees only the answer
// and the pristine database, so a fresh session judges exactly what submit_result judged, even
// when the replayed session died; and JudgeAnswers tells a verifier defect (it raised, timed
// out) apart from a failing verdict. The comparison is on passed and score; differing reasons
// are reported but do not make the verdict "changed". The verifier versions of both sides are
// reported (a task's version covers its verifier).
//
// Search episodes. Their search/open/find responses are served from the recording unless
// ReplayOptions::live_search (sandbox::SessionOptions::recorded_responses); the answer is judged
// again by the task's answer key.
//
// Versions. The task's version in the bundle must equal the recorded task_version; otherwise,
// and when no bundle has the recorded env_id, Replay fails unless allow_version_drift is set.
// With it, a missing version falls back to a bundle of the same environment name (the report
// says version_drift), which lets an old episode be replayed against a newer environment.
//
// Thread safety: Replay is a blocking call (sync SessionManager wrappers); not from the
// manager's io thread. Distinct calls may run concurrently on one manager.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agents/trajectory_store.h"
#include "base/json.h"
#include "base/status.h"
#include "sandbox/session_manager.h"
#include "toolsets/tool_protocol.h"

namespace envforge::agents {

struct ReplayOptions {
  // Where the recorded environment version is looked for: one *.envdb file, or a directory whose
  // *.envdb files (not recursive) are scanned by content hash.
  std::string envs;
  // Optional: an *.envdb whose task of the same id re-scores the recorded answer (typically the
  // environment re-packed with an edited verifier). Empty: the recorded environment's verifier.
  std::string verifier_of;
  // Accept a task version (or, by environment name, an environment version) other than the
  // recorded one instead of failing.
  bool allow_version_drift = false;
  // Loads an episode by id: needed for forked episodes (their parents' steps). Unset: a forked
  // episode is FailedPrecondition.
  std::function<Result<Episode>(const std::string& id)> load_episode;
  // Search environments: false (the default) answers the replayed search/open/find calls with the
  // responses the episode recorded (a call the recording lacks goes to the backend), so the
  // observations are the episode's even after the corpus or a live API changed; true sends every
  // call to the backend, and the step comparison shows what it answers differently today.
  bool live_search = false;
};

enum class StepStatus { kMatch, kDiverged, kInfraError };
std::string_view StepStatusName(StepStatus status);  // "match", "diverged", "infra_error"

struct StepComparison {
  std::string episode_id;  // the episode that recorded the step (the parent, for a fork's prefix)
  int64_t step = 0;
  std::string tool;
  Json arguments;
  toolsets::ToolResult recorded;
  toolsets::ToolResult replayed;
  StepStatus status = StepStatus::kMatch;
  std::vector<std::string> differences;  // of "outcome", "content", "message", "limit"
};

enum class VerdictStatus {
  kNotApplicable,  // no answer recorded, no task, or no recorded verdict to compare with (see note)
  kSame,           // passed and score equal
  kChanged,        // passed or score differ
  kDefect,         // the verifier could not judge (raised, timed out): see note
};
std::string_view VerdictStatusName(VerdictStatus status);  // "n/a", "same", "changed", "defect"

struct VerdictComparison {
  VerdictStatus status = VerdictStatus::kNotApplicable;
  std::string note;  // why n/a, or the defect message
  Json recorded;     // the recorded verdict {"passed","score","reasons","verifier_version"}, or null
  Json replayed;     // the new one, same shape, or null when not judged
  std::string recorded_verifier_version;
  std::string replayed_verifier_version;
  std::string scored_with;  // the bundle whose verifier judged
  bool reasons_differ = false;
};

struct ReplayReport {
  std::string episode_id;
  std::string env_name;
  std::string env_id;         // recorded
  std::string replay_env_id;  // the bundle the steps ran on (= env_id unless version_drift)
  std::string env_path;
  std::string task_id;
  std::string task_version;         // recorded
  std::string replay_task_version;  // of the bundle's task
  bool version_drift = false;
  std::vector<StepComparison> steps;
  std::optional<size_t> first_divergence;  // index into steps of the first diverged step
  VerdictComparison verdict;

  bool infra_error() const;  // some step answered infra_error on replay
  // Everything matched and the verdict (when comparable) is the same.
  bool matches() const;
};

// Replays `episode` on sessions of `manager` (it opens the bundles it needs). Errors: NotFound
// (no bundle with the recorded environment version -- the message names the version and the
// environment --, no such task in it or in verifier_of, a missing parent episode),
// FailedPrecondition (task version drift without allow_version_drift; a forked episode without
// load_episode), InvalidArgument (envs is neither a bundle nor a directory; a bad bundle), and
// the manager's errors when sessions cannot be created (Unavailable, ResourceExhausted, ...).
Result<ReplayReport> Replay(const Episode& episode, sandbox::SessionManager& manager, const ReplayOptions& options);

// The bundle under `envs` (file or directory, as ReplayOptions::envs) whose content hash is
// env_id. NotFound naming env_id (and env_name, when given) and where it looked.
Result<std::string> FindEnvBundle(const std::string& envs, const std::string& env_id, const std::string& env_name = "");

// {"episode_id", "env_name", "env_id", "replay_env_id", "env_path", "task_id", "task_version",
//  "replay_task_version", "version_drift", "matches", "infra_error", "first_divergence" (step
//  number or null), "steps": [{"episode_id", "step", "tool", "arguments", "status",
//  "differences", "recorded", "replayed" (ToolResult JSON)}], "verdict": {"status", "note",
//  "recorded", "replayed", "recorded_verifier_version", "replayed_verifier_version",
//  "scored_with", "reasons_differ"}}
Json ReplayReportToJson(const ReplayReport& report);

}  // namespace envforge::agents
