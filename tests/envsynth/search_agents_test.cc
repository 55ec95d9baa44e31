// The model review of synthesized search questions (envsynth/search_agents.h) with the scripted
// backend playing the writer, the answer agents and the verifier over the fixture corpus; the
// answer agents play in real sandboxed search sessions, their verdicts from the task's exact match.
// Four proposals, four fates: kept (one agent solved it, two gave a wrong answer the verifier
// refutes), dropped by the writer (its question names the answer, also after being told),
// dropped because the verifier rejects the ground truth, dropped as ambiguous (a wrong candidate
// the verifier calls correct); and the paper's rule (require_unsolved) dropping the solved one.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "base/json.h"
#include "envsynth/search_agents.h"
#include "inference/scripted_backend.h"
#include "tests/sandbox/search_env_fixture.h"
#include "tests/temp_dir.h"
#include "toolsets/search/qa_synth.h"

namespace envforge::envsynth {
namespace {

using ::envforge::testing::TempDir;

Json Line(const std::string& when, Json response) {
  response["when"] = when;
  return response;
}
Json Content(const std::string& text) { return {{"content", text}}; }
Json Submit(const std::string& answer) {
  return {{"tool_calls", Json::array({{{"name", "submit_result"}, {"arguments", {{"answer_text", answer}}}}})}};
}
Json Verdict(const std::string& ground_truth, const Json& candidates) {
  return Content("Here is my verdict:\n```json\n" +
                 Json{{"ground_truth", ground_truth}, {"candidates", candidates}}.dump() + "\n```");
}
Json Question(const std::string& text) { return Content(Json{{"question", text}}.dump()); }

struct Fixture {
  TempDir dir;
  std::string corpus = dir / "corpus.sqlite";
  search::QaSynthOptions synth;
  std::vector<search::SynthQuestion> proposals;

  Fixture() {
    sandbox::testing::BuildFixtureCorpus(corpus);
    synth.questions = 2;
    synth.min_hops = 1;
    synth.max_hops = 2;
    auto made = search::SynthesizeQuestions(corpus, synth);
    REQUIRE_MESSAGE(made.ok(), made.status().ToString());
    proposals = made->questions;
    REQUIRE(proposals.size() == 4);
  }

  // The script: lines matched by the first line of each stage's prompt, the verifier's before the
  // answer agents' (its prompt quotes the question they match on).
  std::string Script() const {
    const std::string& answer_a = proposals[0].key.answer;
    const std::string& answer_b = proposals[1].key.answer;
    std::vector<Json> lines = {
        Line("Proposal: " + proposals[0].id, Question("MARK-A: which entry do these clues point at? Give its title.")),
        Line("Proposal: " + proposals[1].id, Question("Is it " + answer_b + "? Give the title.")),
        Line("Proposal: " + proposals[1].id, Question("Surely it is " + answer_b + ", the title?")),
        Line("Proposal: " + proposals[2].id, Question("MARK-C: follow the link from the clues; the title?")),
        Line("Proposal: " + proposals[3].id, Question("MARK-D: follow the link from the clues; the title?")),
        Line("Question under review: " + proposals[0].id,
             Verdict("correct", Json::array({{{"answer", "wrong-a"}, {"verdict", "incorrect"}},
                                             {{"answer", answer_a}, {"verdict", "correct"}}}))),
        Line("Question under review: " + proposals[2].id, Verdict("incorrect", Json::array())),
        Line("Question under review: " + proposals[3].id,
             Verdict("correct", Json::array({{{"answer", "zzzq"}, {"verdict", "correct"}}}))),
        Line("MARK-A", Submit(answer_a)),
        Line("MARK-A", Submit("Wrong-A")),
        Line("MARK-A", Submit("wrong-a")),
        // MARK-C's model server fails every other request: each agent's episode is played again.
        Line("MARK-C", {{"error", "unavailable"}, {"message", "flaky"}}),
        Line("MARK-C", Submit("zzzq")),
        Line("MARK-D", Submit("zzzq")),
        Content("no line matched"),
    };
    const std::string path = dir / "script.jsonl";
    std::ofstream out(path);
    for (const Json& line : lines) out << line.dump() << "\n";
    return path;
  }

