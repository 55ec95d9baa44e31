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

void FrameChannel::OnReadable() {
  constexpr size_t kInitialBuffer = 16 * 1024;
  constexpr size_t kKeptBuffer = 1 << 20;  // larger buffers are released once drained
  // Bounded reads per wakeup so one chatty peer cannot starve the others.
  for (int round = 0; round < 16; ++round) {
    if (begin_ == end_) {
      begin_ = end_ = 0;
      if (buffer_.size() > kKeptBuffer) std::vector<char>().swap(buffer_);
    }
    if (buffer_.size() - end_ < kInitialBuffer / 2) {
      if (begin_ > 0) {
        std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
      }
      if (buffer_.size() - end_ < kInitialBuffer / 2) buffer_.resize(std::max(kInitialBuffer, 2 * buffer_.size()));
    }
    iovec iov{buffer_.data() + end_, buffer_.size() - end_};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(socket_.native_handle(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n > 0) {
      end_ += static_cast<size_t>(n);
      uint64_t last_byte = stream_offset_ + (end_ - begin_) - 1;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          fds_.push_back(IncomingFd{last_byte, UniqueFd(fd)});
        }
      }
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
  ArmRead();
}

bool FrameChannel::DeliverFrames() {
  // Holding a reference: a callback may drop the owner's.
  auto self = shared_from_this();
  while (!closed_ && end_ - begin_ >= 4) {
    Result<uint32_t> length = wire::DecodeLength(buffer_.data() + begin_, max_frame_bytes_);
    if (!length.ok()) {
      Fail(length.status());
      return false;
    }
    size_t frame_bytes = 4 + static_cast<size_t>(*length);
    if (end_ - begin_ < frame_bytes) {
      // Make room for the whole frame now, so the rest arrives in few reads.
      if (buffer_.size() - begin_ < frame_bytes) {
        std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
        if (buffer_.size() < frame_bytes) buffer_.resize(frame_bytes);
      }
      break;
    }
    uint64_t start = stream_offset_;
    uint64_t end = start + frame_bytes;
    std::string payload(buffer_.data() + begin_ + 4, *length);
    begin_ += frame_bytes;
    stream_offset_ = end;
    // A descriptor belongs to the frame holding the last byte of the recvmsg that carried it:
    // Linux stops a stream recvmsg right after the segment carrying descriptors, and the sender
    // attached it to the segment starting that frame.
    UniqueFd fd;
    while (!fds_.empty() && fds_.front().last_byte < end) {
      if (fds_.front().last_byte >= start && !fd.valid()) fd = std::move(fds_.front().fd);
      fds_.pop_front();  // a stray descriptor is closed
    }
    on_frame_(std::move(payload), std::move(fd));
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
  std::vector<char>().swap(buffer_);
  begin_ = end_ = 0;
  // The handlers stay: Close() may run inside one of them. Owners capture weak references.
}

}  // namespace envforge::sandbox::internal
