// One kernel's cgroup: memory and pids limits, CPU accounting, and killing everything in it.
// cgroup v1 (a directory in each of the memory, pids and cpuacct hierarchies) or v2 (one
// directory with the memory, pids and cpu controllers), under "envforge-kernels/<name>". The
// cgroup files (limits, events, killing) are sandbox/internal/cgroup_files.h's, which the
// worker's session slots use too.
//
// Contract: Create is Unavailable when no usable hierarchy is mounted or writable (not root);
// callers run the kernel without it and report the layer off. The kernel's first process joins
// by writing "0" to the descriptors of procs_fds() (async-signal-safe, after fork). The
// destructor kills what is left and removes the directories (retrying for up to a second while
// the kernel still holds them). Thread safety: const methods may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/status.h"

namespace envforge::sandbox::internal::cgroup {
struct Group;
}

namespace envforge::sandbox::jupyter {

class KernelCgroup {
 public:
  static Result<std::unique_ptr<KernelCgroup>> Create(const std::string& name, int64_t memory_bytes,
                                                      int64_t max_processes);
  ~KernelCgroup();
  KernelCgroup(const KernelCgroup&) = delete;
  KernelCgroup& operator=(const KernelCgroup&) = delete;

  // cgroup.procs of every directory, opened for writing.
  const std::vector<UniqueFd>& procs_fds() const { return procs_; }
  double CpuSeconds() const;
  bool OomKilled() const;           // the memory limit was hit and a process was killed
  bool PidsLimited() const;         // a fork failed at pids.max
  int64_t MemoryBytes() const;      // current usage
  std::vector<pid_t> Pids() const;  // the processes in it now (host pids)
  // SIGKILLs every process in the cgroup (forks blocked first: read OomKilled and PidsLimited
  // before), in rounds on v1; the cgroup is then meant to go.
  void KillAll() const;
  const char* version() const { return v2_ ? "v2" : "v1"; }

 private:
  KernelCgroup() = default;
  internal::cgroup::Group Group() const;  // the memory and pids directories

  bool v2_ = false;
  std::vector<std::string> dirs_;  // v1: memory, pids, cpuacct; v2: one
  std::vector<UniqueFd> procs_;
};

}  // namespace envforge::sandbox::jupyter
