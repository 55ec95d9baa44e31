// FrameChannel (sandbox/internal/frame_channel.h) over a real socket pair: framing, descriptor
// passing, large frames, protocol errors and end of stream.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <thread>

#include "sandbox/internal/frame_channel.h"
#include "sandbox/internal/wire.h"

namespace envforge::sandbox::internal {
namespace {

struct Received {
  std::vector<std::string> frames;
  std::vector<int> fd_frames;  // indexes of frames that carried a descriptor
  std::vector<ino_t> inodes;   // of those descriptors
  std::optional<Status> closed;
};

// Runs the io_context until `done` holds (or 5 s pass).
template <typename Done>
void RunUntil(boost::asio::io_context& io, Done done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
}

std::shared_ptr<FrameChannel> StartChannel(boost::asio::io_context& io, UniqueFd socket, Received& got,
                                           uint32_t max_frame = wire::kMaxFrameBytes) {
  auto channel = FrameChannel::Create(io, std::move(socket), max_frame);
  channel->Start(
      [&got](std::string payload, UniqueFd fd) {
        if (fd.valid()) {
          struct stat info {};
          ::fstat(fd.get(), &info);
          got.fd_frames.push_back(static_cast<int>(got.frames.size()));
          got.inodes.push_back(info.st_ino);
        }
        got.frames.push_back(std::move(payload));
      },
      [&got](const Status& why) { got.closed = why; });
  return channel;
}

TEST_SUITE("sandbox.frame_channel") {
  TEST_CASE("frames written together arrive one by one, in order") {
    boost::asio::io_context io;
    auto pair = MakeSocketPair().value();
    Received got;
    auto channel = StartChannel(io, std::move(pair.first), got);
    REQUIRE(WriteFull(pair.second.get(), wire::EncodeFrame("one") + wire::EncodeFrame("two") + wire::EncodeFrame("3"))
                .ok());
    RunUntil(io, [&] { return got.frames.size() == 3; });
    CHECK(got.frames == std::vector<std::string>{"one", "two", "3"});
    CHECK_FALSE(got.closed);
  }

  TEST_CASE("a large frame split over many reads arrives whole") {
    boost::asio::io_context io;
    auto pair = MakeSocketPair().value();
    Received got;
    auto channel = StartChannel(io, std::move(pair.first), got);
    std::string big(5 << 20, 'x');
    big[12345] = 'y';
    std::thread writer([&] { REQUIRE(wire::WriteFrame(pair.second.get(), big).ok()); });
    RunUntil(io, [&] { return got.frames.size() == 1; });
    writer.join();
    REQUIRE(got.frames.size() == 1);
    CHECK(got.frames[0] == big);
  }

  TEST_CASE("a descriptor is delivered with the frame it rode on") {
    boost::asio::io_context io;
    auto pair = MakeSocketPair().value();
    Received got;
    auto channel = StartChannel(io, std::move(pair.first), got);
    UniqueFd file(::open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
    REQUIRE(file.valid());
    struct stat info {};
    ::fstat(file.get(), &info);
    REQUIRE(wire::WriteFrame(pair.second.get(), "plain").ok());
    REQUIRE(wire::SendFrameWithFd(pair.second.get(), "with fd", file.get()).ok());
    REQUIRE(wire::WriteFrame(pair.second.get(), "after").ok());
    RunUntil(io, [&] { return got.frames.size() == 3; });
    CHECK(got.frames == std::vector<std::string>{"plain", "with fd", "after"});
    CHECK(got.fd_frames == std::vector<int>{1});
    REQUIRE(got.inodes.size() == 1);
    CHECK(got.inodes[0] == info.st_ino);
  }

  TEST_CASE("sending carries a descriptor to the peer") {
    boost::asio::io_context io;
    auto pair = MakeSocketPair().value();
    Received got;
    auto channel = StartChannel(io, std::move(pair.first), got);
    UniqueFd file(::open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
    channel->Send("first");
    channel->Send("second", std::move(file));
    UniqueFd received;
    CHECK(wire::ReadFrame(pair.second.get()).value() == "first");
    CHECK(wire::ReadFrameWithFd(pair.second.get(), &received).value() == "second");
    CHECK(received.valid());
  }

  TEST_CASE("an oversized or empty frame is a protocol error; end of stream is Unavailable") {
    struct Case {
      std::string bytes;
      StatusCode code;
    };
    for (const Case& c :
         {Case{std::string("\xff\xff\xff\x7f", 4), StatusCode::kResourceExhausted},
          Case{std::string("\0\0\0\0", 4), StatusCode::kInvalidArgument}, Case{"", StatusCode::kUnavailable}}) {
      boost::asio::io_context io;
      auto pair = MakeSocketPair().value();
      Received got;
      auto channel = StartChannel(io, std::move(pair.first), got, 1 << 20);
      if (!c.bytes.empty()) REQUIRE(WriteFull(pair.second.get(), c.bytes).ok());
      pair.second.Reset();
      RunUntil(io, [&] { return got.closed.has_value(); });
      REQUIRE(got.closed.has_value());
      CHECK(got.closed->code() == c.code);
      CHECK(channel->closed());
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox::internal
