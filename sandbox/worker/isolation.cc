// Isolation layers: network namespace, the zygote's confinement, rlimits, uid switch,
// capabilities, Landlock, seccomp.
#include "sandbox/worker/isolation.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "base/fd.h"
#include "sandbox/internal/seccomp_rules.h"

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
  if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return ErrnoError("write " + path, errno);
  return Status::Ok();
}

std::string Off(std::string_view why, int error) { return "off: " + std::string(why) + ": " + std::strerror(error); }

// The permitted and effective capability sets, 64 bits each. Reading them takes the raw system
// call, like setting them (SetCapabilitySets): a 64-bit mask is all the callers need.
int CapGet(uint64_t* effective, uint64_t* permitted) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return errno;
  *effective = data[0].effective | uint64_t{data[1].effective} << 32;
  *permitted = data[0].permitted | uint64_t{data[1].permitted} << 32;
  return 0;
}

// The capabilities in the calling thread's bounding set.
std::vector<int> BoundingSet() {
  std::vector<int> caps;
  for (int cap = 0; cap < 64; ++cap) {
    int present = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
    if (present < 0) break;  // past the kernel's last capability
    if (present == 1) caps.push_back(cap);
  }
  return caps;
}

// "cap_dac_override,cap_kill" for messages; libcap knows every capability's name.
std::string CapNames(uint64_t mask) {
  std::string names;
  for (int cap = 0; cap < 64; ++cap) {
    if (!(mask >> cap & 1)) continue;
    char* name = cap_to_name(cap);
    names += (names.empty() ? "" : ",") + std::string(name != nullptr ? name : "cap_" + std::to_string(cap));
    cap_free(name);
  }
  return names.empty() ? "none" : names;
}

// Adds a path-beneath rule for `path` (a directory, or a file with file rights only).
// ENOENT is not an error when `optional`.
Status AddPathRule(int ruleset, const std::string& path, uint64_t rights, bool optional = false) {
  UniqueFd fd(open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!fd.valid()) {
    if (optional && errno == ENOENT) return Status::Ok();
    return ErrnoError("open " + path, errno);
  }
  LandlockPathBeneathAttr rule{rights, fd.get()};
  if (LandlockAddRule(ruleset, kLandlockRulePathBeneath, &rule) != 0) {
    return ErrnoError("landlock_add_rule " + path, errno);
  }
  return Status::Ok();
}

// Threads of the calling process (from /proc/self/status; 0 when unreadable).
int ThreadCount() {
  auto status = ReadFileToString("/proc/self/status");
  if (!status.ok()) return 0;
  auto at = status->find("\nThreads:");
  return at == std::string::npos ? 0 : std::atoi(status->c_str() + at + 9);
}

// The zygote's extra rules (ConfineZygote): which uids its processes may still take.
struct ZygoteSyscallRules {
  uid_t family_uid_first = 0;
  uid_t family_uid_last = 0;
};

// The deny-list (real-envs.md §5.2 step 3), compiled once into BPF; with `zygote`, the zygote's
// program: the same list plus the rules ConfineZygote documents.
Result<std::vector<uint64_t>> BuildSeccompProgram(const ZygoteSyscallRules* zygote = nullptr) {
  ENVFORGE_ASSIGN_OR_RETURN(scmp_filter_ctx ctx, NewSandboxSeccompFilter());
  Status status;
  auto deny = [&](int nr, uint32_t action, unsigned count = 0, const scmp_arg_cmp* args = nullptr) {
    if (status.ok()) status = AddSeccompRule(ctx, nr, action, count, args);
  };
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  if (zygote != nullptr) {
    // Credentials: only setresuid/setresgid, and only to the families' uids (64-bit compares:
    // high bits the kernel would drop make the value out of range, hence denied).
    for (const char* name : {"setuid", "setgid", "setreuid", "setregid", "setfsuid", "setfsgid"}) {
      deny(seccomp_syscall_resolve_name(name), eperm);
    }
    for (const char* name : {"setresuid", "setresgid"}) {
      for (unsigned arg = 0; arg < 3; ++arg) {
        scmp_arg_cmp below{arg, SCMP_CMP_LT, zygote->family_uid_first, 0};
        scmp_arg_cmp above{arg, SCMP_CMP_GT, zygote->family_uid_last, 0};
        deny(seccomp_syscall_resolve_name(name), eperm, 1, &below);
        deny(seccomp_syscall_resolve_name(name), eperm, 1, &above);
      }
    }
    scmp_arg_cmp some_groups = SCMP_A0(SCMP_CMP_NE, 0);
    deny(seccomp_syscall_resolve_name("setgroups"), eperm, 1, &some_groups);
    // Sockets that leave the (empty) network namespace: unix sockets on the file system (with
    // CAP_DAC_OVERRIDE, root's sockets would accept a connect) and vsock (not namespaced).
    // socketpair() stays: the zygote's channels are socket pairs.
    for (uint64_t family : {uint64_t{AF_UNIX}, uint64_t{AF_VSOCK}}) {
      scmp_arg_cmp masked = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, family);
      deny(seccomp_syscall_resolve_name("socket"), SCMP_ACT_ERRNO(EACCES), 1, &masked);
    }
    // Checked against DAC permissions only (CAP_DAC_OVERRIDE passes), not against Landlock.
    for (const char* name :
         {"inotify_add_watch", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr"}) {
      deny(seccomp_syscall_resolve_name(name), eperm);
    }
  }
  Result<std::string> exported = status.ok() ? ExportSeccompProgram(ctx) : Result<std::string>(status);
  seccomp_release(ctx);
  if (!exported.ok()) return exported.status();
  static_assert(sizeof(sock_filter) == sizeof(uint64_t));
  std::vector<uint64_t> program(exported->size() / sizeof(sock_filter));
  std::memcpy(program.data(), exported->data(), exported->size());
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
  isolation.bounding_caps_ = BoundingSet();
  return isolation;
}

