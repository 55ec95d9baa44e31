// The seccomp deny-list every sandboxed process of envforge runs under (real-envs.md §5.2 step
// 3): worker sessions (stacked under the zygote's extra rules, sandbox/worker/isolation.cc) and
// Jupyter kernels (handed to bubblewrap, sandbox/jupyter/kernel_process.cc). Default allow; the
// listed calls fail with EPERM, clone3 with ENOSYS (so glibc falls back to clone, whose
// namespace flags are checked), ioctl TIOCSTI/TIOCLINUX with EPERM (low 32 bits compared), and
// a call of another architecture kills the process.
#pragma once

#include <seccomp.h>

#include <string>

#include "base/fd.h"
#include "base/status.h"

namespace envforge::sandbox {

// A filter with the deny-list; the caller may add rules and must seccomp_release it.
Result<scmp_filter_ctx> NewSandboxSeccompFilter();
// Adds `action` for syscall `nr` when `args` match; nr < 0 (unknown here) is skipped.
Status AddSeccompRule(scmp_filter_ctx ctx, int nr, uint32_t action, unsigned count = 0,
                      const scmp_arg_cmp* args = nullptr);
// The filter's BPF program (an array of struct sock_filter) as bytes.
Result<std::string> ExportSeccompProgram(scmp_filter_ctx ctx);
// A memfd (named `name`, at offset 0) holding the deny-list's program, for bubblewrap's
// --seccomp FD. An error means the layer is off; callers report it.
Result<UniqueFd> SeccompProgramMemfd(const char* name);

}  // namespace envforge::sandbox
