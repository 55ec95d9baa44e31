#include "base/fd.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <random>

namespace envforge {

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Status WriteFull(int fd, std::string_view bytes) {
  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::send(fd, data, left, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE || errno == ECONNRESET) return UnavailableError("peer closed the connection");
      return ErrnoError("write", errno);
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status ReadFull(int fd, char* buffer, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, buffer + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ECONNRESET) return UnavailableError("peer reset the connection");
      return ErrnoError("read", errno);
    }
    if (n == 0)
      return UnavailableError("end of stream after " + std::to_string(done) + " of " + std::to_string(size) + " bytes");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<std::pair<UniqueFd, UniqueFd>> MakeSocketPair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return ErrnoError("socketpair", errno);
  return std::make_pair(UniqueFd(fds[0]), UniqueFd(fds[1]));
}

Status SetNonBlocking(int fd, bool non_blocking) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return ErrnoError("fcntl(F_GETFL)", errno);
  flags = non_blocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) != 0) return ErrnoError("fcntl(F_SETFL)", errno);
  return Status::Ok();
}

Status SetCloseOnExec(int fd, bool close_on_exec) {
  int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0) return ErrnoError("fcntl(F_GETFD)", errno);
  flags = close_on_exec ? (flags | FD_CLOEXEC) : (flags & ~FD_CLOEXEC);
  if (::fcntl(fd, F_SETFD, flags) != 0) return ErrnoError("fcntl(F_SETFD)", errno);
  return Status::Ok();
}

Status SendWithFds(int socket, std::string_view bytes, const std::vector<int>& fds_to_send) {
  if (bytes.empty()) return InvalidArgumentError("SendWithFds needs at least one byte");
  if (fds_to_send.empty() || fds_to_send.size() > kMaxFdsPerSend) {
    return InvalidArgumentError("SendWithFds sends 1.." + std::to_string(kMaxFdsPerSend) + " descriptors");
  }
  const size_t fd_bytes = sizeof(int) * fds_to_send.size();
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerSend)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(fd_bytes);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(fd_bytes);
  std::memcpy(CMSG_DATA(cmsg), fds_to_send.data(), fd_bytes);
  ssize_t n;
  do {
    n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EPIPE || errno == ECONNRESET) return UnavailableError("peer closed the connection");
    return ErrnoError("sendmsg", errno);
  }
  // The descriptors travel with the first bytes; the rest is ordinary stream data.
  return WriteFull(socket, bytes.substr(static_cast<size_t>(n)));
}

Status SendWithFd(int socket, std::string_view bytes, int fd_to_send) {
  return SendWithFds(socket, bytes, {fd_to_send});
}

Result<size_t> RecvWithFd(int socket, char* buffer, size_t capacity, UniqueFd* received_fd) {
  received_fd->Reset();
  iovec iov{buffer, capacity};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return UnavailableError("no data ready");
    return ErrnoError("recvmsg", errno);
  }
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      // Keep the first descriptor; a peer that sends more does not get to leak them into us.
      if (!received_fd->valid())
        received_fd->Reset(fd);
      else
        ::close(fd);
    }
  }
  return static_cast<size_t>(n);
}

Result<std::string> ReadFileToString(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return NotFoundError("no such file: " + path);
    return ErrnoError("cannot open " + path, errno);
  }
  std::string contents;
  char chunk[65536];
  while (true) {
    ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot read " + path, errno);
    }
    if (n == 0) break;
    contents.append(chunk, static_cast<size_t>(n));
  }
  return contents;
}

Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  std::random_device entropy;
  std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(entropy());
  UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoError("cannot create " + temp, errno);
  Status status = WriteFull(fd.get(), contents);
  if (status.ok() && ::fsync(fd.get()) != 0) status = ErrnoError("fsync " + temp, errno);
  fd.Reset();
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) status = ErrnoError("rename to " + path, errno);
  if (!status.ok()) ::unlink(temp.c_str());
  return status;
}

std::string ExecutableDirectory() {
  char buffer[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return ".";
  std::string path(buffer, static_cast<size_t>(n));
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace envforge
