// Launching ipykernel under bubblewrap, seccomp, a cgroup and rlimits.
#include "sandbox/jupyter/kernel_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <system_error>

#include "sandbox/internal/sandbox_exec.h"
#include "sandbox/internal/seccomp_rules.h"
#include "sandbox/jupyter/jupyter_message.h"
#include "sandbox/jupyter/kernel_cgroup.h"
#include "sandbox/jupyter/kernel_janitor.h"
#include "sandbox/jupyter/kernel_launcher.h"

namespace envforge::sandbox::jupyter {
namespace {

namespace fs = std::filesystem;
constexpr uid_t kSandboxUid = 65534;  // nobody, on the host as inside
constexpr size_t kMaxSocketPath = 100;
constexpr int kKernelNice = 10;  // sun_path is 108 bytes with the NUL
// /etc entries the interpreter and its libraries read; the rest of /etc stays out.
constexpr const char* kEtcEntries[] = {"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
                                       "fonts",        "mime.types",  "python3",    "python3.11",   "matplotlibrc"};

// A relative path of plain components: no empty, "." or ".." component, no NUL.
bool ValidRelativePath(const std::string& path) {
  if (path.empty() || path.size() > 1024 || path.find('\0') != std::string::npos) return false;
  size_t start = 0;
  for (;;) {
    const size_t end = path.find('/', start);
    const std::string part = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.empty() || part == "." || part == ".." || part.size() > 255) return false;
    if (end == std::string::npos) return true;
    start = end + 1;
  }
}

Status WriteWholeFile(const fs::path& path, const std::string& contents, mode_t mode) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd.valid()) return ErrnoError("kernel: create " + path.string(), errno);
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("kernel: write " + path.string(), errno);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// The bubblewrap command line; data files are bound read-only over the tmpfs working directory.
std::vector<std::string> BwrapArgv(const KernelLaunchOptions& options, const fs::path& dir, bool have_seccomp) {
  std::vector<std::string> argv = {options.bwrap,
                                   "--unshare-all",
                                   "--die-with-parent",
                                   "--new-session",
                                   "--cap-drop",
                                   "ALL",
                                   "--uid",
                                   std::to_string(kSandboxUid),
                                   "--gid",
                                   std::to_string(kSandboxUid),
                                   "--hostname",
                                   "sandbox",
                                   "--ro-bind",
                                   "/usr",
                                   "/usr",
                                   "--symlink",
                                   "usr/lib",
                                   "/lib",
                                   "--symlink",
                                   "usr/lib64",
                                   "/lib64",
                                   "--symlink",
                                   "usr/bin",
                                   "/bin",
                                   "--symlink",
                                   "usr/sbin",
                                   "/sbin"};
  for (const char* entry : kEtcEntries) {
    const std::string path = std::string("/etc/") + entry;
    if (fs::exists(path)) argv.insert(argv.end(), {"--ro-bind", path, path});
  }
  const std::string size = std::to_string(options.limits.disk_bytes);
  argv.insert(argv.end(), {"--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp", "--size", size,
                           "--tmpfs", "/work", "--bind", (dir / "sock").string(), "/sock"});
  for (const KernelFile& file : options.files) {
    argv.insert(argv.end(), {"--ro-bind", (dir / "files" / file.name).string(), "/work/" + file.name});
  }
  argv.insert(argv.end(), {"--chdir",
                           "/work",
                           "--clearenv",
                           "--setenv",
                           "PATH",
                           "/usr/bin:/bin",
                           "--setenv",
                           "HOME",
                           "/work",
                           "--setenv",
                           "USER",
                           "sandbox",
                           "--setenv",
                           "LANG",
                           "C.UTF-8",
                           "--setenv",
                           "MPLBACKEND",
                           "module://matplotlib_inline.backend_inline",
                           "--setenv",
                           "MPLCONFIGDIR",
                           "/tmp/matplotlib",
                           "--setenv",
                           "IPYTHONDIR",
                           "/tmp/ipython",
                           "--setenv",
                           "JUPYTER_RUNTIME_DIR",
                           "/tmp/jupyter",
                           "--setenv",
                           "PYDEVD_DISABLE_FILE_VALIDATION",
                           "1"});
  argv.insert(argv.end(), {"--ro-bind", (dir / "kernel_launcher.py").string(), std::string(kKernelLauncherPath)});
  if (have_seccomp) argv.insert(argv.end(), {"--seccomp", "3"});
  argv.insert(argv.end(), {"--", options.python, "-Xfrozen_modules=off", std::string(kKernelLauncherPath), "-f",
                           "/sock/conn.json", "--HistoryManager.enabled=False", "--quiet"});
  return argv;
}

}  // namespace

