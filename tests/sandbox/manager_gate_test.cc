// The call gate (ManagerOptions::max_running_calls): at most N tool calls run in their session
// processes at once, the rest wait first come first served; a call past running_call_grace stops
// counting. Against the real worker.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "tests/sandbox/manager_test_util.h"

namespace envforge::sandbox {
namespace {

using testing::Call;
using testing::FastLimits;
using testing::ManagerFixture;
using toolsets::Outcome;
using toolsets::ToolResult;
using SessionId = SessionManager::SessionId;

ManagerOptions GateOptions(size_t running, std::chrono::milliseconds grace) {
  ManagerOptions options;
  options.limits = FastLimits();
  options.max_running_calls = running;
  options.running_call_grace = grace;
  return options;
}

// Sends `call` on `session` and returns the future of its answer.
std::future<ToolResult> CallLater(SessionManager& manager, SessionId session, toolsets::ToolCall call) {
  auto answer = std::make_shared<std::promise<ToolResult>>();
  std::future<ToolResult> future = answer->get_future();
  manager.CallToolAsync(session, std::move(call),
                        [answer](ToolResult result) { answer->set_value(std::move(result)); });
  return future;
}

TEST_CASE("the call gate: calls beyond max_running_calls wait their turn and every one is answered right") {
  ManagerFixture fixture(GateOptions(2, std::chrono::milliseconds(10'000)));
  std::vector<SessionId> sessions;
  for (int i = 0; i < 8; ++i) sessions.push_back(fixture.NewSession());
  std::vector<std::future<ToolResult>> answers;
  for (int round = 0; round < 4; ++round) {
    for (size_t i = 0; i < sessions.size(); ++i) {
      answers.push_back(CallLater(*fixture.manager, sessions[i],
                                  Call("echo", {{"text", std::to_string(round) + "/" + std::to_string(i)}})));
    }
  }
  for (size_t k = 0; k < answers.size(); ++k) {
    REQUIRE(answers[k].wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    ToolResult result = answers[k].get();
    REQUIRE_MESSAGE(result.ok(), result.message);
    CHECK(result.content == std::to_string(k / sessions.size()) + "/" + std::to_string(k % sessions.size()));
  }
  // Calls on one session keep their order through the gate: incr counts 1, 2, 3 on each.
  std::vector<std::future<ToolResult>> counts;
  for (int round = 0; round < 3; ++round) {
    for (SessionId session : sessions) counts.push_back(CallLater(*fixture.manager, session, Call("incr")));
  }
  for (size_t k = 0; k < counts.size(); ++k) {
    REQUIRE(counts[k].wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    CHECK(counts[k].get().content == static_cast<int>(k / sessions.size()) + 1);
  }
  const ManagerStats stats = fixture.manager->Stats();
  CHECK(stats.calls_gated > 0);
  CHECK(stats.calls_waiting == 0);
}

TEST_CASE("the call gate: slow calls stop counting after the grace, so they cannot hold it shut") {
  ManagerFixture fixture(GateOptions(1, std::chrono::milliseconds(50)));
  std::vector<SessionId> sessions;
  for (int i = 0; i < 4; ++i) sessions.push_back(fixture.NewSession());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<ToolResult>> answers;
  for (SessionId session : sessions) {
    answers.push_back(CallLater(*fixture.manager, session, Call("slow_echo", {{"text", "late"}, {"seconds", 1.0}})));
  }
  for (auto& answer : answers) {
    REQUIRE(answer.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    ToolResult result = answer.get();
    REQUIRE_MESSAGE(result.ok(), result.message);
    CHECK(result.content == "late");
  }
  // In turn they would take 4 s; past the grace each lets the next one start.
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("4 calls of 1 s through a gate of 1: " << seconds << " s");
  CHECK(seconds < 3.0);
  CHECK(fixture.manager->Stats().calls_gated >= 3);
}

TEST_CASE("the call gate: a waiting call whose session closed answers so; a shutdown answers the rest") {
  std::future<ToolResult> closed_answer, shutdown_answer, holder;
  {
    ManagerFixture fixture(GateOptions(1, std::chrono::milliseconds(60'000)));
    SessionId busy = fixture.NewSession();
    SessionId closing = fixture.NewSession();
    SessionId waiting = fixture.NewSession();
    holder = CallLater(*fixture.manager, busy, Call("slow_echo", {{"text", "held"}, {"seconds", 1.0}}));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the slow call holds the gate
    closed_answer = CallLater(*fixture.manager, closing, Call("echo", {{"text", "never"}}));
    REQUIRE(testing::WaitFor([&] { return fixture.manager->Stats().calls_waiting == 1; }));
    REQUIRE(fixture.manager->CloseSession(closing).ok());
    REQUIRE(holder.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    CHECK(holder.get().content == "held");
    REQUIRE(closed_answer.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    ToolResult closed = closed_answer.get();
    CHECK(closed.outcome == Outcome::kInvalidCall);
    CHECK(closed.message.find("unknown session") != std::string::npos);

    // Held again, a call waits, and the manager goes away under it.
    holder = CallLater(*fixture.manager, busy, Call("slow_echo", {{"text", "held"}, {"seconds", 5.0}}));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    shutdown_answer = CallLater(*fixture.manager, waiting, Call("echo", {{"text", "never"}}));
    REQUIRE(testing::WaitFor([&] { return fixture.manager->Stats().calls_waiting == 1; }));
  }
  REQUIRE(shutdown_answer.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  ToolResult result = shutdown_answer.get();
  CHECK(result.outcome == Outcome::kInfraError);
  CHECK(result.message.find("shutting down") != std::string::npos);
  CHECK_FALSE(result.session_alive);
}

}  // namespace
}  // namespace envforge::sandbox
