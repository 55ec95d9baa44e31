// Forking a sandboxed child.
#include "sandbox/internal/sandbox_exec.h"

#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace envforge::sandbox::internal {
namespace {

constexpr uid_t kSandboxUid = 65534;  // nobody, on the host as inside

// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void ExecInChild(const SandboxChildSetup& setup, char* const* argv, char* const* envp) {
  for (int fd : setup.cgroup_procs) {
    if (write(fd, "0", 1) != 1) _exit(120);
  }
  setpgid(0, 0);  // out of the server's process group: a terminal's ^C does not reach it
  setpriority(PRIO_PROCESS, 0, setup.nice);
  if (dup2(setup.stdin_fd, 0) < 0 || dup2(setup.stdout_fd, 1) < 0 || dup2(setup.stderr_fd, 2) < 0) _exit(121);
  if (setup.seccomp_fd >= 0 && dup2(setup.seccomp_fd, 3) < 0) _exit(122);
  syscall(SYS_close_range, setup.seccomp_fd >= 0 ? 4u : 3u, ~0u, 0u);
  if (setrlimit(RLIMIT_CORE, &setup.core) != 0 || setrlimit(RLIMIT_FSIZE, &setup.file_size) != 0 ||
      setrlimit(RLIMIT_NOFILE, &setup.open_files) != 0) {
    _exit(123);
  }
  if (setup.switch_uid && (setgroups(0, nullptr) != 0 || setresgid(kSandboxUid, kSandboxUid, kSandboxUid) != 0 ||
                           setresuid(kSandboxUid, kSandboxUid, kSandboxUid) != 0)) {
    _exit(124);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // after the uid switch, which clears it
  if (getppid() == 1) _exit(125);    // the launching thread is already gone
  execve(argv[0], argv, envp);
  _exit(127);
}

}  // namespace

Result<pid_t> ForkSandboxChild(const SandboxChildSetup& setup, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::string path_env = "PATH=/usr/bin:/bin";
  char* envp[] = {path_env.data(), nullptr};
  const pid_t pid = fork();
  if (pid < 0) return ErrnoError("fork", errno);
  if (pid == 0) ExecInChild(setup, argv.data(), envp);
  return pid;
}

}  // namespace envforge::sandbox::internal
