// The shared seccomp deny-list.
#include "sandbox/internal/seccomp_rules.h"

#include <linux/filter.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/fd.h"

namespace envforge::sandbox {

Status AddSeccompRule(scmp_filter_ctx ctx, int nr, uint32_t action, unsigned count, const scmp_arg_cmp* args) {
  if (nr < 0) return Status::Ok();  // __NR_SCMP_ERROR: unknown on this architecture
  const int rc = seccomp_rule_add_array(ctx, action, nr, count, args);
  if (rc != 0)
    return InternalError("seccomp_rule_add failed for syscall " + std::to_string(nr) + ": " + std::strerror(-rc));
  return Status::Ok();
}

Result<scmp_filter_ctx> NewSandboxSeccompFilter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return InternalError("seccomp_init failed");
  // Syscalls of another architecture (i386, x32 numbers) kill the process: a classic bypass.
  seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);  // whoever loads it sets no_new_privs itself
  Status status;
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  for (const char* name : {"ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "mount",
                           "umount2",
                           "pivot_root",
                           "chroot",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "bpf",
                           "perf_event_open",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "init_module",
                           "finit_module",
                           "delete_module",
                           "kexec_load",
                           "kexec_file_load",
                           "unshare",
                           "setns",
                           "userfaultfd",
                           "personality",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "fsopen",
                           "fsconfig",
                           "fsmount",
                           "fspick",
                           "move_mount",
                           "open_tree",
                           "mount_setattr",
                           "acct",
                           "swapon",
                           "swapoff",
                           "reboot",
                           "syslog",
                           "quotactl",
                           "iopl",
                           "ioperm",
                           "lookup_dcookie",
                           "vhangup",
                           "settimeofday",
                           "clock_settime",
                           "clock_adjtime",
                           "adjtimex",
                           "pidfd_getfd"}) {
    if (status.ok()) status = AddSeccompRule(ctx, seccomp_syscall_resolve_name(name), eperm);
  }
  // glibc falls back from clone3 to clone on ENOSYS; clone's flags can then be inspected.
  if (status.ok()) status = AddSeccompRule(ctx, seccomp_syscall_resolve_name("clone3"), SCMP_ACT_ERRNO(ENOSYS));
  // CLONE_NEWTIME (0x80) is not checked: in clone() that bit is part of the exit signal.
  for (uint64_t flag :
       {uint64_t{CLONE_NEWNS}, uint64_t{CLONE_NEWCGROUP}, uint64_t{CLONE_NEWUTS}, uint64_t{CLONE_NEWIPC},
        uint64_t{CLONE_NEWUSER}, uint64_t{CLONE_NEWPID}, uint64_t{CLONE_NEWNET}}) {
    scmp_arg_cmp masked = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
    if (status.ok()) status = AddSeccompRule(ctx, seccomp_syscall_resolve_name("clone"), eperm, 1, &masked);
  }
  // Terminal injection (CVE-2017-5226): compare the low 32 bits only (CVE-2019-10063).
  for (uint64_t request : {uint64_t{TIOCSTI}, uint64_t{TIOCLINUX}}) {
    scmp_arg_cmp masked = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, request);
    if (status.ok()) status = AddSeccompRule(ctx, seccomp_syscall_resolve_name("ioctl"), eperm, 1, &masked);
  }
  if (!status.ok()) {
    seccomp_release(ctx);
    return status;
  }
  return ctx;
}

Result<std::string> ExportSeccompProgram(scmp_filter_ctx ctx) {
  // libseccomp 2.5 exports to a descriptor only: use a memfd and read the program back.
  UniqueFd memfd(static_cast<int>(syscall(SYS_memfd_create, "envforge-seccomp", MFD_CLOEXEC)));
  if (!memfd.valid()) return ErrnoError("memfd_create", errno);
  const int rc = seccomp_export_bpf(ctx, memfd.get());
  if (rc != 0) return InternalError(std::string("seccomp_export_bpf failed: ") + std::strerror(-rc));
  const off_t size = lseek(memfd.get(), 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0) return InternalError("seccomp program has a bad size");
  std::string program(static_cast<size_t>(size), '\0');
  if (pread(memfd.get(), program.data(), program.size(), 0) != size) return ErrnoError("read seccomp program", errno);
  return program;
}

Result<UniqueFd> SeccompProgramMemfd(const char* name) {
  ENVFORGE_ASSIGN_OR_RETURN(scmp_filter_ctx ctx, NewSandboxSeccompFilter());
  Result<std::string> program = ExportSeccompProgram(ctx);
  seccomp_release(ctx);
  if (!program.ok()) return program.status();
  UniqueFd fd(static_cast<int>(syscall(SYS_memfd_create, name, MFD_CLOEXEC)));
  if (!fd.valid()) return ErrnoError("memfd_create", errno);
  if (write(fd.get(), program->data(), program->size()) != static_cast<ssize_t>(program->size()) ||
      lseek(fd.get(), 0, SEEK_SET) != 0) {
    return ErrnoError("write seccomp program", errno);
  }
  return fd;
}

}  // namespace envforge::sandbox
