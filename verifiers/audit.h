// `envforge audit`: how often each task's verifier accepts wrong answers and rejects right ones,
// with the answers that show it (issue 3; reference/synthesis-and-peers.md section 6).
//
// Per task, on two lanes (judge_lane.h):
//   1. gold        the gold solution runs once (lane 0); its answer is judged K times in a row in
//                  one batch on each lane (module state persists within a batch, so a verifier
//                  that counts calls or draws random numbers shows it).
//   2. probes      trivial, answer space (enumerated or sampled), gold neighbourhood, threshold
//                  (boundary) probes, single-field and structural mutants (probes.h), judged in
//                  batches spread over the lanes, by the verifier and, when the task has one, by the
//                  oracle.
//   3. walk        rounds of neighbourhood and boundary moves from answers accepted so far (by
//                  either judge), exploring the accepted region and its boundary (where off-by-one
//                  thresholds live).
//   4. determinism every trivial, mutant and structural probe plus `rejudge_samples` seeded
//                  others are judged again by both judges on the *other* lane (another zygote,
//                  another Python hash seed); any different verdict for the same answer is
//                  nondeterminism, reported with the answer.
//
// BUDGET AND HANGS. Each task's audit runs against a budget of wall time (task_budget, from the
// start of its gold run; `envforge audit --task-budget-seconds`). Judge calls are sized so that
// each one's hard deadline (JudgeLane::CallDeadline), plus one more single-answer call to confirm a
// hang, fits in what is left; when not even one answer fits, the budget is spent. A judge (verifier
// or oracle) that never returns on an answer -- confirmed alone in a fresh session, see
// JudgeLane::Judge -- is a hang. Either way the task's audit STOPS at once: the lanes finish the
// call they are in and judge nothing more, the walk and the determinism re-judge are skipped, the
// probes judged so far are analysed as usual, and TaskAudit::stopped says why (reason "hang" or
// "budget", the detail, the probes left unjudged). A verifier that hangs on every answer is
// therefore caught on the gold runs, in about (k + 1) * wall_time + 2 * kill_grace.
//
// VERDICT RULES (ComputeVerdict), first match wins:
//   broken   the audit stopped (a hang, or the budget spent: the task cannot be audited, and a
//            verifier that never returns hangs a trainer's episode too); or
//            the gold solution failed, or the verifier rejected the gold answer in any of its
//            runs; or the verifier has a defect (raised, hung, crashed, returned a non-verdict)
//            on any probe; or any verifier nondeterminism (within the gold runs or across lanes);
//            or any false accept or false reject against the oracle (the oracle judged the probe
//            without a defect and disagrees); or the verifier accepted any trivial probe; or the
//            answer schema's x-domain annotations are invalid (the task cannot be audited).
//   suspect  the oracle itself is unreliable: a defect on any probe, nondeterminism, a trivial
//            probe accepted. Or, for a task WITHOUT an oracle (nothing to prove the verifier
//            wrong, so the audit flags what a person should judge):
//              * looseness: the verifier accepts more than `loose_rate` (50%) of the answer space
//                (enumerated or sampled; spaces of fewer than 2 answers excepted);
//              * it accepted an answer that violates the task's own answer schema;
//              * it ignores a field: every other value of a slot's domain (at least 2 tried) was
//                accepted as a single-field mutant of the gold answer.
//            Not a rule: "no sampled answer accepted" -- the gold answer passing already proves
//            solvability; the report gives the counts (rarity) instead.
//   sound    otherwise.
// SEARCH TASKS (kind "search"; search_probes.h): the answer key is the oracle (answers that
// normalise equal are the same answer, so case and spacing variants are no findings), the task's
// distractors are wrong whatever the key says, and search probes are added (equivalent forms,
// near misses, distractors, other tasks' answers, prompt words). Also broken: a recorded solution
// path that does not replay to an answer the key names ("solution_path_failed"). Also suspect:
// the prompt contains an answer the key accepts ("answer_in_prompt").
// Every finding carries the exact answer text that shows it; at most max_findings_per_kind are
// kept per kind, with the full count beside them.
//
// Rates: false_accept_rate = false accepts / probes the oracle rejected; false_reject_rate =
// false rejects / probes the oracle accepted (gold runs count once). Acceptance rate = verifier
// accepts / answers judged in the answer space. "judgements" count every verdict computed
// (verifier and oracle, re-judging included); probes are distinct answer texts.
//
// Development aid: with ENVFORGE_AUDIT_DUMP=FILE in the environment, every probe of every task
// and its verdicts are appended to FILE as JSON lines ({"task", "family", "kind", "label", "text",
// "verifier", "oracle"}).
//
// Thread safety: RunAudit uses one thread per lane and calls on_progress from the calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/env_bundle.h"
#include "verifiers/judge_lane.h"