void Isolation::SetAllZygoteStatuses(const std::string& status) {
  zygote_caps_status_ = zygote_uid_status_ = zygote_landlock_status_ = status;
  zygote_scope_status_ = zygote_seccomp_status_ = status;
}

void Isolation::ConfineZygote(const ZygoteConfinement& confinement) {
  // Per-thread state (capabilities, Landlock) cannot be applied to threads that already exist.
  if (int threads = ThreadCount(); threads != 1) {
    std::string why = "off: the zygote has " + std::to_string(threads) + " threads before confinement";
    SetAllZygoteStatuses(why);
    return;
  }
  // Landlock and a seccomp filter without CAP_SYS_ADMIN need it; the zygote never executes a
  // program, and sessions set it anyway.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    std::string why = Off("prctl(PR_SET_NO_NEW_PRIVS)", errno);
    SetAllZygoteStatuses(why);
    return;
  }

  // Capabilities and uid. As root the zygote keeps kZygoteCapabilities and becomes its own uid;
  // otherwise it needs none (its sessions share its uid).
  uint64_t keep = 0;
  if (can_switch_uid_) {
    for (int cap : kZygoteCapabilities) keep |= uint64_t{1} << cap;
  }
  std::string caps_error;
  for (int cap : BoundingSet()) {
    if (keep >> cap & 1) continue;
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      // Without CAP_SETPCAP (a plain user) the bounding set stays; with nothing permitted and
      // no_new_privs it grants nothing.
      if (errno != EPERM) caps_error = Off("prctl(PR_CAPBSET_DROP)", errno);
      break;
    }
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (!can_switch_uid_) {
    zygote_uid_status_ = "off: the worker does not run as root (sessions share its uid)";
  } else if (confinement.uid == static_cast<uid_t>(-1) || confinement.uid == 0) {
    zygote_uid_status_ = "off: no uid given for the zygote";
  } else {
    // Permitted capabilities survive the switch from root with PR_SET_KEEPCAPS; effective
    // ones are restored by the capset below.
    uid_t uid = confinement.uid;
    if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) {
      zygote_uid_status_ = Off("prctl(PR_SET_KEEPCAPS)", errno);
    } else if (setgroups(0, nullptr) != 0) {
      zygote_uid_status_ = Off("setgroups", errno);
    } else if (setresgid(uid, uid, uid) != 0) {
      zygote_uid_status_ = Off("setresgid", errno);
    } else if (setresuid(uid, uid, uid) != 0) {
      zygote_uid_status_ = Off("setresuid", errno);
    } else {
      zygote_uid_status_ = "on";
    }
    prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
  }
  uint64_t effective = 0;
  uint64_t permitted = 0;
  if (int error = SetCapabilitySets(keep, keep); error != 0) {
    // The uid switch failed and left some set smaller than `keep`: keep whatever is left of it.
    if (CapGet(&effective, &permitted) == 0) error = SetCapabilitySets(permitted & keep, permitted & keep);
    if (error != 0 && caps_error.empty()) caps_error = Off("capset", error);
  }
  if (caps_error.empty() && CapGet(&effective, &permitted) == 0 && (permitted & ~keep) != 0) {
    caps_error = "off: capabilities left after capset: " + CapNames(permitted & ~keep);
  }
  zygote_caps_status_ = caps_error.empty() ? "on" : caps_error;
  // What sessions drop from their bounding set; nothing when they could not (no CAP_SETPCAP:
  // a plain user, whose bounding set grants nothing under no_new_privs).
  bounding_caps_ = BoundingSet();
  if (CapGet(&effective, &permitted) != 0 || !(effective >> CAP_SETPCAP & 1)) bounding_caps_.clear();

  // Landlock: the zygote's domain; every session's nests inside it.
  if (landlock_abi_ < 1) {
    zygote_landlock_status_ = zygote_scope_status_ = landlock_status_;
  } else {
    LandlockRulesetAttr attr{};
    attr.handled_access_fs = HandledFs(landlock_abi_);
    size_t size = sizeof(uint64_t);
    if (landlock_abi_ >= 4) {
      attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
      size = 2 * sizeof(uint64_t);
    }
    if (landlock_abi_ >= 6) {
      attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
      size = sizeof attr;
    }
    UniqueFd ruleset(LandlockCreateRuleset(&attr, size, 0));
    Status status = ruleset.valid() ? Status::Ok() : ErrnoError("landlock_create_ruleset", errno);
    const uint64_t read_only = kFsExecute | kFsReadFile | kFsReadDir;
    const uint64_t read_write_file = kFsReadFile | kFsWriteFile | (landlock_abi_ >= 3 ? kFsTruncate : 0);
    for (const char* path : {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"}) {
      if (status.ok()) status = AddPathRule(ruleset.get(), path, read_only, true);
    }
    if (status.ok()) status = AddPathRule(ruleset.get(), "/etc/ld.so.cache", kFsReadFile, true);
    for (const std::string& path : confinement.read_only) {
      // A directory or a zip file: file rights are the only ones a file rule may carry.
      struct stat info {};
      if (!status.ok() || path == "/" || stat(path.c_str(), &info) != 0) continue;
      status = AddPathRule(ruleset.get(), path, S_ISDIR(info.st_mode) ? kFsReadFile | kFsReadDir : kFsReadFile);
    }
    if (status.ok()) status = AddPathRule(ruleset.get(), "/dev/null", read_write_file);
    // /proc: the zygote reads its own status and children, and a copy's status and cwd at adopt.
    // Other processes' sensitive files (environ, mem, fd, ...) are ptrace-mode checked, and
    // Landlock denies ptrace-mode access outside the zygote's own domain.
    if (status.ok()) status = AddPathRule(ruleset.get(), "/proc", kFsReadFile | kFsReadDir);
    if (status.ok()) status = AddPathRule(ruleset.get(), confinement.scratch_root, attr.handled_access_fs);
    for (const std::string& dir : confinement.cgroup_dirs) {
      if (status.ok()) status = AddPathRule(ruleset.get(), dir, attr.handled_access_fs);
    }
    if (status.ok() && LandlockRestrictSelf(ruleset.get()) != 0) status = ErrnoError("landlock_restrict_self", errno);
    zygote_landlock_status_ = status.ok() ? "on" : "off: " + status.message();
    if (!status.ok()) {
      zygote_scope_status_ = zygote_landlock_status_;
    } else if (landlock_abi_ < 6) {
      zygote_scope_status_ = "off: Landlock ABI " + std::to_string(landlock_abi_) +
                             " has no signal or abstract unix socket scoping (needs 6): the zygote can signal any "
                             "process its capabilities allow";
    } else {
      zygote_scope_status_ = "on";
    }
  }

  // seccomp, last: it restricts the uid switches done above.
  if (seccomp_status_ != "on") {
    zygote_seccomp_status_ = seccomp_status_;
  } else {
    ZygoteSyscallRules rules;
    rules.family_uid_first = confinement.family_uid_first;
    rules.family_uid_last = confinement.family_uid_last;
    if (!can_switch_uid_) {
      // No uid is ever taken: any set*id call is refused.
      rules.family_uid_first = 1;
      rules.family_uid_last = 0;
    }
    auto program = BuildSeccompProgram(&rules);
    if (!program.ok()) {
      zygote_seccomp_status_ = "off: " + program.status().message();
    } else {
      sock_fprog fprog{static_cast<unsigned short>(program->size()), reinterpret_cast<sock_filter*>(program->data())};
      zygote_seccomp_status_ =
          prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) == 0 ? "on" : Off("prctl(PR_SET_SECCOMP)", errno);
    }
  }
}

