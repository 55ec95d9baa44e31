// The envforge CLI as a user runs it: the real binary, real bundles, real sandbox sessions.
// Asserts exit codes, JSON output and error messages.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "agents/trajectory_store.h"
#include "base/fd.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "tests/run_envforge.h"

namespace envforge {
namespace {

namespace fs = std::filesystem;

std::string SourceDir() {
  const char* dir = std::getenv("ENVFORGE_SOURCE_DIR");
  return dir != nullptr ? dir : ENVFORGE_TEST_SOURCE_DIR;
}

using ::envforge::testing::Envforge;
using ::envforge::testing::StartEnvforge;
using ::envforge::testing::WaitUntil;

struct TempDir {
  fs::path path;
  TempDir() {
    path =
        fs::temp_directory_path() / ("envforge_cli_test_" + std::to_string(::getpid()) + "_" + std::to_string(rand()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// One packed reference bundle for the whole suite: packing is tested once, used everywhere.
const std::string& TripBundle() {
  static TempDir dir;
  static std::string path = [] {
    std::string out = (dir.path / "trip.envdb").string();
    auto packed = Envforge({"env", "pack", SourceDir() + "/data/envs/trip_planning", "-o", out, "--json"});
    INFO(packed.stderr_text);
    REQUIRE(packed.exit_code == 0);
    auto summary = ParseJson(packed.stdout_text).value();
    CHECK(summary["tools"] == 15);
    CHECK(summary["tasks"] == 4);
    return out;
  }();
  return path;
}

TEST_CASE("every command answers --help with its usage on stdout and exit 0, doing nothing else") {
  const std::vector<std::vector<std::string>> commands = {{"env", "pack"},
                                                          {"env", "show"},
                                                          {"env", "check"},
                                                          {"session", "solve"},
                                                          {"session", "run"},
                                                          {"bench", "sandbox"},
                                                          {"bench", "serve"},
                                                          {"bench", "engine"},
                                                          {"bench", "kernels"},
                                                          {"bench", "frames"},
                                                          {"bench", "rollout"},
                                                          {"bench", "v1"},
                                                          {"bench", "interpreter"},
                                                          {"bench", "viewer"},
                                                          {"audit"},
                                                          {"serve"},
                                                          {"view"},
                                                          {"traj", "ls"},
                                                          {"traj", "show"},
                                                          {"traj", "export"},
                                                          {"replay"},
                                                          {"generate"},
                                                          {"rollout"},
                                                          {"code", "junit"},
                                                          {"code", "import"},
                                                          {"code", "validate"},
                                                          {"search"},
                                                          {"env"},
                                                          {"session"},
                                                          {"bench"},
                                                          {"traj"},
                                                          {"code"}};
  for (std::vector<std::string> command : commands) {
    std::string words;
    for (const std::string& word : command) words += (words.empty() ? "" : " ") + word;
    CAPTURE(words);
    // After other arguments too: a user adds --help to the line that just failed.
    for (bool after_arguments : {false, true}) {
      std::vector<std::string> args = command;
      if (after_arguments) args.push_back("--json");
      args.push_back("--help");
      auto help = Envforge(args);
      CHECK(help.exit_code == 0);
      CHECK_MESSAGE(help.stdout_text.find("envforge " + words) != std::string::npos, help.stdout_text);
      CHECK(help.stdout_text.find("usage") != std::string::npos);
    }
  }
  auto unknown = Envforge({"env", "pack", "--no-such-option"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.stderr_text.find("--no-such-option") != std::string::npos);
}

TEST_CASE("code junit reads a real runner's report: ids and statuses, --json, exit 2 for bad reports") {
  const std::string fixtures = SourceDir() + "/tests/fixtures/junit/";
  auto table = Envforge({"code", "junit", fixtures + "pytest-xunit1.xml"});
  REQUIRE(table.exit_code == 0);
  CHECK(table.stdout_text.find("tests/test_a.py::test_xf") != std::string::npos);
  CHECK(table.stdout_text.find("producer: pytest (detected)") != std::string::npos);
  auto json_run = Envforge({"code", "junit", fixtures + "gotestsum.xml", "--json"});
  REQUIRE(json_run.exit_code == 0);
  Json report = ParseJson(json_run.stdout_text).value();
  CHECK(report["producer"] == "go");
  CHECK(report["broken"] == true);  // a package that did not build has no suite
  std::map<std::string, std::string> statuses;
  for (const Json& test : report["tests"]) statuses[test["id"]] = test["status"];
  CHECK(statuses["example.com/m/pkg1::TestSub/bad"] == "fail");
  CHECK(statuses["example.com/m/pkg1::TestSkip"] == "skip");
  TempDir dir;
  const std::string empty = (dir.path / "empty.xml").string(), garbage = (dir.path / "garbage.xml").string();
  REQUIRE(WriteFileAtomically(empty, "").ok());
  REQUIRE(WriteFileAtomically(garbage, "<testsuite><testcase name='a'>").ok());
  for (const std::string& bad : {empty, garbage, (dir.path / "absent.xml").string()}) {
    CAPTURE(bad);
    auto refused = Envforge({"code", "junit", bad});
    CHECK(refused.exit_code == 2);
    CHECK(refused.stderr_text.find(bad) != std::string::npos);
  }
  auto unknown = Envforge({"code", "junit", fixtures + "gtest.xml", "--producer", "nose"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.stderr_text.find("nose") != std::string::npos);
}

TEST_CASE("env show --json lists the manifest, the 15 trip tools with submit_result, the tasks and the hash") {
  auto shown = Envforge({"env", "show", TripBundle(), "--json"});
  REQUIRE(shown.exit_code == 0);
  Json json = ParseJson(shown.stdout_text).value();
  CHECK(json["manifest"]["name"] == "trip_planning");
  CHECK(json["manifest"]["kind"] == "general");
  std::vector<std::string> tools;
  for (const auto& tool : json["tools"]) tools.push_back(tool["name"]);
  CHECK(tools.size() == 15);
  CHECK(std::find(tools.begin(), tools.end(), "get_inter_city_transport") != tools.end());
  CHECK(tools.back() == "submit_result");
  CHECK(json["tasks"].size() == 4);
  CHECK(json["hash"].get<std::string>().size() == 64);
}

TEST_CASE("env check passes the reference environment and session solve prints a passing verdict") {
  auto checked = Envforge({"env", "check", TripBundle(), "--json"});
  INFO(checked.stdout_text, checked.stderr_text);
  REQUIRE(checked.exit_code == 0);
  Json report = ParseJson(checked.stdout_text).value();
  CHECK(report["ok"] == true);
  size_t task_checks = 0;
  for (const auto& item : report["checks"]) {
    CHECK(item["ok"] == true);
    if (item["check"].get<std::string>().starts_with("task ")) {
      ++task_checks;
      CHECK(item["detail"]["oracle"]["passed"] == true);  // every trip task has an oracle
    }
  }
  CHECK(task_checks == 4);

  auto solved = Envforge({"session", "solve", TripBundle(), "--task", "three_day_trip", "--json"});
  REQUIRE(solved.exit_code == 0);
  Json verdict = ParseJson(solved.stdout_text).value();
  CHECK(verdict["passed"] == true);
  CHECK(verdict["score"] == 1.0);
  CHECK(verdict["reasons"].empty());
  CHECK(verdict["verifier_version"].get<std::string>().size() == 64);
}

TEST_CASE("session solve names the known tasks when the task does not exist") {
  auto solved = Envforge({"session", "solve", TripBundle(), "--task", "no_such_task"});
  CHECK(solved.exit_code == 2);
  CHECK(solved.stderr_text.find("no task 'no_such_task'") != std::string::npos);
  CHECK(solved.stderr_text.find("three_day_trip") != std::string::npos);
}

TEST_CASE("session run plays each call and prints its typed outcome, in order") {
  TempDir dir;
  std::string calls = (dir.path / "calls.jsonl").string();
  REQUIRE(WriteFileAtomically(calls,
                              "{\"name\": \"get_all_cities\"}\n"
                              "\n"
                              "{\"name\": \"no_such_tool\", \"arguments\": {}}\n"
                              "{\"name\": \"get_all_hotels_by_city\", \"arguments\": {\"city\": 7}}\n"
                              "{\"name\": \"get_city_by_hotel\", \"arguments\": {\"hotel\": \"Nowhere Inn\"}}\n"
                              "{\"name\": \"submit_result\", \"arguments\": {\"answer_text\": \"[]\"}}\n")
              .ok());
  auto run = Envforge({"session", "run", TripBundle(), "--task", "three_day_trip", "--calls", calls, "--json"});
  INFO(run.stderr_text);
  REQUIRE(run.exit_code == 0);
  std::vector<Json> results;
  size_t start = 0;
  while (start < run.stdout_text.size()) {
    size_t end = run.stdout_text.find('\n', start);
    results.push_back(ParseJson(run.stdout_text.substr(start, end - start)).value());
    start = end + 1;
  }
  REQUIRE(results.size() == 5);
  CHECK(results[0]["outcome"] == "ok");
  CHECK(results[0]["content"].size() >= 20);
  CHECK(results[0]["id"] == "1");
  CHECK(results[1]["outcome"] == "invalid_call");
  CHECK(results[2]["outcome"] == "invalid_call");
  CHECK(results[2]["message"].get<std::string>().find("/city") != std::string::npos);
  CHECK(results[3]["outcome"] == "tool_error");
  CHECK(results[3]["message"].get<std::string>().find("Nowhere Inn") != std::string::npos);
  CHECK(results[4]["outcome"] == "ok");
  CHECK(results[4]["content"]["passed"] == false);
}

TEST_CASE("session run rejects a malformed calls file before running anything, naming the line") {
  TempDir dir;
  std::string calls = (dir.path / "calls.jsonl").string();
  REQUIRE(WriteFileAtomically(calls, "{\"name\": \"get_all_cities\"}\n{\"name\": \n").ok());
  auto run = Envforge({"session", "run", TripBundle(), "--task", "three_day_trip", "--calls", calls});
  CHECK(run.exit_code == 2);
  CHECK(run.stdout_text.empty());
  CHECK(run.stderr_text.find("calls.jsonl:2") != std::string::npos);
}

TEST_CASE("a failed pack exits 2, lists the problems and writes nothing") {
  TempDir dir;
  std::string out = (dir.path / "broken.envdb").string();
  auto packed = Envforge({"env", "pack", SourceDir() + "/tests/fixtures/envs/broken_many", "-o", out});
  CHECK(packed.exit_code == 2);
  CHECK(packed.stderr_text.find("problems") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 0);
}

TEST_CASE("a truncated bundle is refused by show, check and solve with a message naming the file") {
  TempDir dir;
  std::string cut = (dir.path / "cut.envdb").string();
  std::string bytes = ReadFileToString(TripBundle()).value();
  REQUIRE(WriteFileAtomically(cut, bytes.substr(0, bytes.size() / 2)).ok());
  for (std::vector<std::string> args :
       {std::vector<std::string>{"env", "show", cut},
        std::vector<std::string>{"session", "solve", cut, "--task", "three_day_trip"}}) {
    auto result = Envforge(args);
    CHECK(result.exit_code == 2);
    CHECK(result.stderr_text.find("cut.envdb") != std::string::npos);
  }
  auto checked = Envforge({"env", "check", cut, "--json"});
  CHECK(checked.exit_code == 1);
  Json report = ParseJson(checked.stdout_text).value();
  CHECK(report["ok"] == false);
  CHECK(report["checks"][0]["check"] == "bundle");
  CHECK(report["checks"][0]["ok"] == false);
}

TEST_CASE("env check fails, naming the task, when a gold solution does not satisfy its verifier") {
  TempDir dir;
  fs::path source = dir.path / "mini";
  fs::copy(SourceDir() + "/tests/fixtures/envs/mini", source, fs::copy_options::recursive);
  // A plausible but wrong gold answer: the newest book instead of the oldest.
  REQUIRE(WriteFileAtomically((source / "tasks/oldest_book/solution.py").string(),
                              "def solve(tools):\n    return {\"title\": tools.list_books(\"Alan Turing\")[-1]}\n")
              .ok());
  std::string out = (dir.path / "mini.envdb").string();
  REQUIRE(Envforge({"env", "pack", source.string(), "-o", out}).exit_code == 0);
  auto checked = Envforge({"env", "check", out});
  CHECK(checked.exit_code == 1);
  CHECK(checked.stdout_text.find("[FAIL] task oldest_book") != std::string::npos);
  CHECK(checked.stdout_text.find("[ok] task count_books") != std::string::npos);
  auto solved = Envforge({"session", "solve", out, "--task", "oldest_book", "--json"});
  CHECK(solved.exit_code == 1);
  CHECK(ParseJson(solved.stdout_text).value()["passed"] == false);
}

TEST_CASE("env check and session solve fail a gold solution that rewrites its session's runtime before submitting") {
  // tests/fixtures/envs/forger: the gold solution of `forged` calls a tool that patches the
  // verdict normalisation, the judge, the verifiers, their builtins and the db module of its
  // session; its verifier always says no. `honest` is a plain task of the same environment.
  TempDir dir;
  std::string out = (dir.path / "forger.envdb").string();
  auto packed = Envforge({"env", "pack", SourceDir() + "/tests/fixtures/envs/forger", "-o", out});
  INFO(packed.stderr_text);
  REQUIRE(packed.exit_code == 0);
  auto checked = Envforge({"env", "check", out});
  INFO(checked.stdout_text);
  CHECK(checked.exit_code == 1);
  CHECK(checked.stdout_text.find("[FAIL] task forged") != std::string::npos);
  CHECK(checked.stdout_text.find("gold solution rejected by its verifier") != std::string::npos);
  CHECK(checked.stdout_text.find("[ok] task honest") != std::string::npos);
  auto forged = Envforge({"session", "solve", out, "--task", "forged", "--json"});
  CHECK(forged.exit_code == 1);
  CHECK(ParseJson(forged.stdout_text).value()["passed"] == false);
  auto honest = Envforge({"session", "solve", out, "--task", "honest", "--json"});
  CHECK(honest.exit_code == 0);
  CHECK(ParseJson(honest.stdout_text).value()["passed"] == true);
}

TEST_CASE("--limits sets per-session limits, and each hit limit is reported as a typed outcome") {
  TempDir dir;
  std::string calls = (dir.path / "calls.jsonl").string();
  REQUIRE(WriteFileAtomically(
              calls,
              "{\"name\": \"get_all_cities\"}\n{\"name\": \"get_city_by_hotel\", \"arguments\": {\"hotel\": \"x\"}}\n")
              .ok());
  auto run = Envforge({"session", "run", TripBundle(), "--task", "three_day_trip", "--calls", calls, "--json",
                       "--limits", "{\"max_output_bytes\": 64}"});
  INFO(run.stderr_text);
  REQUIRE(run.exit_code == 0);
  Json first = ParseJson(run.stdout_text.substr(0, run.stdout_text.find('\n'))).value();
  CHECK(first["outcome"] == "tool_error");
  CHECK(first["limit"] == "output_size");
  CHECK(first["session_alive"] == true);

  auto bad = Envforge({"session", "run", TripBundle(), "--task", "three_day_trip", "--calls", calls, "--limits",
                       "{\"memory_bytes\": \"lots\"}"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.stderr_text.find("memory_bytes") != std::string::npos);
}

TEST_CASE("env check fails a task whose oracle rejects the gold answer, with the oracle's reasons") {
  TempDir dir;
  fs::path source = dir.path / "mini";
  fs::copy(SourceDir() + "/tests/fixtures/envs/mini", source, fs::copy_options::recursive);
  REQUIRE(WriteFileAtomically((source / "tasks/oldest_book/oracle.py").string(),
                              "def verify(answer, db):\n"
                              "    return {'passed': False, 'score': 0.0, 'reasons': ['oracle says no']}\n")
              .ok());
  std::string out = (dir.path / "mini.envdb").string();
  REQUIRE(Envforge({"env", "pack", source.string(), "-o", out}).exit_code == 0);
  auto checked = Envforge({"env", "check", out});
  CHECK(checked.exit_code == 1);
  CHECK(checked.stdout_text.find("oracle rejects the gold answer: oracle says no") != std::string::npos);
}

// ---- Tooling that ends: budgets, hangs and signals ------------------------------------------------

// The pid of a child that has exited and been reaped: a process that no longer exists.
pid_t DeadPid() {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(0);
  REQUIRE(::waitpid(pid, nullptr, 0) == pid);
  return pid;
}

std::vector<std::string> Names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The mini environment with schema.sql replaced.
std::string MiniWithSchema(const TempDir& dir, const std::string& schema) {
  fs::path source = dir.path / "mini";
  fs::copy(SourceDir() + "/tests/fixtures/envs/mini", source, fs::copy_options::recursive);
  REQUIRE(WriteFileAtomically((source / "schema.sql").string(), schema).ok());
  return source.string();
}

const char* const kEndlessSchema =
    "CREATE TABLE t(x);\n"
    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c)\n"
    "  SELECT count(*) FROM c;\n";

TEST_CASE("env pack stops schema.sql at --max-seconds and --max-bytes, naming the budget and the statement") {
  TempDir dir;
  std::string source = MiniWithSchema(dir, kEndlessSchema);
  std::string out = (dir.path / "mini.envdb").string();
  auto timed = Envforge({"env", "pack", source, "-o", out, "--max-seconds", "1"});
  CHECK(timed.exit_code == 2);
  CHECK_MESSAGE(timed.stderr_text.find("schema.sql:2: the time budget of 1 s (--max-seconds) was spent running this "
                                       "statement") != std::string::npos,
                timed.stderr_text);
  CHECK(Names(dir.path) == std::vector<std::string>{"mini"});

  REQUIRE(WriteFileAtomically(source + "/schema.sql",
                              "CREATE TABLE t(x);\n"
                              "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c)\n"
                              "  INSERT INTO t SELECT randomblob(100000) FROM c;\n")
              .ok());
  auto filled = Envforge({"env", "pack", source, "-o", out, "--max-bytes", "10000000"});
  CHECK(filled.exit_code == 2);
  CHECK_MESSAGE(filled.stderr_text.find("schema.sql:2: the size budget of 10000000 bytes (--max-bytes) was spent") !=
                    std::string::npos,
                filled.stderr_text);
  CHECK(Names(dir.path) == std::vector<std::string>{"mini"});

  auto bad = Envforge({"env", "pack", source, "-o", out, "--max-seconds", "0"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.stderr_text.find("--max-seconds must be between 1 and") != std::string::npos);
  // Options are listed by each command's --help (the top-level help lists the commands).
  auto help = Envforge({"env", "pack", "--help"}).stdout_text + Envforge({"audit", "--help"}).stdout_text;
  for (const char* flag : {"--max-seconds", "--max-bytes", "--task-budget-seconds"}) {
    CHECK_MESSAGE(help.find(flag) != std::string::npos, flag);
  }
}

TEST_CASE(
    "a pack ended by SIGINT, SIGTERM or SIGHUP removes its temporary file; a SIGKILLed one's is swept next time") {
  TempDir dir;
  std::string source = MiniWithSchema(dir, kEndlessSchema);
  std::string out = (dir.path / "mini.envdb").string();
  auto temp_files = [&] {
    std::vector<std::string> found;
    for (const auto& name : Names(dir.path)) {
      if (name.find(".tmp.") != std::string::npos) found.push_back(name);
    }
    return found;
  };
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGKILL}) {
    CAPTURE(signal_number);
    pid_t pid = StartEnvforge({"env", "pack", source, "-o", out, "--max-seconds", "120"});
    REQUIRE(WaitUntil([&] { return !temp_files().empty(); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // well inside schema.sql's endless statement
    REQUIRE(::kill(pid, signal_number) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signal_number);  // the handler re-raises: the process still ends by the signal
    if (signal_number == SIGKILL) {
      CHECK(temp_files().size() == 1);  // SIGKILL cannot be caught...
    } else {
      CHECK(temp_files().empty());
    }
  }
  // ...so the next pack into the directory sweeps the dead process's file.
  REQUIRE(WriteFileAtomically(source + "/schema.sql", "CREATE TABLE t(x);\nINSERT INTO t VALUES (1);\n").ok());
  auto packed = Envforge({"env", "pack", source, "-o", out});
  INFO(packed.stderr_text);
  CHECK(packed.exit_code == 0);
  CHECK(Names(dir.path) == (std::vector<std::string>{"mini", "mini.envdb"}));
}

// A bundle of the mini environment whose count_books verifier swallows the wall-time exception.
std::string PackHangingMini(const TempDir& dir) {
  fs::path source = dir.path / "hang";
  fs::copy(SourceDir() + "/tests/fixtures/envs/mini", source, fs::copy_options::recursive);
  REQUIRE(WriteFileAtomically((source / "tasks/count_books/verifier.py").string(),
                              "def verify(answer, db):\n"
                              "    while True:\n"
                              "        try:\n"
                              "            sum(range(100000))\n"
                              "        except BaseException:\n"
                              "            pass\n")
              .ok());
  std::string out = (dir.path / "hang.envdb").string();
  auto packed = Envforge({"env", "pack", source.string(), "-o", out});
  INFO(packed.stderr_text);
  REQUIRE(packed.exit_code == 0);
  return out;
}

TEST_CASE(
    "audit of a verifier that never returns: broken (hang) on the gold runs, said in --json and the table, exit 1") {
  TempDir dir;
  std::string bundle = PackHangingMini(dir);
  // A dead audit's scratch root (SIGKILLed: no handler ran) is swept by the next audit.
  fs::path stale = "/tmp/envforge-audit-" + std::to_string(DeadPid()) + "-0";
  fs::create_directories(stale / "f1" / "s1");
  REQUIRE(WriteFileAtomically((stale / "f1" / "s1" / "left.txt").string(), "x").ok());

  const std::vector<std::string> common = {"audit",
                                           bundle,
                                           "--task",
                                           "count_books",
                                           "--no-store",
                                           "--limits",
                                           "{\"wall_time_ms\": 500, \"kill_grace_ms\": 200}"};
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> json_args = common;
  json_args.push_back("--json");
  auto audited = Envforge(json_args);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(audited.stderr_text);
  CHECK(audited.exit_code == 1);
  Json report = ParseJson(audited.stdout_text).value();
  CHECK(report["broken"] == true);
  CHECK(report["stopped"] == Json::array({"count_books"}));
  const Json& task = report["tasks"][0];
  CHECK(task["verdict"] == "broken");
  CHECK(task["stopped"]["reason"] == "hang");
  CHECK(task["stopped"]["detail"].get<std::string>().find("never returned within its wall-time limit of 500 ms") !=
        std::string::npos);
  CHECK(task["stopped"]["probes_not_judged"] == task["probes"]);
  CHECK(task["stopped"]["budget_seconds"] == 600.0);
  CHECK(task["verdict_reasons"][0].get<std::string>().rfind("hang: ", 0) == 0);
  CHECK(report["options"]["task_budget_seconds"] == 600.0);
  CHECK_FALSE(fs::exists(stale));
  MESSAGE("envforge audit of a hanging verifier (wall_time 500 ms, kill_grace 200 ms): exit 1 after " << seconds
                                                                                                      << " s");

  auto table = Envforge(common);
  CHECK(table.exit_code == 1);
  CHECK(table.stdout_text.find("count_books  BROKEN") != std::string::npos);
  CHECK(table.stdout_text.find("STOPPED") != std::string::npos);
  CHECK(table.stdout_text.find("hang after 0 of") != std::string::npos);
  CHECK(table.stdout_text.find("1 stopped early: a hang or the task budget spent") != std::string::npos);

  std::vector<std::string> bad = common;
  bad.insert(bad.end(), {"--task-budget-seconds", "0"});
  CHECK(Envforge(bad).exit_code == 2);
}

TEST_CASE("an audit ended by SIGTERM or SIGINT removes its lanes' scratch directories") {
  TempDir dir;
  std::string bundle = PackHangingMini(dir);
  for (int signal_number : {SIGTERM, SIGINT}) {
    CAPTURE(signal_number);
    // Default limits: each gold batch hangs for seconds, so the audit is mid-judgement.
    pid_t pid = StartEnvforge({"audit", bundle, "--task", "count_books", "--no-store"});
    std::string prefix = "/tmp/envforge-audit-" + std::to_string(pid) + "-";
    REQUIRE(WaitUntil([&] { return fs::exists(prefix + "1"); }));  // both lanes are up
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    CHECK(fs::exists(prefix + "0"));
    REQUIRE(::kill(pid, signal_number) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signal_number);
    CHECK_FALSE(fs::exists(prefix + "0"));
    CHECK_FALSE(fs::exists(prefix + "1"));
  }
}

TEST_CASE("usage errors name the offending option") {
  auto unknown = Envforge({"env", "show", TripBundle(), "--jsn"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.stderr_text.find("unknown option --jsn") != std::string::npos);
  auto bad_count = Envforge({"bench", "sandbox", TripBundle(), "--sessions", "many"});
  CHECK(bad_count.exit_code == 2);
  CHECK(bad_count.stderr_text.find("--sessions expects an integer") != std::string::npos);
  CHECK(Envforge({"frobnicate"}).exit_code == 2);
}

// A store with one interpreter episode (an execute call, a submit) and one trip-planning episode.
struct NotebookStore {
  TempDir dir;
  std::string path = (dir.path / "traj.sqlite").string();
  std::string interpreter_id, other_id;
  NotebookStore() {
    auto store = agents::TrajectoryStore::Open(path);
    REQUIRE_MESSAGE(store.ok(), store.status().ToString());
    auto record = [&](const std::string& env, const std::string& tool, Json arguments, Json content) {
      agents::EpisodeStart start;
      start.env_id = std::string(64, 'c');
      start.env_name = env;
      start.task_id = "t1";
      start.client = "cli_test";
      std::string id = (*store)->BeginEpisode(start);
      agents::StepRecord step;
      step.tool = tool;
      step.arguments = std::move(arguments);
      step.result.content = std::move(content);
      (*store)->RecordStep(id, std::move(step));
      (*store)->EndEpisode(id, agents::EpisodeOutcome::kClosed);
      return id;
    };
    other_id = record("trip_planning", "search_flights", Json{{"from", "A"}}, Json::array());
    interpreter_id =
        record("python", "execute", Json{{"code", "print(1)"}},
               Json{{"status", "ok"},
                    {"execution_count", 1},
                    {"truncated", false},
                    {"outputs", Json::array({Json{{"output_type", "stream"}, {"name", "stdout"}, {"text", "1\n"}}})}});
    REQUIRE((*store)->Flush().ok());
  }
};

TEST_CASE("traj export --ipynb writes one notebook per interpreter episode into DIR and skips the others") {
  NotebookStore store;
  const std::string out = (store.dir.path / "notebooks" / "nested").string();  // created
  auto exported = Envforge({"traj", "export", store.path, "--ipynb", "-o", out});
  INFO(exported.stderr_text);
  REQUIRE(exported.exit_code == 0);
  const std::string notebook = out + "/" + store.interpreter_id + ".ipynb";
  CHECK(exported.stdout_text == notebook + "\n");
  CHECK(exported.stderr_text.find("warning: episode " + store.other_id + " has no execute call") != std::string::npos);
  CHECK(exported.stderr_text.find("exported 1 notebook to " + out) != std::string::npos);
  CHECK_FALSE(fs::exists(out + "/" + store.other_id + ".ipynb"));
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(out)) files += entry.is_regular_file() ? 1 : 0;
  CHECK(files == 1);  // no temporary file left behind
  auto text = ReadFileToString(notebook);
  REQUIRE(text.ok());
  auto json = ParseJson(*text);
  REQUIRE(json.ok());
  CHECK((*json)["nbformat"] == 4);
  CHECK((*json)["metadata"]["envforge"]["episode_id"] == store.interpreter_id);
  REQUIRE((*json)["cells"].size() == 1);
  CHECK((*json)["cells"][0]["source"] == "print(1)");
  CHECK((*json)["cells"][0]["outputs"][0]["text"] == "1\n");

  // Filters select as for the JSON lines export: only the trip episode, so nothing is written.
  auto none = Envforge({"traj", "export", store.path, "--ipynb", "-o", out + "2", "--env", "trip_planning"});
  CHECK(none.exit_code == 2);
  CHECK(none.stderr_text.find("none of the 1 selected episodes is an interpreter episode") != std::string::npos);
  CHECK(fs::is_empty(out + "2"));

  auto no_dir = Envforge({"traj", "export", store.path, "--ipynb"});
  CHECK(no_dir.exit_code == 2);
  CHECK(no_dir.stderr_text.find("--ipynb needs -o DIR") != std::string::npos);
  auto both = Envforge({"traj", "export", store.path, "--ipynb", "--jsonl", "-o", out});
  CHECK(both.exit_code == 2);
  auto into_file = Envforge({"traj", "export", store.path, "--ipynb", "-o", notebook});
  CHECK(into_file.exit_code == 2);
  CHECK(into_file.stderr_text.find("is not a directory") != std::string::npos);

  // The JSON lines export is unchanged: both episodes.
  auto lines = Envforge({"traj", "export", store.path});
  REQUIRE(lines.exit_code == 0);
  CHECK(lines.stdout_text.find(store.other_id) != std::string::npos);
  CHECK(lines.stdout_text.find(store.interpreter_id) != std::string::npos);
  CHECK(std::count(lines.stdout_text.begin(), lines.stdout_text.end(), '\n') == 2);

  auto help = Envforge({"traj", "export", "--help"});
  CHECK(help.stdout_text.find("--ipynb -o DIR") != std::string::npos);
}

}  // namespace
}  // namespace envforge
