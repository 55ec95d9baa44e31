// What a hostile session (or zygote) can do to the manager through the descriptors it shares
// with it, against the real envforge-worker: pass descriptors on its socket, announce huge
// frames, flood its stderr. Each is contained: the manager's descriptors and memory stay
// bounded, its stderr never carries the worker's bytes raw, and a neighbour still answers.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "tests/sandbox/manager_test_util.h"

namespace envforge::sandbox {
namespace {

using testing::Call;
using toolsets::Outcome;
using toolsets::ToolResult;
using SessionId = SessionManager::SessionId;

// Appended to the fixture's tools.py. The module body writes a forged log line and a terminal
// escape to the zygote's stderr at import time.
constexpr const char* kAbuseTools = R"PY(

import array
import struct

os.write(2, b"E envforge 2026-11-24 forged-by-zygote: all verdicts passed\n\x1b[31m")


def _session_socket():
    for fd in range(3, 256):
        try:
            if os.fstat(fd).st_mode & 0o170000 == 0o140000:
                return fd
        except OSError:
            pass
    return -1


def pass_descriptors(rounds, per_message):
    # An unfinished frame (1000 bytes announced, 1 byte per message), each byte carrying
    # descriptors: none of them completes a frame, so a manager that keeps descriptors until
    # their frame completes piles them up.
    sock = socket.socket(fileno=os.dup(_session_socket()))
    null = os.open("/dev/null", os.O_RDONLY)
    sent = 0
    try:
        sock.send(struct.pack("<I", 1000))
        for _ in range(rounds):
            sock.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [null] * per_message))])
            sent += per_message
    except OSError:
        pass
    return sent


def announce(size, seconds):
    # A header announcing `size` bytes, then nothing: the manager must not allocate them.
    os.write(_session_socket(), struct.pack("<I", size))
    time.sleep(seconds)
    return "slept"


def spew_stderr(total):
    line = b"E envforge 2026-11-24 forged-by-session: the verdict was PASSED\n" + bytes(range(256)) + b"\n"
    chunk = line * (65536 // len(line) + 1)
    written = 0
    while written < total:
        written += os.write(2, chunk[: min(len(chunk), total - written)])
    return written


def stderr_then_crash(text):
    os.write(2, text.encode())
    return ctypes.string_at(0xFFFF800000000000, 16)
)PY";

const std::vector<testing::FixtureTool>& AbuseToolSpecs() {
  static const std::vector<testing::FixtureTool> tools = {
      {"pass_descriptors",
       R"({"type":"object","properties":{"rounds":{"type":"integer"},"per_message":{"type":"integer"}},"required":["rounds","per_message"]})"},
      {"announce",
       R"({"type":"object","properties":{"size":{"type":"integer"},"seconds":{"type":"number"}},"required":["size","seconds"]})"},
      {"spew_stderr", R"({"type":"object","properties":{"total":{"type":"integer"}},"required":["total"]})"},
      {"stderr_then_crash", R"({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]})"},
  };
  return tools;
}

ManagerOptions FastOptions() {
  ManagerOptions options;
  options.limits = testing::FastLimits();
  return options;
}

// A manager over the fixture environment plus the abusive tools, with a healthy neighbour.
struct AbuseFixture {
  testing::TempDir dir;
  std::unique_ptr<SessionManager> manager;
  std::string env_id;
  SessionId neighbour = 0;

  explicit AbuseFixture(ManagerOptions options = FastOptions()) {
    auto created = SessionManager::Create(std::move(options));
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    manager = std::move(created).value();
    auto opened =
        manager->OpenEnvironment(testing::WriteFixtureBundle(dir / "abuse.envdb", "", kAbuseTools, AbuseToolSpecs()));
    REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
    env_id = *opened;
    neighbour = NewSession();
    REQUIRE(manager->CallTool(neighbour, Call("incr")).content == 1);
  }

  SessionId NewSession(std::optional<SandboxLimits> limits = {}) {
    auto id = manager->CreateSession(env_id, SessionOptions{"", limits});
    REQUIRE_MESSAGE(id.ok(), id.status().ToString());
    return *id;
  }

  void CheckNeighbour(int64_t expected_count) {
    ToolResult result = manager->CallTool(neighbour, Call("incr"));
    INFO("neighbour: " << ToJson(result).dump());
    CHECK(result.outcome == Outcome::kOk);
    CHECK(result.content == expected_count);
  }
};

