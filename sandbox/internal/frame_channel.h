// An asynchronous, framed (sandbox/internal/wire.h) view of one connected Unix stream socket,
// driven by Boost.Asio readiness waits on a single io_context thread.
//
// Reading: recvmsg(MSG_DONTWAIT | MSG_CMSG_CLOEXEC) into a buffer, split into frames, one
// callback per frame. A descriptor that rides on a frame (SCM_RIGHTS on its first byte) is
// handed to that frame's callback. Writing: a FIFO of frames, each optionally carrying one
// descriptor, written without blocking; the channel closes its copy of a sent descriptor.
//
// Thread safety: none. Create, every method and every callback belong to the io thread.
// Lifetime: pending waits hold a shared_ptr, so the object lives until they complete; Close()
// cancels them.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/status.h"

namespace envforge::sandbox::internal {

class FrameChannel : public std::enable_shared_from_this<FrameChannel> {
 public:
  using FrameHandler = std::function<void(std::string payload, UniqueFd fd)>;
  // Called once when the channel fails: Unavailable for end of stream or a reset/broken peer,
  // InvalidArgument/ResourceExhausted for a malformed or oversized frame (a protocol error),
  // Internal for an unexpected socket error. Not called after Close().
  using CloseHandler = std::function<void(const Status& why)>;

  // Takes ownership of `socket` and makes it non-blocking. Frames longer than max_frame_bytes
  // are protocol errors.
  static std::shared_ptr<FrameChannel> Create(boost::asio::io_context& io, UniqueFd socket, uint32_t max_frame_bytes);

  // Starts reading. Callbacks may call Close() or Send(), and may drop the last outside reference.
  void Start(FrameHandler on_frame, CloseHandler on_close);
  // Queues one frame; `attach` (optional) rides on its first byte. Errors arrive through on_close.
  void Send(std::string_view payload, UniqueFd attach = {});
  // Stops reading and writing and closes the socket; unsent frames are dropped. Idempotent.
  void Close();
  bool closed() const { return closed_; }

  FrameChannel(boost::asio::io_context& io, UniqueFd socket, uint32_t max_frame_bytes);

 private:
  struct Outgoing {
    std::string bytes;
    UniqueFd fd;
    size_t offset = 0;
  };
  struct IncomingFd {
    uint64_t last_byte;  // stream offset of the last byte of the recvmsg that carried it
    UniqueFd fd;
  };

  void ArmRead();
  void OnReadable();
  bool DeliverFrames();  // false when the channel closed meanwhile
  void TryWrite();
  void Fail(const Status& why);

  boost::asio::posix::stream_descriptor socket_;
  uint32_t max_frame_bytes_;
  FrameHandler on_frame_;
  CloseHandler on_close_;
  bool closed_ = false;
  bool write_armed_ = false;

  std::vector<char> buffer_;  // received bytes in [begin_, end_)
  size_t begin_ = 0;
  size_t end_ = 0;
  uint64_t stream_offset_ = 0;  // stream offset of buffer_[begin_]
  std::deque<IncomingFd> fds_;
  std::deque<Outgoing> outq_;
};

}  // namespace envforge::sandbox::internal
