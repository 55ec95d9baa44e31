// Interpreter environments through the SessionManager: sessions own a sandboxed Jupyter kernel
// from the environment's warm pool (tests/fixtures/envs/interp_mini, packed by the real worker).
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/env_pack.h"
#include "sandbox/session_manager.h"

namespace envforge::sandbox {
namespace {

namespace fs = std::filesystem;
using toolsets::Outcome;
using toolsets::ToolCall;
using toolsets::ToolResult;

struct InterpreterEnv {
  fs::path dir = fs::temp_directory_path() / ("envforge_interp_test_" + std::to_string(::getpid()));
  std::string bundle = (dir / "interp_mini.envdb").string();
  InterpreterEnv() {
    fs::remove_all(dir);
    fs::create_directories(dir);
    Status packed = PackEnvironment(std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/fixtures/envs/interp_mini", bundle);
    REQUIRE_MESSAGE(packed.ok(), packed.ToString());
  }
  ~InterpreterEnv() { fs::remove_all(dir); }
};

std::unique_ptr<SessionManager> Manager(size_t pool_size = 2) {
  ManagerOptions options;
  options.kernel_pool_size = pool_size;
  options.kernel_scratch_root = "/tmp/envforge-jupyter-test";
  options.limits.wall_time = std::chrono::milliseconds(5000);
  Result<std::unique_ptr<SessionManager>> manager = SessionManager::Create(options);
  REQUIRE(manager.ok());
  return std::move(manager).value();
}

ToolCall Execute(const std::string& code) { return {"x", "execute", {{"code", code}}}; }

std::string Stdout(const ToolResult& result) {
  std::string text;
  for (const Json& output : result.content["outputs"]) {
    if (output.contains("text")) text += output["text"].get<std::string>();
    if (output.contains("data")) text += output["data"].value("text/plain", "");
  }
  return text;
}

TEST_SUITE("sandbox.manager.interpreter") {
  TEST_CASE("an interpreter session runs code in its kernel, reads the task's files, and is judged" *
            doctest::timeout(120)) {
    InterpreterEnv env;
    auto manager = Manager();
    std::string env_id = manager->OpenEnvironment(env.bundle).value();
    const EnvBundle* bundle = manager->FindEnvironment(env_id);
    std::vector<std::string> tools;
    for (const ToolRecord& tool : bundle->tools) tools.push_back(tool.spec.name);
    CHECK(tools == std::vector<std::string>{"execute", "interrupt", "restart", "submit_result"});

    auto session = manager->CreateSession(env_id, "mean_temp");
    REQUIRE_MESSAGE(session.ok(), session.status().ToString());
    // interp_mini's tools.py defines no tool: the create did not wait for the session's worker,
    // which may still be starting; the session counts as alive all the same.
    CHECK(manager->GetSessionInfo(*session).value().alive);
    ToolResult listing = manager->CallTool(*session, Execute("import os\nsorted(os.listdir('.'))"));
    CHECK(listing.outcome == Outcome::kOk);
    CHECK(Stdout(listing) == "['readings.csv']");
    ToolResult mean = manager->CallTool(
        *session,
        Execute(
            "import csv\nt = [float(r['temp']) for r in csv.DictReader(open('readings.csv')) if r['city'] == 'Oslo']\n"
            "round(sum(t) / len(t), 2)"));
    CHECK(Stdout(mean) == "2.25");
    CHECK(mean.duration_us > 0);
    CHECK(manager->CallTool(*session, {"x", "execute", {{"source", "1"}}}).outcome == Outcome::kInvalidCall);

    SessionInfo info = manager->GetSessionInfo(*session).value();
    REQUIRE(info.kernel.is_object());
    CHECK(info.kernel["executes"] == 2);
    CHECK(info.kernel["isolation"]["namespaces"].get<std::string>().rfind("on", 0) == 0);

    ToolResult right = manager->CallTool(*session, {"s", "submit_result", {{"answer_text", R"({"mean": 2.25})"}}});
    CHECK(right.outcome == Outcome::kOk);
    CHECK(right.content["passed"] == true);
    CHECK(right.session_alive);
    ToolResult wrong = manager->CallTool(*session, {"s", "submit_result", {{"answer_text", R"({"mean": 2.0})"}}});
    CHECK(wrong.content["passed"] == false);

    // The gold solution is notebook code: it runs in the kernel and leaves `answer`.
    auto solved = manager->Solve(*session);
    REQUIRE_MESSAGE(solved.ok(), solved.status().ToString());
    CHECK(solved->answer == Json{{"mean", 2.25}});
    CHECK(manager->CloseSession(*session).ok());
  }

  TEST_CASE("interpreter sessions: no fork, reset is a fresh kernel, a crash ends only its session" *
            doctest::timeout(120)) {
    InterpreterEnv env;
    auto manager = Manager();
    std::string env_id = manager->OpenEnvironment(env.bundle).value();
    auto first = manager->CreateSession(env_id, "sum_squares").value();
    auto second = manager->CreateSession(env_id, "sum_squares").value();

    auto fork = manager->ForkSession(first);
    REQUIRE_FALSE(fork.ok());
    CHECK(fork.status().code() == StatusCode::kFailedPrecondition);
    CHECK(fork.status().message().find("cannot be forked") != std::string::npos);

    manager->CallTool(first, Execute("kept = 41"));
    CHECK(Stdout(manager->CallTool(first, Execute("kept + 1"))) == "42");
    auto reset = manager->ResetSession(first);
    REQUIRE(reset.ok());
    CHECK(manager->CallTool(*reset, Execute("kept")).message.rfind("NameError", 0) == 0);

    ToolResult crash = manager->CallTool(second, Execute("import os\nos._exit(4)"));
    CHECK(crash.outcome == Outcome::kCrashed);
    CHECK_FALSE(crash.session_alive);
    CHECK(manager->CallTool(second, Execute("1")).outcome == Outcome::kCrashed);
    CHECK(Stdout(manager->CallTool(*reset, Execute("6 * 7"))) == "42");
  }

  TEST_CASE("closing a session in the middle of a long execute kills its kernel at once" * doctest::timeout(120)) {
    InterpreterEnv env;
    auto manager = Manager();
    std::string env_id = manager->OpenEnvironment(env.bundle).value();
    auto session = manager->CreateSession(env_id).value();
    std::promise<ToolResult> answered;
    manager->CallToolAsync(session, Execute("import time\ntime.sleep(4)\n'finished'"),
                           [&](ToolResult result) { answered.set_value(std::move(result)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto start = std::chrono::steady_clock::now();
    CHECK(manager->CloseSession(session).ok());
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2000));
    auto future = answered.get_future();
    // The execute answers (crashed, or never: the session is gone) — it must not hang the manager.
    if (future.wait_for(std::chrono::milliseconds(3000)) == std::future_status::ready) {
      CHECK(future.get().outcome != Outcome::kOk);
    }
    auto next = manager->CreateSession(env_id);
    REQUIRE(next.ok());
    CHECK(Stdout(manager->CallTool(*next, Execute("2 ** 10"))) == "1024");
  }

  TEST_CASE("eight interpreter sessions execute concurrently" * doctest::timeout(180)) {
    InterpreterEnv env;
    auto manager = Manager(4);
    std::string env_id = manager->OpenEnvironment(env.bundle).value();
    std::vector<uint64_t> sessions;
    for (int i = 0; i < 8; ++i) {
      auto session = manager->CreateSession(env_id);
      REQUIRE_MESSAGE(session.ok(), session.status().ToString());
      sessions.push_back(*session);
    }
    std::vector<std::thread> threads;
    std::vector<std::string> results(sessions.size());
    for (size_t i = 0; i < sessions.size(); ++i) {
      threads.emplace_back([&, i] {
        manager->CallTool(sessions[i], Execute("import time\nn = " + std::to_string(i)));
        results[i] = Stdout(manager->CallTool(sessions[i], Execute("time.sleep(0.5)\nn * n")));
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (size_t i = 0; i < sessions.size(); ++i) CHECK(results[i] == std::to_string(i * i));
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
