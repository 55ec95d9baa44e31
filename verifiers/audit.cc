#include "verifiers/audit.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cstdint>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_set>

#include "toolsets/json_schema.h"
#include "verifiers/answer_space.h"
#include "base/rng.h"
#include "verifiers/probes.h"
#include "verifiers/search_probes.h"

namespace envforge::verifiers {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One call's worth of answers for one lane, judged by the verifier and (optionally) the oracle.
struct Job {
  size_t lane = 0;
  std::vector<size_t> indexes;  // probe indexes, or empty for a job with explicit answers only
  std::vector<std::string> answers;
  bool with_oracle = false;
  std::vector<Verdict> verifier;
  std::vector<Verdict> oracle;
};

// Why a task's audit stopped early (audit.h, BUDGET AND HANGS).
struct StopReason {
  std::string reason;  // "hang" | "budget"
  std::string detail;
  std::string answer;  // the answer a judge hung on
};

// Runs jobs on their lanes, one thread per lane, reporting progress from the calling thread.
// Within a task's budget: each judge call is sized to fit what is left of it, and a hang or a spent
// budget stops every lane before its next call (stopped()).
class Runner {
 public:
  Runner(const std::vector<JudgeLane*>& lanes, const std::function<void(const AuditProgress&)>& on_progress,
         AuditProgress* progress, Clock::time_point start)
      : lanes_(lanes), on_progress_(on_progress), progress_(progress), start_(start) {}

  // Starts a task: its budget ends at `deadline`; forgets the previous task's stop.
  void BeginTask(Clock::time_point deadline, std::chrono::milliseconds budget) {
    std::lock_guard<std::mutex> lock(stop_mu_);
    deadline_ = deadline;
    budget_ = budget;
    stop_.reset();
    stopped_.store(false);
  }
  bool stopped() const { return stopped_.load(); }
  std::optional<StopReason> stop_reason() const {
    std::lock_guard<std::mutex> lock(stop_mu_);
    return stop_;
  }

  Status Run(const std::string& task_id, std::vector<Job>& jobs, const std::string& phase) {
    progress_->phase = phase;
    std::mutex mu;
    std::condition_variable cv;
    size_t running = lanes_.size();
    Status first_error;
    std::vector<std::thread> threads;
    for (size_t lane = 0; lane < lanes_.size(); ++lane) {
      threads.emplace_back([&, lane] {
        Status status;
        for (Job& job : jobs) {
          if (job.lane != lane || !status.ok()) continue;
          if (stopped()) break;
          if (job.answers.empty()) continue;
          status = JudgeWithinBudget(lane, task_id, JudgeKind::kVerifier, job.answers, job.verifier);
          if (!status.ok() || stopped()) break;
          if (job.with_oracle) {
            status = JudgeWithinBudget(lane, task_id, JudgeKind::kOracle, job.answers, job.oracle);
            if (!status.ok() || stopped()) break;
          }
        }
        std::lock_guard<std::mutex> lock(mu);
        if (!status.ok() && first_error.ok()) first_error = status;
        --running;
        cv.notify_all();
      });
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      while (running > 0) {
        cv.wait_for(lock, std::chrono::milliseconds(200));
        Report();
      }
    }
    for (auto& thread : threads) thread.join();
    Report();
    return first_error;
  }

  uint64_t judgements() const { return judgements_.load(); }

  // Judges `answers` on `lane` into `verdicts` (appended), in calls that fit the budget. Returns
  // OK with fewer verdicts than answers when the task stopped (a hang, the budget), an error
  // Status when the lane failed.
  Status JudgeWithinBudget(size_t lane, const std::string& task_id, JudgeKind judge,
                           const std::vector<std::string>& answers, std::vector<Verdict>& verdicts) {
    const char* judge_name = judge == JudgeKind::kOracle ? "oracle" : "verifier";
    size_t done = 0;
    while (done < answers.size() && !stopped()) {
      size_t count = FittingAnswers(*lanes_[lane], answers.size() - done);
      if (count == 0) {
        Stop({"budget",
              "the audit budget of " + FormatSeconds(budget_) + " s per task (--task-budget-seconds) was spent with " +
                  std::to_string(answers.size() - done) + " answer(s) of a call still to judge by the " + judge_name,
              ""});
        break;
      }
      std::vector<std::string> chunk(answers.begin() + static_cast<std::ptrdiff_t>(done),
                                     answers.begin() + static_cast<std::ptrdiff_t>(done + count));
      auto judged = lanes_[lane]->Judge(task_id, judge, chunk);
      if (!judged.ok()) return judged.status();
      size_t got = judged->size();
      bool hung = got < count && got > 0 && judged->back().defect && judged->back().limit == "wall_time";
      if (got > count || (got < count && !hung)) return InternalError("a lane answered the wrong number of verdicts");
      judgements_ += got;
      for (Verdict& verdict : *judged) verdicts.push_back(std::move(verdict));
      if (hung) {
        Stop({"hang", verdicts.back().defect_message, chunk[got - 1]});
        break;
      }
      done += count;
    }
    return Status::Ok();
  }

  void Report() {
    if (!on_progress_) return;
    progress_->judgements = judgements_.load();
    progress_->seconds = SecondsSince(start_);
    progress_->judgements_per_second = progress_->seconds > 0 ? double(progress_->judgements) / progress_->seconds : 0;
    on_progress_(*progress_);
  }

 private:
  // How many of `wanted` answers one call may take: its hard deadline plus one single-answer call
  // (a hang's confirmation) must end before the deadline. A lane without a bound gets them all
  // while time is left.
  size_t FittingAnswers(const JudgeLane& lane, size_t wanted) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    if (left.count() <= 0) return 0;
    if (lane.CallDeadline(1).count() <= 0) return wanted;
    auto fits = [&](size_t n) { return lane.CallDeadline(n) + lane.CallDeadline(1) <= left; };
    size_t low = 0, high = wanted;  // fits(low) holds (vacuously for 0); find the largest
    while (low < high) {
      size_t middle = low + (high - low + 1) / 2;
      if (fits(middle)) {
        low = middle;
      } else {
        high = middle - 1;
      }
    }
    return low;
  }

  void Stop(StopReason reason) {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (!stop_) stop_ = std::move(reason);
    stopped_.store(true);
  }

