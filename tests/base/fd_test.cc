#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
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

}  // namespace
}  // namespace envforge
