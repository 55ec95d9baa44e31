#include "base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "base/fd.h"

namespace envforge {
namespace {

Result<std::pair<UniqueFd, UniqueFd>> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe2", errno);
  return std::make_pair(UniqueFd(fds[0]), UniqueFd(fds[1]));
}

}  // namespace

Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options) {
  if (argv.empty()) return InvalidArgumentError("RunCommand: empty argv");
  ENVFORGE_ASSIGN_OR_RETURN(auto in_pipe, MakePipe());
  ENVFORGE_ASSIGN_OR_RETURN(auto out_pipe, MakePipe());
  ENVFORGE_ASSIGN_OR_RETURN(auto err_pipe, MakePipe());
  auto [exec_status_read, exec_status_write] = MakePipe().value();

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork", errno);
  if (pid == 0) {
    ::dup2(in_pipe.first.get(), 0);
    ::dup2(out_pipe.second.get(), 1);
    ::dup2(err_pipe.second.get(), 2);
    ::execvp(args[0], args.data());
    int error = errno;
    ssize_t ignored = ::write(exec_status_write.get(), &error, sizeof error);
    (void)ignored;
    ::_exit(127);
  }
  in_pipe.first.Reset();
  out_pipe.second.Reset();
  err_pipe.second.Reset();
  exec_status_write.Reset();

  int exec_errno = 0;
  if (::read(exec_status_read.get(), &exec_errno, sizeof exec_errno) == sizeof exec_errno) {
    ::waitpid(pid, nullptr, 0);
    return ErrnoError("cannot run " + argv[0], exec_errno);
  }

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
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
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