  static std::string FormatSeconds(std::chrono::milliseconds duration) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", static_cast<double>(duration.count()) / 1000.0);
    return text;
  }

  const std::vector<JudgeLane*>& lanes_;
  const std::function<void(const AuditProgress&)>& on_progress_;
  AuditProgress* progress_;
  Clock::time_point start_;
  std::atomic<uint64_t> judgements_{0};
  mutable std::mutex stop_mu_;
  Clock::time_point deadline_ = Clock::time_point::max();
  std::chrono::milliseconds budget_{0};
  std::optional<StopReason> stop_;
  std::atomic<bool> stopped_{false};
};

struct Judged {
  bool done = false;
  size_t lane = 0;
  Verdict verifier;
  bool has_oracle = false;
  Verdict oracle;
};

bool Accepted(const Verdict& verdict) { return !verdict.defect && verdict.passed; }

std::string ProbeName(const Probe& probe) {
  std::string name = probe.kind.empty() ? std::string(ProbeFamilyName(probe.family)) : probe.kind;
  if (!probe.label.empty()) name += " " + probe.label;
  return name;
}

// Splits probe indexes into jobs of at most batch_size, lane = batch number % lanes (or `lane_of`).
void AppendJobs(const ProbeSet& probes, const std::vector<size_t>& indexes, size_t batch_size, size_t lanes,
                bool with_oracle, const std::function<size_t(size_t index, size_t batch)>& lane_of,
                std::vector<Job>& jobs) {
  std::vector<std::vector<size_t>> per_lane(lanes);
  size_t batch = 0;
  for (size_t index : indexes) {
    size_t lane = lane_of(index, batch) % lanes;
    per_lane[lane].push_back(index);
    if (per_lane[lane].size() == batch_size) {
      Job job;
      job.lane = lane;
      job.with_oracle = with_oracle;
      job.indexes = std::move(per_lane[lane]);
      per_lane[lane].clear();
      for (size_t i : job.indexes) job.answers.push_back(probes[i].text);
      jobs.push_back(std::move(job));
      ++batch;
    }
  }
  for (size_t lane = 0; lane < lanes; ++lane) {
    if (per_lane[lane].empty()) continue;
    Job job;
    job.lane = lane;
    job.with_oracle = with_oracle;
    job.indexes = std::move(per_lane[lane]);
    for (size_t i : job.indexes) job.answers.push_back(probes[i].text);
    jobs.push_back(std::move(job));
  }
}

class TaskAuditor {
 public:
  // `search` is the task's answer-key facts when it is a search task (search_probes.h), else null.
  TaskAuditor(const sandbox::TaskRecord& task, Database& db, Runner& runner, const std::vector<JudgeLane*>& lanes,
              const AuditOptions& options, const SearchTaskFacts* search = nullptr)
      : task_(task), db_(db), runner_(runner), lanes_(lanes), options_(options), search_(search) {}

