// SessionManager against the real envforge-worker: sessions, tool calls, validation, solve,
// concurrency, max_sessions, and teardown (no processes, zombies or descriptors left behind).
#include <doctest/doctest.h>
#include <fcntl.h>

#include <condition_variable>
#include <map>
#include <mutex>

#include "tests/sandbox/manager_test_util.h"

namespace envforge::sandbox {
namespace {

using testing::Call;
using testing::ManagerFixture;
using toolsets::Outcome;
using toolsets::ToolResult;
using SessionId = SessionManager::SessionId;

TEST_SUITE("sandbox.manager") {
  TEST_CASE("a session answers tool calls, then closes and is forgotten" * doctest::timeout(30)) {
    ManagerFixture f;
    SessionId id = f.NewSession();
    ToolResult echo = f.manager->CallTool(id, Call("echo", {{"text", "hello"}}, "c1"));
    INFO(ToJson(echo).dump());
    CHECK(echo.outcome == Outcome::kOk);
    CHECK(echo.content == "hello");
    CHECK(echo.call_id == "c1");
    CHECK(echo.session_alive);
    CHECK(echo.duration_us > 0);
    CHECK(f.manager->CallTool(id, Call("add", {{"a", 2}, {"b", 40}})).content == 42);
    CHECK(f.manager->CallTool(id, Call("count_items")).content == 3);

    auto info = f.manager->GetSessionInfo(id);
    REQUIRE(info.ok());
    CHECK(info->alive);
    CHECK(info->calls == 3);
    CHECK(info->env_id == f.env_id);
    CHECK(testing::ProcessExists(info->pid));
    CHECK(info->zygote_pid > 0);
    CHECK(f.manager->ListSessions() == std::vector<SessionId>{id});

    REQUIRE(f.manager->CloseSession(id).ok());
    CHECK_FALSE(testing::ProcessExists(info->pid));
    CHECK(testing::ZombieChildrenOf(info->zygote_pid).empty());
    ToolResult after = f.manager->CallTool(id, Call("echo", {{"text", "x"}}));
    CHECK(after.outcome == Outcome::kInvalidCall);
    CHECK_FALSE(after.session_alive);
    CHECK(after.message.find("unknown session") != std::string::npos);
    CHECK(f.manager->CloseSession(id).code() == StatusCode::kNotFound);
    CHECK(f.manager->GetSessionInfo(id).status().code() == StatusCode::kNotFound);
    CHECK(f.manager->ListSessions().empty());
  }

  TEST_CASE("calls are validated before anything is sent" * doctest::timeout(30)) {
    ManagerFixture f;
    SessionId id = f.NewSession();

    ToolResult unknown = f.manager->CallTool(id, Call("no_such_tool", Json::object(), "u"));
    CHECK(unknown.outcome == Outcome::kInvalidCall);
    CHECK(unknown.call_id == "u");
    CHECK(unknown.session_alive);
    CHECK(unknown.message.find("unknown tool 'no_such_tool'") != std::string::npos);
    CHECK(unknown.message.find("echo") != std::string::npos);  // lists the tools

    ToolResult wrong_type = f.manager->CallTool(id, Call("add", {{"a", "two"}, {"b", 1}}));
    CHECK(wrong_type.outcome == Outcome::kInvalidCall);
    CHECK(wrong_type.message.find("arguments invalid") != std::string::npos);
    CHECK(wrong_type.message.find("/a") != std::string::npos);
    CHECK(wrong_type.message.find("expected integer") != std::string::npos);

    ToolResult missing = f.manager->CallTool(id, Call("echo", Json::object()));
    CHECK(missing.outcome == Outcome::kInvalidCall);
    CHECK(missing.message.find("text") != std::string::npos);

    ToolResult extra = f.manager->CallTool(id, Call("echo", {{"text", "a"}, {"loud", true}}));
    CHECK(extra.outcome == Outcome::kInvalidCall);
    CHECK(extra.message.find("loud") != std::string::npos);

    // None of those reached the session: its call counter is still zero.
    CHECK(f.manager->GetSessionInfo(id)->calls == 0);
    CHECK(f.manager->CallTool(id, Call("echo", {{"text", "still here"}})).content == "still here");
  }

  TEST_CASE("a tool that raises answers tool_error and the session lives on" * doctest::timeout(30)) {
    ManagerFixture f;
    SessionId id = f.NewSession();
    ToolResult failed = f.manager->CallTool(id, Call("fail", {{"message", "no such hotel 'X'"}}));
    CHECK(failed.outcome == Outcome::kToolError);
    CHECK(failed.message.find("ValueError") != std::string::npos);
    CHECK(failed.message.find("no such hotel 'X'") != std::string::npos);
    CHECK(failed.session_alive);
    CHECK(f.manager->CallTool(id, Call("add", {{"a", 1}, {"b", 1}})).content == 2);
  }

  TEST_CASE("unknown environments, tasks and bad limits are refused" * doctest::timeout(30)) {
    ManagerFixture f;
    CHECK(f.manager->CreateSession("nope").status().code() == StatusCode::kNotFound);
    auto no_task = f.manager->CreateSession(f.env_id, "no_such_task");
    CHECK(no_task.status().code() == StatusCode::kNotFound);
    CHECK(no_task.status().message().find("no_such_task") != std::string::npos);
    SandboxLimits bad;
    bad.max_processes = -1;
    CHECK(f.manager->CreateSession(f.env_id, SessionOptions{"", bad}).status().code() == StatusCode::kInvalidArgument);
    CHECK(f.manager->FindEnvironment("nope") == nullptr);
    REQUIRE(f.manager->FindEnvironment(f.env_id) != nullptr);
    CHECK(f.manager->FindEnvironment(f.env_id)->manifest.name == "manager_fixture");
    CHECK(f.manager->OpenEnvironment(f.dir / "missing.envdb").status().code() == StatusCode::kNotFound);
    // The same content under another path is the same environment.
    std::filesystem::copy_file(f.dir / "fixture.envdb", f.dir / "copy.envdb");
    CHECK(*f.manager->OpenEnvironment(f.dir / "copy.envdb") == f.env_id);
    CHECK(f.manager->EnvironmentIds() == std::vector<std::string>{f.env_id});
  }

  TEST_CASE("the gold solution runs in a task session, and submit_result gets a verdict" * doctest::timeout(30)) {
    ManagerFixture f;
    SessionId task_session = f.NewSession("sum_task");
    auto solved = f.manager->Solve(task_session);
    REQUIRE_MESSAGE(solved.ok(), solved.status().ToString());
    CHECK(solved->answer == 5);
    CHECK(Json::parse(solved->answer_text) == 5);

    ToolResult verdict = f.manager->CallTool(task_session, Call("submit_result", {{"answer_text", "5"}}));
    INFO(ToJson(verdict).dump());
    REQUIRE(verdict.outcome == Outcome::kOk);
    CHECK(verdict.content["passed"] == true);
    CHECK(verdict.content.contains("verifier_version"));

    SessionId plain = f.NewSession();
    CHECK(f.manager->Solve(plain).status().code() == StatusCode::kFailedPrecondition);
    CHECK(f.manager->Solve(987654).status().code() == StatusCode::kNotFound);
  }

  TEST_CASE("reset is close + create: fresh state, and session ids are never reused" * doctest::timeout(30)) {
    ManagerFixture f;
    SessionId first = f.NewSession();
    CHECK(f.manager->CallTool(first, Call("incr")).content == 1);
    CHECK(f.manager->CallTool(first, Call("incr")).content == 2);
    REQUIRE(f.manager->CloseSession(first).ok());
    SessionId second = f.NewSession("sum_task");
    CHECK(second != first);
    CHECK(second > first);
    CHECK(f.manager->CallTool(second, Call("incr")).content == 1);
    CHECK(f.manager->CallTool(second, Call("incr")).content == 2);

    // ResetSession does both at once and keeps the task and limits.
    pid_t old_pid = f.manager->GetSessionInfo(second)->pid;
    auto third = f.manager->ResetSession(second);
    REQUIRE_MESSAGE(third.ok(), third.status().ToString());
    CHECK(*third > second);
    CHECK(f.manager->CallTool(*third, Call("incr")).content == 1);
    CHECK(f.manager->GetSessionInfo(*third)->task_id == "sum_task");
    CHECK(f.manager->Solve(*third).ok());
    CHECK(f.manager->CallTool(second, Call("incr")).outcome == Outcome::kInvalidCall);
    CHECK(testing::WaitFor([&] { return !testing::ProcessExists(old_pid); }));
    CHECK(f.manager->ResetSession(second).status().code() == StatusCode::kNotFound);
    CHECK(f.manager->ListSessions() == std::vector<SessionId>{*third});
  }

  TEST_CASE("calls on one session are answered in FIFO order; 50 sessions interleave" * doctest::timeout(60)) {
    ManagerFixture f;
    constexpr int kSessions = 50;
    constexpr int kCallsEach = 6;

    std::mutex mu;
    std::condition_variable cv;
    std::vector<SessionId> ids;
    int create_errors = 0;
    for (int i = 0; i < kSessions; ++i) {
      f.manager->CreateSessionAsync(f.env_id, "", [&](Result<SessionId> id) {
        std::lock_guard lock(mu);
        if (id.ok())
          ids.push_back(*id);
        else
          ++create_errors;
        cv.notify_all();
      });
    }
    {
      std::unique_lock lock(mu);
      REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return ids.size() + create_errors == kSessions; }));
    }
    REQUIRE(create_errors == 0);