namespace envforge::verifiers {

struct AuditOptions {
  int k = 5;                           // gold runs in a row, per lane
  uint64_t max_enumerate = 200'000;    // enumerate the answer space up to this size
  size_t samples = 20'000;             // else sample this many distinct answers
  size_t neighbourhood = 4'000;        // perturbations of the gold answer
  size_t boundary = 4'000;             // threshold probes around the gold answer
  size_t walk = 8'000;                 // moves from accepted answers and near misses, in rounds
  size_t max_values_per_slot = 5'000;  // replace mutants per slot (seeded subset beyond)
  size_t rejudge_samples = 1'000;      // space/neighbourhood/walk answers re-judged on the other lane
  bool rejudge_mutants = true;         // re-judge every trivial, mutant and structural probe too
                                       // (false: the trivial probes only; for quick runs)
  uint64_t seed = 1;
  std::vector<std::string> tasks;  // empty: every task of the bundle
  size_t batch_size = 256;         // answers per judge call
  size_t max_findings_per_kind = 5;
  double loose_rate = 0.5;
  // Wall time per task, gold run included (BUDGET AND HANGS above). Ten minutes: an ordinary
  // task's full audit takes a small fraction of it.
  std::chrono::milliseconds task_budget{std::chrono::minutes(10)};
};

struct AuditProgress {
  size_t tasks_done = 0;
  size_t tasks_total = 0;
  std::string task;         // the task being audited
  std::string phase;        // "gold", "probes", "walk", "determinism"
  uint64_t judgements = 0;  // verdicts computed so far, all tasks
  double seconds = 0;
  double judgements_per_second = 0;
};

struct Finding {
  std::string kind;    // gold_failed, gold_rejected, defect, nondeterminism, false_accept, false_reject,
                       // trivial_accept, schema_defect, oracle_defect, oracle_nondeterminism,
                       // oracle_trivial_accept, schema_violation_accepted, ignored_field,
                       // accepted_mutant, loose, solution_path_failed, answer_in_prompt
  std::string answer;  // the exact answer text that shows it ("" for task-level findings)
  std::string probe;   // the probe's family and label: "mutant.replace /1/hotel <- \"X\""
  std::string detail;  // the verdicts or message
  Json ToJson() const;
};

struct FamilyStats {
  size_t judged = 0;
  size_t accepted = 0;  // by the verifier
  size_t oracle_accepted = 0;
  Json ToJson() const;
};

struct TaskAudit {
  std::string id;
  std::string verifier_version;  // the task's version (prompt + solution + verifier + environment)
  bool has_oracle = false;
  // What the oracle is: "task" (the task's oracle, judged on the lanes), "answer_key" (a search
  // task: its answer key and distractors, search_probes.h), "" (none).
  std::string oracle_kind;
  std::string verdict;  // sound | suspect | broken
  std::vector<std::string> verdict_reasons;

  // Why the audit of this task stopped early, "" when it ran to the end (BUDGET AND HANGS):
  //   "hang"    a judge never returned within its wall-time limit (stopped_detail names which and
  //             the limit; the answer is among the findings, kind "defect" or "oracle_defect");
  //   "budget"  task_budget was spent.
  std::string stopped;
  std::string stopped_detail;
  std::string stopped_answer;    // the answer the judge hung on ("" for "budget")
  size_t probes_not_judged = 0;  // probes built but never judged (the walk's are never built)