  Result<TaskAudit> Run(AuditProgress& progress) {
    auto start = Clock::now();
    runner_.BeginTask(start + options_.task_budget, options_.task_budget);
    uint64_t judgements_before = runner_.judgements();
    audit_.id = task_.id;
    audit_.verifier_version = task_.version;
    // The lanes judge with the task's oracle when it has one; a search task's oracle is its answer
    // key, judged here in the audit's process (Absorb).
    lane_oracle_ = !task_.oracle_source.empty();
    audit_.has_oracle = lane_oracle_ || search_ != nullptr;
    audit_.oracle_kind = lane_oracle_ ? "task" : search_ != nullptr ? "answer_key" : "";
    audit_.lanes = static_cast<int>(lanes_.size());
    auto compiled = toolsets::CompiledSchema::Compile(task_.answer_schema);
    if (!compiled.ok()) return compiled.status().WithContext("task " + task_.id + " answer_schema");
    compiled_ = *compiled;

    // 1. Gold.
    progress.phase = "gold";
    auto gold = lanes_[0]->SolveGold(task_.id);
    if (!gold.ok()) {
      StatusCode code = gold.status().code();
      if (code != StatusCode::kFailedPrecondition && code != StatusCode::kDeadlineExceeded &&
          code != StatusCode::kUnavailable) {
        return gold.status().WithContext("task " + task_.id + ": running the gold solution");
      }
      audit_.gold_error = gold.status().message();
      audit_.AddFinding({"gold_failed", "", "gold", gold.status().message()}, options_.max_findings_per_kind);
    } else {
      audit_.gold_answer = *gold;
      gold_json_ = EffectiveAnswer(*gold);
    }

    // 2. Probes.
    ENVFORGE_RETURN_IF_ERROR(BuildProbes());
    // The gold answer K times in a row, once on lane 0 and once on the next lane.
    std::vector<Job> jobs;
    if (gold.ok()) {
      for (size_t run = 0; run < 2; ++run) {
        Job job;
        job.lane = run % lanes_.size();
        job.with_oracle = lane_oracle_;
        job.answers.assign(static_cast<size_t>(options_.k), audit_.gold_answer);
        jobs.push_back(std::move(job));
      }
    }
    size_t gold_jobs = jobs.size();
    std::vector<size_t> all(probes_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    AppendJobs(
        probes_, all, options_.batch_size, lanes_.size(), lane_oracle_, [](size_t, size_t batch) { return batch; },
        jobs);
    ENVFORGE_RETURN_IF_ERROR(runner_.Run(task_.id, jobs, "probes"));
    if (gold_jobs > 0) {
      gold_runs_[0] = jobs[0];
      if (gold_jobs > 1) gold_runs_[1] = jobs[1];
    }
    judged_.resize(probes_.size());
    Absorb(jobs, gold_jobs);

    // 3. Walk from accepted answers.
    if (!runner_.stopped()) ENVFORGE_RETURN_IF_ERROR(Walk());

    // 4. Determinism across lanes.
    if (!runner_.stopped()) ENVFORGE_RETURN_IF_ERROR(Rejudge());

    // 5. Findings and verdict.
    Analyse();
    RecordStop();
    if (const char* dump = std::getenv("ENVFORGE_AUDIT_DUMP"); dump != nullptr && *dump != '\0') DumpProbes(dump);
    ComputeVerdict(audit_, options_);
    audit_.probes = probes_.size();
    audit_.judgements = runner_.judgements() - judgements_before;
    audit_.seconds = SecondsSince(start);
    return std::move(audit_);
  }

 private:
  Status BuildProbes() {
    std::optional<AnswerSpace> space;
    auto built = AnswerSpace::Build(db_, task_.answer_schema, gold_json_);
    if (built.ok()) {
      space = std::move(built).value();
    } else if (built.status().code() == StatusCode::kInvalidArgument) {
      audit_.space_error = built.status().message();
      audit_.AddFinding({"schema_defect", "", "answer_schema", built.status().message()},
                        options_.max_findings_per_kind);
    } else {
      return built.status().WithContext("task " + task_.id + ": reading the answer domains");
    }
    if (space) space_ = std::move(*space);
    const AnswerSpace* space_ptr = space_ ? &*space_ : nullptr;

    ProbeContext context;
    context.schema = &task_.answer_schema;
    context.compiled = &compiled_;
    context.space = space_ptr;
    if (!audit_.gold_answer.empty() || !gold_json_.is_null()) {
      context.gold_text = audit_.gold_answer;
      context.gold = gold_json_;
    }
    AddTrivialProbes(context, probes_);
    if (search_ != nullptr) AddSearchProbes(*search_, probes_);
    Rng mutant_rng(DeriveSeed(options_.seed, task_.id + "/mutants"));
    AddMutantProbes(context, options_.max_values_per_slot, mutant_rng, probes_);
    AddStructuralProbes(context, probes_);
    if (space_ptr != nullptr) {
      audit_.space_size = space_ptr->Size();
      audit_.space_size_saturated = space_ptr->SizeSaturated();
      audit_.space_log10_size = space_ptr->Log10Size();
      audit_.space_slots = space_ptr->slots().size();
      for (const Slot& slot : space_ptr->slots()) {
        const Domain& domain = space_ptr->domain_of(slot);
        audit_.space_domains.push_back((slot.pointer.empty() ? "/" : slot.pointer) + ": " + domain.source + " (" +
                                       std::to_string(domain.values.size()) + ")");
      }
      if (!space_ptr->slots().empty()) {
        Rng space_rng(DeriveSeed(options_.seed, task_.id + "/space"));
        bool enumerated = AddSpaceProbes(*space_ptr, options_.max_enumerate, options_.samples, space_rng, probes_);
        audit_.space_mode = enumerated ? "enumerated" : "sampled";
        Rng near_rng(DeriveSeed(options_.seed, task_.id + "/neighbourhood"));
        auto boundary = FindBoundaryValues(db_, *space_ptr, TaskNumbers(task_.prompt, task_.knobs));
        if (!boundary.ok()) return boundary.status().WithContext("task " + task_.id + ": reading boundary values");
        boundary_ = std::move(boundary).value();
        for (const auto& values : boundary_) audit_.boundary_values += values.size();
        if (space_ptr->template_is_gold()) {
          AddNeighbourhoodProbes(*space_ptr, space_ptr->TemplateChoice(), options_.neighbourhood,
                                 ProbeFamily::kNeighbourhood, near_rng, probes_);
          Rng boundary_rng(DeriveSeed(options_.seed, task_.id + "/boundary"));
          AddBoundaryProbes(*space_ptr, boundary_, space_ptr->TemplateChoice(), options_.boundary,
                            ProbeFamily::kBoundary, boundary_rng, probes_);
        }
      }
    }
    return Status::Ok();
  }

  // Takes the verdicts of `jobs` (from `skip` on) into judged_; a job cut short by a stop has fewer
  // verdicts than answers, and only the judged answers count.
  void Absorb(const std::vector<Job>& jobs, size_t skip) {
    judged_.resize(probes_.size());
    for (size_t j = skip; j < jobs.size(); ++j) {
      const Job& job = jobs[j];
      for (size_t k = 0; k < job.indexes.size() && k < job.verifier.size(); ++k) {
        Judged& entry = judged_[job.indexes[k]];
        entry.done = true;
        entry.lane = job.lane;
        entry.verifier = job.verifier[k];
        if (job.with_oracle && k < job.oracle.size()) {
          entry.has_oracle = true;
          entry.oracle = job.oracle[k];
        } else if (search_ != nullptr) {
          entry.has_oracle = true;
          entry.oracle = KeyVerdict(*search_, probes_[job.indexes[k]].text);
        }
      }
    }
  }

  bool AcceptedByEither(size_t index) const {
    const Judged& entry = judged_[index];
    return entry.done && (Accepted(entry.verifier) || (entry.has_oracle && Accepted(entry.oracle)));
  }

  // The number of rules an answer failed: the oracle's reasons when it judged it, else the verifier's.
  size_t FailedRules(size_t index) const {
    const Judged& entry = judged_[index];
    if (entry.has_oracle && !entry.oracle.defect) return entry.oracle.passed ? 0 : entry.oracle.reasons.size();
    if (entry.verifier.defect) return SIZE_MAX;
    return entry.verifier.passed ? 0 : entry.verifier.reasons.size();
  }

  // The one failed rule of a near miss, without its specifics (quoted names, numbers), so that near
  // misses group by the rule they break.
  std::string ReasonKind(size_t index) const {
    const Judged& entry = judged_[index];
    const Verdict& v = entry.has_oracle && !entry.oracle.defect ? entry.oracle : entry.verifier;
    if (v.reasons.empty()) return "";
    std::string kind;
    char quote = 0;
    for (char c : v.reasons[0]) {
      if (quote != 0) {
        if (c == quote) quote = 0;
        continue;
      }
      if (c == '\'' || c == '"') {
        quote = c;
        kind += '#';
      } else if (!std::isdigit(static_cast<unsigned char>(c))) {
        kind += c;
      }
    }
    return kind;
  }

  // The values of the slots that are parents of other slots (a trip's cities): answers with one
  // signature explore one region; the walk samples signatures uniformly to reach rare regions.
  std::string Signature(const std::vector<uint32_t>& choice) const {
    std::string signature;
    for (const SlotRelation& relation : space_->relations()) {
      signature += std::to_string(choice[relation.parent]) + ",";
    }
    return signature;
  }

  // Walk pools: accepted answers and near misses (rejected with exactly one failed rule), each
  // grouped by signature.
  struct WalkPool {
    std::map<std::string, std::vector<std::vector<uint32_t>>> groups;
    std::vector<std::string> keys;
    void Add(const std::string& signature, std::vector<uint32_t> choice) {
      auto [it, inserted] = groups.try_emplace(signature);
      if (inserted) keys.push_back(signature);
      it->second.push_back(std::move(choice));
    }
    bool empty() const { return keys.empty(); }
    const std::vector<uint32_t>& Pick(Rng& rng) const {
      const auto& group = groups.at(keys[rng.Below(keys.size())]);
      return group[rng.Below(group.size())];
    }
  };

  // How many slots of `choice` hold a boundary value.
  size_t BoundaryCount(const std::vector<uint32_t>& choice) {
    if (boundary_sets_.empty()) {
      boundary_sets_.resize(boundary_.size());
      for (size_t d = 0; d < boundary_.size(); ++d) {
        for (const BoundaryValue& value : boundary_[d]) boundary_sets_[d].insert(value.value);
      }
    }
    size_t count = 0;
    for (size_t s = 0; s < choice.size(); ++s) {
      size_t d = space_->slots()[s].domain;
      if (d < boundary_sets_.size() && boundary_sets_[d].count(choice[s])) ++count;
    }
    return count;
  }

  // Every boundary value of the children of `parent_slot` whose parent is `parent_value`, put into
  // `center` one at a time (walk probes).
  void SweepPair(size_t parent_slot, uint32_t parent_value, const std::vector<uint32_t>& center) {
    const auto& slots = space_->slots();
    const Json& parent_json = space_->domain_of(slots[parent_slot]).values[parent_value];
    for (const SlotRelation& relation : space_->relations()) {
      if (relation.parent != parent_slot || slots[relation.child].domain >= boundary_.size()) continue;
      const Domain& domain = space_->domain_of(slots[relation.child]);
      const DomainLink& link = domain.links[relation.link];
      auto parent = link.ParentIndex(parent_json);
      if (!parent) continue;
      for (const BoundaryValue& value : boundary_[slots[relation.child].domain]) {
        const auto& parents = link.parents[value.value];
        if (value.value == center[relation.child] ||
            std::find(parents.begin(), parents.end(), *parent) == parents.end()) {
          continue;
        }
        std::vector<uint32_t> choice = center;
        choice[relation.child] = value.value;
        probes_.Add(Probe{
            DumpJson(space_->Make(choice)), ProbeFamily::kWalk, "walk.sweep",
            slots[relation.child].pointer + " <- " + DumpJson(domain.values[value.value]) + " (" + value.why + ")",
            std::move(choice)});
      }
    }
  }

  Status Walk() {
    if (!space_ || space_->slots().empty() || options_.walk == 0) return Status::Ok();
    WalkPool accepted, near;
    std::set<size_t> pooled;
    // Accepted answers by (parent slot, parent value): contexts for boundary moves to a new parent.
    std::map<std::pair<size_t, uint32_t>, std::vector<std::vector<uint32_t>>> by_parent, near_by_parent;
    std::set<size_t> parent_slots;
    for (const SlotRelation& relation : space_->relations()) parent_slots.insert(relation.parent);
    Rng rng(DeriveSeed(options_.seed, task_.id + "/walk"));
    ContextFn context = [&](size_t parent_slot, uint32_t parent_value) -> const std::vector<uint32_t>* {
      auto it = by_parent.find({parent_slot, parent_value});
      if (it == by_parent.end() || it->second.empty()) return nullptr;
      return &it->second[rng.Below(it->second.size())];
    };
    auto collect = [&](size_t from) {
      for (size_t i = from; i < probes_.size(); ++i) {
        if (!judged_[i].done || probes_.IsMember(i, ProbeFamily::kTrivial) || probes_[i].choice.empty()) continue;
        if (std::find(probes_[i].choice.begin(), probes_[i].choice.end(), kNoValue) != probes_[i].choice.end())
          continue;
        if (!pooled.insert(i).second) continue;
        if (AcceptedByEither(i)) {
          accepted.Add(Signature(probes_[i].choice), probes_[i].choice);
          for (size_t slot : parent_slots) by_parent[{slot, probes_[i].choice[slot]}].push_back(probes_[i].choice);
        } else if (FailedRules(i) == 1) {
          near.Add(Signature(probes_[i].choice) + "|" + ReasonKind(i), probes_[i].choice);
          for (size_t slot : parent_slots) near_by_parent[{slot, probes_[i].choice[slot]}].push_back(probes_[i].choice);
        }
      }
    };
    collect(0);
    if (space_->template_is_gold() && !gold_runs_[0].verifier.empty()) {
      std::vector<uint32_t> gold_choice = space_->TemplateChoice();
      if (std::find(gold_choice.begin(), gold_choice.end(), kNoValue) == gold_choice.end()) {
        accepted.Add(Signature(gold_choice), gold_choice);
      }
    }
    std::vector<std::pair<size_t, uint32_t>> sweep_order;
    size_t sweep_position = 0, sweep_turn = 0;
    // Small rounds: every round feeds its accepted answers and near misses back into the pools.
    size_t round_size = std::max<size_t>(1, lanes_.size() * std::min<size_t>(options_.batch_size, 64));
    bool has_boundary = audit_.boundary_values > 0;
    while (!(accepted.empty() && near.empty()) && probes_.Members(ProbeFamily::kWalk).size() < options_.walk) {
      size_t before = probes_.size();
      size_t members_before = probes_.Members(ProbeFamily::kWalk).size();
      size_t want = std::min(round_size, options_.walk - members_before);
      // Half of a round sweeps (record, parent) pairs: every threshold value of the parent's
      // records, put into a known answer of that parent (accepted, or a near miss) one at a time.
      if (has_boundary && !parent_slots.empty()) {
        size_t target = members_before + want / 2;
        for (size_t tries = 0; probes_.Members(ProbeFamily::kWalk).size() < target && tries < 64; ++tries) {
          if (sweep_position >= sweep_order.size()) {
            sweep_order.clear();
            for (const auto& [key, list] : by_parent) sweep_order.push_back(key);
            for (const auto& [key, list] : near_by_parent) {
              if (!by_parent.count(key)) sweep_order.push_back(key);
            }
            for (size_t k = 0; k + 1 < sweep_order.size(); ++k) {
              std::swap(sweep_order[k], sweep_order[k + rng.Below(sweep_order.size() - k)]);
            }
            sweep_position = 0;
            ++sweep_turn;
            if (sweep_order.empty()) break;
          }
          auto key = sweep_order[sweep_position++];
          auto& good = by_parent[key];
          auto& close = near_by_parent[key];
          bool use_near = !close.empty() && (good.empty() || (sweep_turn + sweep_position) % 2 == 0);
          const auto& list = use_near ? close : good;
          // Corner seeking: of a few candidates, the one holding the most boundary values already,
          // so that one more threshold value puts two thresholds at their edges at once.
          const std::vector<uint32_t>* center = &list[rng.Below(list.size())];
          size_t best = BoundaryCount(*center);
          for (int k = 0; k < 15; ++k) {
            const auto& candidate = list[rng.Below(list.size())];
            size_t count = BoundaryCount(candidate);
            if (count > best) {
              best = count;
              center = &candidate;
            }
          }
          SweepPair(key.first, key.second, *center);
        }
      }
      want -= std::min(want, probes_.Members(ProbeFamily::kWalk).size() - members_before);
      for (size_t i = 0; i < want; ++i) {
        bool from_near = !near.empty() && (accepted.empty() || rng.Chance(0.4));
        const auto& center = from_near ? near.Pick(rng) : accepted.Pick(rng);
        // A near miss sits at a rule's edge: threshold moves from it are the likeliest to land on
        // the other side of an off-by-one.
        if (has_boundary && rng.Chance(0.35)) {
          AddBoundaryProbes(*space_, boundary_, center, 1, ProbeFamily::kWalk, rng, probes_, &context);
        } else {
          AddNeighbourhoodProbes(*space_, center, 1, ProbeFamily::kWalk, rng, probes_);
        }
      }
      if (probes_.Members(ProbeFamily::kWalk).size() == members_before) break;
      std::vector<size_t> fresh;
      for (size_t i = before; i < probes_.size(); ++i) fresh.push_back(i);
      std::vector<Job> jobs;
      AppendJobs(
          probes_, fresh, options_.batch_size, lanes_.size(), lane_oracle_, [](size_t, size_t batch) { return batch; },
          jobs);
      ENVFORGE_RETURN_IF_ERROR(runner_.Run(task_.id, jobs, "walk"));
      Absorb(jobs, 0);
      if (runner_.stopped()) break;
      collect(before);
    }
    return Status::Ok();
  }

  Status Rejudge() {
    std::vector<size_t> subset;
    std::set<size_t> chosen;
    for (ProbeFamily family : {ProbeFamily::kTrivial, ProbeFamily::kMutant, ProbeFamily::kStructural}) {
      if (family != ProbeFamily::kTrivial && !options_.rejudge_mutants) continue;
      for (size_t i : probes_.Members(family)) {
        if (chosen.insert(i).second) subset.push_back(i);
      }
    }
    std::vector<size_t> others;
    for (ProbeFamily family :
         {ProbeFamily::kSpace, ProbeFamily::kNeighbourhood, ProbeFamily::kBoundary, ProbeFamily::kWalk}) {
      for (size_t i : probes_.Members(family)) {
        if (!chosen.count(i)) others.push_back(i);
      }
    }
    std::sort(others.begin(), others.end());
    others.erase(std::unique(others.begin(), others.end()), others.end());
    Rng rng(DeriveSeed(options_.seed, task_.id + "/rejudge"));
    size_t take = std::min(options_.rejudge_samples, others.size());
    for (size_t i = 0; i < take; ++i) std::swap(others[i], others[i + rng.Below(others.size() - i)]);
    others.resize(take);
    std::sort(others.begin(), others.end());
    subset.insert(subset.end(), others.begin(), others.end());
    std::erase_if(subset, [&](size_t i) { return !judged_[i].done; });

    std::vector<Job> jobs;
    size_t lanes = lanes_.size();
    AppendJobs(
        probes_, subset, options_.batch_size, lanes, lane_oracle_,
        [&](size_t index, size_t) { return judged_[index].lane + 1; }, jobs);
    ENVFORGE_RETURN_IF_ERROR(runner_.Run(task_.id, jobs, "determinism"));
    audit_.rejudged = 0;
    for (const Job& job : jobs) {
      audit_.rejudged += std::min(job.indexes.size(), job.verifier.size());
      for (size_t k = 0; k < job.indexes.size() && k < job.verifier.size(); ++k) {
        size_t index = job.indexes[k];
        const Judged& first = judged_[index];
        const Probe& probe = probes_[index];
        if (!SameVerdict(first.verifier, job.verifier[k])) {
          ++audit_.verifier_differences;
          audit_.AddFinding({"nondeterminism", probe.text, ProbeName(probe),
                             "lane " + std::to_string(first.lane) + ": " + DescribeVerdict(first.verifier) +
                                 " | lane " + std::to_string(job.lane) + ": " + DescribeVerdict(job.verifier[k])},
                            options_.max_findings_per_kind);
        }
        if (job.with_oracle && k < job.oracle.size() && first.has_oracle && !SameVerdict(first.oracle, job.oracle[k])) {
          ++audit_.oracle_differences;
          audit_.AddFinding({"oracle_nondeterminism", probe.text, ProbeName(probe),
                             "lane " + std::to_string(first.lane) + ": " + DescribeVerdict(first.oracle) + " | lane " +
                                 std::to_string(job.lane) + ": " + DescribeVerdict(job.oracle[k])},
                            options_.max_findings_per_kind);
        }
      }
    }
    return Status::Ok();
  }

  // The audit stopped early (a hang, the budget): why, and what was left unjudged.
  void RecordStop() {
    auto stop = runner_.stop_reason();
    if (!stop) return;
    audit_.stopped = stop->reason;
    audit_.stopped_detail = stop->detail;
    audit_.stopped_answer = stop->answer;
    audit_.probes_not_judged = 0;
    for (size_t i = 0; i < probes_.size(); ++i) audit_.probes_not_judged += judged_[i].done ? 0 : 1;
  }

  // Development aid (ENVFORGE_AUDIT_DUMP=FILE): every probe and its verdicts, one JSON per line.
  void DumpProbes(const std::string& path) const {
    std::FILE* out = std::fopen(path.c_str(), "a");
    if (out == nullptr) return;
    for (size_t i = 0; i < probes_.size(); ++i) {
      const Judged& entry = judged_[i];
      Json line{
          {"task", task_.id},        {"family", ProbeFamilyName(probes_[i].family)},
          {"kind", probes_[i].kind}, {"label", probes_[i].label},
          {"text", probes_[i].text}, {"verifier", entry.done ? DescribeVerdict(entry.verifier, 1) : "not judged"}};
      if (entry.has_oracle) line["oracle"] = DescribeVerdict(entry.oracle, 1);
      std::fprintf(out, "%s\n", DumpJson(line).c_str());
    }
    std::fclose(out);
  }

  void AnalyseGold() {
    if (gold_runs_[0].verifier.empty()) return;
    const std::string& gold = audit_.gold_answer;
    audit_.gold_runs = static_cast<int>(gold_runs_[0].verifier.size());
    for (const Verdict& v : gold_runs_[0].verifier) audit_.gold_passes += Accepted(v) ? 1 : 0;
    audit_.gold_runs_other_lane = static_cast<int>(gold_runs_[1].verifier.size());
    for (const Verdict& v : gold_runs_[1].verifier) audit_.gold_passes_other_lane += Accepted(v) ? 1 : 0;
    // Rejections and defects of the gold answer, and disagreement between its runs.
    const Verdict& reference = gold_runs_[0].verifier[0];
    bool reported_rejection = false, reported_difference = false, reported_oracle_difference = false;
    for (int lane = 0; lane < 2; ++lane) {
      const Job& job = gold_runs_[lane];
      for (size_t run = 0; run < job.verifier.size(); ++run) {
        const Verdict& v = job.verifier[run];
        std::string where = "gold run " + std::to_string(run + 1) + " of " + std::to_string(job.verifier.size()) +
                            " on lane " + std::to_string(job.lane);
        if (v.defect) {
          ++audit_.verifier_defects;
          audit_.AddFinding({"defect", gold, "gold", where + ": " + DescribeVerdict(v)},
                            options_.max_findings_per_kind);
        } else if (!v.passed && !reported_rejection) {
          reported_rejection = true;
          audit_.AddFinding({"gold_rejected", gold, "gold", where + ": " + DescribeVerdict(v)},
                            options_.max_findings_per_kind);
        }
        if (!SameVerdict(reference, v) && !reported_difference) {
          reported_difference = true;
          ++audit_.verifier_differences;
          audit_.AddFinding({"nondeterminism", gold, "gold",
                             "gold run 1 on lane " + std::to_string(gold_runs_[0].lane) + ": " +
                                 DescribeVerdict(reference) + " | " + where + ": " + DescribeVerdict(v)},
                            options_.max_findings_per_kind);
        }
        if (job.with_oracle && run < job.oracle.size()) {
          const Verdict& o = job.oracle[run];
          if (o.defect) {
            ++audit_.oracle_defects;
            audit_.AddFinding({"oracle_defect", gold, "gold", where + ": " + DescribeVerdict(o)},
                              options_.max_findings_per_kind);
          }
          if (!gold_runs_[0].oracle.empty() && !SameVerdict(gold_runs_[0].oracle[0], o) &&
              !reported_oracle_difference) {
            reported_oracle_difference = true;
            ++audit_.oracle_differences;
            audit_.AddFinding({"oracle_nondeterminism", gold, "gold",
                               "oracle run 1: " + DescribeVerdict(gold_runs_[0].oracle[0]) + " | " + where + ": " +
                                   DescribeVerdict(o)},
                              options_.max_findings_per_kind);
          }
        }
      }
    }
    // The gold answer against the oracle (first run of each).
    if (gold_runs_[0].with_oracle && !gold_runs_[0].oracle.empty() && !reference.defect &&
        !gold_runs_[0].oracle[0].defect) {
      const Verdict& o = gold_runs_[0].oracle[0];
      ++audit_.compared;
      if (o.passed) {
        ++audit_.oracle_accepts;
        if (!reference.passed) ++audit_.false_rejects;
      } else {
        ++audit_.oracle_rejects;
        if (reference.passed) {
          ++audit_.false_accepts;
          audit_.AddFinding({"false_accept", gold, "gold", "verifier passed; oracle " + DescribeVerdict(o, 3)},
                            options_.max_findings_per_kind);
        }
      }
      if (o.passed && !reference.passed) {
        audit_.AddFinding({"false_reject", gold, "gold", "oracle passed; verifier " + DescribeVerdict(reference, 3)},
                          options_.max_findings_per_kind);
      }
    }
  }

  void Analyse() {
    AnalyseGold();
    size_t cap = options_.max_findings_per_kind;
    if (search_ != nullptr) {
      for (Finding& finding : SearchKeyFindings(*search_)) audit_.AddFinding(std::move(finding), cap);
    }
    std::set<size_t> accepted_texts;
    for (size_t i = 0; i < probes_.size(); ++i) {
      const Judged& entry = judged_[i];
      if (!entry.done) continue;
      const Probe& probe = probes_[i];
      const Verdict& v = entry.verifier;
      bool trivial = probes_.IsMember(i, ProbeFamily::kTrivial);
      if (v.defect) {
        ++audit_.verifier_defects;
        audit_.AddFinding({"defect", probe.text, ProbeName(probe), DescribeVerdict(v)}, cap);
      }
      if (entry.has_oracle && entry.oracle.defect) {
        ++audit_.oracle_defects;
        audit_.AddFinding({"oracle_defect", probe.text, ProbeName(probe), DescribeVerdict(entry.oracle)}, cap);
      }
      if (Accepted(v) && !trivial) accepted_texts.insert(i);
      if (trivial && Accepted(v)) {
        audit_.AddFinding({"trivial_accept", probe.text, ProbeName(probe), "verifier " + DescribeVerdict(v)}, cap);
      }
      if (trivial && entry.has_oracle && Accepted(entry.oracle)) {
        audit_.AddFinding(
            {"oracle_trivial_accept", probe.text, ProbeName(probe), "oracle " + DescribeVerdict(entry.oracle)}, cap);
      }
      if (entry.has_oracle && !v.defect && !entry.oracle.defect) {
        ++audit_.compared;
        if (entry.oracle.passed) {
          ++audit_.oracle_accepts;
          if (!v.passed) {
            ++audit_.false_rejects;
            audit_.AddFinding(
                {"false_reject", probe.text, ProbeName(probe), "oracle passed; verifier " + DescribeVerdict(v, 3)},
                cap);
          }
        } else {
          ++audit_.oracle_rejects;
          if (v.passed) {
            ++audit_.false_accepts;
            audit_.AddFinding({"false_accept", probe.text, ProbeName(probe),
                               "verifier passed; oracle " + DescribeVerdict(entry.oracle, 3)},
                              cap);
          }
        }
      }
      if (Accepted(v) && !trivial && !compiled_.Validate(EffectiveAnswer(probe.text), 1).empty()) {
        audit_.AddFinding({"schema_violation_accepted", probe.text, ProbeName(probe),
                           "violates the answer schema: " +
                               toolsets::DescribeViolations(compiled_.Validate(EffectiveAnswer(probe.text), 2))},
                          cap);
      }
      if (!audit_.has_oracle && Accepted(v) &&
          (probes_.IsMember(i, ProbeFamily::kMutant) || probes_.IsMember(i, ProbeFamily::kStructural))) {
        audit_.AddFinding({"accepted_mutant", probe.text, ProbeName(probe), "verifier passed; no oracle to decide"},
                          cap);
      }
    }
    auto family_stats = [&](ProbeFamily family, FamilyStats& stats) {
      for (size_t i : probes_.Members(family)) {
        const Judged& entry = judged_[i];
        if (!entry.done) continue;
        ++stats.judged;
        if (Accepted(entry.verifier)) ++stats.accepted;
        if (entry.has_oracle && Accepted(entry.oracle)) ++stats.oracle_accepted;
      }
    };
    family_stats(ProbeFamily::kTrivial, audit_.trivial);
    family_stats(ProbeFamily::kSpace, audit_.space);
    family_stats(ProbeFamily::kNeighbourhood, audit_.neighbourhood);
    family_stats(ProbeFamily::kBoundary, audit_.boundary);
    family_stats(ProbeFamily::kWalk, audit_.walk);
    family_stats(ProbeFamily::kMutant, audit_.mutants);
    family_stats(ProbeFamily::kStructural, audit_.structural);
    audit_.trivial_probes = audit_.trivial.judged;
    for (size_t i : probes_.Members(ProbeFamily::kTrivial)) {
      if (judged_[i].done && !judged_[i].verifier.defect && !judged_[i].verifier.passed) ++audit_.trivial_failed;
    }
    bool gold_among = false;
    if (!audit_.gold_answer.empty()) {
      for (const std::string& text : {audit_.gold_answer, DumpJson(gold_json_)}) {
        if (auto index = probes_.Find(text)) gold_among = gold_among || accepted_texts.count(*index) > 0;
      }
    }
    audit_.distinct_accepted = accepted_texts.size() + (audit_.gold_passes > 0 && !gold_among ? 1 : 0);

    // Ignored fields (no oracle): every other value of a slot accepted as a single-field mutant.
    if (!audit_.has_oracle && space_ && space_->template_is_gold()) {
      std::vector<uint32_t> base = space_->TemplateChoice();
      for (size_t s = 0; s < space_->slots().size(); ++s) {
        const Domain& domain = space_->domain_of(space_->slots()[s]);
        if (domain.values.size() < 3 || domain.values.size() - 1 > options_.max_values_per_slot) continue;
        size_t tried = 0, accepted = 0;
        std::string example;
        for (uint32_t v = 0; v < domain.values.size(); ++v) {
          if (v == base[s]) continue;
          std::vector<uint32_t> choice = base;
          choice[s] = v;
          auto index = probes_.Find(DumpJson(space_->Make(choice)));
          if (!index || !judged_[*index].done) continue;
          ++tried;
          if (Accepted(judged_[*index].verifier)) {
            ++accepted;
            if (example.empty()) example = probes_[*index].text;
          }
        }
        if (tried >= 2 && accepted == tried) {
          audit_.AddFinding({"ignored_field", example, "mutant.replace " + space_->slots()[s].pointer,
                             "all " + std::to_string(tried) + " other values of " + space_->slots()[s].pointer + " (" +
                                 domain.source + ") were accepted"},
                            cap);
        }
      }
    }
  }

  const sandbox::TaskRecord& task_;
  Database& db_;
  Runner& runner_;
  const std::vector<JudgeLane*>& lanes_;
  const AuditOptions& options_;
  const SearchTaskFacts* search_;
  bool lane_oracle_ = false;
  toolsets::CompiledSchema compiled_;
  TaskAudit audit_;
  Json gold_json_ = nullptr;
  std::optional<AnswerSpace> space_;
  BoundaryValues boundary_;
  std::vector<std::unordered_set<uint32_t>> boundary_sets_;
  ProbeSet probes_;
  std::vector<Judged> judged_;
  Job gold_runs_[2];
};

Status CheckOptions(const AuditOptions& options) {
  if (options.k < 1) return InvalidArgumentError("audit: k must be at least 1");
  if (options.batch_size < 1) return InvalidArgumentError("audit: batch size must be at least 1");
  if (options.loose_rate < 0 || options.loose_rate > 1)
    return InvalidArgumentError("audit: loose rate must be in [0, 1]");
  if (options.task_budget.count() <= 0) return InvalidArgumentError("audit: the task budget must be positive");
  return Status::Ok();
}

std::string Iso8601Now() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

}  // namespace

