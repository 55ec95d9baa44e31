// Per-session cgroups (memory + pids) under envforge/<zygote pid>/s<N>, on cgroup v1 (separate
// memory and pids hierarchies) or v2 (one unified hierarchy with both controllers).
//
// Contract: one CgroupSlot per session process. The zygote creates a slot and writes its limits;
// the session joins it itself (writing "0" to the cgroup.procs descriptors the slot carries)
// before it runs any code, or the zygote moves a process in (Move, for fork copies). After the
// session died, Inspect tells which limit was hit, KillAll empties the slot, Release removes it
// (retried later while the kernel still holds it).
// Not thread-safe; the zygote is single-threaded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/status.h"

namespace envforge::sandbox::worker {

struct CgroupSlot {
  std::string name;               // "s12"
  std::vector<std::string> dirs;  // v1: {memory dir, pids dir}; v2: {dir}
  std::vector<UniqueFd> procs;    // cgroup.procs of each dir, opened for writing
  UniqueFd pids_events;           // pids.events (read-only), handed to the session
  bool v2 = false;
};

struct CgroupUsage {
  bool oom_killed = false;    // the memory controller OOM-killed a process (or hit its limit)
  bool pids_limited = false;  // a fork failed at pids.max
};

class Cgroups {
 public:
  // Detects the hierarchy and creates envforge/<zygote_pid>. Never fails: when nothing usable
  // is mounted or writable, enabled() is false and status() says why ("off: <why>").
  static std::unique_ptr<Cgroups> Create(pid_t zygote_pid);
  ~Cgroups();

  bool enabled() const { return enabled_; }
  const std::string& status() const { return status_; }  // "on" or "off: <why>"
  const char* version() const { return v2_ ? "v2" : "v1"; }
  // envforge/<zygote pid> of each hierarchy (empty when disabled).
  const std::vector<std::string>& roots() const { return roots_; }

  // A new slot with its limits written (memory_bytes <= 0 or max_processes <= 0: unlimited).
  Result<CgroupSlot> NewSlot();
  // Writes the slot's limits; the session does it itself, as root, before it drops privileges.
  static Status SetLimits(const CgroupSlot& slot, int64_t memory_bytes, int64_t max_processes);
  // In the session: joins the slot (every hierarchy), then closes the procs descriptors.
  static Status JoinSelf(CgroupSlot& slot);
  // Moves another process into the slot (slow on v1: an RCU grace period per write). With
  // as_uid >= 0 the writes are made by a helper running as that uid (RunAsUid): cgroup v1 lets
  // a non-root writer move only processes of its own uid, and the confined zygote is not root.
  Status Move(const CgroupSlot& slot, pid_t pid, int as_uid = -1);
  CgroupUsage Inspect(const CgroupSlot& slot) const;
  // SIGKILLs every process left in the slot (forks blocked first), a few rounds.
  void KillAll(const CgroupSlot& slot);
  // Removes the slot's directories now, or later (RetryReleases) while they are still busy.
  void Release(CgroupSlot slot);
  void RetryReleases();
  bool has_pending_releases() const { return !pending_.empty(); }
  // Kills everything under envforge/<zygote pid> and removes it.
  void Shutdown();

 private:
  void RemoveStale();

  bool enabled_ = false;
  bool v2_ = false;
  std::string status_;
  std::vector<std::string> roots_;  // v1: {memory root, pids root}; v2: {root}
  uint64_t next_ = 0;
  std::vector<std::vector<std::string>> pending_;
  int release_attempts_ = 0;
};

}  // namespace envforge::sandbox::worker
