// --search-judge on the command line (the real binary): `envforge rollout` of a search environment
// where the policy submits a near miss ("helium gas" for "helium") fails on the exact match alone
// and passes with a rubric judge that accepts it; the judge's options need each other, and a
// judge with --url is refused (the server's sessions are judged by the server).
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "base/json.h"
#include "tests/run_envforge.h"
#include "tests/sandbox/search_env_fixture.h"
#include "tests/temp_dir.h"

namespace envforge {
namespace {

using testing::Envforge;
using testing::TempDir;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The first JSON line `envforge ARGS` prints (a rollout's first task), which must exit 0.
Json FirstLineOf(const std::vector<std::string>& args) {
  auto run = Envforge(args);
  INFO(run.stderr_text);
  REQUIRE(run.exit_code == 0);
  auto line = ParseJson(run.stdout_text.substr(0, run.stdout_text.find('\n')));
  REQUIRE(line.ok());
  return *line;
}

TEST_SUITE("apps.search_judge") {
  TEST_CASE("rollout --search-judge turns a near miss the judge accepts into a pass" * doctest::timeout(300)) {
    TempDir dir;
    const std::string envdb = dir / "search.envdb";
    auto packed = Envforge({"env", "pack", sandbox::testing::MakeSearchEnvSource(dir), "-o", envdb});
    INFO(packed.stderr_text);
    REQUIRE(packed.exit_code == 0);
    const std::string policy = dir / "policy.jsonl";
    std::ofstream(policy)
        << R"({"tool_calls": [{"name": "submit_result", "arguments": {"answer_text": "helium gas"}}]})"
        << "\n";
    const std::string judge = dir / "judge.jsonl";
    std::ofstream(judge) << R"({"when": "Answer to grade: \"helium gas\"", "content": "{\"verdict\": \"equivalent\"}"})"
                         << "\n"
                         << R"({"content": "no line matched"})"
                         << "\n";

    const std::vector<std::string> rollout = {
        "rollout", envdb, "--task", "second-lightest-element", "--backend", "scripted:" + policy, "-n", "2", "--json"};
    const Json exact = FirstLineOf(rollout);
    CHECK(exact["passed"] == 0);
    std::vector<std::string> judged = rollout;
    judged.insert(judged.end(), {"--search-judge", "scripted:" + judge});
    const Json with_judge = FirstLineOf(judged);
    CHECK(with_judge["passed"] == 2);
    CHECK(with_judge["outcomes"] == Json{{"submitted", 2}});
  }

  TEST_CASE("the judge's options need --search-judge, and --url leaves judging to the server") {
    TempDir dir;
    auto votes = Envforge({"rollout", dir / "x.envdb", "--all", "--backend", "scripted:" + (dir / "p.jsonl"),
                           "--search-judge-votes", "3"});
    CHECK(votes.exit_code == 2);
    CHECK(Contains(votes.stderr_text, "--search-judge-votes needs --search-judge"));
    auto remote = Envforge({"rollout", "--url", "http://127.0.0.1:9", "--env", "e", "--all", "--backend",
                            "scripted:" + (dir / "p.jsonl"), "--search-judge", "scripted:" + (dir / "j.jsonl")});
    CHECK(remote.exit_code == 2);
    CHECK(Contains(remote.stderr_text, "give it to envforge serve"));
    auto serve = Envforge({"serve", "--envs", dir.path().string(), "--search-judge-model", "m"});
    CHECK(serve.exit_code == 2);
    CHECK(Contains(serve.stderr_text, "--search-judge-model needs --search-judge"));
    auto help = Envforge({"serve", "--help"});
    CHECK(Contains(help.stdout_text, "--search-judge SPEC"));
  }
}

}  // namespace
}  // namespace envforge
