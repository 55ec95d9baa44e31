// `envforge synth report RUN.sqlite`: the funnel of a run, from its run database alone.
//
// Per category and difficulty level: candidates -> verified (gold solution passes both judges,
// after repairs) -> audited sound -> in band (pass rate inside the band; every sound candidate
// when the run had no filter) -> kept (re-validated on the final toolset and written). Beside
// the counts, per level: the policy's mean pass rate (pass@1) over the candidates it played, and
// the audit's mean acceptance rate over the answer space (the share of enumerated or sampled
// answers the verifier accepts: valid answers get rarer as tasks get harder).
// Every dropped candidate is listed with the stage and reason that dropped it; the reasons are
// also counted by class (stage + attribution / verdict / band decision). Cost: wall seconds,
// model calls and tokens, in all and per kept task.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "envsynth/run_store.h"

namespace envforge::envsynth {

struct FunnelRow {
  std::string category;  // "all" for the totals row
  int64_t level = 0;     // 0 in the totals row
  int64_t candidates = 0, verified = 0, audited = 0, in_band = 0, kept = 0;
  int64_t filtered = 0;       // candidates the policy played
  double mean_pass_rate = 0;  // over them
  int64_t early_stops = 0;
  int64_t audited_any = 0;     // candidates with an audit
  double mean_acceptance = 0;  // over them
  int64_t repairs = 0;         // repair proposals spent
  Json ToJson() const;
};

struct DroppedCandidate {
  std::string key, task_id, stage, reason;
  Json ToJson() const;
};

struct Funnel {
  std::string run_path;
  Json config;
  int64_t envs_planned = 0, envs_done = 0, envs_failed = 0, envs_pending = 0, envs_with_kept = 0;
  std::vector<FunnelRow> rows;                  // by category, then level; the totals row last
  std::map<std::string, int64_t> drop_classes;  // "filter: too_hard" -> count
  std::vector<DroppedCandidate> dropped;
  std::vector<std::string> failed_envs;  // "key: reason"
  int64_t augmentations = 0;
  double seconds = 0;
  int64_t model_calls = 0, tokens = 0;
  const FunnelRow& totals() const { return rows.back(); }
  Json ToJson() const;
  void Print(std::FILE* out) const;
};

Result<Funnel> BuildFunnel(RunStore& store);

}  // namespace envforge::envsynth
