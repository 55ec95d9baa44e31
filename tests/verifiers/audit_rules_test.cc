// The audit's rules with C++ judges behind the JudgeLane seam (no sessions): each faulty judge is
// caught with the answer that exposes it, and the verdict rules of verifiers/audit.h hold.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>

#include "tests/verifiers/audit_test_util.h"
#include "tests/verifiers/hotel_db.h"
#include "verifiers/audit.h"
#include "verifiers/probes.h"

namespace envforge::verifiers {
namespace {

using testing::FindingsOf;
using testing::TempDir;

// The task: "the cheapest hotel in Paris costing under 100": only P-Cheap.
struct HotelRow {
  std::string city;
  int price;
};
const std::map<std::string, HotelRow>& Hotels() {
  static const std::map<std::string, HotelRow> hotels = {
      {"P-Cheap", {"Paris", 80}}, {"P-Edge", {"Paris", 100}}, {"P-Lux", {"Paris", 300}},
      {"R-Cheap", {"Rome", 50}},  {"R-Mid", {"Rome", 150}},   {"O-One", {"Oslo", 90}},
  };
  return hotels;
}

Verdict Pass(bool passed, std::string reason = "") {
  Verdict v;
  v.passed = passed;
  v.score = passed ? 1.0 : 0.0;
  if (!reason.empty()) v.reasons.push_back(std::move(reason));
  return v;
}

Verdict Defect(std::string message) {
  Verdict v;
  v.defect = true;
  v.defect_message = std::move(message);
  return v;
}

struct Call {
  const Json& answer;
  size_t lane;
  size_t position;  // within its batch
};
using JudgeFn = std::function<Verdict(const Call&)>;

// Configurable checks: the correct judge has every one on.
struct Checks {
  bool city = true;
  int max_price_exclusive = 100;
  bool price_inclusive = false;
};

Verdict CheckHotel(const Call& call, Checks checks = {}) {
  const Json& a = call.answer;
  if (!a.is_object() || a.size() != 1 || !a.contains("hotel") || !a["hotel"].is_string()) return Pass(false, "shape");
  auto it = Hotels().find(a["hotel"].get<std::string>());
  if (it == Hotels().end()) return Pass(false, "unknown hotel");
  if (checks.city && it->second.city != "Paris") return Pass(false, "not in Paris");
  bool cheap = checks.price_inclusive ? it->second.price <= checks.max_price_exclusive
                                      : it->second.price < checks.max_price_exclusive;
  return Pass(cheap, cheap ? "" : "too expensive");
}

class FakeLane : public JudgeLane {
 public:
  FakeLane(size_t index, JudgeFn verifier, JudgeFn oracle, Result<std::string> gold)
      : index_(index), verifier_(std::move(verifier)), oracle_(std::move(oracle)), gold_(std::move(gold)) {}
  Result<std::string> SolveGold(const std::string&) override { return gold_; }
  Result<std::vector<Verdict>> Judge(const std::string&, JudgeKind judge,
                                     const std::vector<std::string>& answers) override {
    if (judge == JudgeKind::kOracle && !oracle_) return FailedPreconditionError("no oracle");
    if (fail_with) return *fail_with;
    calls.fetch_add(1);
    for (size_t seen = largest_call.load();
         answers.size() > seen && !largest_call.compare_exchange_weak(seen, answers.size());) {
    }
    std::vector<Verdict> verdicts;
    for (size_t k = 0; k < answers.size(); ++k) {
      Json answer = EffectiveAnswer(answers[k]);
      Call call{answer, index_, k};
      if (judge == JudgeKind::kVerifier && verifier_hangs_on && verifier_hangs_on(answer)) {
        // JudgeLane's HANG contract: the verdicts so far, the hang's defect last, nothing after.
        Verdict hang = Defect("the verifier of task 'cheap_paris' never returned within its wall-time limit");
        hang.limit = "wall_time";
        verdicts.push_back(hang);
        return verdicts;
      }
      verdicts.push_back(judge == JudgeKind::kOracle ? oracle_(call) : verifier_(call));
    }
    return verdicts;
  }
  std::chrono::milliseconds CallDeadline(size_t answers) const override {
    return per_answer_deadline * static_cast<int64_t>(answers);
  }
  std::optional<Status> fail_with;
  std::function<bool(const Json&)> verifier_hangs_on;  // the verifier never returns on these
  std::chrono::milliseconds per_answer_deadline{0};    // 0: an unbounded lane
  std::atomic<size_t> calls{0};
  std::atomic<size_t> largest_call{0};

