// Isolation layers: network namespace, rlimits, uid switch, Landlock, seccomp.
#include "sandbox/worker/isolation.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/fd.h"

namespace envforge::sandbox::worker {
namespace {

// Landlock's ABI, declared here because Debian 12's kernel headers (6.1) predate the network
// and scope rules; the kernel ABI is stable.
struct LandlockRulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI >= 4
  uint64_t scoped;              // ABI >= 6
};
struct __attribute__((packed)) LandlockPathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};
constexpr int kLandlockRulePathBeneath = 1;
constexpr uint32_t kLandlockCreateRulesetVersion = 1u << 0;
constexpr uint64_t kFsExecute = 1ull << 0;
constexpr uint64_t kFsWriteFile = 1ull << 1;
constexpr uint64_t kFsReadFile = 1ull << 2;
constexpr uint64_t kFsReadDir = 1ull << 3;
constexpr uint64_t kFsRefer = 1ull << 13;     // ABI 2
constexpr uint64_t kFsTruncate = 1ull << 14;  // ABI 3
constexpr uint64_t kFsIoctlDev = 1ull << 15;  // ABI 5
constexpr uint64_t kNetBindTcp = 1ull << 0;
constexpr uint64_t kNetConnectTcp = 1ull << 1;
constexpr uint64_t kScopeAbstractUnixSocket = 1ull << 0;
constexpr uint64_t kScopeSignal = 1ull << 1;

int LandlockCreateRuleset(const LandlockRulesetAttr* attr, size_t size, uint32_t flags) {
  return static_cast<int>(syscall(SYS_landlock_create_ruleset, attr, size, flags));
}
int LandlockAddRule(int ruleset, int type, const void* attr) {
  return static_cast<int>(syscall(SYS_landlock_add_rule, ruleset, type, attr, 0));
}
int LandlockRestrictSelf(int ruleset) { return static_cast<int>(syscall(SYS_landlock_restrict_self, ruleset, 0)); }

uint64_t HandledFs(int abi) {
  uint64_t rights = (1ull << 13) - 1;  // ABI 1: execute .. make_sym
  if (abi >= 2) rights |= kFsRefer;
  if (abi >= 3) rights |= kFsTruncate;
  if (abi >= 5) rights |= kFsIoctlDev;
  return rights;
}

// One write(2) to a /proc file (these files take a single write and must not be replaced).
Status WriteProcFile(const std::string& path, const std::string& text) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open " + path, errno);
  if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) return ErrnoError("write " + path, errno);
  return Status::Ok();
}

std::string Off(std::string_view why, int error) {
  return "off: " + std::string(why) + ": " + std::strerror(error);
}

