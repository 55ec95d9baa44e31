// A Jupyter kernel (Debian's python3-ipykernel) in its own sandbox: bubblewrap namespaces (user,
// pid, net, ipc, uts, cgroup, mount: an empty network, /usr and a few /etc entries read-only,
// tmpfs working directory and /tmp of a fixed size), the shared seccomp deny-list
// (sandbox/internal/seccomp_rules.h), a cgroup for memory, processes and CPU accounting, rlimits
// (core, file size, open files), nice 10 (kernels yield the CPU to envforge itself), and, when
// envforge runs as root, uid and gid 65534 on the host as well. The kernel talks ZeroMQ over ipc sockets in a directory
// bind-mounted at /sock. The kernel starts from kernel_launcher.h's script (ipykernel with per-execute costs removed),
// bind-mounted read-only at kKernelLauncherPath.
//
// Contract:
// - Launch returns as soon as the process runs; KernelClient::WaitReady says when the kernel
//   answers (about a second for ipykernel: see KernelPool). Unavailable when bubblewrap or
//   python3 is missing; InvalidArgument for a data file path that is not relative and plain.
// - Each isolation layer either holds or is reported "off: <why>" in isolation(); only the
//   namespaces (bubblewrap) are required.
// - The bwrap process gets PR_SET_PDEATHSIG (it dies when the *thread* that launched it exits:
//   launch from a thread that outlives the kernel, as KernelPool's refill thread does), but
//   entering its user namespace clears it; what survives a SIGKILL of envforge is killed by the
//   kernel janitor (kernel_janitor.h), started with the first kernel.
// - The destructor kills every process of the kernel and removes its directory.
// Thread safety: Alive, ExitReason, Kill and the destructor from one thread at a time; the
// const accessors (CpuSeconds, MemoryBytes, MemoryReport, OomKilled, PidsLimited, Terminate) from
// any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "base/status.h"
#include "sandbox/jupyter/kernel_client.h"
#include "sandbox/jupyter/kernel_connection.h"

namespace envforge::sandbox::jupyter {

class KernelCgroup;

struct KernelLimits {
  int64_t memory_bytes = int64_t{1} << 30;      // cgroup; the kernel itself takes about 60 MiB
  int64_t max_processes = 64;                   // cgroup pids.max
  int64_t disk_bytes = int64_t{256} << 20;      // size of each tmpfs (/work and /tmp)
  int64_t max_file_bytes = int64_t{256} << 20;  // RLIMIT_FSIZE
  int64_t open_files = 1024;                    // RLIMIT_NOFILE

  Json ToJson() const;
};

// A data file placed read-only in the kernel's working directory.
struct KernelFile {
  std::string name;  // a relative path ("data.csv", "sales/2024.csv"): no "", "." or ".." part
  std::string contents;
};

struct KernelLaunchOptions {
  // The kernel's directory <scratch_root>/<pid>-k<id> goes here (socket paths must stay short).
  std::filesystem::path scratch_root = "/tmp/envforge-kernels";
  std::vector<KernelFile> files;
  KernelLimits limits;
  std::string python = "/usr/bin/python3";
  std::string bwrap = "/usr/bin/bwrap";
};

class KernelProcess {
 public:
  static Result<std::unique_ptr<KernelProcess>> Launch(const KernelLaunchOptions& options);
  ~KernelProcess();
  KernelProcess(const KernelProcess&) = delete;
  KernelProcess& operator=(const KernelProcess&) = delete;

  // The kernel's address as this process sees it (ipc sockets under directory()/sock).
  const ConnectionInfo& connection() const { return connection_; }
  pid_t pid() const { return pid_; }
  const std::filesystem::path& directory() const { return directory_; }
  // {"namespaces", "uid", "seccomp", "cgroup", "rlimits", "filesystem"}: "on ..." or "off: <why>".
  const Json& isolation() const { return isolation_; }

  // False once the bwrap process (hence the kernel) exited; reaps it.
  bool Alive();
  // Why it ended: "" while alive; "memory limit", "exit code N", "signal N".
  std::string ExitReason();
  double CpuSeconds() const;
  int64_t MemoryBytes() const;  // the cgroup's usage (pages of the processes and their tmpfs files)
  // {"cgroup_bytes", "rss_bytes", "pss_bytes", "processes"}: the cgroup's usage, and the resident
  // and proportional set sizes summed over the kernel's processes (PSS divides shared pages,
  // such as the interpreter's libraries, among the processes that map them).
  Json MemoryReport() const;
  bool OomKilled() const;
  bool PidsLimited() const;
  // SIGKILL to the sandbox and everything in its cgroup; reaps.
  void Kill();
  // SIGKILL through a pidfd and the cgroup, without reaping: safe from any thread, while another
  // thread uses the process (its Execute then sees the kernel die).
  void Terminate() const;
  // The last bytes the kernel wrote to its stderr (start-up failures).
  std::string LogTail(size_t bytes = 2000) const;
  // alive and cpu_seconds bound to this process (valid while it lives).
  KernelProbe Probe();

 private:
  KernelProcess() = default;
  ConnectionInfo connection_;
  std::filesystem::path directory_;
  pid_t pid_ = -1;
  UniqueFd pidfd_;  // signals without a pid-reuse race
  int wait_status_ = 0;
  bool reaped_ = false;
  Json isolation_ = Json::object();
  std::unique_ptr<KernelCgroup> cgroup_;
};

}  // namespace envforge::sandbox::jupyter
