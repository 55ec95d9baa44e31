// The audit on real bundles in real sandbox sessions: the reference trip environment comes out
// sound with 0 false accepts and 0 false rejects; results are stored in _tasks.audit without
// touching the content hash; hanging and non-verdict verifiers are defects; the CLI.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "base/fd.h"
#include "base/subprocess.h"
#include "tests/verifiers/audit_test_util.h"
#include "tests/run_envforge.h"

namespace envforge::verifiers {
namespace {

namespace fs = std::filesystem;
using testing::FindingsOf;
using testing::TempDir;

// One packed reference bundle for the suite.
const std::string& TripBundle() {
  static TempDir dir;
  static std::string path = testing::Pack(testing::TripSource().string(), dir / "trip.envdb");
  return path;
}

// A copy of the trip environment whose task `task` has `verifier` as its verifier.py, packed.
std::string PackWithVerifier(const TempDir& dir, const std::string& task, const std::string& verifier_path) {
  std::string source = testing::CopyTrip(dir);
  testing::WriteText(source + "/tasks/" + task + "/verifier.py", testing::ReadText(verifier_path));
  return testing::Pack(source, dir / "faulty.envdb");
}

TEST_SUITE("verifiers.audit_trip") {
  TEST_CASE("every reference trip task is sound: 0 false accepts and 0 false rejects against its oracle" *
            doctest::timeout(120)) {
    testing::SessionLanes lanes(TripBundle());
    AuditReport report = testing::Audit(TripBundle(), lanes.lanes, testing::SmallOptions());
    REQUIRE(report.tasks.size() == 4);
    for (const TaskAudit& task : report.tasks) {
      CAPTURE(task.id);
      INFO(DumpJson(task.ToJson()["finding_counts"]));
      CHECK(task.verdict == "sound");
      CHECK(task.has_oracle);
      CHECK(task.gold_error.empty());
      CHECK(task.gold_passes == 5);
      CHECK(task.gold_passes_other_lane == 5);
      CHECK(task.trivial_probes > 40);
      CHECK(task.trivial_failed == task.trivial_probes);
      CHECK(task.false_accepts == 0);
      CHECK(task.false_rejects == 0);
      CHECK(task.compared > 300);
      CHECK(task.oracle_accepts >= 1);
      CHECK(task.verifier_defects == 0);
      CHECK(task.oracle_defects == 0);
      CHECK(task.rejudged > 100);
      CHECK(task.verifier_differences == 0);
      CHECK(task.oracle_differences == 0);
      CHECK(task.findings.empty());
      CHECK(task.mutants.judged > 100);
      CHECK(task.structural.judged > 5);
      if (task.id == "cheapest_rated_hotel") {
        // 241 hotels: the whole space is enumerated, and exactly one answer is right.
        CHECK(task.space_mode == "enumerated");
        CHECK(task.space.judged == 241);
        CHECK(task.space.accepted == 1);
        CHECK(task.distinct_accepted == 1);
      } else {
        CHECK(task.space_mode == "sampled");
        CHECK(task.space.judged == testing::SmallOptions().samples);
        CHECK(task.distinct_accepted > 10);  // many valid plans, found around the gold answer
      }
    }
    CHECK_FALSE(report.AnyBroken());
    Json json = report.ToJson();
    CHECK(json["tasks"].size() == 4);
    CHECK(json["probes_per_second"].get<double>() > 0);
    CHECK(json["tasks"][0].contains("verdict"));
    CHECK(json["tasks"][0]["oracle"]["false_accept_rate"] == 0.0);
  }

  TEST_CASE("an audit stored in _tasks.audit keeps the content hash; an edited verifier shows as un-audited") {
    TempDir dir;
    std::string source = testing::CopyTrip(dir);
    std::string bundle_path = testing::Pack(source, dir / "a.envdb");
    auto before = sandbox::EnvBundle::Load(bundle_path);
    REQUIRE(before.ok());
    for (const auto& task : before->tasks) CHECK(sandbox::AuditStatus(task).is_null());

    AuditOptions options = testing::SmallOptions();
    options.tasks = {"cheapest_rated_hotel"};
    TaskAudit audit = [&] {
      testing::SessionLanes lanes(bundle_path);
      return testing::Audit(bundle_path, lanes.lanes, options).tasks.at(0);
    }();
    REQUIRE(audit.verdict == "sound");
    Status stored = sandbox::StoreTaskAudit(bundle_path, audit.id, StoredAudit(audit, options));
    REQUIRE_MESSAGE(stored.ok(), stored.ToString());

    auto hash = sandbox::ComputeContentHash(bundle_path);
    REQUIRE(hash.ok());
    CHECK(*hash == before->manifest.content_hash);
    auto after = sandbox::EnvBundle::Load(bundle_path);
    REQUIRE_MESSAGE(after.ok(), after.status().ToString());
    const sandbox::TaskRecord* task = after->FindTask("cheapest_rated_hotel");
    REQUIRE(task != nullptr);
    CHECK(task->audit["verdict"] == "sound");
    CHECK(task->audit["verifier_version"] == task->version);
    CHECK(task->audit["answer_space"]["mode"] == "enumerated");
    Json status = sandbox::AuditStatus(*task);
    CHECK(status == Json{{"verdict", "sound"}, {"verifier_version", task->version}, {"current", true}});
    Json shown = after->ToJson();
    for (const auto& entry : shown["tasks"]) {
      if (entry["id"] == "cheapest_rated_hotel") {
        CHECK(entry["audit"]["current"] == true);
      } else {
        CHECK(entry["audit"].is_null());
      }
    }

    // The verifier is edited and the environment re-packed: a new task version, no audit.
    testing::WriteText(source + "/tasks/cheapest_rated_hotel/verifier.py",
                       testing::ReadText(source + "/tasks/cheapest_rated_hotel/verifier.py") + "\n# edited\n");
    std::string edited_path = testing::Pack(source, dir / "b.envdb");
    auto edited = sandbox::EnvBundle::Load(edited_path);
    REQUIRE(edited.ok());
    const sandbox::TaskRecord* edited_task = edited->FindTask("cheapest_rated_hotel");
    REQUIRE(edited_task != nullptr);
    CHECK(edited_task->version != task->version);
    CHECK(sandbox::AuditStatus(*edited_task).is_null());
    // Even with the old audit carried over, it is not the audit of this verifier.
    REQUIRE(sandbox::StoreTaskAudit(edited_path, "cheapest_rated_hotel", task->audit).ok());
    auto carried = sandbox::EnvBundle::Load(edited_path);
    REQUIRE(carried.ok());
    Json carried_status = sandbox::AuditStatus(*carried->FindTask("cheapest_rated_hotel"));
    CHECK(carried_status["verdict"] == "sound");
    CHECK(carried_status["current"] == false);

    CHECK(sandbox::StoreTaskAudit(bundle_path, "no_such_task", Json::object()).code() == StatusCode::kNotFound);
    CHECK(sandbox::StoreTaskAudit(bundle_path, "cheapest_rated_hotel", Json::array()).code() ==
          StatusCode::kInvalidArgument);
    CHECK(sandbox::StoreTaskAudit(dir / "missing.envdb", "cheapest_rated_hotel", Json::object()).code() ==
          StatusCode::kNotFound);
  }

  TEST_CASE("a verifier that hangs or returns a non-verdict is a defect of its task, named with the answer") {
    struct Case {
      const char* fixture;
      std::string answer;      // the answer that triggers it
      const char* in_message;  // a word of the defect message
    };
    for (const Case& c :
         {Case{"hangs_on_empty_list", "[]", "wall_time"}, Case{"non_verdict_on_text", "", "returned"}}) {
      CAPTURE(c.fixture);
      TempDir dir;
      std::string bundle = PackWithVerifier(
          dir, "cheapest_rated_hotel",
          (testing::SourceDir() / "tests/fixtures/audit/robustness" / (std::string(c.fixture) + ".py")).string());
      testing::SessionLanes lanes(bundle, 2, std::chrono::milliseconds(500));
      AuditOptions options = testing::SmallOptions();
      options.tasks = {"cheapest_rated_hotel"};
      TaskAudit audit = testing::Audit(bundle, lanes.lanes, options).tasks.at(0);
      CHECK(audit.verdict == "broken");
      CHECK(audit.gold_passes == 5);  // the gold answer is fine: only the probe exposes the defect
      auto defects = FindingsOf(audit, "defect");
      REQUIRE_FALSE(defects.empty());
      bool named = false;
      for (const Finding* finding : defects) {
        if (finding->answer == c.answer) {
          named = true;
          CHECK(finding->detail.find(c.in_message) != std::string::npos);
        }
      }
      CHECK(named);
      CHECK(audit.false_accepts == 0);  // a defect is never a verdict
    }
  }

  using ::envforge::testing::Envforge;

  TEST_CASE("envforge audit prints the table or JSON, stores the result for env show, and exits 1 when broken") {
    TempDir dir;
    std::string bundle = dir / "trip.envdb";
    fs::copy_file(TripBundle(), bundle);
    std::vector<std::string> small = {"--samples",  "300", "--neighbourhood", "200",
                                      "--boundary", "200", "--walk",          "200"};

    auto json_args = std::vector<std::string>{"audit", bundle, "--task", "cheapest_rated_hotel", "--json"};
    json_args.insert(json_args.end(), small.begin(), small.end());
    auto json_run = Envforge(json_args);
    INFO(json_run.stderr_text);
    REQUIRE(json_run.exit_code == 0);
    auto report = ParseJson(json_run.stdout_text);
    REQUIRE(report.ok());
    REQUIRE((*report)["tasks"].size() == 1);
    CHECK((*report)["tasks"][0]["id"] == "cheapest_rated_hotel");
    CHECK((*report)["tasks"][0]["verdict"] == "sound");
    CHECK((*report)["probes_per_second"].get<double>() > 0);
    CHECK(json_run.stderr_text.find("audit:") != std::string::npos);  // the progress line

    auto shown = Envforge({"env", "show", bundle, "--json"});
    REQUIRE(shown.exit_code == 0);
    for (const auto& task : ParseJson(shown.stdout_text).value()["tasks"]) {
      if (task["id"] == "cheapest_rated_hotel") {
        CHECK(task["audit"]["verdict"] == "sound");
        CHECK(task["audit"]["current"] == true);
      }
    }
    auto shown_text = Envforge({"env", "show", bundle});
    CHECK(shown_text.stdout_text.find("audit sound") != std::string::npos);
    CHECK(shown_text.stdout_text.find("un-audited") != std::string::npos);  // the other three tasks

    auto table_args = std::vector<std::string>{"audit", bundle, "--task", "cheapest_rated_hotel", "--no-store"};
    table_args.insert(table_args.end(), small.begin(), small.end());
    auto table = Envforge(table_args);
    CHECK(table.exit_code == 0);
    CHECK(table.stdout_text.find("cheapest_rated_hotel  SOUND") != std::string::npos);
    CHECK(table.stdout_text.find("false accepts") != std::string::npos);

    TempDir broken_dir;
    std::string broken =
        PackWithVerifier(broken_dir, "cheapest_rated_hotel",
                         (testing::SourceDir() / "tests/fixtures/audit/robustness/non_verdict_on_text.py").string());
    auto broken_args = std::vector<std::string>{"audit", broken, "--task", "cheapest_rated_hotel"};
    broken_args.insert(broken_args.end(), small.begin(), small.end());
    auto broken_run = Envforge(broken_args);
    CHECK(broken_run.exit_code == 1);
    CHECK(broken_run.stdout_text.find("BROKEN") != std::string::npos);

    CHECK(Envforge({"audit", bundle, "--task", "no_such_task"}).exit_code == 2);
    CHECK(Envforge({"audit", bundle, "--k", "0"}).exit_code == 2);
    CHECK(Envforge({"audit", bundle, "--bogus"}).exit_code == 2);
    CHECK(Envforge({"audit", dir / "missing.envdb"}).exit_code == 2);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::verifiers
