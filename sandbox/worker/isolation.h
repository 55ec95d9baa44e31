// The isolation layers: the zygote's own confinement (ConfineZygote) and those a session applies
// to itself (sandbox/internal/wire.h; real-envs.md §5).
//
// The zygote prepares everything that is costly once (Prepare): the Landlock ABI probe, the
// seccomp program compiled to BPF by libseccomp, descriptors of the read-only directories. Then,
// before it runs any environment code (tools.py's module body, solutions, verifiers), it confines
// itself (ConfineZygote): capabilities, its own uid, Landlock, seccomp. Sessions inherit that
// domain and nest their own inside it. A session then applies each layer with a handful of system
// calls, in this order (the caller keeps it):
//   rlimits -> uid/gid -> scratch directories -> drop every capability -> no_new_privs ->
//   Landlock -> seccomp.
// Every layer that is unavailable on the host is reported "off: <why>", never skipped silently.
#pragma once

#include <linux/capability.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "sandbox/sandbox_limits.h"

namespace envforge::sandbox::worker {

// The zygote's network: unshare(CLONE_NEWNET) as root, else CLONE_NEWUSER|CLONE_NEWNET (must run
// while single-threaded). The new namespace has only a loopback interface, down. Returns "on"
// or "off: <why>".
std::string EnterEmptyNetworkNamespace();

// What the zygote may still touch once confined (ConfineZygote).
struct ZygoteConfinement {
  std::string scratch_root;              // read-write: every session's directory is inside it
  std::vector<std::string> cgroup_dirs;  // read-write: envforge/<zygote pid> of each hierarchy
  std::vector<std::string> read_only;    // besides /usr, /lib*, ...: the interpreter's sys.path
  uid_t uid = static_cast<uid_t>(-1);    // the zygote's own uid (and gid) when it starts as root
  uid_t family_uid_first = 0;            // the uids (and gids) the zygote may hand its families
  uid_t family_uid_last = 0;
};

class Isolation {
 public:
  // Probes and compiles; never fails: unavailable layers are recorded as off.
  static Isolation Prepare();

  // "on" or "off: <why>".
  const std::string& landlock_status() const { return landlock_status_; }
  const std::string& seccomp_status() const { return seccomp_status_; }
  const std::string& uid_status() const { return uid_status_; }
  int landlock_abi() const { return landlock_abi_; }
  bool can_switch_uid() const { return can_switch_uid_; }
  // Descriptors a session must keep open until it applies Landlock.
  const std::vector<int>& kept_fds() const { return kept_fds_; }

  // The zygote confines itself, once, single-threaded, before it runs any environment code;
  // every process it forks inherits the confinement (sessions nest theirs inside it):
  //   capabilities  bounding, permitted and effective sets cut to kZygoteCapabilities (none when
  //                 the worker does not run as root), inheritable and ambient emptied;
  //   uid           as root: setresuid/setresgid to `uid` (capabilities kept across), so the
  //                 zygote owns nothing on the host and same-uid rules (kill, prlimit, cgroup
  //                 v1 migration, /proc) no longer reach root's processes;
  //   no_new_privs  then Landlock: read-only /usr, /lib*, /bin, /sbin, /etc/ld.so.cache, /proc,
  //                 `read_only`; read-write /dev/null, scratch_root and cgroup_dirs; nothing
  //                 else; TCP denied
  //                 (ABI >= 4); signals and abstract unix sockets scoped to the zygote's domain
  //                 (ABI >= 6): it can signal its own sessions, nothing else;
  //   seccomp       the sessions' deny-list plus: every set*id call but setresuid/setresgid to
  //                 the family uids, setgroups but to the empty list, socket(AF_UNIX) (a root
  //                 socket on the file system is reachable with CAP_DAC_OVERRIDE),
  //                 socket(AF_VSOCK), inotify_add_watch, the *xattr writers.
  // Never fails: each layer's status is recorded ("on" or "off: <why>"); a layer that cannot be
  // applied leaves the others in place.
  void ConfineZygote(const ZygoteConfinement& confinement);
  const std::string& zygote_caps_status() const { return zygote_caps_status_; }
  const std::string& zygote_uid_status() const { return zygote_uid_status_; }
  const std::string& zygote_landlock_status() const { return zygote_landlock_status_; }
  const std::string& zygote_scope_status() const { return zygote_scope_status_; }
  const std::string& zygote_seccomp_status() const { return zygote_seccomp_status_; }
  // True when the zygote's Landlock domain is in place: every path it or a session writes must
  // be inside the scratch root.
  bool zygote_landlocked() const { return zygote_landlock_status_ == "on"; }

