// The synthesis loop (issue 13; DeepSeek-V3.2 section 3.2.3, reference/synthesis-and-peers.md
// sections 1, 6, 7): categories in, audited and pass@k-filtered environment bundles out.
//
// A run makes `envs` environments, round robin over the categories (environment i is category
// i mod C, seed DeriveEnvironmentSeed(seed, category, i)). For each environment:
//   1-2. database + toolset   the proposer's environment draft; the toolset starts as its base
//                             tools;
//   3.   tasks                lineage j = 0 .. tasks_per_env-1 is one task escalated level by
//                             level (1 .. max_levels, capped by the category's own levels); each
//                             level's version is a candidate with the knobs that made it harder;
//   5.   augmentation         a candidate whose solution calls a catalogue tool outside the
//                             toolset adds it (recorded); every kept task is re-validated on the
//                             final toolset before it is written;
//   4.   validation + repair  the level's candidates are packed into one bundle and validated
//                             (task_validation.h); a failure is attributed and the proposer asked
//                             again (attempt + 1) up to `repairs` times; a repaired candidate goes
//                             through the whole audit again like any other (no repair can loosen
//                             a verifier unaudited);
//   6.   audit gate           envforge audit (verifiers/audit.h) on the verified candidates; only
//                             verdict "sound" goes on;
//   7.   filter               the policy plays them (band_filter.h); only "in band" goes on; a
//                             lineage whose level is too hard is not escalated further (harder
//                             versions of an unsolved task are not proposed);
//   8.   keep                 the kept tasks are re-validated on the final toolset and packed
//                             into <out_dir>/<name>.envdb (atomically, sandbox/env_pack.h) with
//                             their provenance: generator, seed, level, knobs, policy, band,
//                             pass rate and pass@k, audit verdict, toolset augmentations.
// Every stage's outcome is written to the run database (run_store.h) as soon as it is known.
//
// RESUME. Run() skips environments recorded done or failed and, inside an unfinished one, reuses
// every recorded stage result (validation, audit, filter) of a candidate whose re-proposed
// artefacts hash the same (proposals are deterministic); a different hash (the generator changed
// under the run) is FailedPrecondition. Bundles are written atomically and named by environment,
// so redoing a keep after a stop replaces the same file: no duplicates.
//
// FAILURES. A proposer or candidate failure is recorded as that environment's or candidate's
// failure and the run goes on (a generated tool or verifier that hangs or crashes is contained by
// the sandbox). Run() returns an error only for infrastructure (the run database, the output
// directory, the session runtime) and for the resume mismatch above.
//
// Thread safety: one Run at a time; on_progress runs on the calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agents/rollout.h"
#include "base/json.h"
#include "base/status.h"
#include "envsynth/band_filter.h"
#include "envsynth/proposer.h"
#include "envsynth/run_store.h"
#include "inference/backend.h"

namespace envforge::envsynth {

// The filter's per-turn cap when --max-tokens-per-turn is not given (and for runs begun before it).
constexpr int64_t DefaultMaxTokensPerTurn(int64_t max_tokens) { return max_tokens < 2048 ? max_tokens : 2048; }

struct SynthOptions {
  std::vector<std::string> categories;
  int64_t envs = 6;
  int64_t tasks_per_env = 2;  // lineages per environment
  int64_t max_levels = 4;
  uint64_t seed = 1;
  std::string out_dir;
  std::string proposer = "procedural";  // or "llm"
  std::string proposer_backend;         // llm: the backend spec that writes the artefacts
  int64_t repairs = 2;                  // proposals after the first, per candidate
  bool filter = true;                   // false: synthesis only (no policy, every sound candidate kept)
  std::string policy;                   // the policy's backend spec, as given (recorded in provenance)
  BandOptions band;
  int64_t audit_lanes = 2;
  bool full_audit = false;  // false: the quick audit sizes (kQuickAudit in synth_run.cc)
  int64_t max_turns = 16;   // filter episodes
  int64_t max_tokens = 4096;
  // Generated tokens per policy turn: a turn that runs on (a small policy repeating itself) ends
  // here instead of spending the episode's max_tokens; at most max_tokens.
  int64_t max_tokens_per_turn = DefaultMaxTokensPerTurn(max_tokens);
  double temperature = 1.0;
  // The filter episodes' tool_choice (agents::RolloutOptions): "required" decodes every policy
  // turn under the tool-call grammar, so pass@k measures the tasks rather than the markup.
  std::string tool_choice = "auto";
  // Every tool strict (agents::RolloutOptions::strict_tools): with tool_choice auto, the embedded
  // policy's calls are decoded under the grammar while a turn may still be text alone.
  bool strict_tools = false;
  // The embedded policy plays with dense attention instead of DSA's top-k (the same weights;
  // `envforge rollout --dense`): for a checkpoint whose indexers lag its dense training.
  bool dense_policy = false;
  int64_t shard_index = 0, shard_count = 1;  // this run makes environments i with i % count == index

  Json ToJson() const;                                     // what the run database stores as its config
  static Result<SynthOptions> FromJson(const Json& json);  // InvalidArgument naming a bad field
  Status Validate() const;                                 // InvalidArgument naming what is wrong
};

// The seed of environment `index` of `category` in a run seeded `run_seed`: 1 .. 999,999,999,
// a pure function of its arguments (shards and resumes agree on it).
uint64_t DeriveEnvironmentSeed(uint64_t run_seed, const std::string& category, int64_t index);

struct SynthProgress {
  int64_t envs_done = 0, envs_total = 0;
  std::string env;    // "<category>/<index>" being worked on
  std::string stage;  // propose, validate, audit, filter, keep
  int64_t level = 0;
  int64_t candidates = 0, kept = 0;  // over the whole run so far
  std::string detail;
};

class SynthRun {
 public:
  // `policy` may be null when !options.filter.
  SynthRun(RunStore& store, Proposer& proposer, inference::Backend* policy, SynthOptions options,
           std::function<void(const SynthProgress&)> on_progress = nullptr);
  // Processes every environment of this shard not finished yet (file comment).
  Status Run();

 private:
  struct Impl;
  RunStore& store_;
  Proposer& proposer_;
  inference::Backend* policy_;
  SynthOptions options_;
  std::function<void(const SynthProgress&)> on_progress_;
};

}  // namespace envforge::envsynth
