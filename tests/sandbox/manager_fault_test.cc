// Faults a session can commit against the real envforge-worker, one per test: each is contained
// (typed outcome, limit named) and a healthy neighbour created before the fault still answers.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "tests/sandbox/manager_test_util.h"

namespace envforge::sandbox {
namespace {

using testing::Call;
using testing::ManagerFixture;
using toolsets::Outcome;
using toolsets::ToolResult;
using SessionId = SessionManager::SessionId;

ManagerOptions FastOptions() {
  ManagerOptions options;
  options.limits = testing::FastLimits();
  return options;
}

// The neighbour's state survived the fault next door: its counter continues where it was.
void CheckNeighbour(SessionManager& manager, SessionId neighbour, int64_t expected_count) {
  ToolResult result = manager.CallTool(neighbour, Call("incr"));
  INFO("neighbour: " << ToJson(result).dump());
  CHECK(result.outcome == Outcome::kOk);
  CHECK(result.content == expected_count);
  CHECK(result.session_alive);
}

struct FaultFixture : ManagerFixture {
  SessionId neighbour;
  SessionId victim;
  FaultFixture() : ManagerFixture(FastOptions()) {
    neighbour = NewSession();
    REQUIRE(manager->CallTool(neighbour, Call("incr")).content == 1);
    victim = NewSession();
  }
  std::string Layer(const std::string& layer) { return testing::IsolationLayer(*manager, env_id, layer); }
};

TEST_SUITE("sandbox.manager.faults") {
  TEST_CASE("a Python loop past the wall time is interrupted; the session answers the next call" *
            doctest::timeout(30)) {
    FaultFixture f;
    ToolResult spun = f.manager->CallTool(f.victim, Call("spin"));
    INFO(ToJson(spun).dump());
    CHECK(spun.outcome == Outcome::kTimeout);
    CHECK(spun.limit == "wall_time");
    CHECK(spun.session_alive);
    CHECK(spun.duration_us >= 1500 * 1000);
    CHECK(spun.duration_us < 2000 * 1000);  // the soft timeout, well before the hard deadline
    CHECK(f.manager->CallTool(f.victim, Call("echo", {{"text", "after"}})).content == "after");
    CheckNeighbour(*f.manager, f.neighbour, 2);
  }

  TEST_CASE("a per-session wall time overrides the manager's" * doctest::timeout(30)) {
    FaultFixture f;
    SandboxLimits limits = testing::FastLimits();
    limits.wall_time = std::chrono::milliseconds(200);
    SessionId quick = f.NewSession("", limits);
    CHECK(f.manager->GetSessionInfo(quick)->limits.wall_time == std::chrono::milliseconds(200));
    ToolResult slow = f.manager->CallTool(quick, Call("slow_echo", {{"text", "x"}, {"seconds", 1}}));
    CHECK(slow.outcome == Outcome::kTimeout);
    CHECK(slow.session_alive);
    CHECK(f.manager->CallTool(f.victim, Call("slow_echo", {{"text", "x"}, {"seconds", 0.5}})).content == "x");
  }

  TEST_CASE("a tool stuck in C is killed at the hard deadline" * doctest::timeout(30)) {
    FaultFixture f;
    pid_t pid = f.manager->GetSessionInfo(f.victim)->pid;
    // A call queued behind the stuck one answers crashed once the session is killed.
    std::promise<ToolResult> queued;
    ToolResult stuck;
    std::thread caller([&] { stuck = f.manager->CallTool(f.victim, Call("stuck_in_c", {{"seconds", 30}})); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    f.manager->CallToolAsync(f.victim, Call("echo", {{"text", "queued"}}),
                             [&](ToolResult result) { queued.set_value(std::move(result)); });
    caller.join();
    INFO(ToJson(stuck).dump());
    CHECK(stuck.outcome == Outcome::kTimeout);
    CHECK(stuck.limit == "wall_time");
    CHECK_FALSE(stuck.session_alive);
    CHECK(stuck.duration_us >= 2000 * 1000);  // wall time 1500 ms + grace 500 ms
    CHECK(stuck.duration_us < 3000 * 1000);
    ToolResult behind = queued.get_future().get();
    CHECK(behind.outcome == Outcome::kCrashed);
    CHECK_FALSE(behind.session_alive);
    ToolResult later = f.manager->CallTool(f.victim, Call("echo", {{"text", "later"}}));
    CHECK(later.outcome == Outcome::kCrashed);
    CHECK_FALSE(later.session_alive);
    CHECK(testing::WaitFor([&] { return !testing::ProcessExists(pid); }));
    CHECK_FALSE(f.manager->GetSessionInfo(f.victim)->alive);
    CHECK(f.manager->CloseSession(f.victim).ok());
    CheckNeighbour(*f.manager, f.neighbour, 2);
  }

  TEST_CASE("burning CPU past cpu_seconds hits the cpu_time limit" * doctest::timeout(30)) {
    FaultFixture f;
    SandboxLimits limits = testing::FastLimits();
    limits.cpu_seconds = 1;
    limits.wall_time = std::chrono::milliseconds(8000);
    SessionId burner = f.NewSession("", limits);
    ToolResult burnt = f.manager->CallTool(burner, Call("spin"));
    INFO(ToJson(burnt).dump());
    CHECK(burnt.limit == "cpu_time");
    CHECK((burnt.outcome == Outcome::kCrashed || burnt.outcome == Outcome::kToolError));
    CHECK(burnt.duration_us < 5000 * 1000);
    CheckNeighbour(*f.manager, f.neighbour, 2);
  }

  TEST_CASE("unbounded allocation hits the memory limit" * doctest::timeout(60)) {
    FaultFixture f;
    // A wall time far past what filling the memory limit takes, so the memory limit is what stops
    // the hog even on a host whose page faults are slow (seen: 256 MiB in 1.3 s).
    SandboxLimits roomy = testing::FastLimits();
    roomy.wall_time = std::chrono::seconds(20);
    SessionId hungry = f.NewSession("", roomy);
    ToolResult hog = f.manager->CallTool(hungry, Call("hog_memory"));
    INFO(ToJson(hog).dump());
    CHECK(hog.limit == "memory");
    if (hog.outcome == Outcome::kToolError) {
      // MemoryError raised inside the session: it lives on.
      CHECK(hog.session_alive);
      CHECK(f.manager->CallTool(hungry, Call("echo", {{"text", "ok"}})).content == "ok");
    } else {
      CHECK(hog.outcome == Outcome::kCrashed);  // OOM-killed by the memory cgroup
      CHECK_FALSE(hog.session_alive);
    }
    CheckNeighbour(*f.manager, f.neighbour, 2);
  }

  TEST_CASE("a segfault ends the session with crashed, naming SIGSEGV" * doctest::timeout(30)) {
    FaultFixture f;
    ToolResult crashed = f.manager->CallTool(f.victim, Call("segfault"));
    INFO(ToJson(crashed).dump());
    CHECK(crashed.outcome == Outcome::kCrashed);
    CHECK_FALSE(crashed.session_alive);
    CHECK(crashed.message.find("session process killed by SIGSEGV") != std::string::npos);
    ToolResult later = f.manager->CallTool(f.victim, Call("incr"));
    CHECK(later.outcome == Outcome::kCrashed);
    CHECK(later.message == crashed.message);
    CHECK(f.manager->Stats().sessions_died == 1);
    CheckNeighbour(*f.manager, f.neighbour, 2);
    CHECK(f.manager->CloseSession(f.victim).ok());
  }

  TEST_CASE("a fork loop is bounded by the process limit" * doctest::timeout(30)) {
    FaultFixture f;
    ToolResult forks = f.manager->CallTool(f.victim, Call("fork_loop", {{"count", 64}}));
    INFO(ToJson(forks).dump());
    if (forks.outcome == Outcome::kOk) {
      CHECK(forks.content.get<int>() < 64);
    } else {
      CHECK(forks.outcome == Outcome::kToolError);
      CHECK((forks.limit == "processes" || forks.message.find("BlockingIOError") != std::string::npos ||
             forks.message.find("PermissionError") != std::string::npos));
    }
    CheckNeighbour(*f.manager, f.neighbour, 2);
  }

  TEST_CASE("a session cannot reach the host's network" * doctest::timeout(30)) {
    FaultFixture f;
    // A listener in the test process: reachable only without the network namespace.
    int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener, 4) == 0);
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    ToolResult connected = f.manager->CallTool(f.victim, Call("connect", {{"port", ntohs(address.sin_port)}}));
    ::close(listener);
    INFO(ToJson(connected).dump());
    if (f.Layer("network") == "on" || f.Layer("seccomp") == "on") {
      CHECK(connected.outcome == Outcome::kToolError);
    } else {
      MESSAGE("network isolation is off here: " << f.Layer("network"));
    }
    CHECK(connected.outcome != Outcome::kCrashed);
    CheckNeighbour(*f.manager, f.neighbour, 2);
  }

  TEST_CASE("a session cannot read /etc/passwd" * doctest::timeout(30)) {
    FaultFixture f;
    ToolResult read = f.manager->CallTool(f.victim, Call("read_file", {{"path", "/etc/passwd"}}));
    INFO(ToJson(read).dump());
    if (f.Layer("landlock") == "on") {
      CHECK(read.outcome == Outcome::kToolError);
      CHECK(read.message.find("PermissionError") != std::string::npos);
    } else {
      MESSAGE("landlock is off here: " << f.Layer("landlock"));
    }
    CHECK(read.session_alive);
    CheckNeighbour(*f.manager, f.neighbour, 2);
  }

  TEST_CASE("a session writes only inside its scratch directory" * doctest::timeout(30)) {
    FaultFixture f;
    auto info = f.manager->GetSessionInfo(f.victim);
    REQUIRE(info.ok());
    std::string outside = f.dir / "escaped.txt";
    ToolResult escaped = f.manager->CallTool(f.victim, Call("write_file", {{"path", outside}, {"text", "pwned"}}));
    INFO(ToJson(escaped).dump());
    if (f.Layer("landlock") == "on") {
      CHECK(escaped.outcome == Outcome::kToolError);
      CHECK_FALSE(std::filesystem::exists(outside));
    } else {
      MESSAGE("landlock is off here: " << f.Layer("landlock"));
    }
    ToolResult inside = f.manager->CallTool(
        f.victim, Call("write_file", {{"path", info->scratch_dir + "/note.txt"}, {"text", "mine"}}));
    INFO(ToJson(inside).dump());
    CHECK(inside.outcome == Outcome::kOk);
    CHECK(inside.content == 4);
    CheckNeighbour(*f.manager, f.neighbour, 2);
    // The scratch directory goes with the session.
    REQUIRE(f.manager->CloseSession(f.victim).ok());
    CHECK_FALSE(std::filesystem::exists(info->scratch_dir));
  }

  TEST_CASE("a caller-chosen scratch root is normalised, used and kept" * doctest::timeout(30)) {
    testing::TempDir dir;
    ManagerOptions options;
    options.scratch_root = dir / "a/../root/";
    ManagerFixture f(options);
    CHECK(f.manager->options().scratch_root == dir / "root");
    SessionId id = f.NewSession();
    auto info = f.manager->GetSessionInfo(id);
    REQUIRE(info.ok());
    CHECK(info->scratch_dir.rfind(dir / "root/e", 0) == 0);  // the zygote's own root, <root>/eN/fN/sN
    ToolResult wrote =
        f.manager->CallTool(id, Call("write_file", {{"path", info->scratch_dir + "/x.txt"}, {"text", "abc"}}));
    CHECK(wrote.content == 3);
    // The file lives in the zygote's private scratch tmpfs when it has one: visible through the
    // zygote's own view of the file system only.
    std::string zygote_view = "/proc/" + std::to_string(info->zygote_pid) + "/root";
    bool private_scratch = testing::IsolationLayer(*f.manager, f.env_id, "zygote_scratch") == "on";
    CHECK(std::filesystem::exists((private_scratch ? zygote_view : "") + info->scratch_dir + "/x.txt"));
    if (private_scratch) CHECK_FALSE(std::filesystem::exists(info->scratch_dir + "/x.txt"));
    f.manager.reset();
    CHECK(std::filesystem::exists(dir / "root"));  // not the manager's to remove
    CHECK_FALSE(std::filesystem::exists(info->scratch_dir));
  }

  TEST_CASE("the default scratch roots: one per manager, removed with it; a dead process's left behind are swept" *
            doctest::timeout(60)) {
    // A pid no process has now: a child that has exited and been reaped.
    pid_t dead = ::fork();
    REQUIRE(dead >= 0);
    if (dead == 0) ::_exit(0);
    REQUIRE(::waitpid(dead, nullptr, 0) == dead);
    const std::filesystem::path left = "/tmp/envforge-scratch-" + std::to_string(dead) + "-1";
    const std::filesystem::path older = "/tmp/envforge-scratch-" + std::to_string(dead);         // before the -<n>
    const std::filesystem::path alive = "/tmp/envforge-scratch-1-7";                             // init's: alive
    const std::filesystem::path other = "/tmp/envforge-scratch-" + std::to_string(dead) + "-x";  // not a root
    for (const auto& root : {left, older, alive, other}) {
      std::filesystem::create_directories(root / "code-copies-1" / "repo");
      std::ofstream(root / "code-copies-1" / "repo" / "file.txt") << "left behind";
    }
    ManagerFixture first;
    ManagerFixture second;
    const std::string first_root = first.manager->options().scratch_root;
    const std::string second_root = second.manager->options().scratch_root;
    CHECK_FALSE(std::filesystem::exists(left));
    CHECK_FALSE(std::filesystem::exists(older));
    CHECK(std::filesystem::exists(alive / "code-copies-1" / "repo" / "file.txt"));
    CHECK(std::filesystem::exists(other / "code-copies-1" / "repo" / "file.txt"));
    std::filesystem::remove_all(alive);
    std::filesystem::remove_all(other);
    // Two managers alive at once in one process: a root each, and the first one's going leaves
    // the second's sessions their files.
    CHECK(first_root.rfind("/tmp/envforge-scratch-" + std::to_string(::getpid()) + "-", 0) == 0);
    CHECK(second_root.rfind("/tmp/envforge-scratch-" + std::to_string(::getpid()) + "-", 0) == 0);
    CHECK(first_root != second_root);
    SessionId id = second.NewSession();
    auto info = second.manager->GetSessionInfo(id);
    REQUIRE(info.ok());
    first.manager.reset();
    CHECK_FALSE(std::filesystem::exists(first_root));
    REQUIRE(std::filesystem::exists(second_root));
    ToolResult wrote =
        second.manager->CallTool(id, Call("write_file", {{"path", info->scratch_dir + "/x.txt"}, {"text", "abc"}}));
    CHECK(wrote.content == 3);
    CHECK(second.manager->CallTool(id, Call("read_file", {{"path", info->scratch_dir + "/x.txt"}})).content == "abc");
    second.manager.reset();
    CHECK_FALSE(std::filesystem::exists(second_root));
  }

  TEST_CASE(
      "another environment under the same manager cannot reach a session's files, from its zygote or a "
      "session" *
      doctest::timeout(60)) {
    ManagerFixture f;
    SessionId owner = f.NewSession();
    auto info = f.manager->GetSessionInfo(owner);
    REQUIRE(info.ok());
    std::string secret = info->scratch_dir + "/secret.txt";
    REQUIRE(f.manager->CallTool(owner, Call("write_file", {{"path", secret}, {"text", "B's secret"}})).outcome ==
            Outcome::kOk);
    // The other environment's tools.py tries at import time (in its zygote) and keeps the results
    // where its `get` tool finds them.
    std::string path = Json(secret).dump();
    std::string dir = Json(info->scratch_dir).dump();
    // Each zygote has a scratch root of its own, <scratch_root>/eN: B's, and the manager's root
    // above both (the host's directory, beside code and search environments' files).
    std::filesystem::path root_b = std::filesystem::path(info->scratch_dir).parent_path().parent_path();
    REQUIRE(root_b.parent_path() == f.manager->options().scratch_root);
    std::string roots = Json(root_b.string()).dump() + ", " + Json(f.manager->options().scratch_root).dump();
    std::string salt =
        "trespasser\n"
        "def _try(fn):\n"
        "    try:\n"
        "        return 'ok: %r' % (fn(),)\n"
        "    except BaseException as exc:\n"
        "        return '%s: %s' % (type(exc).__name__, exc)\n"
        "_state['values']['read'] = _try(lambda: open(" +
        path +
        ").read())\n"
        "_state['values']['write'] = _try(lambda: open(" +
        path +
        ", 'w').write('trespassed'))\n"
        "_state['values']['list'] = _try(lambda: os.listdir(" +
        dir +
        "))\n"
        "_state['values']['roots'] = _try(lambda: [os.listdir(r) for r in (" +
        roots + ")])\n";
    auto other = f.manager->OpenEnvironment(testing::WriteFixtureBundle(f.dir / "trespasser.envdb", salt));
    REQUIRE_MESSAGE(other.ok(), other.status().ToString());
    auto trespasser = f.manager->CreateSession(*other, SessionOptions{});
    REQUIRE_MESSAGE(trespasser.ok(), trespasser.status().ToString());
    for (std::string attempt : {"read", "write", "list", "roots"}) {
      ToolResult result = f.manager->CallTool(*trespasser, Call("get", {{"key", attempt}}));
      INFO(attempt << " at import time: " << result.content);
      REQUIRE(result.content.is_string());
      CHECK(result.content.get<std::string>().rfind("ok", 0) != 0);
    }
    auto a_info = f.manager->GetSessionInfo(*trespasser);
    REQUIRE(a_info.ok());
    std::filesystem::path root_a = std::filesystem::path(a_info->scratch_dir).parent_path().parent_path();
    CHECK(root_a.parent_path() == f.manager->options().scratch_root);
    CHECK(root_a != root_b);
    if (testing::IsolationLayer(*f.manager, *other, "zygote_landlock") == "on") {
      // Refused by A's Landlock domain (its own root only), not merely hidden by A's private
      // scratch tmpfs: so B's files stay out of reach where that tmpfs is off too.
      ToolResult roots_result = f.manager->CallTool(*trespasser, Call("get", {{"key", "roots"}}));
      CHECK(roots_result.content.get<std::string>().rfind("PermissionError", 0) == 0);
    }
    CHECK(f.manager->CallTool(*trespasser, Call("read_file", {{"path", secret}})).outcome == Outcome::kToolError);
    CHECK(f.manager->CallTool(*trespasser, Call("write_file", {{"path", secret}, {"text", "x"}})).outcome ==
          Outcome::kToolError);
    // B's file is intact and B goes on.
    CHECK(f.manager->CallTool(owner, Call("read_file", {{"path", secret}})).content == "B's secret");
    CHECK(f.manager->CallTool(f.NewSession(), Call("add", {{"a", 2}, {"b", 2}})).content == 4);
  }

  TEST_CASE("output over max_output_bytes is refused with limit output_size" * doctest::timeout(30)) {
    FaultFixture f;
    ToolResult big = f.manager->CallTool(f.victim, Call("big_output", {{"size", 2 << 20}}));
    INFO(ToJson(big).dump().substr(0, 400));
    CHECK(big.outcome == Outcome::kToolError);
    CHECK(big.limit == "output_size");
    CHECK(big.session_alive);
    CHECK(f.manager->CallTool(f.victim, Call("big_output", {{"size", 1000}})).content.get<std::string>().size() ==
          1000);
    CheckNeighbour(*f.manager, f.neighbour, 2);
  }

  TEST_CASE("a session that breaks the frame protocol is killed" * doctest::timeout(30)) {
    for (bool oversized : {true, false}) {
      CAPTURE(oversized);
      FaultFixture f;
      pid_t pid = f.manager->GetSessionInfo(f.victim)->pid;
      ToolResult broken = f.manager->CallTool(f.victim, Call("break_protocol", {{"oversized", oversized}}));
      INFO(ToJson(broken).dump());
      CHECK(broken.outcome == Outcome::kCrashed);
      CHECK_FALSE(broken.session_alive);
      CHECK(broken.message.find("protocol violation") != std::string::npos);
      CHECK(testing::WaitFor([&] { return !testing::ProcessExists(pid); }));
      CheckNeighbour(*f.manager, f.neighbour, 2);
    }
  }

  TEST_CASE("a dead zygote fails its sessions with infra_error; the next create restarts it" * doctest::timeout(30)) {
    FaultFixture f;
    pid_t zygote = f.manager->GetSessionInfo(f.victim)->zygote_pid;
    std::promise<ToolResult> in_flight;
    f.manager->CallToolAsync(f.victim, Call("slow_echo", {{"text", "x"}, {"seconds", 5}}),
                             [&](ToolResult result) { in_flight.set_value(std::move(result)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(::kill(zygote, SIGKILL) == 0);
    ToolResult result = in_flight.get_future().get();
    INFO(ToJson(result).dump());
    CHECK(result.outcome == Outcome::kInfraError);
    CHECK_FALSE(result.session_alive);
    CHECK(result.message.find("zygote") != std::string::npos);
    CHECK(f.manager->CallTool(f.neighbour, Call("incr")).outcome == Outcome::kInfraError);
    CHECK(testing::WaitFor([&] { return !testing::ProcessExists(zygote); }));  // reaped
    auto closing = std::chrono::steady_clock::now();
    CHECK(f.manager->CloseSession(f.victim).ok());
    CHECK(std::chrono::steady_clock::now() - closing < std::chrono::seconds(2));

    SessionId fresh = f.NewSession();
    auto info = f.manager->GetSessionInfo(fresh);
    REQUIRE(info.ok());
    CHECK(info->zygote_pid != zygote);
    CHECK(f.manager->CallTool(fresh, Call("incr")).content == 1);
    CHECK(f.manager->Stats().zygote_starts == 2);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