// The deny-list (real-envs.md §5.2 step 3), compiled once into BPF.
Result<std::vector<uint64_t>> BuildSeccompProgram() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return InternalError("seccomp_init failed");
  // Syscalls of another architecture (i386, x32 numbers) kill the process: a classic bypass.
  seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);  // the session sets no_new_privs itself
  Status status;
  auto deny = [&](int nr, uint32_t action, unsigned count = 0, const scmp_arg_cmp* args = nullptr) {
    if (!status.ok() || nr < 0) return;  // __NR_SCMP_ERROR: unknown on this architecture
    int rc = seccomp_rule_add_array(ctx, action, nr, count, args);
    if (rc != 0) status = InternalError("seccomp_rule_add failed for syscall " + std::to_string(nr) + ": " + std::strerror(-rc));
  };
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  for (const char* name :
       {"ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root", "chroot",
        "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "perf_event_open", "keyctl", "add_key",
        "request_key", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "unshare",
        "setns", "userfaultfd", "personality", "open_by_handle_at", "name_to_handle_at", "fsopen", "fsconfig",
        "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr", "acct", "swapon", "swapoff", "reboot",
        "syslog", "quotactl", "iopl", "ioperm", "lookup_dcookie", "vhangup", "settimeofday", "clock_settime",
        "clock_adjtime", "adjtimex", "pidfd_getfd"}) {
    deny(seccomp_syscall_resolve_name(name), eperm);
  }
  // glibc falls back from clone3 to clone on ENOSYS; clone's flags can then be inspected.
  deny(seccomp_syscall_resolve_name("clone3"), SCMP_ACT_ERRNO(ENOSYS));
  // CLONE_NEWTIME (0x80) is not checked: in clone() that bit is part of the exit signal.
  for (uint64_t flag : {uint64_t{CLONE_NEWNS}, uint64_t{CLONE_NEWCGROUP}, uint64_t{CLONE_NEWUTS},
                        uint64_t{CLONE_NEWIPC}, uint64_t{CLONE_NEWUSER}, uint64_t{CLONE_NEWPID},
                        uint64_t{CLONE_NEWNET}}) {
    scmp_arg_cmp masked = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
    deny(seccomp_syscall_resolve_name("clone"), eperm, 1, &masked);
  }
  // Terminal injection (CVE-2017-5226): compare the low 32 bits only (CVE-2019-10063).
  for (uint64_t request : {uint64_t{TIOCSTI}, uint64_t{TIOCLINUX}}) {
    scmp_arg_cmp masked = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, request);
    deny(seccomp_syscall_resolve_name("ioctl"), eperm, 1, &masked);
  }
  if (!status.ok()) {
    seccomp_release(ctx);
    return status;
  }
  // libseccomp 2.5 exports to a descriptor only: use a memfd and read the program back.
  UniqueFd memfd(static_cast<int>(syscall(SYS_memfd_create, "envforge-seccomp", MFD_CLOEXEC)));
  if (!memfd.valid()) {
    seccomp_release(ctx);
    return ErrnoError("memfd_create", errno);
  }
  int rc = seccomp_export_bpf(ctx, memfd.get());
  seccomp_release(ctx);
  if (rc != 0) return InternalError(std::string("seccomp_export_bpf failed: ") + std::strerror(-rc));
  off_t size = lseek(memfd.get(), 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0) return InternalError("seccomp program has a bad size");
  std::vector<uint64_t> program(static_cast<size_t>(size) / sizeof(sock_filter));
  static_assert(sizeof(sock_filter) == sizeof(uint64_t));
  if (pread(memfd.get(), program.data(), static_cast<size_t>(size), 0) != size) return ErrnoError("read seccomp program", errno);
  return program;
}

}  // namespace

std::string EnterEmptyNetworkNamespace() {
  if (unshare(CLONE_NEWNET) == 0) return "on";
  int root_error = errno;
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) return Off("unshare(CLONE_NEWNET)", root_error);
  // Map our own ids onto themselves, so files keep their owner and creating them still works.
  Status mapped = WriteProcFile("/proc/self/setgroups", "deny");
  if (mapped.ok()) mapped = WriteProcFile("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1");
  if (mapped.ok()) mapped = WriteProcFile("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
  if (!mapped.ok()) return "off: user namespace id mapping failed: " + mapped.message();
  return "on";
}

Isolation Isolation::Prepare() {
  Isolation isolation;
  isolation.can_switch_uid_ = geteuid() == 0;
  isolation.uid_status_ = isolation.can_switch_uid_ ? "on" : "off: the worker does not run as root";

  int abi = LandlockCreateRuleset(nullptr, 0, kLandlockCreateRulesetVersion);
  if (abi < 1) {
    isolation.landlock_status_ = Off("landlock_create_ruleset", errno);
  } else {
    isolation.landlock_abi_ = abi;
    for (const char* path : {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"}) {
      int fd = open(path, O_PATH | O_CLOEXEC | O_DIRECTORY);
      if (fd >= 0) isolation.read_only_fds_.push_back(fd);
    }
    isolation.dev_null_fd_ = open("/dev/null", O_PATH | O_CLOEXEC);
    isolation.kept_fds_ = isolation.read_only_fds_;
    if (isolation.dev_null_fd_ >= 0) isolation.kept_fds_.push_back(isolation.dev_null_fd_);
    isolation.landlock_status_ = "on";
  }

  if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
    isolation.seccomp_status_ = Off("prctl(PR_GET_SECCOMP)", errno);
  } else {
    auto program = BuildSeccompProgram();
    if (program.ok()) {
      isolation.seccomp_program_ = std::move(*program);
      isolation.seccomp_status_ = "on";
    } else {
      isolation.seccomp_status_ = "off: " + program.status().message();
    }
  }
  return isolation;
}

