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
  if (fds.size() > kMaxFdsPerFrame) return InvalidArgumentError("SendFrameWithFds: at most 4 descriptors");
  return SendWithFds(socket, EncodeFrame(payload), fds);
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
