#include "base/subprocess.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/fd.h"

namespace envforge {
namespace {

Result<std::pair<UniqueFd, UniqueFd>> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe2", errno);
  return std::make_pair(UniqueFd(fds[0]), UniqueFd(fds[1]));
}

// Marks every descriptor from `first` on close-on-exec (close_range, or one by one on kernels
// before 5.11). Async-signal-safe.
void CloseOnExecFrom(int first) {
  if (::syscall(SYS_close_range, first, ~0u, CLOSE_RANGE_CLOEXEC) == 0) return;
  rlimit nofile{};
  int top = ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < (1u << 20) ? static_cast<int>(nofile.rlim_cur)
                                                                                     : (1 << 20);
  for (int fd = first; fd < top; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// The child between fork and exec: async-signal-safe calls only, no allocation. Every source
// (and the exec-status pipe) first moves above the highest target, so no dup2 overwrites one
// still needed; dup2 then clears close-on-exec on each target.
[[noreturn]] void ExecChild(char* const* args, const ChildFd* fds, size_t count, int status_fd) {
  int top = 2;
  for (size_t i = 0; i < count; ++i) top = std::max(top, fds[i].target);
  int moved[kMaxChildFds];
  for (size_t i = 0; i < count; ++i) moved[i] = ::fcntl(fds[i].source, F_DUPFD_CLOEXEC, top + 1);
  status_fd = ::fcntl(status_fd, F_DUPFD_CLOEXEC, top + 1);
  for (size_t i = 0; i < count; ++i) ::dup2(moved[i], fds[i].target);
  for (int fd = 3; fd <= top; ++fd) {
    bool named = false;
    for (size_t i = 0; i < count; ++i) named = named || fds[i].target == fd;
    if (!named) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  CloseOnExecFrom(top + 1);
  ::execvp(args[0], args);
  int error = errno;
  ssize_t ignored = ::write(status_fd, &error, sizeof error);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

Result<pid_t> SpawnProcess(const std::vector<std::string>& argv, const std::vector<ChildFd>& fds) {
  if (argv.empty()) return InvalidArgumentError("SpawnProcess: empty argv");
  if (fds.size() > kMaxChildFds) return InvalidArgumentError("SpawnProcess: too many descriptors");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ENVFORGE_ASSIGN_OR_RETURN(auto exec_status, MakePipe());
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork", errno);
  if (pid == 0) ExecChild(args.data(), fds.data(), fds.size(), exec_status.second.get());
  exec_status.second.Reset();
  // The pipe closes at exec; an errno arrives only when exec failed.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_status.first.get(), &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof exec_errno) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return ErrnoError("cannot run " + argv[0], exec_errno);
  }
  return pid;
}

Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options) {
  if (argv.empty()) return InvalidArgumentError("RunCommand: empty argv");
  ENVFORGE_ASSIGN_OR_RETURN(auto in_pipe, MakePipe());
  ENVFORGE_ASSIGN_OR_RETURN(auto out_pipe, MakePipe());
  ENVFORGE_ASSIGN_OR_RETURN(auto err_pipe, MakePipe());
  std::vector<ChildFd> stdio = {{0, in_pipe.first.get()}, {1, out_pipe.second.get()}, {2, err_pipe.second.get()}};
  ENVFORGE_ASSIGN_OR_RETURN(pid_t pid, SpawnProcess(argv, stdio));
  in_pipe.first.Reset();
  out_pipe.second.Reset();
  err_pipe.second.Reset();

  CommandOutput output;
  ::signal(SIGPIPE, SIG_IGN);
  (void)SetNonBlocking(in_pipe.second.get(), true);
  size_t input_done = 0;
  if (options.stdin_text.empty()) in_pipe.second.Reset();
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  while (out_pipe.first.valid() || err_pipe.first.valid()) {
    pollfd fds[3];
    int count = 0;
    UniqueFd* owners[3];
    std::string* sinks[3];
    auto add = [&](UniqueFd& fd, short events, std::string* sink) {
      if (!fd.valid()) return;
      fds[count] = pollfd{fd.get(), events, 0};
      owners[count] = &fd;
      sinks[count] = sink;
      ++count;
    };
    add(out_pipe.first, POLLIN, &output.stdout_text);
    add(err_pipe.first, POLLIN, &output.stderr_text);
    add(in_pipe.second, POLLOUT, nullptr);
    // Rounded up, so that a command is never reported as timed out before its timeout has passed.
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      output.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    int ready = ::poll(fds, static_cast<nfds_t>(count), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (sinks[i] == nullptr) {
        ssize_t n = ::write(fds[i].fd, options.stdin_text.data() + input_done, options.stdin_text.size() - input_done);
        if (n > 0) input_done += static_cast<size_t>(n);
        if (n < 0 && errno != EAGAIN) owners[i]->Reset();
        if (input_done == options.stdin_text.size()) owners[i]->Reset();
        continue;
      }
      char chunk[65536];
      ssize_t n = ::read(fds[i].fd, chunk, sizeof chunk);
      if (n > 0) {
        size_t room = options.max_output_bytes - std::min(options.max_output_bytes, sinks[i]->size());
        sinks[i]->append(chunk, std::min(room, static_cast<size_t>(n)));
      } else if (n == 0 || errno != EINTR) {
        owners[i]->Reset();
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) output.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) output.term_signal = WTERMSIG(status);
  return output;
}

}  // namespace envforge