  // The review of the proposals with one backend as writer, answer agents and verifier.
  Result<SearchAgentResult> Review(inference::Backend& backend, const SearchAgentOptions& options) const {
    return ReviewWithAgents(proposals, synth, corpus, backend, backend, options, dir.path().string());
  }
};

const ProposalReview& ReviewOf(const SearchAgentResult& result, const std::string& id) {
  for (const ProposalReview& review : result.reviews)
    if (review.id == id) return review;
  FAIL("no review of " << id);
  return result.reviews.front();
}

TEST_SUITE("envsynth.search_agents") {
  TEST_CASE("the review keeps a verified question and drops each kind of bad one, saying why" * doctest::timeout(300)) {
    Fixture fixture;
    auto backend = inference::OpenBackend("scripted:" + fixture.Script(), {});
    REQUIRE(backend.ok());
    SearchAgentOptions options;
    options.answer_agents = 3;
    options.verify_passes = 2;
    auto result = fixture.Review(**backend, options);
    REQUIRE_MESSAGE(result.ok(), result.status().ToString());
    const auto& proposals = fixture.proposals;

    REQUIRE(result->kept.size() == 1);
    const search::SynthQuestion& kept = result->kept[0];
    CHECK(kept.id == proposals[0].id);
    CHECK(kept.prompt == "MARK-A: which entry do these clues point at? Give its title.");
    CHECK(kept.key.answer == proposals[0].key.answer);
    const Json knobs = kept.Knobs(fixture.synth);
    CHECK(knobs["clue_prompt"] == proposals[0].prompt);
    CHECK(knobs["answer_agents"] == 3);
    CHECK(knobs["answer_agents_solved"] == 1);
    CHECK(knobs["verify_passes"] == 2);
    CHECK(knobs["distractors"].dump().find("Wrong-A") != std::string::npos);  // the refuted candidate

    const ProposalReview& a = ReviewOf(*result, proposals[0].id);
    CHECK(a.kept);
    CHECK(a.answer_agents_submitted == 3);
    REQUIRE(a.candidates.size() == 2);  // "Wrong-A" and "wrong-a" are one normal form
    CHECK(a.candidates[0].solves != a.candidates[1].solves);
    for (const AgentCandidate& candidate : a.candidates) {
      CHECK(candidate.verdicts.size() == 2);
      CHECK(candidate.agents.size() == (candidate.solves ? 1u : 2u));
    }
    CHECK(a.ground_truth_verdicts == std::vector<std::string>{"correct", "correct"});

    const ProposalReview& b = ReviewOf(*result, proposals[1].id);
    CHECK_FALSE(b.kept);
    CHECK(b.written_prompt.empty());
    CHECK(b.drop_reason.find("writer: the question names the answer") == 0);

    const ProposalReview& c = ReviewOf(*result, proposals[2].id);
    CHECK_FALSE(c.kept);
    CHECK(c.drop_reason == "ground truth not verified: the verifier said \"incorrect\"");

    const ProposalReview& d = ReviewOf(*result, proposals[3].id);
    CHECK_FALSE(d.kept);
    CHECK(d.drop_reason.find("ambiguous: the wrong candidate \"zzzq\" (correct)") == 0);

    CHECK(result->stats.proposals == 4);
    CHECK(result->stats.written == 3);
    CHECK(result->stats.kept == 1);
    CHECK(result->stats.dropped ==
          std::map<std::string, int64_t>{{"writer", 1}, {"ground_truth", 1}, {"ambiguous", 1}});
    CHECK(result->stats.answer_episodes == 12);  // 9, and MARK-C's 3 played again
    CHECK(result->stats.answer_retries == 3);
    CHECK(ReviewOf(*result, proposals[2].id).answer_agents_submitted == 3);
    // 5 writer requests (one retry), 6 verifier passes.
    CHECK(result->stats.model_requests == 11);
    CHECK(ToJson(d)["candidates"][0]["answer"] == "zzzq");

    SUBCASE("require_unsolved drops the question an answer agent solved") {
      options.require_unsolved = true;
      auto strict = fixture.Review(**backend, options);
      REQUIRE(strict.ok());
      CHECK(strict->kept.empty());
      CHECK(ReviewOf(*strict, proposals[0].id).drop_reason == "solved by 1 answer agent(s)");
    }
  }

  TEST_CASE("options out of range and a missing prompt are refused before any request") {
    Fixture fixture;
    auto backend = inference::OpenBackend("scripted:" + fixture.Script(), {});
    REQUIRE(backend.ok());
    SearchAgentOptions options;
    options.answer_agents = 0;
    auto refused = fixture.Review(**backend, options);
    CHECK(refused.status().code() == StatusCode::kInvalidArgument);
    CHECK(refused.status().message().find("answer_agents must be in 1..16, got 0") != std::string::npos);
    options.answer_agents = 1;
    options.prompts_dir = fixture.dir / "no_prompts";
    auto missing = fixture.Review(**backend, options);
    CHECK(missing.status().code() == StatusCode::kNotFound);
    CHECK(missing.status().message().find("search_question.md") != std::string::npos);
  }

  TEST_CASE("an answer agent whose episode fails twice fails the review" * doctest::timeout(120)) {
    Fixture fixture;
    const std::string script = fixture.dir / "agents_down.jsonl";
    {
      std::ofstream out(script);
      out << Line("Proposal:", Question("MARK-X: which entry do these clues point at?")).dump() << "\n"
          << Line("MARK-X", {{"error", "unavailable"}, {"message", "the model server is down"}}).dump() << "\n"
          << Content("no line matched").dump() << "\n";
    }
    auto backend = inference::OpenBackend("scripted:" + script, {});
    REQUIRE(backend.ok());
    SearchAgentOptions options;
    options.answer_agents = 1;
    auto result = fixture.Review(**backend, options);
    CHECK(result.status().code() == StatusCode::kUnavailable);
    CHECK(result.status().message().find("answer agent 0 on") != std::string::npos);
    CHECK(result.status().message().find("failed twice") != std::string::npos);
  }

  TEST_CASE("a backend that fails fails the review instead of keeping a question") {
    Fixture fixture;
    const std::string script = fixture.dir / "down.jsonl";
    std::ofstream(script) << R"({"error": "unavailable", "message": "the model server is down"})"
                          << "\n";
    auto backend = inference::OpenBackend("scripted:" + script, {});
    REQUIRE(backend.ok());
    auto result = fixture.Review(**backend, SearchAgentOptions{});
    CHECK(result.status().code() == StatusCode::kUnavailable);
    CHECK(result.status().message().find("the model server is down") != std::string::npos);
  }
}

}  // namespace
}  // namespace envforge::envsynth