// Runs `call` while sampling the process's open descriptors; returns the most seen.
template <typename Fn>
size_t PeakFdsDuring(Fn call) {
  std::atomic<bool> done{false};
  std::atomic<size_t> peak{testing::OpenFdCount()};
  std::thread sampler([&] {
    while (!done.load()) {
      size_t now = testing::OpenFdCount();
      if (now > peak.load()) peak.store(now);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  call();
  done.store(true);
  sampler.join();
  return peak.load();
}

size_t ResidentKib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      size_t kib = 0;
      in >> kib;
      return kib;
    }
    in.ignore(1 << 16, '\n');
  }
  return 0;
}

// Points this process's stderr (fd 2) at a file until destroyed: the manager's stderr, and that
// of any zygote started meanwhile when a zygote inherits it.
class StderrToFile {
 public:
  explicit StderrToFile(const std::string& path) : path_(path) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrToFile() { Restore(); }
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::string Contents() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

 private:
  std::string path_;
  int saved_ = -1;
};

TEST_SUITE("sandbox.manager.wire_abuse") {
  TEST_CASE("descriptors passed on a session's socket are closed at once and kill the session" * doctest::timeout(60)) {
    AbuseFixture f;
    SessionId victim = f.NewSession();
    pid_t pid = f.manager->GetSessionInfo(victim)->pid;
    size_t before = testing::OpenFdCount();
    ToolResult result;
    size_t peak = PeakFdsDuring([&] {
      result = f.manager->CallTool(victim, Call("pass_descriptors", {{"rounds", 300}, {"per_message", 2}}));
    });
    INFO(ToJson(result).dump());
    INFO("open descriptors: " << before << " before, " << peak << " at the peak");
    CHECK(result.outcome == Outcome::kCrashed);
    CHECK_FALSE(result.session_alive);
    CHECK(result.message.find("protocol violation") != std::string::npos);
    CHECK(result.message.find("descriptor") != std::string::npos);
    CHECK(peak < before + 16);  // 600 passed; at most the one message's share was ever held
    CHECK(testing::WaitFor([&] { return !testing::ProcessExists(pid); }));
    CHECK(testing::WaitFor([&] { return testing::OpenFdCount() <= before; }));
    f.CheckNeighbour(2);
  }

  TEST_CASE("a zygote passing descriptors on its control channel is killed as broken" * doctest::timeout(60)) {
    // tools.py's module body runs in the zygote: it starts an unfinished frame on the control
    // channel (fd 3) whose bytes carry descriptors.
    constexpr const char* kZygoteAbuse = R"PY(

import array
import struct

_control = socket.socket(fileno=os.dup(3))
_null = os.open("/dev/null", os.O_RDONLY)
_control.send(struct.pack("<I", 1000))
for _ in range(300):
    _control.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [_null, _null]))])
)PY";
    testing::TempDir dir;
    ManagerOptions options = FastOptions();
    options.zygote_start_timeout = std::chrono::milliseconds(5000);
    auto manager = SessionManager::Create(options);
    REQUIRE(manager.ok());
    auto env_id = (*manager)->OpenEnvironment(testing::WriteFixtureBundle(dir / "zygote.envdb", "", kZygoteAbuse));
    REQUIRE(env_id.ok());
    size_t before = testing::OpenFdCount();
    Result<SessionId> session = UnavailableError("not created");
    size_t peak = PeakFdsDuring([&] { session = (*manager)->CreateSession(*env_id, std::string()); });
    INFO("open descriptors: " << before << " before, " << peak << " at the peak");
    REQUIRE_FALSE(session.ok());
    INFO(session.status().ToString());
    CHECK(session.status().code() == StatusCode::kUnavailable);
    CHECK(session.status().message().find("protocol violation on the control channel") != std::string::npos);
    CHECK(session.status().message().find("descriptor") != std::string::npos);
    CHECK(peak < before + 16);
  }

  TEST_CASE("a header over the manager's frame limit kills the session on the header" * doctest::timeout(60)) {
    ManagerOptions options = FastOptions();
    options.max_frame_bytes = 1 << 20;
    options.limits.wall_time = std::chrono::milliseconds(20'000);
    AbuseFixture f(options);
    SessionId victim = f.NewSession();
    // The tool sleeps 15 s after the header; the answer comes from the header alone.
    ToolResult result = f.manager->CallTool(victim, Call("announce", {{"size", (1 << 20) + 1}, {"seconds", 15}}));
    INFO(ToJson(result).dump());
    CHECK(result.outcome == Outcome::kCrashed);
    CHECK(result.message.find("protocol violation") != std::string::npos);
    CHECK(result.message.find("exceeds the limit of 1048576") != std::string::npos);
    CHECK(result.duration_us < 10'000'000);
    f.CheckNeighbour(2);
  }

  TEST_CASE("max_frame_bytes outside 4 KiB .. 64 MiB is refused") {
    for (uint32_t bad : {uint32_t{100}, (64u << 20) + 1}) {
      ManagerOptions options;
      options.max_frame_bytes = bad;
      auto created = SessionManager::Create(options);
      REQUIRE_FALSE(created.ok());
      CHECK(created.status().code() == StatusCode::kInvalidArgument);
      CHECK(created.status().message().find("max_frame_bytes") != std::string::npos);
    }
  }

  TEST_CASE("sessions announcing the largest frame cost the manager no memory for it" * doctest::timeout(90)) {
    ManagerOptions options = FastOptions();
    options.limits.wall_time = std::chrono::milliseconds(20'000);
    AbuseFixture f(options);
    constexpr int kSessions = 8;
    std::vector<SessionId> sessions;
    for (int i = 0; i < kSessions; ++i) sessions.push_back(f.NewSession());
    size_t before = ResidentKib();
    std::atomic<int> answered{0};
    for (SessionId id : sessions) {
      f.manager->CallToolAsync(id, Call("announce", {{"size", 64 << 20}, {"seconds", 3}}),
                               [&](ToolResult) { answered.fetch_add(1); });
    }
    // Each header arrives within moments of its call; a manager that allocates what a header
    // announces has grown by 8 x 64 MiB by then.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    size_t during = ResidentKib();
    INFO("manager RSS " << before << " KiB before, " << during << " KiB with 8 headers of 64 MiB pending");
    CHECK(during < before + 64 * 1024);
    for (SessionId id : sessions) (void)f.manager->CloseSession(id);
    f.CheckNeighbour(2);
  }

  TEST_CASE("a session's stderr flood never reaches the manager's stderr raw; it is captured, bounded" *
            doctest::timeout(90)) {
    testing::TempDir scratch;
    StderrToFile captured(scratch / "manager-stderr.txt");
    ManagerOptions options = FastOptions();
    options.limits.wall_time = std::chrono::milliseconds(20'000);
    constexpr int64_t kFlood = 31'000'000;
    {
      AbuseFixture f(options);
      SessionId flooder = f.NewSession();
      ToolResult flood = f.manager->CallTool(flooder, Call("spew_stderr", {{"total", kFlood}}));
      INFO(ToJson(flood).dump().substr(0, 400));
      CHECK(flood.outcome == Outcome::kOk);
      CHECK(flood.content == kFlood);
      CHECK(flood.session_alive);
      CHECK(testing::WaitFor([&] { return f.manager->GetSessionInfo(flooder)->stderr_bytes == kFlood; }));
      auto info = f.manager->GetSessionInfo(flooder);
      REQUIRE(info.ok());
      CHECK(info->stderr_excerpt.size() < 64 * 1024);
      CHECK(info->stderr_excerpt.find("forged-by-session") != std::string::npos);
      CHECK(info->stderr_excerpt.find("bytes not kept") != std::string::npos);
      CHECK(info->stderr_excerpt.find('\n') == std::string::npos);
      CHECK(std::all_of(info->stderr_excerpt.begin(), info->stderr_excerpt.end(),
                        [](char c) { return c >= 0x20 && c < 0x7f; }));
      f.CheckNeighbour(2);
      CHECK(f.manager->CallTool(flooder, Call("echo", {{"text", "after"}})).content == "after");
    }
    captured.Restore();
    std::string log = captured.Contents();
    INFO("manager stderr: " << log.substr(0, 2000));
    CHECK(log.size() < 256 * 1024);
    CHECK(log.find("forged-by-session") == std::string::npos);
    // The zygote's import-time line is there only escaped, prefixed, never as a line of its own.
    CHECK(log.find("\nE envforge 2026-11-24 forged-by-zygote") == std::string::npos);
    CHECK(log.rfind("E envforge 2026-11-24 forged-by-zygote", 0) != 0);
    CHECK(log.find('\x1b') == std::string::npos);
  }

  TEST_CASE("a crashed session's message names the last bytes it wrote to stderr" * doctest::timeout(60)) {
    AbuseFixture f;
    SessionId victim = f.NewSession();
    ToolResult crashed = f.manager->CallTool(victim, Call("stderr_then_crash", {{"text", "about to fail\n"}}));
    INFO(ToJson(crashed).dump());
    CHECK(crashed.outcome == Outcome::kCrashed);
    CHECK(crashed.message.find("SIGSEGV") != std::string::npos);
    CHECK(crashed.message.find("its stderr ended with: \"about to fail\\n\"") != std::string::npos);
    f.CheckNeighbour(2);
  }
}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
