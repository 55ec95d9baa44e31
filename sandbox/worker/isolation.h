// The isolation layers a session applies to itself (sandbox/internal/wire.h; real-envs.md §5).
//
// The zygote prepares everything that is costly once (Prepare): the Landlock ABI probe, the
// seccomp program compiled to BPF by libseccomp, descriptors of the read-only directories. A
// session then applies each layer with a handful of system calls, in this order (the caller
// keeps it):  rlimits -> uid/gid -> no_new_privs -> Landlock -> seccomp.
// Every layer that is unavailable on the host is reported "off: <why>", never skipped silently.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace envforge::sandbox::worker {

// The zygote's network: unshare(CLONE_NEWNET) as root, else CLONE_NEWUSER|CLONE_NEWNET (must run
// while single-threaded). The new namespace has only a loopback interface, down. Returns "on"
// or "off: <why>".
std::string EnterEmptyNetworkNamespace();

// Resource limits of one session (LIMITS in wire.h).
struct ResourceLimits {
  int64_t cpu_seconds = 60;
  int64_t memory_bytes = int64_t{512} << 20;
  int64_t max_file_bytes = int64_t{512} << 20;  // RLIMIT_FSIZE
  int64_t max_open_files = 256;                 // RLIMIT_NOFILE
  int64_t max_processes = 16;                   // pids cgroup; RLIMIT_NPROC only without it
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

  // rlimits. RLIMIT_DATA = data_base + 7/8 of memory_bytes: Python's allocator meets it (and
  // raises MemoryError) before the memory cgroup, which also counts the copy-on-write copies of
  // the zygote's pages, OOM-kills the session. RLIMIT_NPROC only when no pids cgroup is in use
  // (it counts per uid, so it then bounds the whole fork family).
  Status ApplyRlimits(const ResourceLimits& limits, int64_t data_base, bool pids_cgroup) const;
  // setgroups({}) + setresgid + setresuid to uid (gid = uid). Must run as root.
  Status SwitchUser(uid_t uid) const;
  // PR_SET_NO_NEW_PRIVS then Landlock: read-only /usr, /lib*, /bin, /sbin (+ /dev/null
  // read-write), read-write `writable_dir`; everything else denied; TCP bind/connect denied
  // (ABI >= 4); abstract unix sockets and signals scoped to the session's domain (ABI >= 6).
  Status ApplyLandlock(const std::string& writable_dir) const;
  // Installs the prepared seccomp program (deny-list, architecture check).
  Status ApplySeccomp() const;

 private:
  std::string landlock_status_;
  std::string seccomp_status_;
  std::string uid_status_;
  int landlock_abi_ = 0;
  bool can_switch_uid_ = false;
  std::vector<int> read_only_fds_;  // O_PATH directories: /usr, /lib, ...
  int dev_null_fd_ = -1;            // O_PATH /dev/null
  std::vector<int> kept_fds_;
  std::vector<uint64_t> seccomp_program_;  // struct sock_filter[], 8 bytes each
};

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