  std::string gold_answer;  // empty when the solution failed
  std::string gold_error;
  int gold_runs = 0;  // K (lane 0)
  int gold_passes = 0;
  int gold_runs_other_lane = 0;
  int gold_passes_other_lane = 0;

  size_t trivial_probes = 0;
  size_t trivial_failed = 0;  // rejected without a defect

  std::string space_mode = "none";  // enumerated | sampled | none
  std::string space_error;
  uint64_t space_size = 0;
  bool space_size_saturated = false;
  double space_log10_size = 0;
  size_t space_slots = 0;
  std::vector<std::string> space_domains;  // "/1/hotel: hotels.name (241)"
  FamilyStats space, neighbourhood, boundary, walk, mutants, structural, trivial;
  size_t boundary_values = 0;    // entities at or next to a number of the task's text
  size_t distinct_accepted = 0;  // distinct answers the verifier accepted (gold included)

  size_t compared = 0;  // probes both judges judged without a defect
  size_t oracle_accepts = 0;
  size_t oracle_rejects = 0;
  size_t false_accepts = 0;
  size_t false_rejects = 0;

  size_t rejudged = 0;  // answers judged again on the other lane
  size_t verifier_differences = 0;
  size_t oracle_differences = 0;
  size_t verifier_defects = 0;
  size_t oracle_defects = 0;

  std::map<std::string, size_t> finding_counts;
  std::vector<Finding> findings;  // at most max_findings_per_kind per kind

  size_t probes = 0;  // distinct answers judged
  uint64_t judgements = 0;
  double seconds = 0;
  int lanes = 0;

  double FalseAcceptRate() const { return oracle_rejects ? double(false_accepts) / double(oracle_rejects) : 0; }
  double FalseRejectRate() const { return oracle_accepts ? double(false_rejects) / double(oracle_accepts) : 0; }
  double AcceptanceRate() const { return space.judged ? double(space.accepted) / double(space.judged) : 0; }
  bool deterministic() const { return finding_counts.count("nondeterminism") == 0; }
  // Records a finding (kept when fewer than `cap` of its kind are kept already).
  void AddFinding(Finding finding, size_t cap);
  size_t Count(const std::string& kind) const;
  Json ToJson() const;
};

// Applies the VERDICT RULES above to the counts and findings of `audit` (sets verdict and
// verdict_reasons).
void ComputeVerdict(TaskAudit& audit, const AuditOptions& options);

struct AuditReport {
  std::string path;
  std::string env_name;
  std::string content_hash;
  AuditOptions options;
  std::vector<TaskAudit> tasks;
  uint64_t judgements = 0;
  size_t probes = 0;
  double seconds = 0;
  bool AnyBroken() const;
  Json ToJson() const;  // {"path", "env", "hash", "options", "tasks": [...], "broken", "stopped", ...}
                        // each task's "stopped": null or {"reason", "detail", "answer",
                        // "probes_not_judged", "budget_seconds"}; "stopped": ids of tasks
                        // whose audit stopped early
  void PrintTable(std::FILE* out) const;
};

// Audits the tasks of `bundle` (loaded from envdb_path, which is read for the domains) on
// `lanes` (at least one; lane 0 runs the gold solutions). Errors: NotFound for an unknown task in
// options.tasks, InvalidArgument for bad options, and the lanes' infrastructure errors. A task's
// faults are never errors: they are its findings and verdict.
Result<AuditReport> RunAudit(const sandbox::EnvBundle& bundle, const std::vector<JudgeLane*>& lanes,
                             const AuditOptions& options,
                             const std::function<void(const AuditProgress&)>& on_progress = nullptr);

// What _tasks.audit stores: the task's audit JSON plus "verifier_version" and "audited_at".
Json StoredAudit(const TaskAudit& audit, const AuditOptions& options);

}  // namespace envforge::verifiers
