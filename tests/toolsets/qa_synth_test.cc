// Offline question synthesis (toolsets/search/qa_synth.h) on the fixture corpus built from
// tests/fixtures/search: questions per hop count, no title in a question, unique answers with
// their solution paths replayed through the session's tool code, near misses rejected, the same
// seed giving the same questions, and clear errors for bad input.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/sandbox/search_env_fixture.h"
#include "tests/temp_dir.h"
#include "toolsets/search/corpus_store.h"
#include "toolsets/search/debian_corpus.h"
#include "toolsets/search/offline_backend.h"
#include "toolsets/search/qa_synth.h"
#include "toolsets/search/search_toolbox.h"

namespace envforge::search {
namespace {

using ::envforge::testing::TempDir;

// The fixture corpus (elements, foldoc, wordnet: 21 documents, 29 links) at dir/corpus.sqlite.
std::string FixtureCorpus(const TempDir& dir) {
  const std::string path = dir / "corpus.sqlite";
  sandbox::testing::BuildFixtureCorpus(path);
  return path;
}

QaSynthOptions Options(int questions, int min_hops, int max_hops, uint64_t seed = 1) {
  QaSynthOptions options;
  options.questions = questions;
  options.min_hops = min_hops;
  options.max_hops = max_hops;
  options.seed = seed;
  return options;
}

bool ContainsPhrase(const std::string& text, const std::string& phrase) {
  const std::string normal = NormalizeAnswer(phrase);
  return !normal.empty() && (" " + NormalizeAnswer(text) + " ").find(" " + normal + " ") != std::string::npos;
}

SolutionReplay Replay(const std::string& corpus, const SynthQuestion& question) {
  auto backend = OfflineSearchBackend::OpenCorpus(corpus);
  REQUIRE_MESSAGE(backend.ok(), backend.status().ToString());
  SearchToolbox toolbox(std::move(backend).value());
  auto replay =
      ReplaySolutionPath(question.solution, [&](const toolsets::ToolCall& call) { return toolbox.Call(call); });
  REQUIRE_MESSAGE(replay.ok(), question.id << ": " << replay.status().ToString());
  return std::move(replay).value();
}

TEST_SUITE("toolsets.search.synth") {
  TEST_CASE("makes N questions for each hop count asked, each a chain of that many documents") {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    Result<QaSynthResult> result = SynthesizeQuestions(corpus, Options(2, 1, 4));
    REQUIRE_MESSAGE(result.ok(), result.status().ToString());
    std::map<int, int> per_hops;
    std::set<std::string> ids;
    for (const SynthQuestion& question : result->questions) {
      ++per_hops[question.hops];
      CHECK(ids.insert(question.id).second);
      CHECK(static_cast<int>(question.chain.size()) == question.hops);
      CHECK(question.solution.calls.size() == question.chain.size() + 1);  // a search, then one open a document
      CHECK(question.difficulty >= 1);
      CHECK(question.difficulty <= 5);
      Json knobs = question.Knobs(Options(2, 1, 4));
      CHECK(knobs["hops"] == question.hops);
      CHECK(knobs["breadth"] == 3);
      CHECK(knobs["obfuscation"] == "keywords");
      CHECK(knobs.contains("rarity"));
      CHECK(knobs["distractors"].is_array());
      CHECK(knobs["relations"].size() == static_cast<size_t>(question.hops - 1));
    }
    CHECK(per_hops == std::map<int, int>{{1, 2}, {2, 2}, {3, 2}, {4, 2}});
    CHECK(result->stats.questions_by_hops == std::map<int, int>{{1, 2}, {2, 2}, {3, 2}, {4, 2}});
    CHECK(result->stats.documents == 21);
  }

  TEST_CASE("a question never names its answer, an alias or a document of its chain") {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    for (int obfuscation : {0, 1, 2}) {
      QaSynthOptions options = Options(3, 1, 3);
      options.obfuscation = obfuscation;
      Result<QaSynthResult> result = SynthesizeQuestions(corpus, options);
      REQUIRE_MESSAGE(result.ok(), result.status().ToString());
      for (const SynthQuestion& question : result->questions) {
        INFO(question.id << " (obfuscation " << obfuscation << "): " << question.prompt);
        CHECK_FALSE(ContainsPhrase(question.prompt, question.key.answer));
        for (const std::string& alias : question.key.aliases) CHECK_FALSE(ContainsPhrase(question.prompt, alias));
        for (const ChainStep& step : question.chain) {
          CHECK_FALSE(ContainsPhrase(question.prompt, step.title));
          CHECK_FALSE(ContainsPhrase(question.prompt, AnswerFromTitle(step.title)));
        }
      }
    }
  }

  TEST_CASE("each solution path finds its answer through the session tools, and a near miss fails") {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    Result<QaSynthResult> result = SynthesizeQuestions(corpus, Options(2, 1, 4));
    REQUIRE_MESSAGE(result.ok(), result.status().ToString());
    for (const SynthQuestion& question : result->questions) {
      INFO(question.id << ": " << question.prompt);
      SolutionReplay replay = Replay(corpus, question);
      CHECK(replay.final_doc_id == question.chain.back().doc_id);
      CHECK(MatchAnswer(replay.answer, question.key).passed);
      CHECK(MatchAnswer(question.key.answer, question.key).passed);
      // Near misses without an alias: one letter more, one letter less, a different word.
      for (const std::string& miss :
           {question.key.answer + "x", question.key.answer.substr(0, question.key.answer.size() - 1),
            question.key.answer + " gas"}) {
        bool is_alias = false;
        for (const std::string& alias : question.key.aliases)
          is_alias = is_alias || NormalizeAnswer(alias) == NormalizeAnswer(miss);
        if (!is_alias) CHECK_FALSE(MatchAnswer(miss, question.key).passed);
      }
      for (const std::string& distractor : question.distractors)
        CHECK_FALSE(MatchAnswer(distractor, question.key).passed);
    }
  }

  TEST_CASE("a solution path that opens what no previous step showed does not replay") {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    Result<QaSynthResult> result = SynthesizeQuestions(corpus, Options(1, 2, 2));
    REQUIRE_MESSAGE(result.ok(), result.status().ToString());
    SolutionPath path = result->questions.front().solution;
    path.calls.back().arguments["doc_id_or_url"] =
        "elements:lead";  // a real document, not linked from the previous one
    auto backend = OfflineSearchBackend::OpenCorpus(corpus);
    REQUIRE(backend.ok());
    SearchToolbox toolbox(std::move(backend).value());
    auto replay = ReplaySolutionPath(path, [&](const toolsets::ToolCall& call) { return toolbox.Call(call); });
    CHECK(replay.status().code() == StatusCode::kFailedPrecondition);
    CHECK(replay.status().message().find("was not among what the previous step showed") != std::string::npos);
  }

  TEST_CASE("the same seed gives the same questions; the solution path survives its JSON form") {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    auto first = SynthesizeQuestions(corpus, Options(2, 1, 4, 7));
    auto second = SynthesizeQuestions(corpus, Options(2, 1, 4, 7));
    REQUIRE(first.ok());
    REQUIRE(second.ok());
    REQUIRE(first->questions.size() == second->questions.size());
    for (size_t i = 0; i < first->questions.size(); ++i) {
      const SynthQuestion& a = first->questions[i];
      const SynthQuestion& b = second->questions[i];
      CHECK(a.id == b.id);
      CHECK(a.prompt == b.prompt);
      CHECK(ToJson(a.key) == ToJson(b.key));
      CHECK(a.Knobs(Options(2, 1, 4, 7)) == b.Knobs(Options(2, 1, 4, 7)));
      CHECK(ToJson(a.solution) == ToJson(b.solution));
      auto parsed = SolutionPathFromJson(ToJson(a.solution));
      REQUIRE(parsed.ok());
      CHECK(ToJson(*parsed) == ToJson(a.solution));
    }
  }

  TEST_CASE("bad input gives a clear error") {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    SUBCASE("a missing corpus") {
      auto result = SynthesizeQuestions(dir / "absent.sqlite", Options(1, 1, 1));
      CHECK(result.status().code() == StatusCode::kNotFound);
    }
    SUBCASE("hops out of range") {
      CHECK(SynthesizeQuestions(corpus, Options(1, 0, 2)).status().code() == StatusCode::kInvalidArgument);
      CHECK(SynthesizeQuestions(corpus, Options(1, 1, 5)).status().code() == StatusCode::kInvalidArgument);
      CHECK(SynthesizeQuestions(corpus, Options(1, 3, 2)).status().code() == StatusCode::kInvalidArgument);
      CHECK(SynthesizeQuestions(corpus, Options(0, 1, 1)).status().code() == StatusCode::kInvalidArgument);
    }
    SUBCASE("a corpus too small for the hops") {
      const std::string small = dir / "small.sqlite";
      {
        auto writer = CorpusWriter::Create(small);
        REQUIRE(writer.ok());
        REQUIRE(
            (*writer)
                ->Add({"t:alpha", "alpha", "", "t", "alpha\nThe first letter of the Greek alphabet, before beta.", {}})
                .ok());
        REQUIRE((*writer)
                    ->Add({"t:omega", "omega", "", "t", "omega\nThe last letter of the Greek alphabet, after psi.", {}})
                    .ok());
        REQUIRE((*writer)->Finish().ok());
      }
      CHECK(SynthesizeQuestions(small, Options(1, 1, 1)).ok());  // a definition question needs no link
      auto result = SynthesizeQuestions(small, Options(1, 2, 2));
      CHECK(result.status().code() == StatusCode::kFailedPrecondition);
      CHECK(result.status().message().find("yields only 0 of 1 questions with 2 hop(s)") != std::string::npos);
    }
    SUBCASE("more questions than the corpus has") {
      auto result = SynthesizeQuestions(corpus, Options(500, 1, 1));
      CHECK(result.status().code() == StatusCode::kFailedPrecondition);
      CHECK(result.status().message().find("of 500 questions with 1 hop(s)") != std::string::npos);
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::search
