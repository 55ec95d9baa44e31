// Synthesized search environments (sandbox/search_synth_bundle.h) in real sessions: questions
// synthesized from the fixture corpus, packed with their solution paths; every task's gold answer
// passes through the SessionManager, its recorded solution path replayed through the session's
// own search/open tools finds the answer, and a near miss fails. A failed pack leaves no bundle.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "sandbox/env_bundle.h"
#include "sandbox/search_bundle.h"
#include "sandbox/search_synth_bundle.h"
#include "sandbox/session_manager.h"
#include "tests/sandbox/search_env_fixture.h"
#include "toolsets/search/qa_synth.h"

namespace envforge::sandbox {
namespace {

namespace fs = std::filesystem;
using ::envforge::testing::TempDir;

search::QaSynthOptions SynthOptions(int questions, int min_hops, int max_hops) {
  search::QaSynthOptions options;
  options.questions = questions;
  options.min_hops = min_hops;
  options.max_hops = max_hops;
  return options;
}

std::vector<search::SynthQuestion> Synthesize(const std::string& corpus, const search::QaSynthOptions& options) {
  auto result = search::SynthesizeQuestions(corpus, options);
  REQUIRE_MESSAGE(result.ok(), result.status().ToString());
  return std::move(result->questions);
}

bool Passed(const toolsets::ToolResult& result) { return result.ok() && result.content.value("passed", false); }

TEST_SUITE("sandbox.search_synth") {
  TEST_CASE("every synthesized task is solved in a real session, by its answer and by its own solution path" *
            doctest::timeout(120)) {
    TempDir dir;
    const std::string corpus = dir / "corpus.sqlite";
    testing::BuildFixtureCorpus(corpus);
    const search::QaSynthOptions options = SynthOptions(2, 1, 4);
    const std::vector<search::SynthQuestion> questions = Synthesize(corpus, options);
    const std::string envdb = dir / "synth.envdb";
    Status packed = PackSynthesizedSearchEnvironment(questions, options, corpus, envdb);
    REQUIRE_MESSAGE(packed.ok(), packed.ToString());
    CHECK(fs::directory_iterator(dir.path()) != fs::directory_iterator());
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      CHECK(entry.path().filename().string().find(".source.") == std::string::npos);  // the source is gone
    }

    Result<EnvBundle> bundle = EnvBundle::Load(envdb);
    REQUIRE_MESSAGE(bundle.ok(), bundle.status().ToString());
    CHECK(bundle->manifest.kind == "search");
    // The removed source is not named; what reproduces the bundle is.
    const Json& provenance = bundle->manifest.provenance;
    CHECK(provenance.at("source_dir").is_null());
    CHECK(provenance.at("corpus") == fs::absolute(corpus).lexically_normal().string());
    CHECK(provenance.at("synth_seed") == options.seed);
    REQUIRE(bundle->tasks.size() == 8);
    Result<SearchBundle> search = LoadSearchBundle(envdb);
    REQUIRE_MESSAGE(search.ok(), search.status().ToString());
    CHECK(search->solutions.size() == 8);
    for (const TaskRecord& task : bundle->tasks) {
      CHECK(task.knobs.contains("hops"));
      CHECK(task.knobs.contains("distractors"));
      CHECK(task.knobs.contains("rarity"));
    }

    auto manager = SessionManager::Create({});
    REQUIRE_MESSAGE(manager.ok(), manager.status().ToString());
    auto env_id = (*manager)->OpenEnvironment(envdb);
    REQUIRE_MESSAGE(env_id.ok(), env_id.status().ToString());
    for (const search::SynthQuestion& question : questions) {
      INFO(question.id << ": " << question.prompt);
      auto new_session = [&] {
        auto session = (*manager)->CreateSession(*env_id, question.id);
        REQUIRE_MESSAGE(session.ok(), session.status().ToString());
        return *session;
      };
      auto submit = [&](SessionManager::SessionId session, const std::string& answer) {
        return (*manager)->CallTool(session, toolsets::ToolCall{"s", "submit_result", {{"answer_text", answer}}});
      };
      // The gold answer (the manager's gold solution of a search task).
      SessionManager::SessionId gold = new_session();
      Result<SolveOutput> solved = (*manager)->Solve(gold);
      REQUIRE_MESSAGE(solved.ok(), solved.status().ToString());
      CHECK(Passed(submit(gold, solved->answer_text)));
      (void)(*manager)->CloseSession(gold);

      // The recorded solution path, through the session's search and open tools.
      SessionManager::SessionId walker = new_session();
      const search::SolutionPath& path = search->solutions.at(question.id);
      auto replay = search::ReplaySolutionPath(
          path, [&](const toolsets::ToolCall& call) { return (*manager)->CallTool(walker, call); });
      REQUIRE_MESSAGE(replay.ok(), replay.status().ToString());
      CHECK(replay->final_doc_id == question.chain.back().doc_id);
      CHECK(Passed(submit(walker, replay->answer)));
      (void)(*manager)->CloseSession(walker);

      // A near miss without an alias.
      SessionManager::SessionId misser = new_session();
      toolsets::ToolResult miss = submit(misser, question.key.answer + "x");
      REQUIRE(miss.ok());
      CHECK_FALSE(miss.content.value("passed", true));
      (void)(*manager)->CloseSession(misser);
    }
  }