 private:
  size_t index_;
  JudgeFn verifier_, oracle_;
  Result<std::string> gold_;
};

struct Harness {
  TempDir dir;
  sandbox::EnvBundle bundle;
  std::vector<std::unique_ptr<FakeLane>> owned;
  std::vector<JudgeLane*> lanes;

  Harness(JudgeFn verifier, JudgeFn oracle, Result<std::string> gold = std::string(R"({"hotel": "P-Cheap"})")) {
    bundle.path = dir / "hotels.db";
    testing::WriteHotelDb(bundle.path);
    sandbox::TaskRecord task;
    task.id = "cheap_paris";
    task.prompt = "The hotel in Paris under 100.";
    task.answer_schema = testing::OneHotelSchema();
    task.verifier_source = "(C++)";
    task.oracle_source = oracle ? "(C++)" : "";
    task.version = "v1";
    bundle.tasks.push_back(task);
    for (size_t i = 0; i < 2; ++i) {
      owned.push_back(std::make_unique<FakeLane>(i, verifier, oracle, gold));
      lanes.push_back(owned.back().get());
    }
  }

  TaskAudit Run(AuditOptions options = {}) {
    options.max_findings_per_kind = 1000;
    auto report = RunAudit(bundle, lanes, options);
    REQUIRE_MESSAGE(report.ok(), report.status().ToString());
    REQUIRE(report->tasks.size() == 1);
    last_report = report->ToJson();
    return report->tasks[0];
  }
  FakeLane& lane(size_t i) { return *owned[i]; }
  Json last_report;
};

bool HasAnswer(const std::vector<const Finding*>& findings, const Json& answer) {
  for (const Finding* finding : findings) {
    if (testing::AnswerJson(finding->answer) == answer) return true;
  }
  return false;
}

const JudgeFn kCorrect = [](const Call& call) { return CheckHotel(call); };

TEST_SUITE("verifiers.audit_rules") {
  TEST_CASE("a correct verifier with a correct oracle is sound over the enumerated space") {
    Harness harness(kCorrect, kCorrect);
    TaskAudit audit = harness.Run();
    CHECK(audit.verdict == "sound");
    CHECK(audit.verdict_reasons.empty());
    CHECK(audit.gold_passes == 5);
    CHECK(audit.gold_runs == 5);
    CHECK(audit.gold_passes_other_lane == 5);
    CHECK(audit.trivial_probes > 20);
    CHECK(audit.trivial_failed == audit.trivial_probes);
    CHECK(audit.space_mode == "enumerated");
    CHECK(audit.space.judged == 6);
    CHECK(audit.space.accepted == 1);
    CHECK(audit.false_accepts == 0);
    CHECK(audit.false_rejects == 0);
    CHECK(audit.oracle_rejects > 20);
    CHECK(audit.rejudged > 0);
    CHECK(audit.verifier_differences == 0);
    CHECK(audit.distinct_accepted == 1);
    CHECK(audit.findings.empty());
    Json json = audit.ToJson();
    CHECK(json["verdict"] == "sound");
    CHECK(json["oracle"]["false_accept_rate"] == 0.0);
    CHECK(json["answer_space"]["mode"] == "enumerated");
  }

  TEST_CASE("a verifier that skips the city check is broken; the false accepts name the hotels of other cities") {
    Harness harness([](const Call& call) { return CheckHotel(call, {.city = false}); }, kCorrect);
    TaskAudit audit = harness.Run();
    CHECK(audit.verdict == "broken");
    auto accepts = FindingsOf(audit, "false_accept");
    CHECK(HasAnswer(accepts, Json{{"hotel", "R-Cheap"}}));
    CHECK(HasAnswer(accepts, Json{{"hotel", "O-One"}}));
    CHECK_FALSE(HasAnswer(accepts, Json{{"hotel", "P-Edge"}}));
    CHECK(audit.false_rejects == 0);
  }

  TEST_CASE("an off-by-one threshold (<= instead of <) is broken; the false accept is the hotel at exactly 100") {
    Harness harness([](const Call& call) { return CheckHotel(call, {.price_inclusive = true}); }, kCorrect);
    TaskAudit audit = harness.Run();
    CHECK(audit.verdict == "broken");
    auto accepts = FindingsOf(audit, "false_accept");
    REQUIRE(accepts.size() == 1);
    CHECK(testing::AnswerJson(accepts[0]->answer) == Json{{"hotel", "P-Edge"}});
    CHECK(accepts[0]->detail.find("oracle failed") != std::string::npos);
  }

  TEST_CASE("a verifier that differs between processes is broken: nondeterminism names the answer") {
    // Lane 1 (the other zygote) flips its verdict on P-Lux.
    Harness harness(
        [](const Call& call) {
          Verdict v = CheckHotel(call);
          if (call.lane == 1 && call.answer.is_object() && call.answer.contains("hotel") &&
              call.answer["hotel"] == "P-Lux") {
            v = Pass(true);
          }
          return v;
        },
        nullptr);
    TaskAudit audit = harness.Run();
    CHECK(audit.verdict == "broken");
    auto differences = FindingsOf(audit, "nondeterminism");
    REQUIRE_FALSE(differences.empty());
    CHECK(HasAnswer(differences, Json{{"hotel", "P-Lux"}}));
    CHECK_FALSE(audit.deterministic());
  }

  TEST_CASE("a verifier whose verdict drifts within a batch fails the gold runs") {
    Harness harness(
        [](const Call& call) {
          Verdict v = CheckHotel(call);
          if (call.position == 2) v = Pass(false, "third call of the batch");
          return v;
        },
        kCorrect);
    TaskAudit audit = harness.Run();
    CHECK(audit.verdict == "broken");
    CHECK(audit.gold_passes == 4);
    CHECK(audit.Count("gold_rejected") == 1);
    auto differences = FindingsOf(audit, "nondeterminism");
    REQUIRE_FALSE(differences.empty());
    CHECK(HasAnswer(differences, Json{{"hotel", "P-Cheap"}}));
  }

  TEST_CASE("a verifier that raises on null is broken with a defect naming the answer null") {
    Harness harness(
        [](const Call& call) {
          if (call.answer.is_null()) return Defect("the verifier of task 'cheap_paris' raised TypeError");
          return CheckHotel(call);
        },
        kCorrect);
    TaskAudit audit = harness.Run();
    CHECK(audit.verdict == "broken");
    auto defects = FindingsOf(audit, "defect");
    REQUIRE_FALSE(defects.empty());
    bool null_named = false;
    for (const Finding* finding : defects) null_named = null_named || finding->answer == "null";
    CHECK(null_named);
    CHECK(audit.verifier_defects >= 1);
    CHECK(audit.false_accepts == 0);  // a defect is never counted as a fail
  }

  TEST_CASE("a verifier that accepts every object accepts trivial probes and is broken") {
    Harness harness([](const Call& call) { return Pass(call.answer.is_object()); }, kCorrect);
    TaskAudit audit = harness.Run();
    CHECK(audit.verdict == "broken");
    CHECK(audit.Count("trivial_accept") > 0);
    CHECK(HasAnswer(FindingsOf(audit, "trivial_accept"), Json::object()));
  }

  TEST_CASE("without an oracle, a verifier that ignores the price is suspect: loose, an ignored field") {
    Harness harness([](const Call& call) { return CheckHotel(call, {.city = false, .max_price_exclusive = 1000}); },
                    nullptr);
    TaskAudit audit = harness.Run();
    CHECK(audit.verdict == "suspect");
    CHECK(audit.AcceptanceRate() == 1.0);
    CHECK(audit.Count("ignored_field") == 1);
    CHECK(audit.Count("accepted_mutant") >= 5);
    bool loose = false;
    for (const auto& reason : audit.verdict_reasons) loose = loose || reason.find("loose") != std::string::npos;
    CHECK(loose);
  }

  TEST_CASE("a correct verifier with an unreliable oracle is suspect") {
    Harness harness(kCorrect, [](const Call& call) {
      if (call.answer.is_array()) return Defect("the oracle raised IndexError");
      return CheckHotel(call);
    });
    TaskAudit audit = harness.Run();
    CHECK(audit.verdict == "suspect");
    CHECK(audit.oracle_defects > 0);
    CHECK(audit.false_accepts == 0);
  }

  TEST_CASE("a rejected gold answer and a failing gold solution are broken") {
    SUBCASE("rejected") {
      Harness harness([](const Call& call) { return CheckHotel(call, {.max_price_exclusive = 60}); }, kCorrect);
      TaskAudit audit = harness.Run();
      CHECK(audit.verdict == "broken");
      CHECK(audit.gold_passes == 0);
      CHECK(audit.Count("gold_rejected") == 1);
      CHECK(HasAnswer(FindingsOf(audit, "false_reject"), Json{{"hotel", "P-Cheap"}}));
    }
    SUBCASE("solution failed") {
      Harness harness(kCorrect, kCorrect, FailedPreconditionError("gold solution failed: raised KeyError"));
      TaskAudit audit = harness.Run();
      CHECK(audit.verdict == "broken");
      CHECK(audit.Count("gold_failed") == 1);
      CHECK(audit.gold_error.find("KeyError") != std::string::npos);
      CHECK(audit.trivial_probes > 10);  // the rest of the audit still ran
      CHECK(audit.space_mode == "enumerated");
    }
  }

  TEST_CASE("infrastructure errors, unknown tasks and bad options are errors, not verdicts") {
    Harness harness(kCorrect, kCorrect);
    static_cast<FakeLane*>(harness.lanes[1])->fail_with = InternalError("worker vanished");
    auto report = RunAudit(harness.bundle, harness.lanes, {});
    REQUIRE_FALSE(report.ok());
    CHECK(report.status().message().find("worker vanished") != std::string::npos);

    AuditOptions unknown;
    unknown.tasks = {"no_such_task"};
    CHECK(RunAudit(harness.bundle, harness.lanes, unknown).status().code() == StatusCode::kNotFound);
    AuditOptions bad;
    bad.k = 0;
    CHECK(RunAudit(harness.bundle, harness.lanes, bad).status().code() == StatusCode::kInvalidArgument);
    CHECK(RunAudit(harness.bundle, {}, {}).status().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("a verifier that hangs stops the task's audit at once: broken (hang), naming the answer") {
    Harness harness(kCorrect, kCorrect);
    for (size_t i = 0; i < 2; ++i)
      harness.lane(i).verifier_hangs_on = [](const Json& answer) { return answer.is_null(); };
    TaskAudit audit = harness.Run();
    CHECK(audit.verdict == "broken");
    CHECK(audit.stopped == "hang");
    CHECK(audit.stopped_answer == "null");
    CHECK(audit.stopped_detail.find("never returned within its wall-time limit") != std::string::npos);
    REQUIRE_FALSE(audit.verdict_reasons.empty());
    CHECK(audit.verdict_reasons[0].rfind("hang: ", 0) == 0);
    CHECK(audit.verdict_reasons[0].find("probe(s) not judged") != std::string::npos);
    CHECK(audit.gold_passes == 5);       // judged before the hang
    CHECK(audit.probes_not_judged > 0);  // the probes after it were skipped...
    CHECK(audit.probes_not_judged < audit.probes);
    CHECK(audit.walk.judged == 0);  // ...and the walk and the re-judge
    CHECK(audit.rejudged == 0);
    CHECK(HasAnswer(FindingsOf(audit, "defect"), Json(nullptr)));
    Json json = audit.ToJson();
    CHECK(json["stopped"]["reason"] == "hang");
    CHECK(json["stopped"]["answer"] == "null");
    CHECK(json["stopped"]["probes_not_judged"] == audit.probes_not_judged);
    CHECK(harness.last_report["stopped"] == Json::array({"cheap_paris"}));
    CHECK(harness.last_report["tasks"][0]["stopped"]["budget_seconds"] == 600.0);

    // Without the hang, the same audit runs to its end.
    Harness fine(kCorrect, kCorrect);
    TaskAudit complete = fine.Run();
    CHECK(complete.stopped.empty());
    CHECK(complete.probes_not_judged == 0);
    CHECK(complete.ToJson()["stopped"].is_null());
  }

  TEST_CASE("judge calls are sized to the task budget, and a budget too small for one call stops the audit") {
    SUBCASE("sized") {
      // One minute of budget, one second of hard deadline per answer: no call may hold more than the
      // answers whose deadline, with one more answer to confirm a hang, fits in what is left.
      Harness harness(kCorrect, kCorrect);
      for (size_t i = 0; i < 2; ++i) harness.lane(i).per_answer_deadline = std::chrono::seconds(1);
      AuditOptions options;
      options.task_budget = std::chrono::seconds(60);
      TaskAudit audit = harness.Run(options);
      CHECK(audit.verdict == "sound");
      CHECK(audit.stopped.empty());
      for (size_t i = 0; i < 2; ++i) {
        CHECK(harness.lane(i).largest_call.load() <= 59);
        CHECK(harness.lane(i).largest_call.load() >= 50);  // the batches of 256 were cut, not starved
      }
    }
    SUBCASE("spent") {
      Harness harness(kCorrect, kCorrect);
      for (size_t i = 0; i < 2; ++i) harness.lane(i).per_answer_deadline = std::chrono::hours(1);
      TaskAudit audit = harness.Run();  // ten minutes: not one answer fits
      CHECK(audit.verdict == "broken");
      CHECK(audit.stopped == "budget");
      CHECK(audit.stopped_detail.find("the audit budget of 600 s per task (--task-budget-seconds) was spent") !=
            std::string::npos);
      CHECK(audit.probes_not_judged == audit.probes);
      CHECK(audit.gold_runs == 0);
      CHECK(harness.lane(0).calls.load() + harness.lane(1).calls.load() == 0);
      CHECK(audit.verdict_reasons[0].rfind("budget: ", 0) == 0);
    }
    AuditOptions bad;
    bad.task_budget = std::chrono::milliseconds(0);
    Harness harness(kCorrect, kCorrect);
    CHECK(RunAudit(harness.bundle, harness.lanes, bad).status().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("verdict rules: broken outranks suspect, findings are capped per kind with full counts") {
    AuditOptions options;
    TaskAudit audit;
    audit.has_oracle = true;
    ComputeVerdict(audit, options);
    CHECK(audit.verdict == "sound");
    audit.AddFinding({"oracle_trivial_accept", "{}", "trivial", ""}, 2);
    ComputeVerdict(audit, options);
    CHECK(audit.verdict == "suspect");
    for (int i = 0; i < 5; ++i) audit.AddFinding({"false_accept", std::to_string(i), "mutant", ""}, 2);
    audit.false_accepts = 5;
    ComputeVerdict(audit, options);
    CHECK(audit.verdict == "broken");
    CHECK(audit.verdict_reasons.size() == 2);
    CHECK(audit.Count("false_accept") == 5);
    CHECK(FindingsOf(audit, "false_accept").size() == 2);

    TaskAudit stopped;
    stopped.has_oracle = true;
    stopped.stopped = "hang";
    stopped.stopped_detail = "the verifier never returned";
    ComputeVerdict(stopped, options);
    CHECK(stopped.verdict == "broken");
    CHECK(stopped.verdict_reasons.size() == 1);

    TaskAudit no_oracle;
    no_oracle.space.judged = 10;
    no_oracle.space.accepted = 6;
    no_oracle.space_size = 10;
    ComputeVerdict(no_oracle, options);
    CHECK(no_oracle.verdict == "suspect");
    no_oracle.space.accepted = 5;  // exactly 50% is not loose
    no_oracle.finding_counts.clear();
    ComputeVerdict(no_oracle, options);
    CHECK(no_oracle.verdict == "sound");
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::verifiers
