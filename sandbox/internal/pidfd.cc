#include "sandbox/internal/pidfd.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace envforge::sandbox::internal {

Result<UniqueFd> PidfdOpen(pid_t pid) {
  // Raw syscalls: glibc 2.36's <sys/pidfd.h> lacks C linkage for C++. pidfds are close-on-exec.
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    if (errno == ESRCH) return NotFoundError("no process " + std::to_string(pid));
    return ErrnoError("pidfd_open(" + std::to_string(pid) + ")", errno);
  }
  return UniqueFd(fd);
}

Status PidfdSignal(int pidfd, int sig) {
  if (::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) != 0 && errno != ESRCH) {
    return ErrnoError("pidfd_send_signal", errno);
  }
  return Status::Ok();
}

bool IsPidfdOf(int fd, pid_t pid) {
  Result<std::string> info = ReadFileToString("/proc/self/fdinfo/" + std::to_string(fd));
  if (!info.ok()) return false;
  // A pidfd's fdinfo has "Pid:\t<pid>" (Linux >= 5.10); no other descriptor has that line.
  size_t at = info->find("\nPid:\t");
  if (at == std::string::npos) return false;
  return std::strtol(info->c_str() + at + 6, nullptr, 10) == static_cast<long>(pid);
}

bool PidfdExited(int pidfd) {
  pollfd entry{pidfd, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&entry, 1, 0);
  } while (ready < 0 && errno == EINTR);
  // A poll that fails says nothing about the process; only a closed or invalid pidfd makes it
  // fail, and then there is nothing left to wait on either.
  return ready != 0;
}

std::string SignalName(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

}  // namespace envforge::sandbox::internal
