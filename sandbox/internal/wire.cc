#include "sandbox/internal/wire.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace envforge::sandbox::wire {

std::string EncodeFrame(std::string_view payload) {
  std::string frame;
  frame.resize(4 + payload.size());
  uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  frame.replace(4, payload.size(), payload);
  return frame;
}

Result<uint32_t> DecodeLength(const char prefix[4], uint32_t max_bytes) {
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<unsigned char>(prefix[i])) << (8 * i);
  if (n == 0) return InvalidArgumentError("empty frame");
  if (n > max_bytes) {
    return ResourceExhaustedError("frame of " + std::to_string(n) + " bytes exceeds the limit of " +
                                  std::to_string(max_bytes));
  }
  return n;
}

Status WriteFrame(int fd, std::string_view payload) { return WriteFull(fd, EncodeFrame(payload)); }

Status SendFrameWithFd(int socket, std::string_view payload, int fd_to_send) {
  return SendWithFd(socket, EncodeFrame(payload), fd_to_send);
}

Status SendFrameWithFds(int socket, std::string_view payload, const std::vector<int>& fds) {
  if (fds.empty() || fds.size() > kMaxFdsPerFrame) return InvalidArgumentError("SendFrameWithFds: 1..4 descriptors");
  std::string frame = EncodeFrame(payload);
  iovec iov{frame.data(), frame.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerFrame)] = {};
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
  ssize_t n;
  do {
    n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EPIPE || errno == ECONNRESET) return UnavailableError("peer closed the connection");
    return ErrnoError("sendmsg", errno);
  }
  // The descriptors travel with the first bytes; the rest is ordinary stream data.
  return WriteFull(socket, std::string_view(frame).substr(static_cast<size_t>(n)));
}

Result<std::string> ReadFrame(int fd, uint32_t max_bytes) {
  char prefix[4];
  ENVFORGE_RETURN_IF_ERROR(ReadFull(fd, prefix, 4));
  ENVFORGE_ASSIGN_OR_RETURN(uint32_t n, DecodeLength(prefix, max_bytes));
  std::string payload(n, '\0');
  ENVFORGE_RETURN_IF_ERROR(ReadFull(fd, payload.data(), n));
  return payload;
}

Result<std::string> ReadFrameWithFd(int socket, UniqueFd* fd, uint32_t max_bytes) {
  char prefix[4];
  // The descriptor rides on the first byte, so receive that byte with recvmsg.
  ENVFORGE_ASSIGN_OR_RETURN(size_t got, RecvWithFd(socket, prefix, 1, fd));
  if (got == 0) return UnavailableError("end of stream");
  ENVFORGE_RETURN_IF_ERROR(ReadFull(socket, prefix + 1, 3));
  ENVFORGE_ASSIGN_OR_RETURN(uint32_t n, DecodeLength(prefix, max_bytes));
  std::string payload(n, '\0');
  ENVFORGE_RETURN_IF_ERROR(ReadFull(socket, payload.data(), n));
  return payload;
}

}  // namespace envforge::sandbox::wire
