// The audit on search tasks (verifiers/search_probes.h) in real sessions: a synthesized search
// bundle audits sound with the answer key as its oracle (case and spacing variants are the same
// answer, not findings); a task whose key accepts a distractor, and one whose answer key disagrees
// with its own solution path, are broken; a task whose prompt gives its answer is suspect.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/search_synth_bundle.h"
#include "tests/sandbox/search_env_fixture.h"
#include "tests/verifiers/audit_test_util.h"
#include "toolsets/search/debian_corpus.h"
#include "toolsets/search/qa_synth.h"

namespace envforge::verifiers {
namespace {

namespace fs = std::filesystem;
using testing::FindingsOf;
using testing::TempDir;

std::string FixtureCorpus(const TempDir& dir) {
  const std::string path = dir / "corpus.sqlite";
  sandbox::testing::BuildFixtureCorpus(path);
  return path;
}

struct Synthesized {
  std::vector<search::SynthQuestion> questions;
  search::QaSynthOptions options;
};

Synthesized Synthesize(const std::string& corpus) {
  Synthesized out;
  out.options.questions = 2;
  out.options.min_hops = 1;
  out.options.max_hops = 3;
  auto result = search::SynthesizeQuestions(corpus, out.options);
  REQUIRE_MESSAGE(result.ok(), result.status().ToString());
  out.questions = std::move(result->questions);
  return out;
}

AuditOptions SearchAuditOptions() {
  AuditOptions options = testing::SmallOptions();
  options.k = 2;
  return options;
}

const TaskAudit& TaskOf(const AuditReport& report, const std::string& id) {
  for (const TaskAudit& task : report.tasks) {
    if (task.id == id) return task;
  }
  FAIL("no task " << id);
  return report.tasks.front();
}

TEST_SUITE("verifiers.search_audit") {
  TEST_CASE("a synthesized search bundle audits sound, its key as the oracle" * doctest::timeout(180)) {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    Synthesized synth = Synthesize(corpus);
    const std::string envdb = dir / "synth.envdb";
    Status packed = sandbox::PackSynthesizedSearchEnvironment(synth.questions, synth.options, corpus, envdb);
    REQUIRE_MESSAGE(packed.ok(), packed.ToString());
    testing::SessionLanes lanes(envdb);
    AuditReport report = testing::Audit(envdb, lanes.lanes, SearchAuditOptions());
    REQUIRE(report.tasks.size() == synth.questions.size());
    for (const TaskAudit& task : report.tasks) {
      INFO(task.id << ": " << task.verdict << " " << DumpJson(Json(task.verdict_reasons)));
      CHECK(task.verdict == "sound");
      CHECK(task.oracle_kind == "answer_key");
      CHECK(task.gold_passes == task.gold_runs);
      CHECK(task.false_accepts == 0);
      CHECK(task.false_rejects == 0);
      CHECK(task.oracle_accepts > 3);   // the answer's equivalent forms, accepted by both
      CHECK(task.oracle_rejects > 10);  // near misses, prompt words, other answers, distractors
      CHECK(FindingsOf(task, "accepted_mutant").empty());
    }
  }

  TEST_CASE("a key that accepts a wrong answer, or disagrees with its solution path, is broken" *
            doctest::timeout(180)) {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    Synthesized synth = Synthesize(corpus);
    // A question with a distractor: its key is made to accept that distractor.
    size_t with_distractor = synth.questions.size();
    for (size_t i = 0; i < synth.questions.size(); ++i) {
      if (!synth.questions[i].distractors.empty()) with_distractor = i;
    }
    REQUIRE(with_distractor < synth.questions.size());
    const std::string loose_id = synth.questions[with_distractor].id;
    const std::string distractor = synth.questions[with_distractor].distractors.front();
    synth.questions[with_distractor].key.aliases.push_back(distractor);
    // Another question's answer key names something its solution path does not reach.
    const size_t wrong = with_distractor == 0 ? 1 : 0;
    const std::string wrong_id = synth.questions[wrong].id;
    synth.questions[wrong].key = {"argon", {}};
    // A third gives its answer away in the prompt.
    const size_t leaky = (wrong + 1 == with_distractor ? wrong + 2 : wrong + 1);
    REQUIRE(leaky < synth.questions.size());
    const std::string leaky_id = synth.questions[leaky].id;
    synth.questions[leaky].prompt += " (It is " + synth.questions[leaky].key.answer + ".)";

    const std::string envdb = dir / "broken.envdb";
    Status packed = sandbox::PackSynthesizedSearchEnvironment(synth.questions, synth.options, corpus, envdb);
    REQUIRE_MESSAGE(packed.ok(), packed.ToString());
    testing::SessionLanes lanes(envdb);
    AuditReport report = testing::Audit(envdb, lanes.lanes, SearchAuditOptions());
    CHECK(report.AnyBroken());

    const TaskAudit& loose = TaskOf(report, loose_id);
    CHECK(loose.verdict == "broken");
    CHECK(loose.false_accepts > 0);
    bool distractor_shown = false;
    for (const Finding* finding : FindingsOf(loose, "false_accept")) {
      distractor_shown =
          distractor_shown || search::NormalizeAnswer(finding->answer) == search::NormalizeAnswer(distractor);
    }
    CHECK(distractor_shown);

    const TaskAudit& mismatched = TaskOf(report, wrong_id);
    CHECK(mismatched.verdict == "broken");
    CHECK(FindingsOf(mismatched, "solution_path_failed").size() == 1);

    const TaskAudit& leaked = TaskOf(report, leaky_id);
    CHECK(leaked.verdict == "suspect");
    CHECK_FALSE(FindingsOf(leaked, "answer_in_prompt").empty());

    for (const TaskAudit& task : report.tasks) {
      if (task.id == loose_id || task.id == wrong_id || task.id == leaky_id) continue;
      INFO(task.id << ": " << DumpJson(Json(task.verdict_reasons)));
      CHECK(task.verdict == "sound");
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::verifiers