void TaskAudit::AddFinding(Finding finding, size_t cap) {
  size_t& count = finding_counts[finding.kind];
  if (count < cap) findings.push_back(std::move(finding));
  ++count;
}

size_t TaskAudit::Count(const std::string& kind) const {
  auto it = finding_counts.find(kind);
  return it == finding_counts.end() ? 0 : it->second;
}

void ComputeVerdict(TaskAudit& audit, const AuditOptions& options) {
  std::vector<std::string> broken, suspect;
  auto count_text = [](size_t n, const std::string& what) { return std::to_string(n) + " " + what; };
  if (!audit.stopped.empty()) {
    broken.push_back(audit.stopped + ": " + audit.stopped_detail + "; the audit stopped there (" +
                     std::to_string(audit.probes_not_judged) + " probe(s) not judged, walk and determinism skipped)");
  }
  if (audit.Count("gold_failed")) broken.push_back("the gold solution failed: " + audit.gold_error);
  if (audit.Count("gold_rejected")) {
    broken.push_back("the verifier rejected the gold answer (" + std::to_string(audit.gold_passes) + "/" +
                     std::to_string(audit.gold_runs) + " passes on lane 0, " +
                     std::to_string(audit.gold_passes_other_lane) + "/" + std::to_string(audit.gold_runs_other_lane) +
                     " on lane 1)");
  }
  if (audit.Count("defect")) broken.push_back(count_text(audit.Count("defect"), "verifier defect(s)"));
  if (audit.Count("nondeterminism"))
    broken.push_back(count_text(audit.Count("nondeterminism"), "nondeterministic verdict(s)"));
  if (audit.false_accepts) broken.push_back(count_text(audit.false_accepts, "false accept(s) against the oracle"));
  if (audit.false_rejects) broken.push_back(count_text(audit.false_rejects, "false reject(s) against the oracle"));
  if (audit.Count("trivial_accept"))
    broken.push_back(count_text(audit.Count("trivial_accept"), "trivial probe(s) accepted"));
  if (audit.Count("schema_defect")) broken.push_back("invalid answer-schema domain annotation: " + audit.space_error);
  if (audit.Count("solution_path_failed")) {
    broken.push_back("the recorded solution path does not find the answer: " + [&] {
      for (const Finding& finding : audit.findings) {
        if (finding.kind == "solution_path_failed") return finding.detail;
      }
      return std::string();
    }());
  }
  if (audit.Count("answer_in_prompt")) suspect.push_back("the prompt contains an answer the key accepts");

  if (audit.Count("oracle_defect")) suspect.push_back(count_text(audit.Count("oracle_defect"), "oracle defect(s)"));
  if (audit.Count("oracle_nondeterminism")) {
    suspect.push_back(count_text(audit.Count("oracle_nondeterminism"), "nondeterministic oracle verdict(s)"));
  }
  if (audit.Count("oracle_trivial_accept")) {
    suspect.push_back(count_text(audit.Count("oracle_trivial_accept"), "trivial probe(s) accepted by the oracle"));
  }
  if (!audit.has_oracle) {
    bool measurable = audit.space.judged >= 2 && (audit.space_size >= 2 || audit.space_size_saturated);
    if (measurable && audit.AcceptanceRate() > options.loose_rate) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.1f%%", 100.0 * audit.AcceptanceRate());
      suspect.push_back(std::string("loose: accepts ") + rate + " of the answer space");
      audit.finding_counts["loose"] += 1;
    }
    if (audit.Count("schema_violation_accepted")) {
      suspect.push_back(
          count_text(audit.Count("schema_violation_accepted"), "accepted answer(s) violating the answer schema"));
    }
    if (audit.Count("ignored_field")) suspect.push_back(count_text(audit.Count("ignored_field"), "ignored field(s)"));
  }
  if (!broken.empty()) {
    audit.verdict = "broken";
    audit.verdict_reasons = std::move(broken);
    audit.verdict_reasons.insert(audit.verdict_reasons.end(), suspect.begin(), suspect.end());
  } else if (!suspect.empty()) {
    audit.verdict = "suspect";
    audit.verdict_reasons = std::move(suspect);
  } else {
    audit.verdict = "sound";
    audit.verdict_reasons.clear();
  }
}

