// Rollouts: a backend plays an environment's tasks, n episodes per task, and pass@k is measured
// (ARCHITECTURE.md, "Agents"; agents-and-rollouts.md).
//
// RolloutRunner::Run plays every (task, sample index) pair as one episode (agents/episode.h: a
// fresh session, render -> sample -> parse -> call tools -> repeat until submit_result or a
// limit), `concurrency` episodes at once, each on its own thread blocking on the backend and the
// session: concurrent episodes meet in the backend (the embedded engine batches their decode
// steps; an episode waiting for a tool result is not in the batch). Sessions come from a
// SessionHost (agents/session_host.h): a SessionManager in this process, or a running `envforge
// serve` (server/remote_session_host.h), where the model stays here and the tools and verifier
// run on the server; episodes and their records are the same either way.
//
// Scoring: an episode passes when it ended `submitted` with a verdict that passed. Episodes that
// ended `infra_error` are not scored (never counted as failures): pass@k of a task uses
// n = its other episodes. pass@k for k = 1, 2, 4, ... n (PassAtKPoints) uses the unbiased
// estimator of agents/pass_at_k.h; tasks whose every episode was an infra_error have no figures.
//
// Determinism: episode i of a task samples turn t with seed Mix(options.sampling.seed, task id, i,
// t) (choice stream 0), so with a deterministic backend the same options replay the same episodes
// whatever the concurrency.
//
// Thread safety: one Run at a time per runner. on_episode runs on episode threads (serialised by
// the runner).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agents/session_host.h"
#include "agents/trajectory_store.h"
#include "base/json.h"
#include "base/status.h"
#include "inference/backend.h"
#include "sandbox/session_manager.h"

