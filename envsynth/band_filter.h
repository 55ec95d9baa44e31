// The pass@k filter (stage 7 of issue 13): the policy plays each audited candidate through the
// rollout loop (agents/rollout.h) and only tasks it solves sometimes but not always are kept.
//
// THE BAND. A task is in band when its pass rate over k scored episodes, c / k, lies strictly
// inside (lo, hi). The default band 0,1 is the paper's filter made two-sided: pass@k > 0 (at
// least one of the k episodes passed: solvable) and not every episode passed (not trivial).
// (pass@k itself, estimated from the same k episodes, is 1 as soon as one passed, so the upper
// side is about the rate, not pass@k.)
//
// ROUNDS AND EARLY STOPPING. Episodes run in rounds of `chunk` per undecided task. After each
// round, with m scored episodes of which c passed (m <= k), the final rate is known to lie in
// [c / k, (c + k - m) / k], and the task is decided as soon as that interval is settled:
//   too easy  c / k >= hi                      (exact: no outcome of the rest can change it)
//   too hard  (c + k - m) / k <= lo            (exact)
//   in band   lo < c / k and (c + k - m) / k < hi   (exact; with 0,1: one pass and one fail)
// plus one statistical rule, as the issue asks: after `early_after` scored episodes that ALL
// passed the task is declared too easy without playing the rest (0 disables it). This is the
// only decision that can differ from playing all k: a task whose true pass rate is p is dropped
// as too easy with probability p^early_after instead of p^k (p = 0.95: 0.36 instead of 0.006
// at 20 vs 100), so early stopping biases the kept set towards tasks the policy fails more
// often; `early` in the result marks those decisions, and the funnel counts them. All-fail is
// never stopped early: pass@k > 0 needs every episode (a task with p = 0.02 passes at least once
// in 100 with probability 0.87, in 20 with 0.33).
// pass@k figures are computed from the episodes actually played (the unbiased estimator over m).
// Episodes that end infra_error are not scored; a round whose every episode of a task was an
// infra_error ends that task as "infra_error" (never counted as a failure).
//
// Thread safety: RunBandFilter blocks the calling thread; episodes run on the rollout runner's
// threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "agents/rollout.h"
#include "base/json.h"
#include "base/status.h"

namespace envforge::envsynth {

struct BandOptions {
  int64_t k = 100;           // episodes per task when undecided to the end
  double lo = 0, hi = 1;     // the band on the pass rate, 0 <= lo < hi <= 1
  int64_t early_after = 20;  // all-pass early stop after this many scored episodes; 0: never
  int64_t chunk = 20;        // episodes per task per round
};

// InvalidArgument naming what is wrong (band not 0 <= lo < hi <= 1, k < 1, chunk < 1, ...).
Status ValidateBandOptions(const BandOptions& options);

enum class BandDecision { kUndecided, kInBand, kTooEasy, kTooHard, kInfraError };
const char* BandDecisionName(BandDecision decision);  // undecided, in_band, too_easy, too_hard, infra_error

struct BandVerdict {
  BandDecision decision = BandDecision::kUndecided;
  bool early = false;  // decided by the statistical all-pass rule
};

// The decision after `scored` episodes of which `passed` passed (rules above).
BandVerdict DecideBand(const BandOptions& options, int64_t scored, int64_t passed);

struct FilterResult {
  std::string task_id;
  BandVerdict verdict;
  int64_t episodes = 0;  // played, infra errors included
  int64_t scored = 0;
  int64_t passed = 0;
  int64_t rounds = 0;
  std::vector<std::pair<int64_t, double>> pass_at_k;  // over the scored episodes
  double mean_turns = 0;
  int64_t model_calls = 0;  // model turns (one backend call each)
  int64_t tokens = 0;       // prompt + generated tokens
  double seconds = 0;
  std::string detail;  // e.g. the first infra error
  double pass_rate() const { return scored > 0 ? double(passed) / double(scored) : 0; }
  Json ToJson()
      const;  // {"decision", "early", "episodes", "scored", "passed", "pass_rate", "rounds", "pass_at_k", ...}
};

// Plays `task_ids` of `env_id` (opened in `manager`) with `backend` under `episode` (its n and
// first_sample are set per round; its on_episode is replaced by on_progress(done episodes)).
// Errors: those of RolloutRunner::Run (bad options, unknown task) and ValidateBandOptions.
Result<std::vector<FilterResult>> RunBandFilter(sandbox::SessionManager& manager, inference::Backend& backend,
                                                const std::string& env_id, const std::vector<std::string>& task_ids,
                                                const BandOptions& options, agents::RolloutOptions episode,
                                                const std::function<void(int64_t)>& on_progress = nullptr);

}  // namespace envforge::envsynth
