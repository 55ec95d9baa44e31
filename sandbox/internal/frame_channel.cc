#include "sandbox/internal/frame_channel.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sandbox/internal/wire.h"

namespace envforge::sandbox::internal {

namespace asio = boost::asio;

std::shared_ptr<FrameChannel> FrameChannel::Create(asio::io_context& io, UniqueFd socket, uint32_t max_frame_bytes) {
  return std::make_shared<FrameChannel>(io, std::move(socket), max_frame_bytes);
}

FrameChannel::FrameChannel(asio::io_context& io, UniqueFd socket, uint32_t max_frame_bytes)
    : socket_(io), max_frame_bytes_(max_frame_bytes) {
  (void)SetNonBlocking(socket.get(), true);
  socket_.assign(socket.Release());
}

void FrameChannel::Start(FrameHandler on_frame, CloseHandler on_close) {
  on_frame_ = std::move(on_frame);
  on_close_ = std::move(on_close);
  ArmRead();
}

void FrameChannel::ArmRead() {
  if (closed_) return;
  socket_.async_wait(asio::posix::descriptor_base::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       if (ec || self->closed_) return;
                       self->OnReadable();
                     });
}

namespace {

constexpr size_t kReadChunk = 64 * 1024;
// Control space for more descriptors than any frame may carry, so that an excess is seen (and
// closed) rather than truncated silently.
constexpr size_t kControlFds = 8;

uint32_t PeekLength(const char* prefix) {
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<unsigned char>(prefix[i])) << (8 * i);
  return n;
}

}  // namespace

void FrameChannel::ReserveForRead() {
  if (capacity_ - end_ >= kReadChunk / 2) return;
  if (begin_ > 0) {
    std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (capacity_ - end_ >= kReadChunk / 2) return;
  // Grow with what arrived (doubling keeps the copies linear), never past the frame being
  // received plus one read: what a length prefix announces is not allocated before it arrives.
  size_t held = end_;
  size_t wanted = std::max(kReadChunk, 2 * held);
  if (held >= 4) wanted = std::min(wanted, 4 + static_cast<size_t>(PeekLength(buffer_.get())) + kReadChunk);
  wanted = std::max(wanted, held + kReadChunk / 2);
  std::unique_ptr<char[]> bigger(new char[wanted]);  // not zero-filled: only received bytes are read
  if (held > 0) std::memcpy(bigger.get(), buffer_.get(), held);
  buffer_ = std::move(bigger);
  capacity_ = wanted;
}

void FrameChannel::ReleaseIfDrained() {
  if (begin_ != end_) return;
  // An idle channel holds no buffer: memory follows what peers send, not how many there are.
  buffer_.reset();
  capacity_ = begin_ = end_ = 0;
}

bool FrameChannel::TakeAncillary(msghdr& msg, uint64_t last_byte) {
  std::vector<UniqueFd> fds;  // closed on every failure path below
  bool foreign = false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
      foreign = true;
      continue;
    }
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds.emplace_back(fd);
    }
  }
  bool truncated = (msg.msg_flags & MSG_CTRUNC) != 0;
  if (!foreign && !truncated && fds.empty()) return true;
  size_t pending = fds.size();
  for (const IncomingFds& entry : fds_) pending += entry.fds.size();
  std::string problem;
  if (foreign) {
    problem = "ancillary data other than descriptors";
  } else if (truncated) {
    problem = "more descriptors in one message than the control buffer holds";
  } else if (fds_per_frame_ == 0) {
    problem = std::to_string(fds.size()) + " descriptor(s) where the protocol expects none";
  } else if (pending > fds_per_frame_) {
    problem = std::to_string(pending) + " descriptors for one frame (at most " + std::to_string(fds_per_frame_) + ")";
  }
  if (!problem.empty()) {
    fds.clear();
    Fail(InvalidArgumentError(problem));
    return false;
  }
  fds_.push_back(IncomingFds{last_byte, std::move(fds)});
  return true;
}