namespace envforge::agents {

enum class RolloutOutcome {
  kSubmitted,         // submit_result answered with a verdict (passed or not)
  kMaxTurns,          // max_turns model turns without a submission
  kMaxTokens,         // the episode's generated-token budget ran out
  kContextExhausted,  // the context passed the window and context management could not free it
  kInvalidCalls,      // max_invalid_calls malformed calls in a row
  kTimeout,           // the episode's wall-clock limit
  kCrashed,           // the session process died
  kInfraError,        // the backend or the runtime failed: not scored
};
// The stored outcome of the same name (trajectory_store.h), and so the name.
EpisodeOutcome ToEpisodeOutcome(RolloutOutcome outcome);
std::string_view RolloutOutcomeName(RolloutOutcome outcome);
inline constexpr RolloutOutcome kAllRolloutOutcomes[] = {
    RolloutOutcome::kSubmitted,        RolloutOutcome::kMaxTurns,     RolloutOutcome::kMaxTokens,
    RolloutOutcome::kContextExhausted, RolloutOutcome::kInvalidCalls, RolloutOutcome::kTimeout,
    RolloutOutcome::kCrashed,          RolloutOutcome::kInfraError};

// Context management when the context passes context_threshold of the window (paper 4.4).
enum class ContextStrategy { kNone, kSummary, kDiscard75, kDiscardAll };
std::string_view ContextStrategyName(ContextStrategy strategy);  // none, summary, discard75, discard-all
Result<ContextStrategy> ParseContextStrategy(std::string_view name);

struct RolloutOptions {
  int64_t n = 1;  // episodes per task
  // Sample index of each task's first episode: episodes first_sample .. first_sample + n - 1, so
  // a caller that plays a task in rounds (envsynth's early-stopping filter) draws new episodes.
  int64_t first_sample = 0;
  bool thinking = false;
  int64_t max_turns = 32;              // model turns per episode
  int64_t max_tokens = 16384;          // generated tokens per episode
  int64_t max_tokens_per_turn = 2048;  // generated tokens per model turn
  inference::SamplingParams sampling;  // seed: the run's seed
  // The DeepSeek-V3.2 paper's (3.1) keep routing and keep sampling mask: every model turn asks the
  // backend to record its routed experts / kept sets (inference/backend.h, CompletionRequest) and
  // the store keeps them with the turn (ModelTurnRecord). Embedded backend only; off: nothing is
  // recorded or costs. Summary requests of context management never record.
  bool record_routing = false;
  bool record_kept_sets = false;
  ContextStrategy context_strategy = ContextStrategy::kNone;
  int64_t context_window = 0;  // tokens; 0: the backend's (none known: no context management)
  double context_threshold = 0.8;
  int64_t max_invalid_calls = 3;  // consecutive malformed calls that end an episode
  // Every model turn's tool_choice: "auto" (the model may answer without a call, a malformed
  // turn), or "required" (the embedded engine decodes under the tool-call grammar, so every turn
  // is a call of an offered tool with its required arguments unless max tokens cut it; an openai
  // server gets tool_choice "required", which vLLM and SGLang honour with guided decoding).
  std::string tool_choice = "auto";
  // Every tool strict (OpenAI's strict function calling; CompletionRequest::strict_tools, the
  // prompt unchanged): under "auto" the embedded engine then decodes under the tool-call grammar
  // with the calls optional (a turn is either text alone or calls that parse); an openai server
  // gets strict function specs.
  bool strict_tools = false;
  std::chrono::milliseconds episode_timeout{600'000};
  int64_t concurrency = 0;                                      // episodes at once; 0: min(all episodes, 256)
  std::string system_prompt;                                    // empty: kDefaultSystemPrompt
  std::optional<sandbox::SandboxLimits> limits;                 // per-session limits; nullopt: the host's
  TrajectoryStore* store = nullptr;                             // record every episode when set
  std::function<void(int64_t done, int64_t total)> on_episode;  // progress
};

inline constexpr std::string_view kDefaultSystemPrompt =
    "You are an agent working in an environment through its tools. Call tools to gather what you "
    "need, then call submit_result exactly once with your final answer as answer_text (JSON text "
    "when the task asks for structured data).";

struct EpisodeResult {
  std::string task_id;
  int64_t sample_index = 0;
  std::string episode_id;  // the trajectory id, when recorded
  RolloutOutcome outcome = RolloutOutcome::kInfraError;
  std::string detail;  // why it ended, for a person
  bool passed = false;
  double score = 0;
  Json verdict;  // submit_result's content when submitted, else null
  std::string answer_text;
  int64_t turns = 0;
  int64_t tool_calls = 0;
  int64_t invalid_calls = 0;  // all malformed calls (not only consecutive)
  int64_t generated_tokens = 0;
  int64_t prompt_tokens = 0;        // the largest context a turn was generated from
  int64_t prefilled_tokens = 0;     // prompt tokens the backend ran through the model (embedded)
  int64_t new_prompt_tokens = 0;    // prompt tokens that were new to this episode's context
  int64_t first_prompt_tokens = 0;  // the first turn's prompt (the same for every episode of a task)
  int64_t context_events = 0;
  double seconds = 0;
};

struct TaskRollout {
  std::string env_id;
  std::string env_name;
  std::string task_id;
  std::vector<EpisodeResult> episodes;  // by sample index (less RolloutOptions::first_sample)
  int64_t scored = 0;                   // episodes other than infra_error
  int64_t passed = 0;
  std::vector<std::pair<int64_t, double>> pass_at_k;  // (k, pass@k), empty when scored == 0
  double mean_turns = 0;
  double mean_generated_tokens = 0;
  std::map<std::string, int64_t> outcomes;  // outcome name -> episodes
  // {"env", "env_id", "task", "n", "scored", "passed", "pass_at_k": {"1": x, ...}, "mean_turns",
  //  "mean_generated_tokens", "outcomes": {...}, "episodes": [{"id", "sample", "outcome",
  //  "passed", "score", "turns", "generated_tokens", "detail"}]}
  Json ToJson() const;
};

// Fills scored, passed, pass_at_k, means and outcomes from episodes.
void Summarize(TaskRollout& rollout);

class RolloutRunner {
 public:
  // Episodes in sessions of `host`, which must outlive the runner.
  RolloutRunner(SessionHost& host, inference::Backend& backend, RolloutOptions options);
  // Episodes in sessions of `manager` (in this process), which must outlive the runner.
  RolloutRunner(sandbox::SessionManager& manager, inference::Backend& backend, RolloutOptions options);

  // Plays the tasks (all of the environment's when task_ids is empty) of the environment `env`
  // (for a SessionManager: the id of an environment opened in it; for another host, what its
  // DescribeEnvironment takes). Errors (before any episode runs): InvalidArgument for n < 1, a bad
  // option, or a context strategy without a known context window; NotFound for an unknown
  // environment or task (naming it); the host's errors describing the environment (Unavailable
  // for a server that cannot be reached). Episode failures are outcomes, not errors.
  Result<std::vector<TaskRollout>> Run(const std::string& env, const std::vector<std::string>& task_ids);
  const std::string& rollout_id() const { return rollout_id_; }

 private:
  std::unique_ptr<SessionHost> owned_host_;  // the LocalSessionHost of the SessionManager constructor
  SessionHost& host_;
  inference::Backend& backend_;
  RolloutOptions options_;
  std::string rollout_id_;
};

}  // namespace envforge::agents