bool AuditReport::AnyBroken() const {
  return std::any_of(tasks.begin(), tasks.end(), [](const TaskAudit& task) { return task.verdict == "broken"; });
}

Result<AuditReport> RunAudit(const sandbox::EnvBundle& bundle, const std::vector<JudgeLane*>& lanes,
                             const AuditOptions& options,
                             const std::function<void(const AuditProgress&)>& on_progress) {
  ENVFORGE_RETURN_IF_ERROR(CheckOptions(options));
  if (lanes.empty()) return InvalidArgumentError("audit: at least one lane is needed");
  std::vector<const sandbox::TaskRecord*> tasks;
  if (options.tasks.empty()) {
    for (const auto& task : bundle.tasks) tasks.push_back(&task);
  } else {
    for (const auto& id : options.tasks) {
      const sandbox::TaskRecord* task = bundle.FindTask(id);
      if (task == nullptr) return NotFoundError("no task '" + id + "' in " + bundle.path);
      tasks.push_back(task);
    }
  }
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenBundleForDomains(bundle.path));
  std::map<std::string, SearchTaskFacts> search_facts;
  if (bundle.manifest.kind == "search") {
    ENVFORGE_ASSIGN_OR_RETURN(search_facts, LoadSearchTaskFacts(bundle));
  }
  AuditReport report;
  report.path = bundle.path;
  report.env_name = bundle.manifest.name;
  report.content_hash = bundle.manifest.content_hash;
  report.options = options;
  auto start = Clock::now();
  AuditProgress progress;
  progress.tasks_total = tasks.size();
  Runner runner(lanes, on_progress, &progress, start);
  for (const sandbox::TaskRecord* task : tasks) {
    progress.task = task->id;
    auto facts = search_facts.find(task->id);
    TaskAuditor auditor(*task, db, runner, lanes, options, facts == search_facts.end() ? nullptr : &facts->second);
    ENVFORGE_ASSIGN_OR_RETURN(TaskAudit audit, auditor.Run(progress));
    report.probes += audit.probes;
    report.tasks.push_back(std::move(audit));
    ++progress.tasks_done;
    runner.Report();
  }
  report.judgements = runner.judgements();
  report.seconds = SecondsSince(start);
  return report;
}

Json StoredAudit(const TaskAudit& audit, const AuditOptions& options) {
  Json stored = audit.ToJson();
  stored["verifier_version"] = audit.verifier_version;
  stored["audited_at"] = Iso8601Now();
  stored["options"] = {{"k", options.k},
                       {"max_enumerate", options.max_enumerate},
                       {"samples", options.samples},
                       {"neighbourhood", options.neighbourhood},
                       {"boundary", options.boundary},
                       {"walk", options.walk},
                       {"seed", options.seed},
                       {"task_budget_seconds", static_cast<double>(options.task_budget.count()) / 1000.0}};
  return stored;
}

}  // namespace envforge::verifiers
