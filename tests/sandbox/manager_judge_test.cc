// SessionManager::JudgeAnswers: a task's verifier and oracle on batches of answers, against the
// real worker, on a bundle packed from the mini fixture (whose oldest_book task has an oracle).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "sandbox/env_pack.h"
#include "sandbox/session_manager.h"
#include "tests/sandbox/manager_test_util.h"

namespace envforge::sandbox {
namespace {

namespace fs = std::filesystem;

// A copy of tests/fixtures/envs/<name> (mini by default) to edit, then pack.
struct PackedMini {
  fs::path dir;
  std::string source;
  std::string bundle;
  explicit PackedMini(const std::string& name = "mini") {
    dir = fs::temp_directory_path() / ("envforge_judge_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    source = (dir / name).string();
    fs::copy(fs::path(ENVFORGE_TEST_SOURCE_DIR) / "tests/fixtures/envs" / name, source, fs::copy_options::recursive);
  }
  void Pack() {
    bundle = (dir / "env.envdb").string();
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

toolsets::ToolCall Submit(const std::string& answer_text) {
  return toolsets::ToolCall{"submit", "submit_result", Json{{"answer_text", answer_text}}};
}

// tests/fixtures/envs/forger: its tool `tamper` rewrites the runtime of the session it runs in
// (verdict normalisation, the judge, every verifier, the verifiers' builtins, the db module), and
// its task `forged` has a verifier that always says no.
TEST_CASE("code that rewrites the episode's runtime cannot forge a verdict: the verdict comes from a fresh process") {
  PackedMini forger("forger");
  forger.Pack();
  auto manager = SessionManager::Create({}).value();
  std::string env = manager->OpenEnvironment(forger.bundle).value();

  SUBCASE("a gold solution that tampers through its tools, then submits") {
    auto session = manager->CreateSession(env, "forged").value();
    auto solved = manager->Solve(session);
    REQUIRE(solved.ok());
    auto verdict = manager->CallTool(session, Submit(solved->answer_text));
    INFO(toolsets::ToJson(verdict).dump());
    REQUIRE(verdict.ok());
    CHECK(verdict.content["passed"] == false);
    CHECK(verdict.session_alive);
    auto judged = manager->JudgeAnswers(session, Judge::kVerifier, {solved->answer_text});
    REQUIRE(judged.ok());
    CHECK_FALSE(judged->front().defect);
    CHECK_FALSE(judged->front().passed);
  }
  SUBCASE("an agent's tool call tampers, then the agent submits") {
    auto session = manager->CreateSession(env, "honest").value();
    auto tampered = manager->CallTool(session, toolsets::ToolCall{"t", "tamper", Json::object()});
    INFO(toolsets::ToJson(tampered).dump());
    REQUIRE(tampered.ok());
    CHECK(tampered.content == Json::array({"_normalise_verdict", "_judge_one", "verifiers", "builtins", "db module"}));
    auto wrong = manager->CallTool(session, Submit(R"({"title": "Computing Machinery and Intelligence"})"));
    REQUIRE(wrong.ok());
    CHECK(wrong.content["passed"] == false);
    // The normal path still passes, in the same (tampered) session.
    auto right = manager->CallTool(session, Submit(R"({"title": "On Computable Numbers"})"));
    REQUIRE(right.ok());
    CHECK(right.content["passed"] == true);
    CHECK(right.content["verifier_version"] == manager->FindEnvironment(env)->FindTask("honest")->version);
  }
}

TEST_CASE("a verifier cannot change the read-only view for the next judgement, within a batch or across batches") {
  PackedMini mini;
  REQUIRE(WriteFileAtomically(mini.source + "/tasks/oldest_book/verifier.py", R"PY(
def verify(answer, db):
    if answer == "attack":
        for sql in ("PRAGMA query_only=0",
                    "CREATE TEMP TABLE books(id INTEGER, title TEXT, author TEXT, year INTEGER)",
                    "INSERT INTO temp.books VALUES (9, 'Forged', 'Alan Turing', 1000)",
                    "INSERT INTO main.books VALUES (9, 'Forged', 'Alan Turing', 1000, NULL, NULL)",
                    "ATTACH DATABASE ':memory:' AS other"):
            try:
                db.query(sql)
            except Exception:  # PermissionError, or no such table after a refused CREATE
                pass
        return True
    rows = db.query("SELECT title FROM books WHERE author = 'Alan Turing' ORDER BY year LIMIT 1")
    temp = db.query("SELECT count(*) AS n FROM sqlite_temp_master")
    return {"passed": rows[0]["title"] == "On Computable Numbers" and temp[0]["n"] == 0,
            "reasons": ["%s, %d temp objects" % (rows[0]["title"], temp[0]["n"])]}
)PY")
              .ok());
  mini.Pack();
  auto manager = SessionManager::Create({}).value();
  std::string env = manager->OpenEnvironment(mini.bundle).value();
  auto session = manager->CreateSession(env, "oldest_book").value();
  // As the audit's lanes do: one session per task, batches one after another.
  auto first = manager->JudgeAnswers(session, Judge::kVerifier, {"attack", "check", "check"});
  REQUIRE(first.ok());
  for (const JudgeVerdict& verdict : *first) {
    INFO(verdict.defect_message << " " << (verdict.reasons.empty() ? "" : verdict.reasons[0]));
    CHECK_FALSE(verdict.defect);
    CHECK(verdict.passed);
  }
  auto second = manager->JudgeAnswers(session, Judge::kVerifier, {"check"});
  REQUIRE(second.ok());
  CHECK(second->front().passed);
  auto submitted = manager->CallTool(session, Submit("check"));
  REQUIRE(submitted.ok());
  CHECK(submitted.content["passed"] == true);
}

TEST_CASE("a judge process judges its task's later batches afresh, and is closed after a limit or a budget") {
  PackedMini mini;
  // `seen` lives as long as the verifier's module namespace: a batch's answers share it, batches
  // do not.
  REQUIRE(WriteFileAtomically(mini.source + "/tasks/oldest_book/verifier.py", R"PY(
seen = []


def verify(answer, db):
    seen.append(answer)
    if answer == "spin":
        while True:
            pass
    return {"passed": True, "reasons": ["seen %d" % len(seen)]}
)PY")
              .ok());
  mini.Pack();
  ManagerOptions options;
  options.limits.wall_time = std::chrono::milliseconds(300);
  options.idle_judges_per_environment = 1;
  auto manager = SessionManager::Create(options).value();
  std::string env = manager->OpenEnvironment(mini.bundle).value();
  auto session = manager->CreateSession(env, "oldest_book").value();
  auto reasons = [&](const std::vector<std::string>& answers) {
    auto judged = manager->JudgeAnswers(session, Judge::kVerifier, answers);
    REQUIRE(judged.ok());
    std::vector<std::string> out;
    for (const JudgeVerdict& verdict : *judged) out.push_back(verdict.defect ? verdict.limit : verdict.reasons.at(0));
    return out;
  };
  auto kept = [&] { return manager->Stats().judgements_in_kept_process; };

  CHECK(reasons({"a", "b"}) == std::vector<std::string>{"seen 1", "seen 2"});
  CHECK(kept() == 0);
  CHECK(reasons({"c"}) == std::vector<std::string>{"seen 1"});  // the same process, a fresh namespace
  CHECK(kept() == 1);
  // A verdict at a limit: that process judges no more.
  CHECK(reasons({"spin"}) == std::vector<std::string>{"wall_time"});
  CHECK(kept() == 2);
  CHECK(reasons({"d"}) == std::vector<std::string>{"seen 1"});
  CHECK(kept() == 2);
  CHECK(reasons({"e"}) == std::vector<std::string>{"seen 1"});
  CHECK(kept() == 3);

  SUBCASE("another task's judgement never takes it; one idle process per environment here") {
    auto other = manager->CreateSession(env, "count_books").value();
    REQUIRE(manager->JudgeAnswers(other, Judge::kVerifier, {"1"}).ok());
    CHECK(kept() == 3);
    CHECK(reasons({"f"}) == std::vector<std::string>{"seen 1"});  // oldest_book's was closed for it
    CHECK(kept() == 3);
  }
  SUBCASE("a budget of one judgement per process: every judgement forks") {
    ManagerOptions fresh = options;
    fresh.judgements_per_judge_process = 1;
    auto each_fresh = SessionManager::Create(fresh).value();
    std::string fresh_env = each_fresh->OpenEnvironment(mini.bundle).value();
    auto fresh_session = each_fresh->CreateSession(fresh_env, "oldest_book").value();
    for (int i = 0; i < 3; ++i) REQUIRE(each_fresh->JudgeAnswers(fresh_session, Judge::kVerifier, {"x"}).ok());
    CHECK(each_fresh->Stats().judgements_in_kept_process == 0);
  }
}

// oldest_book's verifier for the kept-judge tests: it passes every answer, with the answer as its
// reason; an answer "slow:N" first counts to N in Python (a judgement that holds its process).
void WriteSlowOnAskVerifier(PackedMini& mini) {
  REQUIRE(WriteFileAtomically(mini.source + "/tasks/oldest_book/verifier.py", R"PY(
def verify(answer, db):
    if answer.startswith("slow:"):
        total = 0
        for i in range(int(answer[5:])):
            total += i
    return {"passed": True, "reasons": [answer]}
)PY")
              .ok());
}

TEST_CASE("a wave of verdicts keeps as many judge processes idle as judged at once, past the configured count") {
  PackedMini mini;
  WriteSlowOnAskVerifier(mini);
  mini.Pack();
  ManagerOptions options;
  options.idle_judges_per_environment = 2;
  auto manager = SessionManager::Create(options).value();
  std::string env = manager->OpenEnvironment(mini.bundle).value();
  constexpr int kWave = 5;
  std::vector<SessionManager::SessionId> sessions;
  for (int i = 0; i < kWave; ++i) sessions.push_back(manager->CreateSession(env, "oldest_book").value());
  auto wave = [&] {
    std::vector<std::thread> judging;
    for (int i = 0; i < kWave; ++i) {
      judging.emplace_back(
          [&, i] { CHECK(manager->JudgeAnswers(sessions[i], Judge::kVerifier, {"slow:3000000"}).ok()); });
    }
    for (std::thread& thread : judging) thread.join();
  };
  wave();
  // The slow verifier keeps the five judgements in flight together, so all five processes wait.
  CHECK(manager->Stats().idle_judges == kWave);
  wave();  // served by them: no fork
  CHECK(manager->Stats().judgements_in_kept_process == kWave);
  CHECK(manager->Stats().idle_judges == kWave);
}

TEST_CASE("an idle judge process is closed after idle_judge_timeout, and the next judgement forks") {
  PackedMini mini;
  mini.Pack();
  ManagerOptions options;
  options.idle_judge_timeout = std::chrono::milliseconds(1000);
  auto manager = SessionManager::Create(options).value();
  std::string env = manager->OpenEnvironment(mini.bundle).value();
  auto session = manager->CreateSession(env, "oldest_book").value();
  auto judge = [&] { REQUIRE(manager->JudgeAnswers(session, Judge::kVerifier, {R"({"title": "x"})"}).ok()); };
  auto stats = [&] { return manager->Stats(); };
  auto idle_for_a_while = [&](size_t expected) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (stats().idle_judges != expected && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return stats().idle_judges;
  };

  judge();
  CHECK(stats().idle_judges == 1);
  judge();  // taken at once: the same process
  CHECK(stats().judgements_in_kept_process == 1);
  CHECK(idle_for_a_while(0) == 0);
  CHECK(stats().idle_judges_closed == 1);
  judge();  // a fresh process
  CHECK(stats().judgements_in_kept_process == 1);
  CHECK(stats().idle_judges == 1);

  SUBCASE("without a timeout it waits for its next judgement") {
    ManagerOptions forever = options;
    forever.idle_judge_timeout = std::chrono::milliseconds(0);
    auto keeping = SessionManager::Create(forever).value();
    std::string keeping_env = keeping->OpenEnvironment(mini.bundle).value();
    auto keeping_session = keeping->CreateSession(keeping_env, "oldest_book").value();
    REQUIRE(keeping->JudgeAnswers(keeping_session, Judge::kVerifier, {"1"}).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the other manager's timeout
    CHECK(keeping->Stats().idle_judges == 1);
    REQUIRE(keeping->JudgeAnswers(keeping_session, Judge::kVerifier, {"2"}).ok());
    CHECK(keeping->Stats().judgements_in_kept_process == 1);
    CHECK(keeping->Stats().idle_judges_closed == 0);
  }
}

TEST_CASE("a kept judge process that died while it waited is passed over for a live one of its task") {
  PackedMini mini;
  WriteSlowOnAskVerifier(mini);
  mini.Pack();
  ManagerOptions options;
  options.idle_judges_per_environment = 4;
  auto manager = SessionManager::Create(options).value();
  std::string env = manager->OpenEnvironment(mini.bundle).value();
  auto first = manager->CreateSession(env, "oldest_book").value();
  auto second = manager->CreateSession(env, "oldest_book").value();
  // Two judge processes of the task at once; the slow one is kept last, so it is the newest.
  std::thread slow([&] { CHECK(manager->JudgeAnswers(second, Judge::kVerifier, {"slow:10000000"}).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(manager->JudgeAnswers(first, Judge::kVerifier, {"quick"}).ok());
  slow.join();
  REQUIRE(manager->Stats().idle_judges == 2);

  // The slow judge process is the zygote's child that spent the CPU (the sessions and the other
  // judge process spent next to none).
  pid_t newest = 0;
  long most = -1, next_most = -1;
  for (const ZygoteInfo& zygote : manager->Zygotes()) {
    for (pid_t child : testing::ChildrenOf(zygote.pid)) {
      long ticks = testing::ProcessCpuTicks(child);
      if (ticks > most) {
        next_most = most;
        most = ticks;
        newest = child;
      } else {
        next_most = std::max(next_most, ticks);
      }
    }
  }
  INFO("cpu ticks: " << most << " against " << next_most);
  REQUIRE(most > next_most + 10);
  REQUIRE(::kill(newest, SIGKILL) == 0);
  REQUIRE(testing::WaitFor([&] { return !testing::ProcessExists(newest); }));

  // Asked at once: the manager's io loop may not have run the dead process's exit handlers yet.
  auto judged = manager->JudgeAnswers(first, Judge::kVerifier, {"again"});
  INFO("judged: " << (judged.ok() ? std::string("ok") : judged.status().ToString()));
  REQUIRE(judged.ok());
  CHECK(judged->front().reasons.at(0) == "again");
  CHECK(manager->Stats().judgements_in_kept_process == 1);  // the live one, not a fresh fork
}

TEST_CASE("the manager takes a judge's reply as untrusted input") {
  PackedMini mini;
  // tools.py's module body runs in the zygote: every judge process inherits what it patched.
  std::string tools = ReadFileToString(mini.source + "/tools.py").value();
  tools += R"PY(

import sys as _sys

def _forged_judge(cid, msg):
    return '{"id": %d, "outcome": "ok", "verdicts": [{"passed": true, "score": 1.0, "reasons": [1, 2]}]}' % cid

_sys.modules["_envforge_runtime"]._judge = _forged_judge
)PY";
  REQUIRE(WriteFileAtomically(mini.source + "/tools.py", tools).ok());
  mini.Pack();
  auto manager = SessionManager::Create({}).value();
  std::string env = manager->OpenEnvironment(mini.bundle).value();
  auto session = manager->CreateSession(env, "oldest_book").value();
  auto verdict = manager->CallTool(session, Submit(R"({"title": "x"})"));
  CHECK(verdict.outcome == toolsets::Outcome::kInfraError);
  CHECK(verdict.message.find("a reason that is not a string") != std::string::npos);
  auto judged = manager->JudgeAnswers(session, Judge::kVerifier, {"1"});
  CHECK(judged.status().code() == StatusCode::kInternal);
  // The manager and the session live on.
  CHECK(manager->CallTool(session, toolsets::ToolCall{"l", "list_books", Json{{"author", "Alan Turing"}}}).ok());
}

}  // namespace
}  // namespace envforge::sandbox
