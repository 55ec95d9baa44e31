#include "envsynth/synth_run.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <system_error>

#include "envsynth/env_source.h"
#include "envsynth/task_validation.h"
#include "sandbox/code/scoped_directory.h"
#include "sandbox/env_bundle.h"
#include "sandbox/env_pack.h"
#include "sandbox/session_manager.h"
#include "verifiers/audit.h"
#include "verifiers/judge_lane.h"

namespace envforge::envsynth {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Audit sizes of a synthesis run: a tenth of `envforge audit`'s defaults (a few seconds a task);
// --full-audit uses the defaults.
verifiers::AuditOptions AuditOptionsFor(const SynthOptions& options, const std::vector<std::string>& tasks) {
  verifiers::AuditOptions audit;
  if (!options.full_audit) {
    audit.k = 2;
    audit.samples = 2'000;
    audit.neighbourhood = 500;
    audit.boundary = 500;
    audit.walk = 1'000;
    audit.rejudge_samples = 200;
    audit.task_budget = std::chrono::seconds(120);
  }
  audit.seed = options.seed;
  audit.tasks = tasks;
  return audit;
}

Json AuditSummary(const verifiers::TaskAudit& audit) {
  return {{"verdict", audit.verdict},
          {"reasons", audit.verdict_reasons},
          {"probes", audit.probes},
          {"judgements", audit.judgements},
          {"space_mode", audit.space_mode},
          {"space_size", audit.space_size},
          {"space_judged", audit.space.judged},
          {"space_accepted", audit.space.accepted},
          {"acceptance_rate", audit.AcceptanceRate()},
          {"distinct_accepted", audit.distinct_accepted},
          {"false_accepts", audit.false_accepts},
          {"false_rejects", audit.false_rejects},
          {"has_oracle", audit.has_oracle},
          {"seconds", audit.seconds}};
}

// A candidate while its environment is being worked on.
struct Candidate {
  TaskDraft draft;
  CandidateRecord record;
  bool Dropped() const { return !record.dropped_at.empty(); }
};

// The filter's figures without its wall time: provenance enters the content hash, which must not
// depend on how fast the machine was.
Json DeterministicFilter(Json filter) {
  if (filter.is_object()) filter.erase("seconds");
  return filter;
}

// The prefix of this host's work directories in an output directory: ".synth-work-<host>-". The
// host is in the name because shards on several machines may share an output directory over a
// network file system, where a pid says nothing about another machine's processes.
std::string WorkPrefix() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
  std::string name = ".synth-work-";
  for (const char* c = host; *c != '\0'; ++c) name += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
  return name + "-";
}

// Removes this host's work directories of earlier runs in `out_dir` whose process is gone (a run
// stopped by SIGKILL leaves its ".synth-work-<host>-<pid>-<n>" behind).
void SweepStaleWork(const fs::path& out_dir) {
  const std::string prefix = WorkPrefix();
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(out_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), error);
  }
}

// A proposer failure that is the infrastructure's (a model server gone, a deadline): the run stops
// and resumes later, instead of dropping the candidate.
bool IsInfrastructure(const Status& status) {
  return status.code() == StatusCode::kUnavailable || status.code() == StatusCode::kDeadlineExceeded ||
         status.code() == StatusCode::kResourceExhausted;
}

