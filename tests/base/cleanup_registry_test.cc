// base/cleanup_registry.h: what a signal removes (in a forked child that really receives it), what
// it never follows, and the sweep of dead processes' entries.
#include "base/cleanup_registry.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "base/fd.h"
#include "tests/temp_dir.h"

namespace envforge {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  REQUIRE(WriteFileAtomically(path, text).ok());
}

// Runs `body` in a child that installs the handlers and then receives `signal_number`; returns
// the child's wait status.
template <typename Body>
int InChildKilledBy(int signal_number, Body body) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    InstallCleanupSignalHandlers();
    body();
    ::kill(::getpid(), signal_number);
    ::_exit(0);  // not reached: the handler re-raises with the default action
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

TEST_SUITE("base.cleanup_registry") {
  TEST_CASE("a signal removes registered files (with their journal) and trees, never following symlinks") {
    TempDir dir;
    Write(dir / "out.tmp", "partial");
    Write(dir / "out.tmp-journal", "journal");
    for (const char* rel : {"tree/a.txt", "tree/sub/b.txt", "tree/sub/deeper/c.txt"}) Write(dir / rel, "x");
    Write(dir / "outside/keep.txt", "keep");
    fs::create_directory_symlink(dir / "outside", dir / "tree/sub/link");
    Write(dir / "unregistered.tmp", "stays");

    int status = InChildKilledBy(SIGTERM, [&] {
      RegisterCleanupPath(dir / "out.tmp", CleanupKind::kFile);
      RegisterCleanupPath(dir / "tree", CleanupKind::kTree);
      int dropped = RegisterCleanupPath(dir / "unregistered.tmp", CleanupKind::kFile);
      UnregisterCleanupPath(dropped);
    });
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGTERM);
    CHECK_FALSE(fs::exists(dir / "out.tmp"));
    CHECK_FALSE(fs::exists(dir / "out.tmp-journal"));
    CHECK_FALSE(fs::exists(dir / "tree"));
    CHECK(fs::exists(dir / "outside/keep.txt"));  // the symlink went, not its target
    CHECK(fs::exists(dir / "unregistered.tmp"));
  }

  TEST_CASE("registration refuses what the handler could not hold, and slots are reused") {
    CHECK(RegisterCleanupPath("", CleanupKind::kFile) == 0);
    CHECK(RegisterCleanupPath(std::string(5000, 'a'), CleanupKind::kFile) == 0);
    std::vector<int> handles;
    for (int i = 0; i < 64; ++i) {
      int handle = RegisterCleanupPath("/nonexistent/" + std::to_string(i), CleanupKind::kFile);
      if (handle == 0) break;
      handles.push_back(handle);
    }
    CHECK(RegisterCleanupPath("/nonexistent/one-more", CleanupKind::kFile) == 0);  // the table is full
    UnregisterCleanupPath(handles.back());
    int again = RegisterCleanupPath("/nonexistent/one-more", CleanupKind::kFile);
    CHECK(again == handles.back());
    handles.back() = again;
    for (int handle : handles) UnregisterCleanupPath(handle);
  }

  TEST_CASE("the sweep removes the entries of processes that no longer exist, and only those") {
    TempDir dir;
    pid_t dead = ::fork();
    REQUIRE(dead >= 0);
    if (dead == 0) ::_exit(0);
    REQUIRE(::waitpid(dead, nullptr, 0) == dead);
    Write(dir / ("job-" + std::to_string(dead) + "/inner/file"), "x");
    Write(dir / ("job-" + std::to_string(dead) + ".log"), "x");
    Write(dir / ("job-" + std::to_string(::getpid()) + ".log"), "mine, alive");
    Write(dir / "job-1.log", "init is alive");
    Write(dir / "unrelated", "x");
    size_t removed = SweepDeadProcessEntries(dir.path().string(), [](std::string_view name) -> std::optional<pid_t> {
      if (!name.starts_with("job-")) return std::nullopt;
      return LeadingPid(name.substr(4));
    });
    CHECK(removed == 2);
    CHECK_FALSE(fs::exists(dir / ("job-" + std::to_string(dead))));
    CHECK_FALSE(fs::exists(dir / ("job-" + std::to_string(dead) + ".log")));
    CHECK(fs::exists(dir / ("job-" + std::to_string(::getpid()) + ".log")));
    CHECK(fs::exists(dir / "job-1.log"));
    CHECK(fs::exists(dir / "unrelated"));
    CHECK(LeadingPid("0") == std::nullopt);
    CHECK(LeadingPid("12x") == pid_t{12});
    CHECK(LeadingPid("99999999999") == std::nullopt);
    CHECK(PidOfProcessName("tmp-12-3", "tmp-") == pid_t{12});
    CHECK(PidOfProcessName("tmp-12", "tmp-") == std::nullopt);
    CHECK(PidOfProcessName("tmp-12", "tmp-", /*bare_pid_too=*/true) == pid_t{12});
    CHECK(PidOfProcessName("tmp-12-", "tmp-", true) == std::nullopt);
    CHECK(PidOfProcessName("tmp-12-3x", "tmp-", true) == std::nullopt);
    CHECK(PidOfProcessName("tmp-12x", "tmp-", true) == std::nullopt);
    CHECK(PidOfProcessName("other-12-3", "tmp-", true) == std::nullopt);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge
