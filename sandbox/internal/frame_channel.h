// An asynchronous, framed (sandbox/internal/wire.h) view of one connected Unix stream socket,
// driven by Boost.Asio readiness waits on a single io_context thread.
//
// Reading: recvmsg(MSG_DONTWAIT | MSG_CMSG_CLOEXEC) into a buffer, split into frames, one
// callback per frame. The buffer grows with the bytes actually received (doubling, at most the
// announced frame plus one read), never with what a length prefix announces: a peer that
// announces max_frame_bytes and sends nothing costs one 64 KiB read buffer; a channel with no
// partial frame holds no buffer at all. A length above
// max_frame_bytes fails the channel as soon as its 4 bytes arrive.
//
// Descriptors (SCM_RIGHTS) are refused unless the owner allows them: AllowDescriptors(n) lets
// the next frames carry up to n descriptors each (a descriptor belongs to the frame holding the
// last byte of the recvmsg that carried it: Linux stops a stream recvmsg right after the segment
// carrying descriptors, and a sender attaches them to the segment starting its frame). Every
// other ancillary datum fails the channel (InvalidArgument, "protocol violation" to the owners),
// and every descriptor received with it is closed at once: descriptors while none is allowed,
// more than n for one frame, a truncated control message (MSG_CTRUNC), any cmsg other than
// SCM_RIGHTS (SCM_CREDENTIALS, ...). So a peer can never make the channel hold more than n
// descriptors. Writing: a FIFO of frames, each optionally carrying one descriptor, written
// without blocking; the channel closes its copy of a sent descriptor.
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
  // `fds`: the descriptors that rode on the frame (empty unless AllowDescriptors).
  using FrameHandler = std::function<void(std::string payload, std::vector<UniqueFd> fds)>;
  // Called once when the channel fails: Unavailable for end of stream or a reset/broken peer,
  // InvalidArgument/ResourceExhausted for a malformed or oversized frame (a protocol error),
  // Internal for an unexpected socket error. Not called after Close().
  using CloseHandler = std::function<void(const Status& why)>;

  // Takes ownership of `socket` and makes it non-blocking. Frames longer than max_frame_bytes
  // are protocol errors.
  static std::shared_ptr<FrameChannel> Create(boost::asio::io_context& io, UniqueFd socket, uint32_t max_frame_bytes);

  // Starts reading. Callbacks may call Close() or Send(), and may drop the last outside reference.
  void Start(FrameHandler on_frame, CloseHandler on_close);
  // Descriptors a frame may carry from now on (0, the default, refuses them all). May be called
  // from the frame callback: it applies to the frames after the current one.
  void AllowDescriptors(size_t per_frame) { fds_per_frame_ = per_frame; }
  // Bytes held for frames not yet complete (buffer capacity, not the announced length).
  // An idle channel (no partial frame) holds none.
  size_t buffer_capacity() const { return capacity_; }
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
  struct IncomingFds {
    uint64_t last_byte;  // stream offset of the last byte of the recvmsg that carried them
    std::vector<UniqueFd> fds;
  };

  void ArmRead();
  void OnReadable();
  // Makes room for the next read: at least half a read's worth, more only as bytes arrived.
  void ReserveForRead();
  void ReleaseIfDrained();
  // Takes the descriptors of a recvmsg; false (the channel failed) when they are not allowed.
  bool TakeAncillary(msghdr& msg, uint64_t last_byte);
  bool DeliverFrames();  // false when the channel closed meanwhile
  void TryWrite();
  void Fail(const Status& why);

  boost::asio::posix::stream_descriptor socket_;
  uint32_t max_frame_bytes_;
  FrameHandler on_frame_;
  CloseHandler on_close_;
  bool closed_ = false;
  bool write_armed_ = false;

  std::unique_ptr<char[]> buffer_;  // received bytes in [begin_, end_)
  size_t capacity_ = 0;
  size_t begin_ = 0;
  size_t end_ = 0;
  uint64_t stream_offset_ = 0;  // stream offset of buffer_[begin_]
  size_t fds_per_frame_ = 0;
  std::deque<IncomingFds> fds_;
  std::deque<Outgoing> outq_;
};

}  // namespace envforge::sandbox::internal
