// `envforge search synth` from the command line (the real binary): --help, the --json summary,
// the bundle it writes solved by `envforge session solve` and audited sound by `envforge audit`,
// the model review (--backend) with a scripted model, a review ended by SIGTERM leaving nothing
// behind, and bad input -- a missing corpus, hops out of range, a corpus too small for what was
// asked, review options without a backend -- exiting 2 with a clear message and no bundle,
// complete or partial.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/json.h"
#include "tests/run_envforge.h"
#include "tests/sandbox/search_env_fixture.h"
#include "tests/temp_dir.h"
#include "toolsets/search/debian_corpus.h"

namespace envforge {
namespace {

namespace fs = std::filesystem;
using testing::Envforge;
using testing::TempDir;

std::string FixtureCorpus(const TempDir& dir) {
  const std::string path = dir / "corpus.sqlite";
  sandbox::testing::BuildFixtureCorpus(path);
  return path;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Nothing but the corpus in dir: no bundle, no leftover source directory.
void CheckOnlyCorpus(const TempDir& dir) {
  for (const auto& entry : fs::directory_iterator(dir.path())) CHECK(entry.path().filename() == "corpus.sqlite");
}

TEST_SUITE("apps.search_synth") {
  TEST_CASE("search synth writes a bundle that session solve solves and audit finds sound" * doctest::timeout(300)) {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    auto help = Envforge({"search", "synth", "--help"});
    CHECK(help.exit_code == 0);
    CHECK(Contains(help.stdout_text, "--questions N"));
    CHECK(Contains(help.stdout_text, "--hops A..B"));

    const std::string envdb = dir / "synth.envdb";
    auto synth =
        Envforge({"search", "synth", "--corpus", corpus, "--questions", "2", "--hops", "1..3", "-o", envdb, "--json"});
    INFO(synth.stderr_text);
    REQUIRE(synth.exit_code == 0);
    CHECK(Contains(synth.stderr_text, "synth: 3 hop(s): 2/2 questions"));  // progress lines
    auto summary = ParseJson(synth.stdout_text);
    REQUIRE(summary.ok());
    CHECK((*summary)["questions"] == 6);
    for (const char* hops : {"1", "2", "3"}) {
      CHECK((*summary)["by_hops"][hops]["questions"] == 2);
      CHECK((*summary)["by_hops"][hops]["questions_per_minute"].get<double>() > 0);
    }
    CHECK((*summary)["corpus"]["documents"] == 21);

    for (const char* task : {"h1-0001", "h2-0002", "h3-0001"}) {
      auto solved = Envforge({"session", "solve", envdb, "--task", task, "--json"});
      INFO(solved.stdout_text << solved.stderr_text);
      CHECK(solved.exit_code == 0);
    }
    auto audit = Envforge({"audit", envdb, "--json"});
    INFO(audit.stderr_text);
    REQUIRE(audit.exit_code == 0);
    auto report = ParseJson(audit.stdout_text);
    REQUIRE(report.ok());
    REQUIRE((*report)["tasks"].size() == 6);
    for (const Json& task : (*report)["tasks"]) {
      CHECK(task["verdict"] == "sound");
      CHECK(task["oracle_kind"] == "answer_key");
    }
  }

  TEST_CASE("search synth --backend: a model writes the questions, answer agents and a verifier review them" *
            doctest::timeout(300)) {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    // One line per stage: every question written alike, every answer agent wrong, every wrong
    // answer refuted and every ground truth confirmed by the verifier.
    const std::string script = dir / "model.jsonl";
    {
      std::ofstream out(script);
      out << Json{{"when", "Proposal:"}, {"content", R"({"question": "MARK: which entry do the clues point at?"})"}}
                 .dump()
          << "\n"
          << Json{{"when", "Question under review:"},
                  {"content",
                   R"({"ground_truth": "correct", "candidates": [{"answer": "zzzq", "verdict": "incorrect"}]})"}}
                 .dump()
          << "\n"
          << Json{{"when", "MARK:"},
                  {"tool_calls", Json::array({{{"name", "submit_result"}, {"arguments", {{"answer_text", "zzzq"}}}}})}}
                 .dump()
          << "\n"
          << Json{{"content", "no line matched"}}.dump() << "\n";
    }
    auto help = Envforge({"search", "synth", "--help"});
    CHECK(Contains(help.stdout_text, "--backend SPEC"));
    CHECK(Contains(help.stdout_text, "--require-unsolved"));

    const std::string envdb = dir / "reviewed.envdb";
    const std::string reviews = dir / "reviews.jsonl";
    auto synth = Envforge({"search",
                           "synth",
                           "--corpus",
                           corpus,
                           "--questions",
                           "1",
                           "--hops",
                           "1..2",
                           "--proposals",
                           "2",
                           "--backend",
                           "scripted:" + script,
                           "--answer-agents",
                           "2",
                           "--verify-passes",
                           "1",
                           "--reviews",
                           reviews,
                           "-o",
                           envdb,
                           "--json"});
    INFO(synth.stderr_text);
    REQUIRE(synth.exit_code == 0);
    CHECK(Contains(synth.stderr_text, "review: verify 4/4"));  // progress of each stage
    auto summary = ParseJson(synth.stdout_text);
    REQUIRE(summary.ok());
    CHECK((*summary)["questions"] == 2);  // --questions 1 per hop count of the 4 kept
    CHECK((*summary)["review"]["proposals"] == 4);
    CHECK((*summary)["review"]["kept"] == 4);
    CHECK((*summary)["review"]["answer_episodes"] == 8);
    CHECK((*summary)["review"]["model_requests"] == 8);  // 4 writer + 4 verifier requests
    std::ifstream review_lines(reviews);
    int lines = 0;
    for (std::string line; std::getline(review_lines, line); ++lines) {
      auto review = ParseJson(line);
      REQUIRE(review.ok());
      CHECK((*review)["kept"] == true);
      CHECK((*review)["candidates"][0]["answer"] == "zzzq");
    }
    CHECK(lines == 4);

    auto show = Envforge({"env", "show", envdb, "--json"});
    REQUIRE(show.exit_code == 0);
    auto bundle = ParseJson(show.stdout_text);
    REQUIRE(bundle.ok());
    REQUIRE((*bundle)["tasks"].size() == 2);
    for (const Json& task : (*bundle)["tasks"]) {
      CHECK(task["prompt"] == "MARK: which entry do the clues point at?");
      CHECK(task["knobs"]["answer_agents"] == 2);
      CHECK(task["knobs"]["answer_agents_solved"] == 0);
      CHECK(task["knobs"]["distractors"].dump().find("zzzq") != std::string::npos);
      auto solved = Envforge({"session", "solve", envdb, "--task", task["id"].get<std::string>(), "--json"});
      INFO(solved.stdout_text << solved.stderr_text);
      CHECK(solved.exit_code == 0);  // the solution path still finds the answer
    }
    CHECK((*bundle)["manifest"]["provenance"]["backend"] == "scripted:" + script);
    CHECK((*bundle)["manifest"]["provenance"]["review"]["kept"] == 4);
  }

  TEST_CASE("a review ended by SIGTERM while its answer agents play leaves no bundle and no work directory" *
            doctest::timeout(120)) {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    const std::string script = dir / "model.jsonl";
    std::ofstream(script) << Json{{"when", "Proposal:"},
                                  {"content", R"({"question": "MARK: which entry do the clues point at?"})"}}
                                 .dump()
                          << "\n"
                          << Json{{"when", "MARK:"}, {"content", "thinking"}, {"sleep_ms", 60'000}}.dump() << "\n"
                          << Json{{"content", "no line matched"}}.dump() << "\n";
    const std::string envdb = dir / "reviewed.envdb";
    pid_t pid = testing::StartEnvforge({"search", "synth", "--corpus", corpus, "--questions", "1", "--proposals", "2",
                                        "--backend", "scripted:" + script, "-o", envdb});
    auto agents_playing = [&] {  // the answer agents' environment is packed in the work directory
      for (const auto& entry : fs::directory_iterator(dir.path()))
        if (fs::exists(entry.path() / "answer_agents.envdb")) return true;
      return false;
    };
    REQUIRE(testing::WaitUntil(agents_playing));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    REQUIRE(::kill(pid, SIGTERM) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    std::vector<std::string> left;
    for (const auto& entry : fs::directory_iterator(dir.path())) left.push_back(entry.path().filename().string());
    std::sort(left.begin(), left.end());
    CHECK(left == std::vector<std::string>{"corpus.sqlite", "model.jsonl"});
  }

  TEST_CASE("bad input exits 2 with a clear message and writes nothing") {
    TempDir dir;
    const std::string corpus = FixtureCorpus(dir);
    const std::string envdb = dir / "out.envdb";
    SUBCASE("a missing corpus") {
      auto run = Envforge(
          {"search", "synth", "--corpus", dir / "absent.sqlite", "--questions", "1", "--hops", "1", "-o", envdb});
      CHECK(run.exit_code == 2);
      CHECK(Contains(run.stderr_text, "absent.sqlite"));
    }
    SUBCASE("hops out of range") {
      for (const char* hops : {"0..2", "1..5", "3..2", "x"}) {
        auto run = Envforge({"search", "synth", "--corpus", corpus, "--questions", "1", "--hops", hops, "-o", envdb});
        CHECK(run.exit_code == 2);
        CHECK(Contains(run.stderr_text, "--hops must be A..B"));
      }
    }
    SUBCASE("a corpus too small for what was asked") {
      auto run = Envforge({"search", "synth", "--corpus", corpus, "--questions", "100", "--hops", "1..4", "-o", envdb});
      CHECK(run.exit_code == 2);
      CHECK(Contains(run.stderr_text, "yields only"));
    }
    SUBCASE("review options without --backend, too few proposals, a backend that does not open") {
      auto alone = Envforge({"search", "synth", "--corpus", corpus, "--answer-agents", "2", "-o", envdb});
      CHECK(alone.exit_code == 2);
      CHECK(Contains(alone.stderr_text, "--answer-agents needs --backend"));
      auto few = Envforge({"search", "synth", "--corpus", corpus, "--questions", "3", "--proposals", "2", "--backend",
                           "scripted:" + (dir / "absent.jsonl"), "-o", envdb});
      CHECK(few.exit_code == 2);
      CHECK(Contains(few.stderr_text, "--proposals (2) must be at least --questions (3)"));
      auto absent = Envforge(
          {"search", "synth", "--corpus", corpus, "--backend", "scripted:" + (dir / "absent.jsonl"), "-o", envdb});
      CHECK(absent.exit_code == 2);
      CHECK(Contains(absent.stderr_text, "absent.jsonl"));
    }
    SUBCASE("a missing option") {
      auto run = Envforge({"search", "synth", "--corpus", corpus, "--questions", "1"});
      CHECK(run.exit_code == 2);
      CHECK(Contains(run.stderr_text, "-o X.envdb is required"));
    }
    CheckOnlyCorpus(dir);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge
