// Verifiers that never return, in real sessions (verifiers/audit.h, BUDGET AND HANGS): one that
// swallows the wall-time exception makes its task broken after one single-answer re-judge, and
// the rest of the task's audit is skipped instead of costing a hard deadline per answer.
#include <doctest/doctest.h>

#include <string>

#include "tests/verifiers/audit_test_util.h"

namespace envforge::verifiers {
namespace {

using testing::AnswerJson;
using testing::TempDir;

// Catches the runtime's WallTimeExceeded (a BaseException) and goes on, for ever.
constexpr const char* kSwallowForever =
    "    while True:\n"
    "        try:\n"
    "            sum(range(100000))\n"
    "        except BaseException:\n"
    "            pass\n";

// The mini environment (tests/fixtures/envs/mini) with count_books' verifier replaced.
std::string PackMini(const TempDir& dir, const std::string& verifier) {
  std::string source = (dir.path() / "mini").string();
  std::filesystem::copy(testing::SourceDir() / "tests/fixtures/envs/mini", source,
                        std::filesystem::copy_options::recursive);
  testing::WriteText(source + "/tasks/count_books/verifier.py", verifier);
  return testing::Pack(source, dir / "mini.envdb");
}

AuditOptions CountBooks() {
  AuditOptions options = testing::SmallOptions();
  options.tasks = {"count_books"};
  return options;
}

TEST_SUITE("verifiers.audit_hang") {
  TEST_CASE(
      "a verifier that swallows the wall-time exception is broken (hang) on its gold runs; nothing else is judged" *
      doctest::timeout(60)) {
    TempDir dir;
    std::string bundle = PackMini(dir, std::string("def verify(answer, db):\n") + kSwallowForever);
    testing::SessionLanes lanes(bundle, 2, std::chrono::milliseconds(500));
    AuditReport report = testing::Audit(bundle, lanes.lanes, CountBooks());
    const TaskAudit& audit = report.tasks.at(0);
    INFO(DumpJson(audit.ToJson()["verdict_reasons"]));
    CHECK(audit.verdict == "broken");
    CHECK(audit.stopped == "hang");
    REQUIRE_FALSE(audit.gold_answer.empty());
    CHECK(AnswerJson(audit.stopped_answer) == AnswerJson(audit.gold_answer));  // its first gold run
    CHECK(audit.stopped_detail.find("never returned within its wall-time limit of 500 ms") != std::string::npos);
    CHECK(audit.probes_not_judged == audit.probes);
    CHECK(audit.judgements <= 2);  // one hang per lane, each confirmed alone once
    CHECK(audit.rejudged == 0);
    CHECK(report.ToJson()["stopped"] == Json::array({"count_books"}));
    MESSAGE("hanging verifier: broken in " << audit.seconds << " s (wall_time 500 ms, kill_grace 500 ms, k " << 5
                                           << ")");
  }

  TEST_CASE("a verifier that hangs on some answers only stops the audit at the first such answer judged alone" *
            doctest::timeout(60)) {
    TempDir dir;
    std::string bundle =
        PackMini(dir,
                 "def verify(answer, db):\n"
                 "    while not isinstance(answer, dict):\n"
                 "        try:\n"
                 "            sum(range(100000))\n"
                 "        except BaseException:\n"
                 "            pass\n"
                 "    count = db.query(\"SELECT count(*) AS n FROM books WHERE author = 'Alan Turing'\")[0][\"n\"]\n"
                 "    return answer.get(\"count\") == count\n");
    testing::SessionLanes lanes(bundle, 2, std::chrono::milliseconds(500));
    AuditOptions options = CountBooks();
    options.batch_size = 8;  // a batch that hangs costs 8 wall times before its re-judge
    AuditReport report = testing::Audit(bundle, lanes.lanes, options);
    const TaskAudit& audit = report.tasks.at(0);
    INFO(DumpJson(audit.ToJson()["verdict_reasons"]));
    CHECK(audit.verdict == "broken");
    CHECK(audit.gold_passes == 5);
    CHECK(audit.stopped == "hang");
    CHECK_FALSE(AnswerJson(audit.stopped_answer).is_object());
    CHECK(audit.probes_not_judged > 0);
    CHECK(audit.probes_not_judged < audit.probes);
    bool hang_found = false;
    for (const Finding* finding : testing::FindingsOf(audit, "defect")) {
      hang_found = hang_found || finding->answer == audit.stopped_answer;
    }
    CHECK(hang_found);
    MESSAGE("verifier hanging on non-objects: broken in " << audit.seconds << " s, " << audit.judgements
                                                          << " judgements");
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::verifiers