Json KernelLimits::ToJson() const {
  return {{"memory_bytes", memory_bytes},
          {"max_processes", max_processes},
          {"disk_bytes", disk_bytes},
          {"max_file_bytes", max_file_bytes},
          {"open_files", open_files}};
}

Result<std::unique_ptr<KernelProcess>> KernelProcess::Launch(const KernelLaunchOptions& options) {
  if (access(options.bwrap.c_str(), X_OK) != 0) {
    return UnavailableError("kernel: bubblewrap (" + options.bwrap +
                            ") is not installed; scripts/setup.sh installs it");
  }
  if (access(options.python.c_str(), X_OK) != 0) return UnavailableError("kernel: no " + options.python);
  for (const KernelFile& file : options.files) {
    if (!ValidRelativePath(file.name)) {
      return InvalidArgumentError("kernel: data file path '" + file.name + "' is not a relative path of plain names");
    }
  }
  std::unique_ptr<KernelProcess> kernel(new KernelProcess());
  const std::string name = KernelNamePrefix() + RandomHexId().substr(0, 12);
  kernel->directory_ = options.scratch_root / name;
  const fs::path& dir = kernel->directory_;
  if ((dir / "sock/kernel-1").string().size() > kMaxSocketPath) {
    return InvalidArgumentError("kernel: scratch root " + options.scratch_root.string() +
                                " is too long for a unix socket path");
  }
  std::error_code error;
  fs::create_directories(options.scratch_root, error);
  ENVFORGE_RETURN_IF_ERROR(EnsureKernelJanitor(options.scratch_root));
  if (mkdir(dir.c_str(), 0755) != 0 || mkdir((dir / "sock").c_str(), 0700) != 0 ||
      mkdir((dir / "files").c_str(), 0755) != 0) {
    return ErrnoError("kernel: mkdir " + dir.string(), errno);
  }
  const bool switch_uid = geteuid() == 0;
  kernel->connection_.ip = "/sock/kernel";
  kernel->connection_.key = RandomHexId();
  ENVFORGE_RETURN_IF_ERROR(WriteWholeFile(dir / "sock/conn.json", kernel->connection_.ToJson().dump(), 0600));
  ENVFORGE_RETURN_IF_ERROR(WriteWholeFile(dir / "kernel_launcher.py", std::string(KernelLauncherSource()), 0444));
  for (const KernelFile& file : options.files) {
    fs::create_directories((dir / "files" / file.name).parent_path(), error);
    ENVFORGE_RETURN_IF_ERROR(WriteWholeFile(dir / "files" / file.name, file.contents, 0444));
  }
  if (switch_uid && (chown((dir / "sock").c_str(), kSandboxUid, kSandboxUid) != 0 ||
                     chown((dir / "sock/conn.json").c_str(), kSandboxUid, kSandboxUid) != 0)) {
    return ErrnoError("kernel: chown " + dir.string() + "/sock", errno);
  }
  kernel->connection_.ip = (dir / "sock/kernel").string();  // the outside view from here on

  Result<std::unique_ptr<KernelCgroup>> cgroup =
      KernelCgroup::Create(name, options.limits.memory_bytes, options.limits.max_processes);
  Result<UniqueFd> seccomp = SeccompProgramMemfd("envforge-kernel-seccomp");
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  UniqueFd log(open((dir / "kernel.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!devnull.valid() || !log.valid()) return ErrnoError("kernel: open /dev/null or its log", errno);

  internal::SandboxChildSetup setup;
  if (cgroup.ok()) {
    for (const UniqueFd& fd : (*cgroup)->procs_fds()) setup.cgroup_procs.push_back(fd.get());
  }
  setup.stdin_fd = devnull.get();
  setup.stdout_fd = devnull.get();
  setup.stderr_fd = log.get();
  setup.seccomp_fd = seccomp.ok() ? seccomp->get() : -1;
  setup.switch_uid = switch_uid;
  setup.nice = kKernelNice;
  setup.file_size = {static_cast<rlim_t>(options.limits.max_file_bytes),
                     static_cast<rlim_t>(options.limits.max_file_bytes)};
  setup.open_files = {static_cast<rlim_t>(options.limits.open_files), static_cast<rlim_t>(options.limits.open_files)};
  Result<pid_t> forked = internal::ForkSandboxChild(setup, BwrapArgv(options, dir, seccomp.ok()));
  if (!forked.ok()) return forked.status().WithContext("kernel");
  const pid_t pid = *forked;
  kernel->pid_ = pid;
  kernel->pidfd_ = UniqueFd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (cgroup.ok()) kernel->cgroup_ = std::move(cgroup).value();
  kernel->isolation_ = {{"namespaces", "on: bubblewrap (user, pid, net, ipc, uts, cgroup, mount)"},
                        {"uid", switch_uid ? "on: 65534 on the host" : "off: envforge does not run as root"},
                        {"seccomp", seccomp.ok() ? "on" : "off: " + seccomp.status().message()},
                        {"cgroup", kernel->cgroup_ ? std::string("on: ") + kernel->cgroup_->version()
                                                   : "off: " + cgroup.status().message()},
                        {"rlimits", "on: core 0, file size, open files"},
                        {"filesystem", "on: /usr and selected /etc read-only; tmpfs /work and /tmp"},
                        {"limits", options.limits.ToJson()}};
  return kernel;
}

KernelProcess::~KernelProcess() {
  Kill();
  cgroup_.reset();
  std::error_code error;
  fs::remove_all(directory_, error);
}

bool KernelProcess::Alive() {
  if (reaped_ || pid_ < 0) return false;
  const pid_t done = waitpid(pid_, &wait_status_, WNOHANG);
  if (done == pid_ || (done < 0 && errno == ECHILD)) reaped_ = true;
  return !reaped_;
}

std::string KernelProcess::ExitReason() {
  if (Alive()) return "";
  if (OomKilled()) return "memory limit";
  if (WIFSIGNALED(wait_status_)) return "signal " + std::to_string(WTERMSIG(wait_status_));
  return "exit code " + std::to_string(WEXITSTATUS(wait_status_));
}

double KernelProcess::CpuSeconds() const { return cgroup_ ? cgroup_->CpuSeconds() : 0.0; }
int64_t KernelProcess::MemoryBytes() const { return cgroup_ ? cgroup_->MemoryBytes() : 0; }

Json KernelProcess::MemoryReport() const {
  int64_t rss_kib = 0, pss_kib = 0;
  const std::vector<pid_t> pids = cgroup_ ? cgroup_->Pids() : std::vector<pid_t>{pid_};
  for (pid_t pid : pids) {
    std::ifstream rollup("/proc/" + std::to_string(pid) + "/smaps_rollup");
    std::string key;
    int64_t value = 0;
    while (rollup >> key) {
      if ((key == "Rss:" || key == "Pss:") && rollup >> value) (key == "Rss:" ? rss_kib : pss_kib) += value;
      rollup.ignore(1 << 16, '\n');
    }
  }
  return {{"cgroup_bytes", MemoryBytes()},
          {"rss_bytes", rss_kib * 1024},
          {"pss_bytes", pss_kib * 1024},
          {"processes", pids.size()}};
}
bool KernelProcess::OomKilled() const { return cgroup_ && cgroup_->OomKilled(); }
bool KernelProcess::PidsLimited() const { return cgroup_ && cgroup_->PidsLimited(); }

void KernelProcess::Kill() {
  if (pid_ < 0) return;
  if (!reaped_) kill(pid_, SIGKILL);
  if (cgroup_) cgroup_->KillAll();
  if (!reaped_ && waitpid(pid_, &wait_status_, 0) == pid_) reaped_ = true;
  reaped_ = true;
}

void KernelProcess::Terminate() const {
  if (pidfd_.valid()) syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  if (cgroup_) cgroup_->KillAll();
}

std::string KernelProcess::LogTail(size_t bytes) const {
  std::ifstream in(directory_ / "kernel.log", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

KernelProbe KernelProcess::Probe() {
  return {[this] { return Alive(); }, [this] { return CpuSeconds(); }};
}

}  // namespace envforge::sandbox::jupyter