Status Isolation::ApplyRlimits(const ResourceLimits& limits, int64_t data_base, bool pids_cgroup) const {
  auto set = [](int resource, const char* name, rlim_t soft, rlim_t hard) -> Status {
    rlimit limit{soft, hard};
    if (setrlimit(resource, &limit) != 0) return ErrnoError(std::string("setrlimit(") + name + ")", errno);
    return Status::Ok();
  };
  auto cpu = static_cast<rlim_t>(std::max<int64_t>(1, limits.cpu_seconds));
  // Soft: SIGXCPU; one second later the hard limit sends SIGKILL.
  ENVFORGE_RETURN_IF_ERROR(set(RLIMIT_CPU, "RLIMIT_CPU", cpu, cpu + 1));
  ENVFORGE_RETURN_IF_ERROR(set(RLIMIT_CORE, "RLIMIT_CORE", 0, 0));
  auto fsize = static_cast<rlim_t>(std::max<int64_t>(0, limits.max_file_bytes));
  ENVFORGE_RETURN_IF_ERROR(set(RLIMIT_FSIZE, "RLIMIT_FSIZE", fsize, fsize));
  auto files = static_cast<rlim_t>(std::max<int64_t>(16, limits.max_open_files));
  ENVFORGE_RETURN_IF_ERROR(set(RLIMIT_NOFILE, "RLIMIT_NOFILE", files, files));
  if (limits.memory_bytes > 0) {
    auto data = static_cast<rlim_t>(data_base + limits.memory_bytes - limits.memory_bytes / 8);
    ENVFORGE_RETURN_IF_ERROR(set(RLIMIT_DATA, "RLIMIT_DATA", data, data));
  }
  if (!pids_cgroup && limits.max_processes > 0) {
    auto processes = static_cast<rlim_t>(limits.max_processes * 8);
    ENVFORGE_RETURN_IF_ERROR(set(RLIMIT_NPROC, "RLIMIT_NPROC", processes, processes));
  }
  return Status::Ok();
}

Status Isolation::SwitchUser(uid_t uid) const {
  if (setgroups(0, nullptr) != 0) return ErrnoError("setgroups", errno);
  if (setresgid(uid, uid, uid) != 0) return ErrnoError("setresgid", errno);
  if (setresuid(uid, uid, uid) != 0) return ErrnoError("setresuid", errno);
  return Status::Ok();
}

Status Isolation::ApplyLandlock(const std::string& writable_dir) const {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return ErrnoError("prctl(PR_SET_NO_NEW_PRIVS)", errno);
  if (landlock_abi_ < 1) return Status::Ok();
  LandlockRulesetAttr attr{};
  attr.handled_access_fs = HandledFs(landlock_abi_);
  size_t size = sizeof(uint64_t);
  if (landlock_abi_ >= 4) {
    // Handled with no rule: every TCP bind and connect is denied.
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    size = 2 * sizeof(uint64_t);
  }
  if (landlock_abi_ >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    size = sizeof attr;
  }
  UniqueFd ruleset(LandlockCreateRuleset(&attr, size, 0));
  if (!ruleset.valid()) return ErrnoError("landlock_create_ruleset", errno);
  for (int fd : read_only_fds_) {
    LandlockPathBeneathAttr rule{kFsExecute | kFsReadFile | kFsReadDir, fd};
    if (LandlockAddRule(ruleset.get(), kLandlockRulePathBeneath, &rule) != 0) return ErrnoError("landlock_add_rule", errno);
  }
  if (dev_null_fd_ >= 0) {
    uint64_t file_rights = kFsReadFile | kFsWriteFile | (landlock_abi_ >= 3 ? kFsTruncate : 0);
    LandlockPathBeneathAttr rule{file_rights, dev_null_fd_};
    if (LandlockAddRule(ruleset.get(), kLandlockRulePathBeneath, &rule) != 0) return ErrnoError("landlock_add_rule /dev/null", errno);
  }
  UniqueFd writable(open(writable_dir.c_str(), O_PATH | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW));
  if (!writable.valid()) return ErrnoError("open " + writable_dir, errno);
  LandlockPathBeneathAttr rule{attr.handled_access_fs, writable.get()};
  if (LandlockAddRule(ruleset.get(), kLandlockRulePathBeneath, &rule) != 0) return ErrnoError("landlock_add_rule scratch", errno);
  if (LandlockRestrictSelf(ruleset.get()) != 0) return ErrnoError("landlock_restrict_self", errno);
  return Status::Ok();
}

Status Isolation::ApplySeccomp() const {
  if (seccomp_program_.empty()) return Status::Ok();
  sock_fprog program{static_cast<unsigned short>(seccomp_program_.size()),
                     reinterpret_cast<sock_filter*>(const_cast<uint64_t*>(seccomp_program_.data()))};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) != 0) return ErrnoError("prctl(PR_SET_SECCOMP)", errno);
  return Status::Ok();
}

}  // namespace envforge::sandbox::worker