Status Isolation::ApplyRlimits(const SandboxLimits& limits, int64_t data_base, bool pids_cgroup) const {
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
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return ErrnoError("prctl(PR_SET_KEEPCAPS)", errno);
  if (setgroups(0, nullptr) != 0) return ErrnoError("setgroups", errno);
  if (setresgid(uid, uid, uid) != 0) return ErrnoError("setresgid", errno);
  if (setresuid(uid, uid, uid) != 0) return ErrnoError("setresuid", errno);
  prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
  // Leaving uid 0 empties the effective set; the permitted one is still there.
  uint64_t effective = 0;
  uint64_t permitted = 0;
  if (int error = CapGet(&effective, &permitted); error != 0) return ErrnoError("capget", error);
  if (effective != permitted) {
    if (int error = SetCapabilitySets(permitted, permitted); error != 0) return ErrnoError("capset", error);
  }
  return Status::Ok();
}

Status Isolation::DropCapabilities() const {
  for (int cap : bounding_caps_) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EPERM) return ErrnoError("prctl(PR_CAPBSET_DROP)", errno);
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (int error = SetCapabilitySets(0, 0); error != 0) return ErrnoError("capset", error);
  return Status::Ok();
}

int SetCapabilitySets(uint64_t effective, uint64_t permitted) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  data[0].effective = static_cast<uint32_t>(effective);
  data[1].effective = static_cast<uint32_t>(effective >> 32);
  data[0].permitted = static_cast<uint32_t>(permitted);
  data[1].permitted = static_cast<uint32_t>(permitted >> 32);
  return syscall(SYS_capset, &header, data) == 0 ? 0 : errno;
}

