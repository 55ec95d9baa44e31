// The session side of the worker (sandbox/internal/wire.h, SESSION CHANNEL).
//
// Life of a session process:
//   1. forked by the zygote ahead of demand ("warm"): joins its cgroup slot (the slow part on
//      cgroup v1), then waits on a private channel for an assignment;
//   2. assigned (a spawn): binds its task, applies rlimits, switches to its family's uid,
//      creates its scratch directory (as that uid), drops every capability, no_new_privs,
//      Landlock (nested in the zygote's domain), seccomp (stacked on the zygote's filter), then
//      sends "ready" with a pidfd of itself on the session socket;
//   3. serves frames until "close" or the end of the stream; "fork" clones it (CLONE_PARENT:
//      the copy is the zygote's child) into a copy that serves a new socket.
// A failure before "ready" is reported on the session socket as {"op":"fatal","error":...},
// then the process exits with status 1.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "sandbox/worker/cgroups.h"
#include "sandbox/worker/isolation.h"

namespace envforge::sandbox::worker {

// What a warm child inherits from the zygote.
struct WarmChildContext {
  int channel_fd = -1;             // the zygote's assignments arrive here
  std::optional<CgroupSlot> slot;  // empty when cgroups are off
  const Isolation* isolation = nullptr;
  pid_t zygote_pid = 0;
  int64_t data_base = 0;      // the zygote's VmData, base of RLIMIT_DATA
  std::vector<int> keep_fds;  // besides 0-2, channel_fd and the slot's descriptors
};

// The assignment frame (zygote -> warm child, with the session socket attached):
//   {"task":T,"limits":L (ToJson of the session's SandboxLimits, sandbox_limits.h),
//    "disk_mounted":bool (the family directory is a tmpfs of disk_bytes),"uid":U|-1,
//    "scratch_dir":S,"family_dir":F,"create_family":bool,"landlock_dir":L}
// Never returns.
[[noreturn]] void RunWarmChild(WarmChildContext context);

// Finds where glibc keeps the calling thread's tid, so a raw clone() can update it in the copy
// (CLONE_CHILD_SETTID) as glibc's fork() does. Call once in the zygote, before any fork.
void PrepareRawClone();

}  // namespace envforge::sandbox::worker
