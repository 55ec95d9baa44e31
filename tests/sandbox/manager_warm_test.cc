// Warm sessions (ManagerOptions::warm_sessions): sessions forked and isolated ahead of demand,
// taken by creates and judgements with the default limits, against the real worker.
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/sandbox/manager_test_util.h"

namespace envforge::sandbox::testing {
namespace {

constexpr size_t kPool = 4;

ManagerOptions WarmOptions() {
  ManagerOptions options;
  options.limits = FastLimits();
  options.warm_sessions = kPool;
  return options;
}

// The first create forks (the pool starts with it); then the pool fills.
void FillPool(ManagerFixture& fixture) {
  SessionManager::SessionId first = fixture.NewSession();
  REQUIRE(fixture.manager->CloseSession(first).ok());
  REQUIRE(WaitFor([&] { return fixture.manager->Stats().warm_ready == kPool; }, std::chrono::seconds(20)));
}

std::string CommandName(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// The pids of the zygote's session processes that are no caller's session: warm sessions, and
// the zygote's own prepared processes (not its mount helper).
std::vector<pid_t> UnassignedChildren(SessionManager& manager) {
  std::set<pid_t> assigned;
  for (auto id : manager.ListSessions()) assigned.insert(manager.GetSessionInfo(id).value().pid);
  std::vector<pid_t> others;
  for (const ZygoteInfo& zygote : manager.Zygotes()) {
    for (pid_t child : ChildrenOf(zygote.pid)) {
      if (!assigned.count(child) && CommandName(child) == "envforge-worker") others.push_back(child);
    }
  }
  return others;
}

TEST_CASE("a create takes a warm session, which gets its task, and the pool refills") {
  ManagerFixture fixture(WarmOptions());
  FillPool(fixture);
  const ManagerStats before = fixture.manager->Stats();

  SessionManager::SessionId session = fixture.NewSession("sum_task");
  ManagerStats after = fixture.manager->Stats();
  CHECK(after.warm_taken == before.warm_taken + 1);
  CHECK(after.warm_missed == before.warm_missed);

  // The bound task is the session's: its solution runs, its verdict judges it.
  auto solved = fixture.manager->Solve(session);
  REQUIRE_MESSAGE(solved.ok(), solved.status().ToString());
  CHECK(solved->answer_text == "5");
  toolsets::ToolResult added = fixture.manager->CallTool(session, Call("add", {{"a", 2}, {"b", 40}}));
  REQUIRE(added.ok());
  CHECK(added.content == 42);
  toolsets::ToolResult verdict = fixture.manager->CallTool(session, Call("submit_result", {{"answer_text", "5"}}));
  REQUIRE_MESSAGE(verdict.ok(), verdict.message);
  CHECK(verdict.content["passed"] == true);
  toolsets::ToolResult wrong = fixture.manager->CallTool(session, Call("submit_result", {{"answer_text", "6"}}));
  REQUIRE(wrong.ok());
  CHECK(wrong.content["passed"] == false);

  SessionInfo info = fixture.manager->GetSessionInfo(session).value();
  CHECK(info.task_id == "sum_task");
  CHECK(info.alive);
  CHECK(info.limits == FastLimits());
  CHECK(WaitFor([&] { return fixture.manager->Stats().warm_ready == kPool; }, std::chrono::seconds(20)));
}

TEST_CASE("Prewarm starts the zygote and fills the pool before any create; the first creates fork nothing") {
  ManagerFixture fixture(WarmOptions());
  CHECK(fixture.manager->Zygotes().empty());
  REQUIRE(fixture.manager->Prewarm(fixture.env_id).ok());
  CHECK(fixture.manager->Zygotes().size() >= 1);
  REQUIRE(WaitFor([&] { return fixture.manager->Stats().warm_ready == kPool; }, std::chrono::seconds(20)));
  CHECK(fixture.manager->ListSessions().empty());
  // Again: the pool is full, nothing more starts.
  REQUIRE(fixture.manager->Prewarm(fixture.env_id).ok());
  CHECK(fixture.manager->Stats().zygote_starts == 1);

  std::vector<SessionManager::SessionId> sessions;
  for (size_t i = 0; i < kPool; ++i) sessions.push_back(fixture.NewSession("sum_task"));
  const ManagerStats stats = fixture.manager->Stats();
  CHECK(stats.warm_taken == kPool);
  CHECK(stats.warm_missed == 0);
  for (SessionManager::SessionId session : sessions) {
    toolsets::ToolResult verdict = fixture.manager->CallTool(session, Call("submit_result", {{"answer_text", "5"}}));
    REQUIRE_MESSAGE(verdict.ok(), verdict.message);
    CHECK(verdict.content["passed"] == true);
  }
}

TEST_CASE("Prewarm names what it cannot do") {
  ManagerFixture fixture(WarmOptions());
  Status unknown = fixture.manager->Prewarm("no-such-environment");
  CHECK(unknown.code() == StatusCode::kNotFound);
  CHECK(unknown.message().find("no-such-environment") != std::string::npos);

  ManagerOptions cold = WarmOptions();
  cold.warm_sessions = 0;
  ManagerFixture without_pool(cold);
  Status never_warm = without_pool.manager->Prewarm(without_pool.env_id);
  CHECK(never_warm.code() == StatusCode::kFailedPrecondition);
  CHECK(never_warm.message().find("never warm") != std::string::npos);
  CHECK(without_pool.manager->Zygotes().empty());
}

TEST_CASE("warm sessions are nobody's: not listed, not counted in max_sessions, each a fresh process") {
  ManagerOptions options = WarmOptions();
  options.max_sessions = 2;
  ManagerFixture fixture(options);
  FillPool(fixture);
  CHECK(fixture.manager->ListSessions().empty());
  CHECK(fixture.manager->Stats().live_sessions == 0);

  SessionManager::SessionId a = fixture.NewSession();
  SessionManager::SessionId b = fixture.NewSession();
  CHECK(fixture.manager->CreateSession(fixture.env_id, "").status().code() == StatusCode::kResourceExhausted);
  // Each has its own state: a warm session ran nothing before it was taken.
  CHECK(fixture.manager->CallTool(a, Call("incr")).content == 1);
  CHECK(fixture.manager->CallTool(a, Call("incr")).content == 2);
  CHECK(fixture.manager->CallTool(b, Call("incr")).content == 1);
  CHECK(fixture.manager->GetSessionInfo(a).value().pid != fixture.manager->GetSessionInfo(b).value().pid);
}

TEST_CASE("a create with limits of its own forks, and its limits hold") {
  ManagerFixture fixture(WarmOptions());
  FillPool(fixture);
  const ManagerStats before = fixture.manager->Stats();
  SandboxLimits own = FastLimits();
  own.wall_time = std::chrono::milliseconds(700);
  SessionManager::SessionId session = fixture.NewSession("", own);
  CHECK(fixture.manager->Stats().warm_taken == before.warm_taken);
  CHECK(fixture.manager->GetSessionInfo(session).value().limits == own);
  toolsets::ToolResult slow = fixture.manager->CallTool(session, Call("slow_echo", {{"text", "x"}, {"seconds", 1.2}}));
  CHECK(slow.outcome == toolsets::Outcome::kTimeout);
}

TEST_CASE("warm sessions killed while they wait are skipped, and creates go on") {
  ManagerFixture fixture(WarmOptions());
  FillPool(fixture);
  std::vector<pid_t> victims = UnassignedChildren(*fixture.manager);
  REQUIRE(victims.size() >= kPool);
  for (pid_t pid : victims) ::kill(pid, SIGKILL);
  // Once reaped, their deaths are known to the manager (the exit reports come from the zygote).
  REQUIRE(WaitFor([&] { return std::none_of(victims.begin(), victims.end(), ProcessExists); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int i = 0; i < 3; ++i) {
    SessionManager::SessionId session = fixture.NewSession("sum_task");
    toolsets::ToolResult echoed = fixture.manager->CallTool(session, Call("echo", {{"text", "still here"}}));
    REQUIRE_MESSAGE(echoed.ok(), echoed.message);
    CHECK(echoed.content == "still here");
    toolsets::ToolResult verdict = fixture.manager->CallTool(session, Call("submit_result", {{"answer_text", "5"}}));
    REQUIRE_MESSAGE(verdict.ok(), verdict.message);
    CHECK(verdict.content["passed"] == true);
  }
  CHECK(WaitFor([&] { return fixture.manager->Stats().warm_ready == kPool; }, std::chrono::seconds(20)));
}

TEST_CASE("reset and fork of a session that came from the pool") {
  ManagerFixture fixture(WarmOptions());
  FillPool(fixture);
  SessionManager::SessionId session = fixture.NewSession("sum_task");
  CHECK(fixture.manager->CallTool(session, Call("incr")).content == 1);
  SessionManager::SessionId copy = fixture.manager->ForkSession(session).value();
  CHECK(fixture.manager->CallTool(copy, Call("incr")).content == 2);
  SessionManager::SessionId fresh = fixture.manager->ResetSession(session).value();
  CHECK(fixture.manager->CallTool(fresh, Call("incr")).content == 1);
  CHECK(fixture.manager->GetSessionInfo(fresh).value().task_id == "sum_task");
  CHECK(fixture.manager->Solve(fresh).value().answer_text == "5");
}

TEST_CASE("the manager's end takes its warm sessions with it") {
  std::vector<pid_t> warm;
  {
    ManagerFixture fixture(WarmOptions());
    FillPool(fixture);
    warm = UnassignedChildren(*fixture.manager);
    REQUIRE(warm.size() >= kPool);
  }
  for (pid_t pid : warm) CHECK_FALSE(ProcessExists(pid));
}

}  // namespace
}  // namespace envforge::sandbox::testing
