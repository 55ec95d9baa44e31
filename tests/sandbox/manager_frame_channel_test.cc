// FrameChannel (sandbox/internal/frame_channel.h) over a real socket pair: framing, descriptor
// passing, large frames, protocol errors and end of stream.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstring>
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
      [&got](std::string payload, std::vector<UniqueFd> fds) {
        for (const UniqueFd& fd : fds) {
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
    CHECK(channel->buffer_capacity() == 0);  // nothing held once the frame is delivered
  }

  TEST_CASE("a descriptor is delivered with the frame it rode on") {
    boost::asio::io_context io;
    auto pair = MakeSocketPair().value();
    Received got;
    auto channel = StartChannel(io, std::move(pair.first), got);
    channel->AllowDescriptors(1);
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

  // The channel's copy of a passed descriptor is closed when the read end of its pipe sees EOF
  // once the test closed its own copy of the write end.
  bool PipeClosedEverywhere(int read_end) {
    char byte;
    return ::read(read_end, &byte, 1) == 0;
  }

  TEST_CASE("descriptors are refused and closed at once unless allowed, and beyond the allowance") {
    struct Case {
      size_t allowed;
      size_t sent;
      std::string why;
    };
    for (const Case& c : {Case{0, 1, "where the protocol expects none"}, Case{1, 2, "for one frame (at most 1)"},
                          Case{2, 20, "control buffer"}}) {
      CAPTURE(c.allowed);
      CAPTURE(c.sent);
      boost::asio::io_context io;
      auto pair = MakeSocketPair().value();
      Received got;
      auto channel = StartChannel(io, std::move(pair.first), got);
      channel->AllowDescriptors(c.allowed);
      int pipe_fds[2];
      REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
      UniqueFd read_end(pipe_fds[0]);
      // An unfinished frame whose bytes carry the descriptors: they never complete a frame.
      REQUIRE(WriteFull(pair.second.get(), std::string("\x00\x01\x00\x00", 4)).ok());
      std::vector<int> fds(c.sent, pipe_fds[1]);
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 32)] = {};
      iovec iov{const_cast<char*>("x"), 1};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
      REQUIRE(::sendmsg(pair.second.get(), &msg, MSG_NOSIGNAL) == 1);
      ::close(pipe_fds[1]);
      RunUntil(io, [&] { return got.closed.has_value(); });
      REQUIRE(got.closed.has_value());
      CHECK(got.closed->code() == StatusCode::kInvalidArgument);
      CHECK(got.closed->message().find(c.why) != std::string::npos);
      CHECK(PipeClosedEverywhere(read_end.get()));
      CHECK(got.frames.empty());
    }
  }

  TEST_CASE("a header announcing a large frame allocates nothing before the bytes arrive") {
    boost::asio::io_context io;
    std::vector<std::shared_ptr<FrameChannel>> channels;
    std::vector<UniqueFd> peers;
    std::vector<Received> got(16);
    for (Received& received : got) {
      auto pair = MakeSocketPair().value();
      channels.push_back(StartChannel(io, std::move(pair.first), received));
      REQUIRE(WriteFull(pair.second.get(), std::string("\x00\x00\x00\x04", 4) + "{\"partial\":").ok());
      peers.push_back(std::move(pair.second));
    }
    io.restart();
    io.run_for(std::chrono::milliseconds(200));
    for (const auto& channel : channels) {
      CHECK_FALSE(channel->closed());
      CHECK(channel->buffer_capacity() < (1u << 20));  // 64 MiB announced
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox::internal
