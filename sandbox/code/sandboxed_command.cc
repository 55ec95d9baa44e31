// Running one command of a code environment under bubblewrap, seccomp, a cgroup and rlimits.
#include "sandbox/code/sandboxed_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>
#include <tuple>

#include "base/fd.h"
#include "sandbox/code/scoped_directory.h"
#include "sandbox/internal/sandbox_exec.h"
#include "sandbox/internal/seccomp_rules.h"
#include "sandbox/jupyter/kernel_cgroup.h"
#include "sandbox/jupyter/jupyter_message.h"
#include "sandbox/jupyter/kernel_janitor.h"

namespace envforge::sandbox::code {
namespace {

namespace fs = std::filesystem;
constexpr int kCommandNice = 10;  // test runs yield the CPU to envforge's own threads
// Paths the sandbox's own layout takes; a bind may not land on or under them.
constexpr const char* kReservedInside[] = {"/usr", "/etc", "/work", "/tmp",   "/proc",
                                           "/dev", "/bin", "/lib",  "/lib64", "/sbin"};

bool UnderOrAt(const std::string& path, const std::string& root) {
  return path == root ||
         (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

Status CheckOptions(const SandboxedCommandOptions& options) {
  if (access(options.bwrap.c_str(), X_OK) != 0) {
    return UnavailableError("sandboxed command: bubblewrap (" + options.bwrap +
                            ") is not installed; scripts/setup.sh installs it");
  }
  std::error_code error;
  if (!fs::is_directory(options.workdir, error)) {
    return InvalidArgumentError("sandboxed command: working directory " + options.workdir.string() +
                                " is not a directory");
  }
  for (const auto& [host, inside] : options.binds) {
    if (!fs::is_directory(host, error))
      return InvalidArgumentError("sandboxed command: bind source " + host.string() + " is not a directory");
    if (inside.size() < 2 || inside[0] != '/' || inside.find("..") != std::string::npos) {
      return InvalidArgumentError("sandboxed command: bind target '" + inside + "' is not a plain absolute path");
    }
    for (const char* reserved : kReservedInside) {
      if (UnderOrAt(inside, reserved))
        return InvalidArgumentError("sandboxed command: bind target " + inside + " is inside " + reserved);
    }
  }
  return Status::Ok();
}

std::vector<std::string> BwrapArgv(const SandboxedCommandOptions& options, bool have_seccomp) {
  const std::string tmp_size = std::to_string(options.limits.tmp_bytes);
  std::vector<std::string> argv = {options.bwrap,   "--unshare-all", "--die-with-parent",
                                   "--new-session", "--cap-drop",    "ALL",
                                   "--uid",         "65534",         "--gid",
                                   "65534",         "--hostname",    "sandbox",
                                   "--ro-bind",     "/usr",          "/usr",
                                   "--symlink",     "usr/lib",       "/lib",
                                   "--symlink",     "usr/lib64",     "/lib64",
                                   "--symlink",     "usr/bin",       "/bin",
                                   "--symlink",     "usr/sbin",      "/sbin",
                                   "--ro-bind",     "/etc",          "/etc",
                                   "--proc",        "/proc",         "--dev",
                                   "/dev",          "--size",        tmp_size,
                                   "--tmpfs",       "/tmp",          "--dir",
                                   "/tmp/home",     "--bind",        options.workdir.string(),
                                   "/work"};
  for (const auto& [host, inside] : options.binds) argv.insert(argv.end(), {"--bind", host.string(), inside});
  const std::vector<std::pair<std::string, std::string>> defaults = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                                                     {"LANG", "C.UTF-8"},
                                                                     {"HOME", "/tmp/home"},
                                                                     {"TMPDIR", "/tmp"},
                                                                     {"USER", "sandbox"},
                                                                     {"CI", "true"},
                                                                     {"GOCACHE", "/tmp/go-cache"},
                                                                     {"GOPATH", "/tmp/go"},
                                                                     {"GOTOOLCHAIN", "local"},
                                                                     {"GOPROXY", "off"},
                                                                     {"GOFLAGS", "-mod=mod"},
                                                                     {"npm_config_cache", "/tmp/npm-cache"}};
  argv.insert(argv.end(), {"--chdir", "/work", "--clearenv"});
  for (const auto* list : {&defaults, &options.env}) {
    for (const auto& [name, value] : *list) argv.insert(argv.end(), {"--setenv", name, value});
  }
  if (have_seccomp) argv.insert(argv.end(), {"--seccomp", "3"});
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", options.command});
  return argv;
}

// Waits for pid until the deadline; true when it exited (reaped into *wait_status).
bool WaitUntil(pid_t pid, int pidfd, std::chrono::steady_clock::time_point deadline, int* wait_status) {
  for (;;) {
    const pid_t done = waitpid(pid, wait_status, WNOHANG);
    if (done == pid) return true;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (pidfd >= 0) {
      pollfd entry{pidfd, POLLIN, 0};
      poll(&entry, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    } else {
      usleep(10'000);
    }
  }
}

// The last `keep` bytes of the file, and its size.
std::pair<std::string, int64_t> OutputTail(const fs::path& path, size_t keep) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat info {};
  if (!fd.valid() || fstat(fd.get(), &info) != 0) return {"", 0};
  const auto size = static_cast<int64_t>(info.st_size);
  const int64_t start = std::max<int64_t>(0, size - static_cast<int64_t>(keep));
  std::string text(static_cast<size_t>(size - start), '\0');
  const ssize_t n = pread(fd.get(), text.data(), text.size(), start);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return {text, size};
}

Json IsolationReport(const Result<std::unique_ptr<jupyter::KernelCgroup>>& cgroup, const Result<UniqueFd>& seccomp,
                     const CommandLimits& limits) {
  return {{"namespaces", "on: bubblewrap (user, pid, net, ipc, uts, cgroup, mount)"},
          {"network", "off: an empty network namespace"},
          {"seccomp", seccomp.ok() ? "on" : "off: " + seccomp.status().message()},
          {"cgroup", cgroup.ok() ? std::string("on: ") + (*cgroup)->version() : "off: " + cgroup.status().message()},
          {"rlimits", "on: core 0, file size, open files"},
          {"filesystem", "on: /usr and /etc read-only; the working copy at /work; tmpfs /tmp"},
          {"limits", limits.ToJson()}};
}

}  // namespace

Json CommandLimits::ToJson() const {
  return {{"wall_ms", wall_ms},
          {"memory_bytes", memory_bytes},
          {"max_processes", max_processes},
          {"max_file_bytes", max_file_bytes},
          {"open_files", open_files},
          {"tmp_bytes", tmp_bytes},
          {"output_bytes", output_bytes}};
}

std::string SandboxedCommandResult::EndReason() const {
  if (timed_out) return "wall clock";
  if (out_of_memory) return "memory limit";
  if (signal != 0) return "signal " + std::to_string(signal);
  return "exit code " + std::to_string(exit_code);
}

Result<SandboxedCommandResult> RunSandboxedCommand(const SandboxedCommandOptions& options) {
  ENVFORGE_RETURN_IF_ERROR(CheckOptions(options));
  const auto started = std::chrono::steady_clock::now();
  std::error_code error;
  fs::create_directories(options.scratch_root, error);
  ENVFORGE_RETURN_IF_ERROR(jupyter::EnsureKernelJanitor(options.scratch_root));
  const std::string name = jupyter::KernelNamePrefix() + jupyter::RandomHexId().substr(0, 12);
  const fs::path dir = options.scratch_root / name;
  if (mkdir(dir.c_str(), 0700) != 0) return ErrnoError("sandboxed command: mkdir " + dir.string(), errno);
  const ScopedDirectory remove_dir(dir);

  Result<std::unique_ptr<jupyter::KernelCgroup>> cgroup =
      jupyter::KernelCgroup::Create(name, options.limits.memory_bytes, options.limits.max_processes);
  Result<UniqueFd> seccomp = SeccompProgramMemfd("envforge-command-seccomp");
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  UniqueFd output(open((dir / "output").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!devnull.valid() || !output.valid())
    return ErrnoError("sandboxed command: open /dev/null or the output file", errno);

  internal::SandboxChildSetup setup;
  if (cgroup.ok()) {
    for (const UniqueFd& fd : (*cgroup)->procs_fds()) setup.cgroup_procs.push_back(fd.get());
  }
  setup.stdin_fd = devnull.get();
  setup.stdout_fd = output.get();
  setup.stderr_fd = output.get();
  setup.seccomp_fd = seccomp.ok() ? seccomp->get() : -1;
  setup.nice = kCommandNice;
  setup.file_size = {static_cast<rlim_t>(options.limits.max_file_bytes),
                     static_cast<rlim_t>(options.limits.max_file_bytes)};
  setup.open_files = {static_cast<rlim_t>(options.limits.open_files), static_cast<rlim_t>(options.limits.open_files)};
  ENVFORGE_ASSIGN_OR_RETURN(const pid_t pid, internal::ForkSandboxChild(setup, BwrapArgv(options, seccomp.ok())));
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  SandboxedCommandResult result;
  int wait_status = 0;
  const auto deadline = started + std::chrono::milliseconds(options.limits.wall_ms);
  if (!WaitUntil(pid, pidfd.get(), deadline, &wait_status)) {
    result.timed_out = true;
    kill(pid, SIGKILL);
    if (cgroup.ok()) (*cgroup)->KillAll();
    waitpid(pid, &wait_status, 0);
  }
  if (cgroup.ok()) {
    result.out_of_memory = (*cgroup)->OomKilled();
    result.pids_limited = (*cgroup)->PidsLimited();
    (*cgroup)->KillAll();  // anything the command left behind
  }
  if (WIFSIGNALED(wait_status)) result.signal = WTERMSIG(wait_status);
  if (WIFEXITED(wait_status)) result.exit_code = WEXITSTATUS(wait_status);
  // bwrap exits 1 with its own message when the sandbox cannot be built; the command never ran.
  std::tie(result.output, result.output_bytes) = OutputTail(dir / "output", options.limits.output_bytes);
  if (result.exit_code == 1 && result.output.starts_with("bwrap: ")) {
    return UnavailableError("sandboxed command: the sandbox could not start: " + result.output.substr(0, 300));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  result.isolation = IsolationReport(cgroup, seccomp, options.limits);
  return result;
}

}  // namespace envforge::sandbox::code
