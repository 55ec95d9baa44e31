#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/fd.h"
#include "base/subprocess.h"

namespace envforge {
namespace {

TEST_CASE("a descriptor passed over a socket pair is usable on the other side") {
  auto [a, b] = MakeSocketPair().value();
  auto [x, y] = MakeSocketPair().value();
  REQUIRE(SendWithFd(a.get(), "hi", y.get()).ok());
  char buffer[8];
  UniqueFd received;
  size_t n = RecvWithFd(b.get(), buffer, sizeof buffer, &received).value();
  CHECK(std::string(buffer, n) == "hi");
  REQUIRE(received.valid());
  REQUIRE(WriteFull(received.get(), "ping").ok());
  char reply[4];
  REQUIRE(ReadFull(x.get(), reply, 4).ok());
  CHECK(std::string(reply, 4) == "ping");
}

TEST_CASE("ReadFull reports a short stream as Unavailable") {
  auto [a, b] = MakeSocketPair().value();
  REQUIRE(WriteFull(a.get(), "abc").ok());
  a.Reset();
  char buffer[8];
  Status status = ReadFull(b.get(), buffer, 8);
  CHECK(status.code() == StatusCode::kUnavailable);
}

TEST_CASE("WriteFileAtomically replaces the whole file and leaves no temporary behind") {
  auto dir = std::filesystem::temp_directory_path() / ("envforge_fd_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "f.txt").string();
  REQUIRE(WriteFileAtomically(path, "one").ok());
  REQUIRE(WriteFileAtomically(path, "two").ok());
  CHECK(ReadFileToString(path).value() == "two");
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()) == 1);
  CHECK(ReadFileToString((dir / "missing").string()).status().code() == StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST_CASE("RunCommand captures output, exit codes and enforces its timeout") {
  CommandOptions options;
  options.stdin_text = "from stdin";
  auto cat = RunCommand({"cat"}, options).value();
  CHECK(cat.exit_code == 0);
  CHECK(cat.stdout_text == "from stdin");
  auto failing = RunCommand({"sh", "-c", "echo oops >&2; exit 3"}).value();
  CHECK(failing.exit_code == 3);
  CHECK(failing.stderr_text == "oops\n");
  CommandOptions quick;
  quick.timeout = std::chrono::milliseconds(200);
  auto slow = RunCommand({"sleep", "5"}, quick).value();
  CHECK(slow.timed_out);
  CHECK(slow.term_signal == SIGKILL);
  CHECK_FALSE(RunCommand({"/nonexistent/program"}).ok());
}

// Everything written to `fd` until its end.
std::string ReadAll(int fd) {
  std::string text;
  char chunk[256];
  for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) > 0;) text.append(chunk, static_cast<size_t>(n));
  return text;
}

TEST_CASE("SpawnProcess gives the child exactly its descriptors, even swapped ones, and reports exec failures") {
  int first[2], second[2];
  REQUIRE(::pipe2(first, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(second, O_CLOEXEC) == 0);
  UniqueFd first_read(first[0]), second_read(second[0]);
  // Sources at 40 and 41, mapped crosswise to 41 and 40; a stray descriptor at 42 without
  // close-on-exec must not reach the child. (bash: dash redirects descriptors 0-9 only.)
  UniqueFd at40(::dup2(first[1], 40)), at41(::dup2(second[1], 41)), stray(::dup(second[1]));
  ::close(first[1]);
  ::close(second[1]);
  REQUIRE(::dup2(stray.get(), 42) == 42);
  UniqueFd stray42(42);
  auto pid =
      SpawnProcess({"bash", "-c", "echo one >&41; echo two >&40; test -e /proc/self/fd/42 && echo leak >&40; exit 0"},
                   {{41, 40}, {40, 41}});
  REQUIRE(pid.ok());
  at40.Reset();
  at41.Reset();
  stray.Reset();
  stray42.Reset();
  int status = 0;
  REQUIRE(::waitpid(*pid, &status, 0) == *pid);
  CHECK(WIFEXITED(status));
  CHECK(ReadAll(first_read.get()) == "one\n");
  CHECK(ReadAll(second_read.get()) == "two\n");
  auto missing = SpawnProcess({"/nonexistent/program"}, {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("cannot run /nonexistent/program") != std::string::npos);
  CHECK(SpawnProcess({}, {}).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace envforge
