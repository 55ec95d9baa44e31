// File descriptors and files: an owning fd, whole reads and writes that survive EINTR and short
// transfers, descriptor passing over Unix sockets, and atomic file replacement.
#pragma once

#include <string>
#include <string_view>
#include <vector>
#include <utility>

#include "base/status.h"

namespace envforge {

// Owns one file descriptor; closes it on destruction. -1 means empty.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Writes all bytes (blocking fd). EPIPE and the like come back as Unavailable.
Status WriteFull(int fd, std::string_view bytes);
// Reads exactly `size` bytes (blocking fd). End of file before that is Unavailable.
Status ReadFull(int fd, char* buffer, size_t size);

// A connected pair of SOCK_STREAM Unix sockets, both close-on-exec.
Result<std::pair<UniqueFd, UniqueFd>> MakeSocketPair();
Status SetNonBlocking(int fd, bool non_blocking);
Status SetCloseOnExec(int fd, bool close_on_exec);

// Sends `bytes` with 1..kMaxFdsPerSend descriptors attached, in order, in one SCM_RIGHTS message
// riding on the first byte. bytes must be non-empty.
inline constexpr size_t kMaxFdsPerSend = 4;
Status SendWithFds(int socket, std::string_view bytes, const std::vector<int>& fds_to_send);
// SendWithFds with one descriptor.
Status SendWithFd(int socket, std::string_view bytes, int fd_to_send);
// Receives up to `capacity` bytes and at most one attached descriptor; *received_fd is -1 when
// none came. Returns the byte count (0 = peer closed).
Result<size_t> RecvWithFd(int socket, char* buffer, size_t capacity, UniqueFd* received_fd);

// Whole-file helpers.
Result<std::string> ReadFileToString(const std::string& path);
// Writes to a temporary file in the same directory, fsyncs it and renames it over `path`, so a
// reader sees the old file or the new one, never half of one. Nothing is left behind on error.
Status WriteFileAtomically(const std::string& path, std::string_view contents);

// The directory holding the running executable (from /proc/self/exe).
std::string ExecutableDirectory();

}  // namespace envforge
