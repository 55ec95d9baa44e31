// `envforge search synth` from the command line (the real binary): --help, the --json summary,
// the bundle it writes solved by `envforge session solve` and audited sound by `envforge audit`,
// and bad input -- a missing corpus, hops out of range, a corpus too small for what was asked --
// exiting 2 with a clear message and no bundle, complete or partial.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

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