int RunAsUid(uid_t uid, int (*fn)(void*), void* arg) {
  volatile int result = 0;  // written by the helper, which shares this memory
  long id = static_cast<long>(uid);
  pid_t helper = vfork();
  if (helper == 0) {
    // Raw system calls: glibc's wrappers would signal the other threads of the caller.
    if (syscall(SYS_setgroups, 0L, nullptr) != 0 || syscall(SYS_setresgid, id, id, id) != 0 ||
        syscall(SYS_setresuid, id, id, id) != 0) {
      result = errno;
    } else {
      result = fn(arg);
    }
    _exit(0);
  }
  if (helper < 0) return errno;
  while (waitpid(helper, nullptr, 0) < 0 && errno == EINTR) {
  }
  return result;
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
    if (LandlockAddRule(ruleset.get(), kLandlockRulePathBeneath, &rule) != 0)
      return ErrnoError("landlock_add_rule", errno);
  }
  if (dev_null_fd_ >= 0) {
    uint64_t file_rights = kFsReadFile | kFsWriteFile | (landlock_abi_ >= 3 ? kFsTruncate : 0);
    LandlockPathBeneathAttr rule{file_rights, dev_null_fd_};
    if (LandlockAddRule(ruleset.get(), kLandlockRulePathBeneath, &rule) != 0)
      return ErrnoError("landlock_add_rule /dev/null", errno);
  }
  UniqueFd writable(open(writable_dir.c_str(), O_PATH | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW));
  if (!writable.valid()) return ErrnoError("open " + writable_dir, errno);
  LandlockPathBeneathAttr rule{attr.handled_access_fs, writable.get()};
  if (LandlockAddRule(ruleset.get(), kLandlockRulePathBeneath, &rule) != 0)
    return ErrnoError("landlock_add_rule scratch", errno);
  if (LandlockRestrictSelf(ruleset.get()) != 0) return ErrnoError("landlock_restrict_self", errno);
  return Status::Ok();
}

Status Isolation::ApplySeccomp() const {
  if (seccomp_program_.empty()) return Status::Ok();
  sock_fprog program{static_cast<unsigned short>(seccomp_program_.size()),
                     reinterpret_cast<sock_filter*>(const_cast<uint64_t*>(seccomp_program_.data()))};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) != 0)
    return ErrnoError("prctl(PR_SET_SECCOMP)", errno);
  return Status::Ok();
}

}  // namespace envforge::sandbox::worker