  // rlimits. RLIMIT_DATA = data_base + 7/8 of memory_bytes: Python's allocator meets it (and
  // raises MemoryError) before the memory cgroup, which also counts the copy-on-write copies of
  // the zygote's pages, OOM-kills the session. RLIMIT_NPROC only when no pids cgroup is in use
  // (it counts per uid, so it then bounds the whole fork family).
  Status ApplyRlimits(const SandboxLimits& limits, int64_t data_base, bool pids_cgroup) const;
  // setgroups({}) + setresgid + setresuid to uid (gid = uid), keeping the permitted capabilities
  // (and raising them as effective) so the session can still create its directories; the caller
  // drops them all right after (DropCapabilities).
  Status SwitchUser(uid_t uid) const;
  // Empties every capability set: bounding (what the zygote kept of it), ambient, inheritable,
  // permitted, effective.
  Status DropCapabilities() const;
  // PR_SET_NO_NEW_PRIVS then Landlock: read-only /usr, /lib*, /bin, /sbin (+ /dev/null
  // read-write), read-write `writable_dir`; everything else denied; TCP bind/connect denied
  // (ABI >= 4); abstract unix sockets and signals scoped to the session's domain (ABI >= 6).
  Status ApplyLandlock(const std::string& writable_dir) const;
  // Installs the prepared seccomp program (deny-list, architecture check).
  Status ApplySeccomp() const;

 private:
  void SetAllZygoteStatuses(const std::string& status);

  std::string landlock_status_;
  std::string seccomp_status_;
  std::string uid_status_;
  std::string zygote_caps_status_ = "off: not applied";
  std::string zygote_uid_status_ = "off: not applied";
  std::string zygote_landlock_status_ = "off: not applied";
  std::string zygote_scope_status_ = "off: not applied";
  std::string zygote_seccomp_status_ = "off: not applied";
  int landlock_abi_ = 0;
  bool can_switch_uid_ = false;
  std::vector<int> read_only_fds_;  // O_PATH directories: /usr, /lib, ...
  int dev_null_fd_ = -1;            // O_PATH /dev/null
  std::vector<int> kept_fds_;
  std::vector<int> bounding_caps_;         // what a session still has to drop from its bounding set
  std::vector<uint64_t> seccomp_program_;  // struct sock_filter[], 8 bytes each
};

// The capabilities the zygote keeps when it starts as root (see README.md, threat model):
//   CAP_SETUID, CAP_SETGID  sessions (and the helpers below) take their family's uid and gid;
//   CAP_DAC_OVERRIDE        the zygote (its own uid) creates, empties and removes directories of
//                           other uids: families' scratch directories, their parent (the
//                           manager's scratch root, root's), the cgroup directories;
//   CAP_KILL                it kills its sessions (other uids) and what they left behind;
//                           Landlock's signal scoping keeps that to its own sessions;
//   CAP_SYS_PTRACE          adopt reads /proc/<copy>/cwd (a session is not dumpable);
//                           Landlock keeps ptrace-mode access to the zygote's own sessions;
//   CAP_SETPCAP             a session empties its bounding set before it runs any code.
inline constexpr int kZygoteCapabilities[] = {CAP_DAC_OVERRIDE, CAP_KILL,    CAP_SETGID,
                                              CAP_SETUID,       CAP_SETPCAP, CAP_SYS_PTRACE};

// Runs fn(arg) in a vfork()ed helper that first takes uid and gid `uid` (no supplementary
// groups). A non-root caller (the confined zygote) keeps its capabilities across that switch; a
// root caller loses them. The helper shares the caller's memory until it exits: fn may only make
// raw system calls and write through arg. Returns the errno of the failed uid switch, else fn's
// result (0 or an errno).
int RunAsUid(uid_t uid, int (*fn)(void*), void* arg);
// Sets the calling thread's effective and permitted capability sets to these masks (bit N:
// capability N) and empties the inheritable one. One raw system call and no allocation, so a
// RunAsUid helper (which shares the caller's memory) and the mount helper may call it; this is
// why capabilities are not handled through libcap's cap_t objects (only their names are, for
// messages). 0 or an errno.
int SetCapabilitySets(uint64_t effective, uint64_t permitted);

// Session uids: each zygote owns a block of 65536 uids, 200000 + (zygote pid % 32768) * 65536,
// and gives family slot N (1..60000) the uid block + N, so families of different zygotes do not
// share a uid either (unless two live zygotes' pids are congruent modulo 32768). Fork copies
// share their family's uid. The highest uid used stays below 2^31.
inline constexpr uid_t kSessionUidBase = 200000;
inline constexpr int kMaxFamilies = 60000;
inline uid_t SessionUidBlock(pid_t zygote_pid) {
  return kSessionUidBase + static_cast<uid_t>(zygote_pid % 32768) * 65536u;
}

}  // namespace envforge::sandbox::worker
