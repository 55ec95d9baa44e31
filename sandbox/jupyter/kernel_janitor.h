// The clean-up of kernels whose envforge process ended without destroying them (SIGKILL, a
// crash): a bubblewrap process survives its parent, because entering its user namespace clears
// the PR_SET_PDEATHSIG its launcher set. So the first kernel a process launches also starts a
// janitor: /bin/sh in a session of its own, reading a pipe whose write end only this process
// holds (close-on-exec). At end of file (this process is gone, however it ended) it SIGKILLs
// every process in the cgroups envforge-kernels/<pid>-k* and removes them and the kernels'
// directories <scratch_root>/<pid>-k*. A process that destroys its kernels leaves it nothing to do.
//
// Contract: thread-safe; one janitor per scratch root per process. Without cgroups (not root)
// the janitor can only remove the directories: the kernels' processes then rely on the kernels
// being destroyed.
#pragma once

#include <filesystem>
#include <string>

#include "base/status.h"

namespace envforge::sandbox::jupyter {

// "<pid>-k": the prefix of this process's kernels' cgroup and directory names.
std::string KernelNamePrefix();
Status EnsureKernelJanitor(const std::filesystem::path& scratch_root);

}  // namespace envforge::sandbox::jupyter