    // Round-robin over the sessions: incr (the answer is the call's position in its session's
    // queue) interleaved with echo calls.
    std::map<SessionId, std::vector<int64_t>> seen;
    int answered = 0;
    int failures = 0;
    for (int round = 0; round < kCallsEach; ++round) {
      for (SessionId id : ids) {
        f.manager->CallToolAsync(id, round % 2 == 0 ? Call("incr") : Call("echo", {{"text", std::to_string(round)}}),
                                 [&, id, round](ToolResult result) {
                                   std::lock_guard lock(mu);
                                   ++answered;
                                   if (!result.ok())
                                     ++failures;
                                   else if (round % 2 == 0)
                                     seen[id].push_back(result.content.get<int64_t>());
                                   else if (result.content != std::to_string(round))
                                     ++failures;
                                   else
                                     seen[id].push_back(-round);
                                   cv.notify_all();
                                 });
      }
    }
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return answered == kSessions * kCallsEach; }));
    CHECK(failures == 0);
    for (SessionId id : ids) {
      CAPTURE(id);
      CHECK(seen[id] == std::vector<int64_t>{1, -1, 2, -3, 3, -5});
    }
    lock.unlock();
    CHECK(f.manager->Stats().live_sessions == kSessions);
  }

  TEST_CASE("max_sessions bounds live sessions with a retryable error, never a hang" * doctest::timeout(30)) {
    ManagerOptions options;
    options.max_sessions = 3;
    ManagerFixture f(options);
    std::vector<SessionId> ids;
    for (int i = 0; i < 3; ++i) ids.push_back(f.NewSession());
    auto refused = f.manager->CreateSession(f.env_id);
    CHECK(refused.status().code() == StatusCode::kResourceExhausted);
    CHECK(refused.status().message().find("max_sessions") != std::string::npos);
    CHECK(f.manager->ForkSession(ids[0]).status().code() == StatusCode::kResourceExhausted);
    REQUIRE(f.manager->CloseSession(ids[1]).ok());
    auto again = f.manager->CreateSession(f.env_id);
    CHECK(again.ok());
    CHECK(f.manager->Stats().live_sessions == 3);
  }

  TEST_CASE("sync calls from a callback fail instead of deadlocking" * doctest::timeout(30)) {
    ManagerFixture f;
    SessionId id = f.NewSession();
    std::promise<Status> from_callback;
    f.manager->CallToolAsync(id, Call("incr"),
                             [&](ToolResult) { from_callback.set_value(f.manager->CloseSession(id)); });
    Status status = from_callback.get_future().get();
    CHECK(status.code() == StatusCode::kFailedPrecondition);
  }

  TEST_CASE("closing sessions leaves no zombies and no descriptors behind" * doctest::timeout(30)) {
    ManagerFixture f;
    SessionId warm = f.NewSession();  // starts the zygote
    pid_t zygote = f.manager->GetSessionInfo(warm)->zygote_pid;
    size_t fds_before = testing::OpenFdCount();
    std::vector<pid_t> closed_pids;
    for (int i = 0; i < 20; ++i) {
      SessionId id = f.NewSession();
      closed_pids.push_back(f.manager->GetSessionInfo(id)->pid);
      CHECK(f.manager->CallTool(id, Call("incr")).content == 1);
      if (i % 2 == 0) {
        // Close with a call still in flight: the session is killed and the call answers crashed.
        std::promise<ToolResult> pending;
        f.manager->CallToolAsync(id, Call("slow_echo", {{"text", "x"}, {"seconds", 5}}),
                                 [&](ToolResult result) { pending.set_value(std::move(result)); });
        REQUIRE(f.manager->CloseSession(id).ok());
        ToolResult result = pending.get_future().get();
        CHECK(result.outcome == Outcome::kCrashed);
        CHECK_FALSE(result.session_alive);
      } else {
        REQUIRE(f.manager->CloseSession(id).ok());
      }
    }
    CHECK(testing::OpenFdCount() == fds_before);
    CHECK(testing::ZombieChildrenOf(zygote).empty());
    // Of the sessions, only `warm` is left among the zygote's children (the others may be
    // pre-forked spare processes of the worker).
    std::vector<pid_t> children = testing::ChildrenOf(zygote);
    CHECK(std::find(children.begin(), children.end(), f.manager->GetSessionInfo(warm)->pid) != children.end());
    for (pid_t pid : closed_pids) CHECK(std::find(children.begin(), children.end(), pid) == children.end());
  }

  TEST_CASE("one zygote per environment, started on first use and reused" * doctest::timeout(30)) {
    ManagerFixture f;
    CHECK(f.manager->Zygotes().empty());  // lazily started
    auto other = f.manager->OpenEnvironment(testing::WriteFixtureBundle(f.dir / "other.envdb", "other"));
    REQUIRE(other.ok());
    REQUIRE(*other != f.env_id);
    SessionId a1 = f.NewSession();
    SessionId a2 = f.NewSession();
    auto b1 = f.manager->CreateSession(*other);
    REQUIRE(b1.ok());
    pid_t za = f.manager->GetSessionInfo(a1)->zygote_pid;
    CHECK(f.manager->GetSessionInfo(a2)->zygote_pid == za);
    CHECK(f.manager->GetSessionInfo(*b1)->zygote_pid != za);
    CHECK(f.manager->GetSessionInfo(*b1)->env_id == *other);
    CHECK(f.manager->Zygotes().size() == 2);
    CHECK(f.manager->Stats().zygote_starts == 2);
    CHECK(f.manager->CallTool(*b1, Call("incr")).content == 1);
    CHECK(f.manager->CallTool(a1, Call("incr")).content == 1);
  }

  TEST_CASE("no descriptor of the manager's process leaks into the zygote or a session" * doctest::timeout(30)) {
    testing::TempDir dir;
    // A descriptor without close-on-exec, as a careless library might leave one.
    std::string marker = dir / "leak-marker";
    int leaky = ::open(marker.c_str(), O_CREAT | O_RDWR, 0600);
    REQUIRE(leaky >= 0);
    {
      ManagerFixture f;
      SessionId id = f.NewSession();
      auto info = f.manager->GetSessionInfo(id);
      REQUIRE(info.ok());
      for (pid_t pid : {info->zygote_pid, info->pid}) {
        CAPTURE(pid);
        std::error_code ec;
        int seen = 0;
        for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
          ++seen;
          std::error_code link_ec;
          auto target = std::filesystem::read_symlink(entry.path(), link_ec);
          CHECK(target.string() != marker);
        }
        CHECK(seen > 0);
      }
    }
    ::close(leaky);
  }

  TEST_CASE("Create refuses bad options" * doctest::timeout(30)) {
    ManagerOptions no_worker;
    no_worker.worker_path = "/nonexistent/envforge-worker";
    CHECK(SessionManager::Create(no_worker).status().code() == StatusCode::kNotFound);
    ManagerOptions bad_limits;
    bad_limits.limits.wall_time = std::chrono::milliseconds(0);
    CHECK(SessionManager::Create(bad_limits).status().code() == StatusCode::kInvalidArgument);
    ManagerOptions no_sessions;
    no_sessions.max_sessions = 0;
    CHECK(SessionManager::Create(no_sessions).status().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("a zygote that cannot start fails the create with its reason, and is retried" * doctest::timeout(30)) {
    ManagerFixture f;
    // tools.py with a syntax error: the zygote reports {"op":"fatal"} and exits.
    auto broken =
        f.manager->OpenEnvironment(testing::WriteFixtureBundle(f.dir / "broken.envdb", "x\nthis is not python"));
    REQUIRE_MESSAGE(broken.ok(), broken.status().ToString());
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto created = f.manager->CreateSession(*broken);
      REQUIRE_FALSE(created.ok());
      CHECK(created.status().code() == StatusCode::kUnavailable);
      CHECK(created.status().message().find("zygote") != std::string::npos);
      CHECK(created.status().message().find("tools.py") != std::string::npos);
    }
    CHECK(f.manager->Stats().zygote_starts == 2);
    CHECK(f.manager->Stats().live_sessions == 0);
    // The healthy environment is unaffected.
    SessionId id = f.NewSession();
    CHECK(f.manager->CallTool(id, Call("incr")).content == 1);
  }

  TEST_CASE("a worker that exits at once fails the create instead of hanging" * doctest::timeout(30)) {
    ManagerOptions options;
    options.worker_path = "/bin/false";
    ManagerFixture f(options);
    auto created = f.manager->CreateSession(f.env_id);
    REQUIRE_FALSE(created.ok());
    CHECK(created.status().code() == StatusCode::kUnavailable);
    CHECK(created.status().message().find("exited with code 1") != std::string::npos);
  }

  TEST_CASE("the destructor kills every session, reaps the zygotes and closes its descriptors" * doctest::timeout(30)) {
    size_t fds_before = testing::OpenFdCount();
    pid_t zygote = 0;
    std::vector<pid_t> session_pids;
    std::promise<ToolResult> pending;
    {
      ManagerFixture f;
      for (int i = 0; i < 4; ++i) {
        SessionId id = f.NewSession();
        auto info = f.manager->GetSessionInfo(id);
        REQUIRE(info.ok());
        session_pids.push_back(info->pid);
        zygote = info->zygote_pid;
        if (i == 0) {
          f.manager->CallToolAsync(id, Call("slow_echo", {{"text", "x"}, {"seconds", 5}}),
                                   [&](ToolResult result) { pending.set_value(std::move(result)); });
        }
      }
      CHECK(f.manager->Zygotes().size() == 1);
    }
    ToolResult result = pending.get_future().get();
    CHECK(result.outcome == Outcome::kInfraError);
    CHECK_FALSE(result.session_alive);
    CHECK_FALSE(testing::ProcessExists(zygote));  // reaped, not even a zombie
    for (pid_t pid : session_pids) CHECK_FALSE(testing::ProcessExists(pid));
    CHECK(testing::OpenFdCount() == fds_before);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