std::string CandidateKey(const std::string& env_key, int64_t lineage, int64_t level) {
  return env_key + "/" + std::to_string(lineage) + "/" + std::to_string(level);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Options

Json SynthOptions::ToJson() const {
  return {{"categories", categories},
          {"envs", envs},
          {"tasks_per_env", tasks_per_env},
          {"max_levels", max_levels},
          {"seed", seed},
          {"out_dir", out_dir},
          {"proposer", proposer},
          {"proposer_backend", proposer_backend},
          {"repairs", repairs},
          {"filter", filter},
          {"policy", policy},
          {"k", band.k},
          {"band", {band.lo, band.hi}},
          {"early_stop", band.early_after},
          {"filter_chunk", band.chunk},
          {"audit_lanes", audit_lanes},
          {"full_audit", full_audit},
          {"max_turns", max_turns},
          {"max_tokens", max_tokens},
          {"max_tokens_per_turn", max_tokens_per_turn},
          {"temperature", temperature},
          {"tool_choice", tool_choice},
          {"strict_tools", strict_tools},
          {"dense_policy", dense_policy},
          {"shard", {shard_index, shard_count}}};
}

Result<SynthOptions> SynthOptions::FromJson(const Json& json) {
  SynthOptions o;
  try {
    o.categories = json.at("categories").get<std::vector<std::string>>();
    o.envs = json.at("envs").get<int64_t>();
    o.tasks_per_env = json.at("tasks_per_env").get<int64_t>();
    o.max_levels = json.at("max_levels").get<int64_t>();
    o.seed = json.at("seed").get<uint64_t>();
    o.out_dir = json.at("out_dir").get<std::string>();
    o.proposer = json.at("proposer").get<std::string>();
    o.proposer_backend = json.value("proposer_backend", "");
    o.repairs = json.at("repairs").get<int64_t>();
    o.filter = json.at("filter").get<bool>();
    o.policy = json.at("policy").get<std::string>();
    o.band.k = json.at("k").get<int64_t>();
    o.band.lo = json.at("band").at(0).get<double>();
    o.band.hi = json.at("band").at(1).get<double>();
    o.band.early_after = json.at("early_stop").get<int64_t>();
    o.band.chunk = json.at("filter_chunk").get<int64_t>();
    o.audit_lanes = json.at("audit_lanes").get<int64_t>();
    o.full_audit = json.at("full_audit").get<bool>();
    o.max_turns = json.at("max_turns").get<int64_t>();
    o.max_tokens = json.at("max_tokens").get<int64_t>();
    o.max_tokens_per_turn = json.value("max_tokens_per_turn", DefaultMaxTokensPerTurn(o.max_tokens));
    o.temperature = json.at("temperature").get<double>();
    o.tool_choice = json.value("tool_choice", "auto");   // runs begun before the option: auto
    o.strict_tools = json.value("strict_tools", false);  // the same
    o.dense_policy = json.value("dense_policy", false);  // the same
    o.shard_index = json.at("shard").at(0).get<int64_t>();
    o.shard_count = json.at("shard").at(1).get<int64_t>();
  } catch (const Json::exception& error) {
    return InvalidArgumentError(std::string("run config: ") + error.what());
  }
  return o;
}

Status SynthOptions::Validate() const {
  if (categories.empty()) return InvalidArgumentError("--categories names no category");
  if (envs < 1) return InvalidArgumentError("--envs must be at least 1, got " + std::to_string(envs));
  if (tasks_per_env < 1)
    return InvalidArgumentError("--tasks-per-env must be at least 1, got " + std::to_string(tasks_per_env));
  if (max_levels < 1 || max_levels > 5)
    return InvalidArgumentError("--max-levels must be 1..5, got " + std::to_string(max_levels));
  if (repairs < 0) return InvalidArgumentError("--repairs must be >= 0");
  if (out_dir.empty()) return InvalidArgumentError("--out DIR is required");
  if (proposer != "procedural" && proposer != "llm")
    return InvalidArgumentError("unknown --proposer '" + proposer + "' (procedural or llm)");
  if (proposer == "llm" && proposer_backend.empty())
    return InvalidArgumentError("--proposer llm needs --backend SPEC (the model that writes)");
  if (audit_lanes < 1 || audit_lanes > 16) return InvalidArgumentError("--audit-lanes must be 1..16");
  if (tool_choice != "auto" && tool_choice != "required") {
    return InvalidArgumentError("--tool-choice must be auto or required, got '" + tool_choice + "'");
  }
  if (dense_policy && (!filter || policy.rfind("embedded:", 0) != 0)) {
    return InvalidArgumentError("--dense applies to an embedded policy only, got '" +
                                (filter ? policy : std::string("--no-filter")) + "'");
  }
  if (shard_count < 1 || shard_index < 0 || shard_index >= shard_count) {
    return InvalidArgumentError("--shard I/N needs 0 <= I < N, got " + std::to_string(shard_index) + "/" +
                                std::to_string(shard_count));
  }
  if (filter) {
    ENVFORGE_RETURN_IF_ERROR(ValidateBandOptions(band));
    if (policy.empty()) return InvalidArgumentError("the filter needs a policy: give --policy SPEC, or --no-filter");
  }
  if (max_turns < 1 || max_tokens < 1) return InvalidArgumentError("--max-turns and --max-tokens must be at least 1");
  if (max_tokens_per_turn < 1 || max_tokens_per_turn > max_tokens)
    return InvalidArgumentError("--max-tokens-per-turn must be 1.." + std::to_string(max_tokens) +
                                " (--max-tokens), got " + std::to_string(max_tokens_per_turn));
  return Status::Ok();
}

uint64_t DeriveEnvironmentSeed(uint64_t run_seed, const std::string& category, int64_t index) {
  uint64_t hash = 1469598103934665603ULL;
  auto mix = [&hash](uint64_t value) {
    hash ^= value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
    hash ^= hash >> 31;
    hash *= 0xbf58476d1ce4e5b9ULL;
    hash ^= hash >> 29;
  };
  mix(run_seed);
  for (unsigned char c : category) mix(c);
  mix(static_cast<uint64_t>(index));
  return hash % 999'999'999ULL + 1;
}

// ------------------------------------------------------------------------------------------
// The loop over one environment

struct SynthRun::Impl {
  SynthRun& run;
  EnvironmentRecord env_record;
  EnvironmentDraft env;
  std::set<std::string> toolset;
  fs::path work;
  int work_counter = 0;
  int64_t& candidates_seen;
  int64_t& kept_total;
  int64_t envs_done, envs_total;
  std::optional<RepairRequest> env_failure;  // set by EnvironmentFailure

  Status Process();
  void ChargeEnvironment() {
    const ProposalCost cost = run.proposer_.TakeCost();
    env_record.model_calls += cost.model_calls;
    env_record.tokens += cost.tokens;
  }

  void Progress(const std::string& stage, int64_t level, const std::string& detail) {
    if (!run.on_progress_) return;
    run.on_progress_({envs_done, envs_total, env_record.key, stage, level, candidates_seen, kept_total, detail});
  }

  Status Event(const std::string& candidate_key, const std::string& kind, Json detail) {
    return run.store_.AddEvent({0, 0, env_record.key, candidate_key, kind, std::move(detail)});
  }

  // Records a repair: the stage that failed, the attempt asked for, and what goes back.
  Status RepairEvent(const std::string& candidate_key, int64_t attempt, const RepairRequest& request) {
    return Event(candidate_key, "repair",
                 {{"stage", request.stage},
                  {"attempt", attempt},
                  {"attribution", request.attribution},
                  {"reasons", request.reasons}});
  }

  Status Drop(Candidate& c, const std::string& stage_name, const std::string& reason) {
    c.record.dropped_at = stage_name;
    c.record.reason = reason;
    return run.store_.PutCandidate(c.record);
  }

  // Adds the tools a task needs to the toolset (stage 5), recording the augmentation: catalogue
  // tools, and the new tools the task brings (first added to the catalogue).
  Status Augment(const Candidate& c, bool record_event = true) {
    std::vector<std::string> added;
    for (const auto& [name, source] : c.draft.new_tools) {
      bool known =
          std::any_of(env.tools.begin(), env.tools.end(), [&](const auto& tool) { return tool.first == name; });
      if (!known) env.tools.emplace_back(name, source);
      if (toolset.insert(name).second) added.push_back(name);
    }
    for (const std::string& tool : c.draft.tools) {
      if (toolset.insert(tool).second) added.push_back(tool);
    }
    if (added.empty()) return Status::Ok();
    Json entry = {{"level", c.draft.level}, {"task", c.draft.id}, {"tools", added}};
    env_record.augmentations.push_back(entry);
    return record_event ? Event(c.record.key, "augment", entry) : Status::Ok();
  }

  // Packs the environment with `tasks` into a fresh bundle under the work directory.
  Result<std::string> PackBundle(const std::vector<const TaskDraft*>& tasks, const Json& provenance,
                                 std::string& pack_problems) {
    const std::string stem = (work / ("b" + std::to_string(work_counter++))).string();
    ENVFORGE_RETURN_IF_ERROR(WriteEnvironmentSource(stem, env, toolset, tasks, provenance));
    Status packed = sandbox::PackEnvironment(stem, stem + ".envdb");
    if (packed.code() == StatusCode::kInvalidArgument) {
      pack_problems = packed.message();
      return std::string();
    }
    ENVFORGE_RETURN_IF_ERROR(packed);
    return stem + ".envdb";
  }

  // Asks the proposer for a task, charging its model cost to the candidate.
  Result<TaskDraft> Propose(CandidateRecord& record, int64_t attempt, const RepairRequest* repair) {
    auto draft = run.proposer_.ProposeTask(env, record.lineage, record.level, attempt, repair);
    const ProposalCost cost = run.proposer_.TakeCost();
    record.model_calls += cost.model_calls;
    record.tokens += cost.tokens;
    return draft;
  }

  void Adopt(Candidate& c, TaskDraft draft) {
    c.draft = std::move(draft);
    c.record.task_id = c.draft.id;
    c.record.artifact_hash = c.draft.ArtifactHash();
    c.record.knobs = c.draft.knobs;
    c.record.draft = c.draft.ToJson();
  }

  // Stage 3: the level's candidates, each either restored from the run database or new.
  Result<std::vector<Candidate>> ProposeLevel(int64_t level, const std::vector<int64_t>& lineages) {
    std::vector<Candidate> out;
    for (int64_t lineage : lineages) {
      const auto start = Clock::now();
      Candidate c;
      c.record.key = CandidateKey(env_record.key, lineage, level);
      c.record.env_key = env_record.key;
      c.record.category = env.category;
      c.record.lineage = lineage;
      c.record.level = level;
      ENVFORGE_ASSIGN_OR_RETURN(std::optional<CandidateRecord> stored, run.store_.GetCandidate(c.record.key));
      candidates_seen += 1;
      if (stored && !stored->draft.is_null()) {
        // Resumed: the stored proposal, never a new one (a model would not answer the same).
        ENVFORGE_ASSIGN_OR_RETURN(c.draft, TaskDraft::FromJson(stored->draft));
        c.record = *stored;
        if (c.Dropped()) continue;
        ENVFORGE_RETURN_IF_ERROR(Augment(c, /*record_event=*/false));
        out.push_back(std::move(c));
        continue;
      }
      if (stored) c.record = *stored;  // a proposal that failed before: dropped already
      if (c.Dropped()) continue;
      c.record.stage = stage::kProposed;
      auto draft = Propose(c.record, 0, nullptr);
      // A proposer that cannot make this task (a generator finding no feasible parameters) is
      // asked again with the next attempt while repairs remain.
      while (!draft.ok() && !IsInfrastructure(draft.status()) && c.record.attempt < run.options_.repairs) {
        const RepairRequest request{"task", {draft.status().message()}, nullptr, "proposal"};
        ENVFORGE_RETURN_IF_ERROR(RepairEvent(c.record.key, c.record.attempt + 1, request));
        c.record.attempt += 1;
        draft = Propose(c.record, c.record.attempt, &request);
      }
      c.record.seconds = SecondsSince(start);
      if (!draft.ok() && IsInfrastructure(draft.status())) return draft.status();
      if (!draft.ok()) {
        ENVFORGE_RETURN_IF_ERROR(Drop(c, "proposal", draft.status().message()));
        continue;
      }
      Adopt(c, std::move(draft).value());
      ENVFORGE_RETURN_IF_ERROR(run.store_.PutCandidate(c.record));
      ENVFORGE_RETURN_IF_ERROR(Augment(c));
      out.push_back(std::move(c));
    }
    return out;
  }

  // Stage 4: validation with repairs. Candidates that end unverified are dropped.
  Status ValidateLevel(std::vector<Candidate>& level_candidates, int64_t level) {
    for (int round = 0;; ++round) {
      std::vector<Candidate*> pending;
      for (Candidate& c : level_candidates) {
        if (!c.Dropped() && c.record.validation.is_null()) pending.push_back(&c);
      }
      if (pending.empty()) return Status::Ok();
      Progress("validate", level, std::to_string(pending.size()) + " candidate(s), round " + std::to_string(round + 1));
      std::vector<const TaskDraft*> drafts;
      for (Candidate* c : pending) drafts.push_back(&c->draft);
      std::string problems;
      ENVFORGE_ASSIGN_OR_RETURN(std::string bundle, PackBundle(drafts, Json::object(), problems));
      std::map<std::string, TaskValidation> results;
      if (bundle.empty()) {
        auto split = SplitPackProblems(problems);
        if (split.count("") != 0) return EnvironmentFailure(split[""]);
        for (Candidate* c : pending) {
          TaskValidation v;
          v.task_id = c->draft.id;
          v.attribution = "task";
          v.reasons = split.count(c->draft.id) ? split[c->draft.id] : std::vector<std::string>{"packing failed"};
          for (const std::string& line : v.reasons) {
            if (line.find("/solution.py") != std::string::npos) v.attribution = "solution";
            if (line.find("/verifier.py") != std::string::npos) v.attribution = "verifier";
            if (line.find("/oracle.py") != std::string::npos) v.attribution = "oracle";
          }
          results[c->draft.id] = v;
        }
      } else {
        ENVFORGE_ASSIGN_OR_RETURN(auto manager, sandbox::SessionManager::Create(sandbox::ManagerOptions{}));
        auto env_id = manager->OpenEnvironment(bundle);
        if (!env_id.ok()) return EnvironmentFailure({"the environment does not start: " + env_id.status().message()});
        std::vector<std::string> ids;
        for (Candidate* c : pending) ids.push_back(c->draft.id);
        ENVFORGE_ASSIGN_OR_RETURN(auto validations, ValidateTasks(*manager, *env_id, ids));
        for (TaskValidation& v : validations) results[v.task_id] = std::move(v);
      }
      for (Candidate* c : pending) {
        ENVFORGE_RETURN_IF_ERROR(Settle(*c, results[c->draft.id]));
      }
    }
  }

  // Records one validation; a failure is repaired (re-proposed) while attempts remain.
  Status Settle(Candidate& c, const TaskValidation& v) {
    c.record.seconds += v.seconds;
    if (v.passed) {
      c.record.validation = v.ToJson();
      c.record.validation["attempt"] = c.record.attempt;
      c.record.stage = stage::kVerified;
      return run.store_.PutCandidate(c.record);
    }
    if (c.record.attempt >= run.options_.repairs) {
      c.record.validation = v.ToJson();
      c.record.validation["attempt"] = c.record.attempt;
      std::string reason = v.attribution + ": " + (v.reasons.empty() ? std::string("failed") : v.reasons.front());
      return Drop(c, "validation", reason.substr(0, 500));
    }
    return Repair(c, "validation", {v.attribution, v.reasons, nullptr, "validation"});
  }

  // Asks for another version of a candidate that failed `stage_name`; the new version starts
  // over at validation and goes through the whole audit again.
  Status Repair(Candidate& c, const char* stage_name, const RepairRequest& request) {
    RepairRequest with_previous = request;
    with_previous.previous = &c.draft;
    with_previous.stage = stage_name;
    ENVFORGE_RETURN_IF_ERROR(RepairEvent(c.record.key, c.record.attempt + 1, with_previous));
    c.record.attempt += 1;
    auto draft = Propose(c.record, c.record.attempt, &with_previous);
    if (!draft.ok() && IsInfrastructure(draft.status())) return draft.status();
    if (!draft.ok()) return Drop(c, stage_name, "repair proposal failed: " + draft.status().message());
    Adopt(c, std::move(draft).value());
    c.record.stage = stage::kProposed;
    c.record.validation = nullptr;
    c.record.audit = nullptr;
    ENVFORGE_RETURN_IF_ERROR(Augment(c));
    return run.store_.PutCandidate(c.record);
  }

  // An environment-level failure (the database or the toolset): recorded for Run, which asks the
  // proposer for a repaired environment while attempts remain.
  Status EnvironmentFailure(const std::vector<std::string>& lines) {
    std::string reason;
    bool toolset_fault = false;
    for (const std::string& line : lines) {
      reason += (reason.empty() ? "" : "; ") + line;
      toolset_fault =
          toolset_fault || line.find("tools.py") != std::string::npos || line.find("tool ") != std::string::npos;
    }
    env_failure = RepairRequest{toolset_fault ? "toolset" : "database", lines, nullptr, "environment"};
    return FailedPreconditionError(reason);
  }

  // The level's verified candidates in one bundle (for the audit and the filter).
  Result<std::string> VerifiedBundle(const std::vector<Candidate*>& chosen) {
    std::vector<const TaskDraft*> drafts;
    for (Candidate* c : chosen) drafts.push_back(&c->draft);
    std::string problems;
    ENVFORGE_ASSIGN_OR_RETURN(std::string bundle, PackBundle(drafts, Json::object(), problems));
    if (bundle.empty()) return InternalError("verified candidates no longer pack: " + problems);
    return bundle;
  }

  std::vector<Candidate*> AtStage(std::vector<Candidate>& level_candidates, const char* stage_name) {
    std::vector<Candidate*> out;
    for (Candidate& c : level_candidates) {
      if (!c.Dropped() && c.record.stage == stage_name) out.push_back(&c);
    }
    return out;
  }

  // What a repair after an unsound audit is told: the verdict's reasons and the answers that show
  // them (a verifier accepting a wrong answer is the verifier's; an oracle's defect the oracle's).
  static RepairRequest AuditRepair(const verifiers::TaskAudit& audit) {
    RepairRequest request{"verifier", audit.verdict_reasons, nullptr, "audit"};
    for (const verifiers::Finding& finding : audit.findings) {
      if (finding.kind.rfind("oracle", 0) == 0) request.attribution = "oracle";
      if (request.reasons.size() >= 8) break;
      request.reasons.push_back(finding.kind + ": " + finding.detail +
                                (finding.answer.empty() ? "" : " -- answer " + finding.answer));
    }
    return request;
  }

  // Stage 6: the audit gate. Returns how many candidates were repaired (they start over).
  Result<int64_t> AuditLevel(std::vector<Candidate>& level_candidates, int64_t level) {
    int64_t repaired = 0;
    std::vector<Candidate*> pending = AtStage(level_candidates, stage::kVerified);
    if (pending.empty()) return repaired;
    Progress("audit", level, std::to_string(pending.size()) + " verified candidate(s)");
    ENVFORGE_ASSIGN_OR_RETURN(std::string bundle_path, VerifiedBundle(pending));
    ENVFORGE_ASSIGN_OR_RETURN(sandbox::EnvBundle bundle, sandbox::EnvBundle::Load(bundle_path));
    sandbox::ManagerOptions manager_options;
    manager_options.limits.wall_time = std::chrono::milliseconds(3000);
    std::vector<std::unique_ptr<verifiers::SessionJudgeLane>> owned;
    std::vector<verifiers::JudgeLane*> lanes;
    for (int64_t i = 0; i < run.options_.audit_lanes; ++i) {
      ENVFORGE_ASSIGN_OR_RETURN(auto lane, verifiers::SessionJudgeLane::Create(bundle_path, manager_options));
      lanes.push_back(lane.get());
      owned.push_back(std::move(lane));
    }
    std::vector<std::string> ids;
    for (Candidate* c : pending) ids.push_back(c->draft.id);
    ENVFORGE_ASSIGN_OR_RETURN(verifiers::AuditReport report,
                              verifiers::RunAudit(bundle, lanes, AuditOptionsFor(run.options_, ids)));
    for (Candidate* c : pending) {
      auto it = std::find_if(report.tasks.begin(), report.tasks.end(),
                             [&](const verifiers::TaskAudit& a) { return a.id == c->draft.id; });
      if (it == report.tasks.end()) return InternalError("the audit did not report task " + c->draft.id);
      c->record.audit = AuditSummary(*it);
      c->record.seconds += it->seconds;
      if (it->verdict != "sound") {
        if (c->record.attempt < run.options_.repairs) {
          ENVFORGE_RETURN_IF_ERROR(Repair(*c, "audit", AuditRepair(*it)));
          repaired += 1;
          continue;
        }
        std::string reason = "audit verdict " + it->verdict;
        if (!it->verdict_reasons.empty()) reason += ": " + it->verdict_reasons.front();
        ENVFORGE_RETURN_IF_ERROR(Drop(*c, "audit", reason.substr(0, 500)));
        continue;
      }
      c->record.stage = stage::kAudited;
      ENVFORGE_RETURN_IF_ERROR(run.store_.PutCandidate(c->record));
    }
    return repaired;
  }

  // Stage 7: the pass@k band. Returns the lineages that stop escalating (too hard).
  Result<std::set<int64_t>> FilterLevel(std::vector<Candidate>& level_candidates, int64_t level) {
    std::set<int64_t> stopped;
    for (Candidate& c : level_candidates) {
      const bool too_hard = c.record.filter.is_object() && c.record.filter.value("decision", "") == "too_hard";
      if (c.record.dropped_at == "filter" && too_hard) stopped.insert(c.record.lineage);
    }
    std::vector<Candidate*> pending = AtStage(level_candidates, stage::kAudited);
    if (pending.empty()) return stopped;
    if (!run.options_.filter) {
      for (Candidate* c : pending) {
        c->record.stage = stage::kInBand;
        ENVFORGE_RETURN_IF_ERROR(run.store_.PutCandidate(c->record));
      }
      return stopped;
    }
    Progress("filter", level,
             std::to_string(pending.size()) + " sound candidate(s), k=" + std::to_string(run.options_.band.k));
    ENVFORGE_ASSIGN_OR_RETURN(std::string bundle_path, VerifiedBundle(pending));
    ENVFORGE_ASSIGN_OR_RETURN(auto manager, sandbox::SessionManager::Create(sandbox::ManagerOptions{}));
    ENVFORGE_ASSIGN_OR_RETURN(std::string env_id, manager->OpenEnvironment(bundle_path));
    agents::RolloutOptions episode;
    episode.max_turns = run.options_.max_turns;
    episode.max_tokens = run.options_.max_tokens;
    episode.max_tokens_per_turn = run.options_.max_tokens_per_turn;
    episode.sampling.temperature = run.options_.temperature;
    episode.tool_choice = run.options_.tool_choice;
    episode.strict_tools = run.options_.strict_tools;
    episode.sampling.seed = run.options_.seed;
    std::vector<std::string> ids;
    for (Candidate* c : pending) ids.push_back(c->draft.id);
    ENVFORGE_ASSIGN_OR_RETURN(
        auto results, RunBandFilter(*manager, *run.policy_, env_id, ids, run.options_.band, episode, [&](int64_t done) {
          Progress("filter", level, std::to_string(done) + " episodes");
        }));
    for (size_t i = 0; i < pending.size(); ++i) {
      Candidate& c = *pending[i];
      const FilterResult& result = results[i];
      c.record.filter = result.ToJson();
      c.record.seconds += result.seconds;
      c.record.model_calls += result.model_calls;
      c.record.tokens += result.tokens;
      if (result.verdict.decision != BandDecision::kInBand) {
        if (result.verdict.decision == BandDecision::kTooHard) stopped.insert(c.record.lineage);
        std::string reason = std::string(BandDecisionName(result.verdict.decision)) +
                             (result.verdict.early ? " (early stop)" : "") + ": " + std::to_string(result.passed) +
                             "/" + std::to_string(result.scored) + " episodes passed";
        ENVFORGE_RETURN_IF_ERROR(Drop(c, "filter", reason));
        continue;
      }
      c.record.stage = stage::kInBand;
      ENVFORGE_RETURN_IF_ERROR(run.store_.PutCandidate(c.record));
    }
    return stopped;
  }

  Json Provenance(const std::vector<Candidate*>& kept) const {
    Json tasks = Json::object();
    for (const Candidate* c : kept) {
      tasks[c->draft.id] = {
          {"level", c->record.level},
          {"lineage", c->record.lineage},
          {"attempt", c->record.attempt},
          {"knobs", c->record.knobs},
          {"audit", c->record.audit.is_object() ? c->record.audit.value("verdict", "") : ""},
          {"acceptance_rate", c->record.audit.is_object() ? c->record.audit.value("acceptance_rate", 0.0) : 0.0},
          {"filter", DeterministicFilter(c->record.filter)}};
    }
    const SynthOptions& o = run.options_;
    // Which weights filtered, and how they attended: the policy spec names only a directory.
    const bool embedded = o.filter && run.policy_->info().kind == "embedded";
    const std::string weights = embedded ? run.policy_->WeightsSha256() : "";
    return {{"generator", "envsynth " + run.proposer_.name()},
            {"category", env.category},
            {"seed", env.seed},
            {"run_seed", o.seed},
            {"policy", o.filter ? Json(o.policy) : Json()},
            {"policy_weights_sha256", weights.empty() ? Json() : Json(weights)},
            {"policy_attention", embedded ? Json(o.dense_policy ? "dense" : "dsa") : Json()},
            {"band", o.filter ? Json::array({o.band.lo, o.band.hi}) : Json()},
            {"k", o.filter ? Json(o.band.k) : Json()},
            {"toolset", std::vector<std::string>(toolset.begin(), toolset.end())},
            {"augmentations", env_record.augmentations},
            {"tasks", tasks}};
  }

  // The kept environment's source, written in the work directory and moved to
  // out_dir/sources/<name>/ (replacing an earlier run's): the bundle's provenance names it, and
  // `envforge env pack` rebuilds the same bundle from it.
  Result<std::string> KeptSource(const std::vector<const TaskDraft*>& drafts, const Json& provenance) {
    const fs::path staged = work / "kept";
    ENVFORGE_RETURN_IF_ERROR(WriteEnvironmentSource(staged.string(), env, toolset, drafts, provenance));
    const fs::path sources = fs::path(run.options_.out_dir) / "sources";
    const fs::path target = sources / env.name;
    std::error_code error;
    fs::create_directories(sources, error);
    if (!error) fs::remove_all(target, error);
    if (!error) fs::rename(staged, target, error);
    if (error) return ErrnoError("moving the kept source to " + target.string(), error.value());
    return fs::absolute(target, error).string();
  }

  // Stage 8: re-validate the kept tasks on the final toolset, then pack them into out_dir.
  Status Keep(std::vector<Candidate>& all) {
    std::vector<Candidate*> kept;
    for (Candidate& c : all) {
      if (!c.Dropped() && (c.record.stage == stage::kInBand || c.record.stage == stage::kKept)) kept.push_back(&c);
    }
    if (!kept.empty()) {
      Progress("keep", 0, "re-validating " + std::to_string(kept.size()) + " task(s) on the final toolset");
      ENVFORGE_ASSIGN_OR_RETURN(std::string bundle_path, VerifiedBundle(kept));
      ENVFORGE_ASSIGN_OR_RETURN(auto manager, sandbox::SessionManager::Create(sandbox::ManagerOptions{}));
      ENVFORGE_ASSIGN_OR_RETURN(std::string env_id, manager->OpenEnvironment(bundle_path));
      std::vector<std::string> ids;
      for (Candidate* c : kept) ids.push_back(c->draft.id);
      ENVFORGE_ASSIGN_OR_RETURN(auto validations, ValidateTasks(*manager, env_id, ids));
      std::vector<Candidate*> still;
      for (size_t i = 0; i < kept.size(); ++i) {
        if (validations[i].passed) {
          still.push_back(kept[i]);
        } else {
          ENVFORGE_RETURN_IF_ERROR(
              Drop(*kept[i], "revalidation",
                   "fails on the final toolset: " +
                       (validations[i].reasons.empty() ? std::string() : validations[i].reasons.front())));
        }
      }
      kept = std::move(still);
    }
    env_record.kept_tasks = static_cast<int64_t>(kept.size());
    env_record.output.clear();
    if (!kept.empty()) {
      std::vector<const TaskDraft*> drafts;
      for (Candidate* c : kept) drafts.push_back(&c->draft);
      ENVFORGE_ASSIGN_OR_RETURN(std::string source, KeptSource(drafts, Provenance(kept)));
      const std::string output = (fs::path(run.options_.out_dir) / (env.name + ".envdb")).string();
      ENVFORGE_RETURN_IF_ERROR(sandbox::PackEnvironment(source, output).WithContext("writing " + output));
      env_record.output = output;
      for (Candidate* c : kept) {
        c->record.stage = stage::kKept;
        ENVFORGE_RETURN_IF_ERROR(run.store_.PutCandidate(c->record));
      }
      kept_total += static_cast<int64_t>(kept.size());
    }
    return Status::Ok();
  }

  Result<int64_t> CategoryLevels() {
    ENVFORGE_ASSIGN_OR_RETURN(auto categories, run.proposer_.Categories());
    if (categories.empty()) return run.options_.max_levels;  // a proposer of any category
    for (const auto& [id, levels] : categories) {
      if (id == env.category) return std::min<int64_t>(levels, run.options_.max_levels);
    }
    return NotFoundError("the proposer has no category '" + env.category + "'");
  }

  // Stages 3-8 for the proposed environment. A FailedPrecondition marks the environment failed.
  Status Work() {
    toolset = std::set<std::string>(env.base_tools.begin(), env.base_tools.end());
    ENVFORGE_ASSIGN_OR_RETURN(int64_t levels, CategoryLevels());
    std::vector<int64_t> lineages;
    for (int64_t j = 0; j < run.options_.tasks_per_env; ++j) lineages.push_back(j);
    std::vector<Candidate> all;
    for (int64_t level = 1; level <= levels && !lineages.empty(); ++level) {
      Progress("propose", level, std::to_string(lineages.size()) + " lineage(s)");
      ENVFORGE_ASSIGN_OR_RETURN(std::vector<Candidate> level_candidates, ProposeLevel(level, lineages));
      for (;;) {  // validation and audit until no candidate is repaired
        ENVFORGE_RETURN_IF_ERROR(ValidateLevel(level_candidates, level));
        ENVFORGE_ASSIGN_OR_RETURN(int64_t repaired, AuditLevel(level_candidates, level));
        if (repaired == 0) break;
      }
      ENVFORGE_ASSIGN_OR_RETURN(std::set<int64_t> stopped, FilterLevel(level_candidates, level));
      std::vector<int64_t> next;
      for (int64_t j : lineages) {
        if (stopped.count(j) == 0) next.push_back(j);
      }
      lineages = std::move(next);
      for (Candidate& c : level_candidates) all.push_back(std::move(c));
    }
    return Keep(all);
  }
};

// Proposes (or restores) the environment and works it through every stage; an environment-level
// failure is repaired while attempts remain. Returns only infrastructure errors: the
// environment's own faults are recorded as its status "failed".
Status SynthRun::Impl::Process() {
  std::error_code error;
  fs::create_directories(work, error);
  const auto start = Clock::now();
  env_record.status = "pending";
  Status worked = Status::Ok();
  if (!env_record.draft.is_null()) {
    ENVFORGE_ASSIGN_OR_RETURN(env, EnvironmentDraft::FromJson(env_record.draft));
  } else {
    Progress("propose", 0, "environment seed " + std::to_string(env_record.seed));
    auto draft = run.proposer_.ProposeEnvironment(env_record.category, env_record.seed);
    ChargeEnvironment();
    if (draft.ok()) {
      env = std::move(draft).value();
      env_record.draft = env.ToJson();
    } else {
      worked = draft.status();
    }
  }
  while (worked.ok()) {
    env_record.name = env.name;
    env_record.augmentations = Json::array();
    ENVFORGE_RETURN_IF_ERROR(run.store_.PutEnvironment(env_record));
    env_failure.reset();
    Status this_try = Work();
    if (this_try.ok() || !env_failure || env.attempt >= run.options_.repairs) {
      worked = this_try;
      break;
    }
    // The database or the toolset failed: ask for a repaired environment and start it over.
    ENVFORGE_RETURN_IF_ERROR(RepairEvent("", env.attempt + 1, *env_failure));
    auto repaired = run.proposer_.RepairEnvironment(env, *env_failure);
    ChargeEnvironment();
    if (!repaired.ok()) {
      worked = repaired.status();
      break;
    }
    const int64_t attempt = env.attempt + 1;
    env = std::move(repaired).value();
    env.attempt = attempt;
    env_record.draft = env.ToJson();
    // The discarded candidates' model cost stays counted, on the environment.
    ENVFORGE_ASSIGN_OR_RETURN(auto discarded, run.store_.Candidates());
    for (const CandidateRecord& c : discarded) {
      if (c.env_key != env_record.key) continue;
      env_record.model_calls += c.model_calls;
      env_record.tokens += c.tokens;
    }
    ENVFORGE_RETURN_IF_ERROR(run.store_.DeleteCandidates(env_record.key));
  }
  env_record.seconds += SecondsSince(start);
  const StatusCode code = worked.code();
  if (worked.ok()) {
    env_record.status = "done";
  } else if (code == StatusCode::kFailedPrecondition || code == StatusCode::kNotFound ||
             code == StatusCode::kInvalidArgument || code == StatusCode::kInternal || code == StatusCode::kDataLoss) {
    env_record.status = "failed";  // the environment's own fault (or its proposer's): recorded, the run goes on
    env_record.reason = worked.message().substr(0, 1000);
  } else {
    return worked;  // infrastructure
  }
  return Status::Ok();
}

SynthRun::SynthRun(RunStore& store, Proposer& proposer, inference::Backend* policy, SynthOptions options,
                   std::function<void(const SynthProgress&)> on_progress)
    : store_(store),
      proposer_(proposer),
      policy_(policy),
      options_(std::move(options)),
      on_progress_(std::move(on_progress)) {}

Status SynthRun::Run() {
  ENVFORGE_RETURN_IF_ERROR(options_.Validate());
  if (options_.filter && policy_ == nullptr) return InvalidArgumentError("the filter needs a policy backend");
  std::error_code error;
  fs::create_directories(options_.out_dir, error);
  if (error) return ErrnoError("creating the output directory " + options_.out_dir, error.value());
  SweepStaleWork(options_.out_dir);
  std::string prefix = WorkPrefix();
  prefix.pop_back();  // UniqueScratchPath adds "-<pid>-<n>"
  sandbox::code::ScopedDirectory work_root(sandbox::code::UniqueScratchPath(options_.out_dir, prefix));
  fs::create_directories(work_root.path(), error);
  if (error) return ErrnoError("creating a work directory in " + options_.out_dir, error.value());

  int64_t candidates_seen = 0, kept_total = 0;
  ENVFORGE_ASSIGN_OR_RETURN(auto stored, store_.Candidates());
  for (const CandidateRecord& c : stored) kept_total += c.stage == stage::kKept ? 1 : 0;
  std::vector<int64_t> mine;
  for (int64_t i = 0; i < options_.envs; ++i) {
    if (i % options_.shard_count == options_.shard_index) mine.push_back(i);
  }
  int64_t done = 0;
  for (int64_t i : mine) {
    const std::string& category = options_.categories[static_cast<size_t>(i) % options_.categories.size()];
    const std::string key = category + "/" + std::to_string(i);
    ENVFORGE_ASSIGN_OR_RETURN(std::optional<EnvironmentRecord> existing, store_.GetEnvironment(key));
    if (existing && (existing->status == "done" || existing->status == "failed")) {
      done += 1;
      continue;
    }
    Impl impl{*this,
              {},
              {},
              {},
              work_root.path() / std::to_string(i),
              0,
              candidates_seen,
              kept_total,
              done,
              static_cast<int64_t>(mine.size())};
    impl.env_record = existing.value_or(EnvironmentRecord{});
    impl.env_record.key = key;
    impl.env_record.category = category;
    impl.env_record.index = i;
    impl.env_record.seed = DeriveEnvironmentSeed(options_.seed, category, i);
    ENVFORGE_RETURN_IF_ERROR(impl.Process());
    ENVFORGE_RETURN_IF_ERROR(store_.PutEnvironment(impl.env_record));
    fs::remove_all(impl.work, error);
    done += 1;
    impl.envs_done = done;
    impl.Progress("done", 0, impl.env_record.status + ", " + std::to_string(impl.env_record.kept_tasks) + " kept");
  }
  return Status::Ok();
}

}  // namespace envforge::envsynth