  TEST_CASE("the same seed packs the same environment (content hash), another seed another one") {
    TempDir dir;
    const std::string corpus = dir / "corpus.sqlite";
    testing::BuildFixtureCorpus(corpus);
    auto hash_of = [&](uint64_t seed, const std::string& name) {
      search::QaSynthOptions options = SynthOptions(2, 1, 3);
      options.seed = seed;
      const std::string envdb = dir / name;
      REQUIRE(PackSynthesizedSearchEnvironment(Synthesize(corpus, options), options, corpus, envdb).ok());
      Result<EnvBundle> bundle = EnvBundle::Load(envdb);
      REQUIRE(bundle.ok());
      return bundle->manifest.content_hash;
    };
    const std::string first = hash_of(5, "a.envdb");
    CHECK(hash_of(5, "b.envdb") == first);
    CHECK(hash_of(6, "c.envdb") != first);
  }

  TEST_CASE("a failed pack leaves no half-written bundle") {
    TempDir dir;
    const std::string corpus = dir / "corpus.sqlite";
    testing::BuildFixtureCorpus(corpus);
    const search::QaSynthOptions options = SynthOptions(1, 1, 1);
    const std::vector<search::SynthQuestion> questions = Synthesize(corpus, options);
    SUBCASE("no question") {
      Status status = PackSynthesizedSearchEnvironment({}, options, corpus, dir / "none.envdb");
      CHECK(status.code() == StatusCode::kInvalidArgument);
      CHECK_FALSE(fs::exists(dir / "none.envdb"));
    }
    SUBCASE("an output directory that does not exist") {
      Status status = PackSynthesizedSearchEnvironment(questions, options, corpus, dir / "absent/out.envdb");
      CHECK_FALSE(status.ok());
      CHECK_FALSE(fs::exists(dir / "absent"));
    }
    SUBCASE("a question the packer refuses keeps the previous bundle") {
      const std::string envdb = dir / "kept.envdb";
      REQUIRE(PackSynthesizedSearchEnvironment(questions, options, corpus, envdb).ok());
      const auto size = fs::file_size(envdb);
      std::vector<search::SynthQuestion> bad = questions;
      bad.front().id = "bad id!";  // not a valid task id
      Status status = PackSynthesizedSearchEnvironment(bad, options, corpus, envdb);
      CHECK(status.code() == StatusCode::kInvalidArgument);
      CHECK(fs::file_size(envdb) == size);
      CHECK(EnvBundle::Load(envdb).ok());
    }
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      CHECK(entry.path().filename().string().find(".source.") == std::string::npos);
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