void FrameChannel::OnReadable() {
  // Bounded reads per wakeup so one chatty peer cannot starve the others.
  for (int round = 0; round < 16; ++round) {
    ReserveForRead();
    iovec iov{buffer_.get() + end_, capacity_ - end_};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kControlFds)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(socket_.native_handle(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n >= 0 && msg.msg_controllen > 0) {
      uint64_t last_byte = stream_offset_ + (end_ - begin_) + static_cast<size_t>(n) - 1;
      if (!TakeAncillary(msg, last_byte)) return;
    }
    if (n > 0) {
      end_ += static_cast<size_t>(n);
      if (!DeliverFrames()) return;
      continue;
    }
    if (n == 0) return Fail(UnavailableError("end of stream"));
    int error = errno;
    if (error == EINTR) continue;
    if (error == EAGAIN || error == EWOULDBLOCK) break;
    if (error == ECONNRESET) return Fail(UnavailableError("connection reset"));
    return Fail(ErrnoError("recvmsg", error));
  }
  ReleaseIfDrained();
  ArmRead();
}

bool FrameChannel::DeliverFrames() {
  // Holding a reference: a callback may drop the owner's.
  auto self = shared_from_this();
  while (!closed_ && end_ - begin_ >= 4) {
    Result<uint32_t> length = wire::DecodeLength(buffer_.get() + begin_, max_frame_bytes_);
    if (!length.ok()) {
      Fail(length.status());
      return false;
    }
    size_t frame_bytes = 4 + static_cast<size_t>(*length);
    if (end_ - begin_ < frame_bytes) break;  // the rest arrives in later reads (ReserveForRead)
    uint64_t end = stream_offset_ + frame_bytes;
    std::string payload(buffer_.get() + begin_ + 4, *length);
    begin_ += frame_bytes;
    stream_offset_ = end;
    std::vector<UniqueFd> fds;
    while (!fds_.empty() && fds_.front().last_byte < end) {
      for (UniqueFd& fd : fds_.front().fds) fds.push_back(std::move(fd));
      fds_.pop_front();
    }
    on_frame_(std::move(payload), std::move(fds));
  }
  return !closed_;
}

void FrameChannel::Send(std::string_view payload, UniqueFd attach) {
  if (closed_) return;
  outq_.push_back(Outgoing{wire::EncodeFrame(payload), std::move(attach), 0});
  if (!write_armed_) TryWrite();
}

void FrameChannel::TryWrite() {
  while (!closed_ && !outq_.empty()) {
    Outgoing& out = outq_.front();
    const char* data = out.bytes.data() + out.offset;
    size_t left = out.bytes.size() - out.offset;
    ssize_t n;
    if (out.fd.valid()) {
      iovec iov{const_cast<char*>(data), left};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      int fd = out.fd.get();
      std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
      n = ::sendmsg(socket_.native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) out.fd.Reset();  // the peer holds its own copy now
    } else {
      n = ::send(socket_.native_handle(), data, left, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (n < 0) {
      int error = errno;
      if (error == EINTR) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) {
        write_armed_ = true;
        socket_.async_wait(asio::posix::descriptor_base::wait_write,
                           [self = shared_from_this()](const boost::system::error_code& ec) {
                             self->write_armed_ = false;
                             if (ec || self->closed_) return;
                             self->TryWrite();
                           });
        return;
      }
      if (error == EPIPE || error == ECONNRESET) return Fail(UnavailableError("peer closed the connection"));
      return Fail(ErrnoError("send", error));
    }
    out.offset += static_cast<size_t>(n);
    if (out.offset == out.bytes.size()) outq_.pop_front();
  }
}

void FrameChannel::Fail(const Status& why) {
  if (closed_) return;
  CloseHandler on_close = std::move(on_close_);
  Close();
  if (on_close) on_close(why);
}

void FrameChannel::Close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
  outq_.clear();
  fds_.clear();
  buffer_.reset();
  capacity_ = begin_ = end_ = 0;
  // The handlers stay: Close() may run inside one of them. Owners capture weak references.
}

}  // namespace envforge::sandbox::internal
