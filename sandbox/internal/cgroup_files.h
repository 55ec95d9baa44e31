// The cgroup file system, for the two users that put processes into cgroups of their own: the
// worker's session slots (sandbox/worker/cgroups.h, envforge/<zygote pid>/s<N>) and the groups
// of Jupyter kernels and code environments' commands (sandbox/jupyter/kernel_cgroup.h,
// envforge-kernels/<name>). Each keeps its own directory layout and life cycle; what a cgroup
// is (v1 or v2, which file holds a limit or an event, how to empty one) is written here once.
//
// A group is the directory of each controller it uses: on v2 one directory for all of them; on
// v1 one per hierarchy (memory, pids; cpuacct for CPU time).
//
// Thread safety: stateless functions over the file system; callable from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace envforge::sandbox::internal::cgroup {

inline constexpr char kMount[] = "/sys/fs/cgroup";

// True when `path` is a mount of the cgroup v2 (unified) or a cgroup v1 file system.
bool IsV2Mount(const std::string& path);
bool IsV1Mount(const std::string& path);

struct Group {
  bool v2 = false;
  std::string memory_dir;  // v2: the group's only directory
  std::string pids_dir;    // v2: the same directory
};

// One write of `value` to a cgroup file (they take a single write); the error names the path.
Status WriteFile(const std::string& path, std::string_view value);
// The file's text, or "" when it cannot be read (a controller file absent, a removed group).
std::string ReadFile(const std::string& path);
// mkdir 0755; an existing directory is fine.
Status MakeDir(const std::string& path);
// The number after `key` at the start of a line of a flat keyed file (memory.events,
// pids.events, memory.oom_control, cpu.stat), or 0 when absent.
int64_t KeyedValue(const std::string& text, std::string_view key);
// The processes in `dir` (its cgroup.procs).
std::vector<pid_t> Procs(const std::string& dir);

// The memory limit (v2 memory.max, v1 memory.limit_in_bytes), no swap beyond it (v2
// memory.swap.max 0, v1 memory.memsw.limit_in_bytes; best effort: absent without swap
// accounting) and pids.max. memory_bytes or max_processes <= 0: unlimited.
Status SetLimits(const Group& group, int64_t memory_bytes, int64_t max_processes);

struct Events {
  bool oom_killed = false;    // the memory controller OOM-killed a process
  bool pids_limited = false;  // a fork failed at pids.max
};
Events ReadEvents(const Group& group);

// Empties the group: forks are blocked first (pids.max 0, so nothing can race the kill; read
// ReadEvents before), then cgroup.kill on v2, else SIGKILL to every listed process, in rounds
// until none is left (at most 50 rounds, 0.2 ms apart). The group's limits are not restored: it
// is meant to be removed next.
void KillAll(const Group& group);

}  // namespace envforge::sandbox::internal::cgroup
