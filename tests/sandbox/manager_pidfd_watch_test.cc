// SessionChannel's pidfd watch (sandbox/internal/session_channel.h) when Asio recycles a
// closed descriptor's reactor state: an event the reactor collected for the closed descriptor
// must not read as the session's exit. This is how healthy sessions once died "with code 0":
// the manager took such an event for an exit, closed the session's socket, and the session
// process, seeing end of stream, exited cleanly.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <optional>

#include "base/json.h"
#include "sandbox/internal/pidfd.h"
#include "sandbox/internal/session_channel.h"
#include "sandbox/internal/wire.h"

namespace envforge::sandbox::internal {
namespace {

namespace asio = boost::asio;

// A child that waits to be killed: the process the channel watches. Killed and reaped when
// the guard goes, so a failed check does not leave it holding the test's output open.
class IdleChild {
 public:
  IdleChild() : pid_(::fork()) {
    if (pid_ == 0) {
      ::pause();
      ::_exit(0);
    }
  }
  ~IdleChild() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  IdleChild(const IdleChild&) = delete;
  IdleChild& operator=(const IdleChild&) = delete;
  pid_t pid() const { return pid_; }
  // Kills and reaps it now.
  void Reap() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  pid_t pid_;
};

// A pipe's read end, readable, as an Asio descriptor; the write end is closed.
asio::posix::stream_descriptor ReadablePipe(asio::io_context& io) {
  int ends[2];
  REQUIRE(::pipe2(ends, O_CLOEXEC) == 0);
  REQUIRE(::write(ends[1], "x", 1) == 1);
  ::close(ends[1]);
  asio::posix::stream_descriptor read_end(io);
  read_end.assign(ends[0]);
  return read_end;
}

template <typename Done>
void RunUntil(asio::io_context& io, std::chrono::milliseconds limit, Done done) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
}

TEST_SUITE("sandbox.session_channel") {
  TEST_CASE("a recycled reactor state's event is not taken for the session's exit") {
    asio::io_context io;
    IdleChild idle;
    pid_t child = idle.pid();
    REQUIRE(child > 0);
    auto sockets = MakeSocketPair().value();
    SessionChannelOptions options;
    options.max_frame_bytes = wire::kMaxFrameBytes;
    options.report_wait = std::chrono::milliseconds(20);
    options.label = "session 1";
    auto channel = SessionChannel::Create(io, std::move(sockets.first), options);
    std::optional<Result<int>> ready;
    bool gone = false;
    channel->Start([&](Result<int> pid) { ready = std::move(pid); }, [&] { gone = true; });

    // Both pipes are readable before the loop runs, so one epoll_wait collects both events.
    // The first one's handler closes the second descriptor and starts watching the child's
    // pidfd, which takes over the second descriptor's reactor state while that state's event
    // is still queued.
    auto first = ReadablePipe(io);
    auto second = ReadablePipe(io);
    bool second_aborted = false;
    first.async_wait(asio::posix::descriptor_base::wait_read, [&](const boost::system::error_code& ec) {
      REQUIRE_FALSE(ec);
      second.close();
      channel->SetPid(child);
    });
    second.async_wait(asio::posix::descriptor_base::wait_read, [&](const boost::system::error_code& ec) {
      second_aborted = ec == asio::error::operation_aborted;
    });
    RunUntil(io, std::chrono::milliseconds(300), [] { return false; });
    CHECK(second_aborted);
    // A false exit would have failed the start ("exited before it became ready") after
    // report_wait.
    CHECK_FALSE(ready.has_value());
    CHECK_FALSE(gone);
    CHECK(::kill(child, 0) == 0);

    // The watch still sees the real exit.
    Json frame = {{"op", "ready"}, {"pid", child}};
    REQUIRE(wire::WriteFrame(sockets.second.get(), DumpJson(frame)).ok());
    RunUntil(io, std::chrono::seconds(5), [&] { return ready.has_value(); });
    REQUIRE(ready.has_value());
    REQUIRE(ready->ok());
    CHECK(**ready == child);
    CHECK(channel->alive());
    REQUIRE(::kill(child, SIGKILL) == 0);
    RunUntil(io, std::chrono::seconds(5), [&] { return gone; });
    CHECK(gone);
    CHECK_FALSE(channel->alive());
  }

  TEST_CASE("PidfdExited tells a live process from one that exited") {
    IdleChild idle;
    REQUIRE(idle.pid() > 0);
    UniqueFd pidfd = PidfdOpen(idle.pid()).value();
    CHECK_FALSE(PidfdExited(pidfd.get()));
    idle.Reap();
    CHECK(PidfdExited(pidfd.get()));
  }
}

}  // namespace
}  // namespace envforge::sandbox::internal
