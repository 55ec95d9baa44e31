// The rubric judge of search answers (agents/rubric_judge.h, toolsets/search/answer_judge.h): the
// near-miss rule that keeps the model from being the only check, the model's votes and unreadable
// replies through the scripted backend, and the judge in real search sessions of a SessionManager
// (submit_result and JudgeAnswers): a near miss the model accepts passes, one it rejects fails, an
// unrelated answer fails without the model being asked, and a judge that cannot decide makes the
// call infra_error instead of a verdict.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "agents/rubric_judge.h"
#include "base/json.h"
#include "sandbox/session_manager.h"
#include "tests/sandbox/search_env_fixture.h"
#include "tests/temp_dir.h"

namespace envforge::agents {
namespace {

using ::envforge::testing::TempDir;

const search::AnswerKey kHelium{"Helium", {"He"}};

// A judge whose model answers from `lines` (scripted backend; "when" lines keyed on the graded answer).
std::shared_ptr<search::AnswerJudge> JudgeFrom(const TempDir& dir, const std::vector<Json>& lines, int votes = 1) {
  const std::string path = dir / ("judge" + std::to_string(votes) + ".jsonl");
  std::ofstream out(path);
  for (const Json& line : lines) out << line.dump() << "\n";
  out.close();
  auto backend = inference::OpenBackend("scripted:" + path, {});
  REQUIRE_MESSAGE(backend.ok(), backend.status().ToString());
  auto judge = MakeRubricJudge(std::move(backend).value(), {.votes = votes});
  REQUIRE_MESSAGE(judge.ok(), judge.status().ToString());
  return *judge;
}

Json Says(const std::string& answer, const std::string& reply) {
  return {{"when", "Answer to grade: \"" + answer + "\""}, {"content", reply}};
}
std::string Verdict(const std::string& word) { return Json{{"verdict", word}, {"reason", "because"}}.dump(); }
const Json kFallback = {{"content", "no line matched"}};

TEST_SUITE("agents.rubric_judge") {
  TEST_CASE("near misses hold the answer's words; everything else is never judged") {
    CHECK(search::IsNearMiss("helium gas", kHelium));
    CHECK(search::IsNearMiss("the element HELIUM", kHelium));
    CHECK(search::IsNearMiss("he (symbol)", kHelium));  // an alias's words
    CHECK_FALSE(search::IsNearMiss("argon", kHelium));
    CHECK_FALSE(search::IsNearMiss("heliumgas", kHelium));  // not as a whole word
    CHECK_FALSE(search::IsNearMiss("", kHelium));
    CHECK_FALSE(search::IsNearMiss("helium " + std::string(60, 'x') + " a b c d e f g h i j k l", kHelium));
    const search::AnswerKey curie{"Marie Curie", {}};
    CHECK(search::IsNearMiss("Curie", curie));      // held by the answer, 5 letters
    CHECK_FALSE(search::IsNearMiss("Mar", curie));  // too short a part
  }

  TEST_CASE("the model's verdict, its majority of votes, and replies it cannot read") {
    TempDir dir;
    auto judge =
        JudgeFrom(dir, {Says("helium gas", "Sure: " + Verdict("equivalent")),
                        Says("helium balloon", Verdict("different")), Says("liquid helium", "I think so."),
                        Says("helium-4", Verdict("maybe")), Says("helium-4", Verdict("equivalent")), kFallback});
    CHECK(judge->name().find("scripted:") != std::string::npos);
    auto yes = judge->Judge("Which element?", kHelium, "helium gas");
    REQUIRE(yes.ok());
    CHECK(yes->equivalent);
    CHECK(yes->reason == "because");
    auto no = judge->Judge("Which element?", kHelium, "helium balloon");
    REQUIRE(no.ok());
    CHECK_FALSE(no->equivalent);
    auto unreadable = judge->Judge("Which element?", kHelium, "liquid helium");  // asked twice, no object
    CHECK(unreadable.status().code() == StatusCode::kDataLoss);
    CHECK(unreadable.status().message().find("not a verdict") != std::string::npos);
    auto repaired = judge->Judge("Which element?", kHelium, "helium-4");  // "maybe", then a verdict
    REQUIRE(repaired.ok());
    CHECK(repaired->equivalent);

    auto voting = JudgeFrom(dir,
                            {Says("helium gas", Verdict("equivalent")), Says("helium gas", Verdict("different")),
                             Says("helium gas", Verdict("different")), kFallback},
                            3);
    auto majority = voting->Judge("Which element?", kHelium, "helium gas");
    REQUIRE(majority.ok());
    CHECK_FALSE(majority->equivalent);  // 1 of 3
    CHECK(MakeRubricJudge(nullptr, {.votes = 2}).status().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("in search sessions the judge decides near misses only; a judge that fails is infra_error" *
            doctest::timeout(120)) {
    TempDir dir;
    const std::string envdb = sandbox::testing::PackSearchEnv(dir, sandbox::testing::MakeSearchEnvSource(dir));
    sandbox::ManagerOptions options;
    // "argon" would pass if the judge were asked; an error line for "helium ion" stands for a model
    // server that is down.
    options.search_answer_judge =
        JudgeFrom(dir, {Says("helium gas", Verdict("equivalent")),
                        Says("helium balloon", Verdict("different")),
                        Says("argon", Verdict("equivalent")),
                        {{"when", "Answer to grade: \"helium ion\""}, {"error", "unavailable"}, {"message", "down"}},
                        kFallback});
    auto manager = sandbox::SessionManager::Create(std::move(options));
    REQUIRE_MESSAGE(manager.ok(), manager.status().ToString());
    auto env = (*manager)->OpenEnvironment(envdb);
    REQUIRE(env.ok());
    auto session = (*manager)->CreateSession(*env, "second-lightest-element");
    REQUIRE(session.ok());
    auto submit = [&](const std::string& answer) {
      return (*manager)->CallTool(*session, {"c", "submit_result", {{"answer_text", answer}}});
    };

    toolsets::ToolResult accepted = submit("helium gas");
    REQUIRE_MESSAGE(accepted.ok(), accepted.message);
    CHECK(accepted.content["passed"] == true);
    CHECK(accepted.content["score"] == 1.0);
    CHECK(accepted.content["reasons"].dump().find("accepted by the rubric judge model") != std::string::npos);
    CHECK(accepted.content["reasons"].dump().find("because") == std::string::npos);  // its words stay out

    toolsets::ToolResult rejected = submit("helium balloon");
    REQUIRE(rejected.ok());
    CHECK(rejected.content["passed"] == false);
    CHECK(rejected.content["reasons"].dump().find("found it different") != std::string::npos);

    toolsets::ToolResult unrelated = submit("argon");
    REQUIRE(unrelated.ok());
    CHECK(unrelated.content["passed"] == false);  // never asked: not a near miss
    CHECK(unrelated.content["reasons"].dump().find("rubric judge") == std::string::npos);

    CHECK(submit("He").content["passed"] == true);  // the exact match needs no judge

    toolsets::ToolResult failed = submit("helium ion");
    CHECK(failed.outcome == toolsets::Outcome::kInfraError);
    CHECK(failed.message.find("the rubric judge model") != std::string::npos);
    CHECK(failed.message.find("down") != std::string::npos);

    auto judged = (*manager)->JudgeAnswers(*session, sandbox::Judge::kVerifier, {"helium gas", "argon"});
    REQUIRE_MESSAGE(judged.ok(), judged.status().ToString());
    CHECK((*judged)[0].passed);
    CHECK_FALSE((*judged)[1].passed);
    CHECK_FALSE((*manager)->JudgeAnswers(*session, sandbox::Judge::kVerifier, {"helium ion"}).ok());
  }
}

}  // namespace
}  // namespace envforge::agents
