// SessionManager::JudgeAnswers: a task's verifier and oracle on batches of answers, against the
// real worker, on a bundle packed from the mini fixture (whose oldest_book task has an oracle).
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/fd.h"
#include "sandbox/env_pack.h"
#include "sandbox/session_manager.h"

namespace envforge::sandbox {
namespace {

namespace fs = std::filesystem;

struct PackedMini {
  fs::path dir;
  std::string source;
  std::string bundle;
  PackedMini() {
    dir = fs::temp_directory_path() / ("envforge_judge_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    source = (dir / "mini").string();
    fs::copy(fs::path(ENVFORGE_TEST_SOURCE_DIR) / "tests/fixtures/envs/mini", source, fs::copy_options::recursive);
  }
  void Pack() {
    bundle = (dir / "mini.envdb").string();
    Status packed = PackEnvironment(source, bundle);
    INFO(packed.ToString());
    REQUIRE(packed.ok());
  }
  ~PackedMini() { fs::remove_all(dir); }
};

TEST_CASE("the verifier and the oracle judge a batch of answers and the session lives on") {
  PackedMini mini;
  mini.Pack();
  auto manager = SessionManager::Create({}).value();
  std::string env = manager->OpenEnvironment(mini.bundle).value();
  auto session = manager->CreateSession(env, "oldest_book").value();
  std::string gold = manager->Solve(session).value().answer_text;
  std::vector<std::string> answers = {gold, R"({"title": "no such book"})", "", "null", "```json\n{}\n```"};

  auto by_verifier = manager->JudgeAnswers(session, Judge::kVerifier, answers);
  REQUIRE(by_verifier.ok());
  REQUIRE(by_verifier->size() == answers.size());
  CHECK((*by_verifier)[0].passed);
  CHECK_FALSE((*by_verifier)[0].defect);
  for (size_t i = 1; i < answers.size(); ++i) {
    CHECK_FALSE((*by_verifier)[i].defect);
    CHECK_FALSE((*by_verifier)[i].passed);
  }
  auto by_oracle = manager->JudgeAnswers(session, Judge::kOracle, {gold, R"({"title": "no such book"})"});
  REQUIRE(by_oracle.ok());
  CHECK((*by_oracle)[0].passed);
  CHECK_FALSE((*by_oracle)[1].passed);
  CHECK((*by_oracle)[1].reasons == std::vector<std::string>{"not the oldest"});

  // Judging changed nothing: the session still answers and still accepts its gold answer.
  toolsets::ToolCall submit{"s", "submit_result", Json{{"answer_text", gold}}};
  auto verdict = manager->CallTool(session, submit);
  REQUIRE(verdict.ok());
  CHECK(verdict.content["passed"] == true);
  CHECK(manager->JudgeAnswers(session, Judge::kVerifier, {}).value().empty());
}

TEST_CASE("a judge that raises or returns a non-verdict is a defect per answer, never a fail") {
  PackedMini mini;
  // Crashes on null: the defect names the exception and the line; other answers are judged.
  std::string verifier = mini.source + "/tasks/oldest_book/verifier.py";
  REQUIRE(WriteFileAtomically(verifier,
                      "def verify(answer, db):\n"
                      "    if answer == 'maybe':\n"
                      "        return 'yes'\n"
                      "    return answer['title'] == 'x'\n")
              .ok());
  mini.Pack();
  auto manager = SessionManager::Create({}).value();
  std::string env = manager->OpenEnvironment(mini.bundle).value();
  auto session = manager->CreateSession(env, "oldest_book").value();
  auto verdicts = manager->JudgeAnswers(session, Judge::kVerifier, {"null", R"({"title": "x"})", "maybe"});
  REQUIRE(verdicts.ok());
  REQUIRE(verdicts->size() == 3);
  CHECK((*verdicts)[0].defect);
  CHECK((*verdicts)[0].defect_message.find("TypeError") != std::string::npos);
  CHECK((*verdicts)[0].defect_message.find("verifier.py:4") != std::string::npos);
  CHECK_FALSE((*verdicts)[1].defect);
  CHECK((*verdicts)[1].passed);
  CHECK((*verdicts)[2].defect);
  CHECK((*verdicts)[2].defect_message.find("returned str") != std::string::npos);
}

TEST_CASE("judging asks for a task, and for an oracle only where the task has one") {
  PackedMini mini;
  mini.Pack();
  auto manager = SessionManager::Create({}).value();
  std::string env = manager->OpenEnvironment(mini.bundle).value();
  auto no_task = manager->CreateSession(env, std::string()).value();
  CHECK(manager->JudgeAnswers(no_task, Judge::kVerifier, {"1"}).status().code() == StatusCode::kFailedPrecondition);
  auto no_oracle = manager->CreateSession(env, "count_books").value();
  auto refused = manager->JudgeAnswers(no_oracle, Judge::kOracle, {"1"});
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message().find("no oracle") != std::string::npos);
  CHECK(manager->JudgeAnswers(987654, Judge::kVerifier, {"1"}).status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace envforge::sandbox
