// Starting a sandboxed child (bubblewrap) the way every envforge sandbox process starts: the child
// joins its cgroup, leaves the server's process group, lowers its priority, gets its standard
// streams and the seccomp program (at fd 3, for bwrap's --seccomp 3) and nothing else, its
// rlimits, optionally uid/gid 65534 on the host (when envforge runs as root), PR_SET_PDEATHSIG,
// and execs argv with PATH as its only environment. Used by Jupyter kernels and code commands.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace envforge::sandbox::internal {

struct SandboxChildSetup {
  std::vector<int> cgroup_procs;  // cgroup.procs files to write "0" into
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
  int seccomp_fd = -1;  // -1: no seccomp program
  bool switch_uid = false;
  int nice = 10;
  rlimit core{0, 0}, file_size{RLIM_INFINITY, RLIM_INFINITY}, open_files{1024, 1024};
};

// Forks and execs argv[0] in the child; returns its pid. The child exits 120-127 when a step of its
// setup fails (cgroup 120, streams 121, seccomp fd 122, rlimits 123, uid 124, parent gone 125,
// exec 127).
Result<pid_t> ForkSandboxChild(const SandboxChildSetup& setup, std::vector<std::string> argv);

}  // namespace envforge::sandbox::internal
