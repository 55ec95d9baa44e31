// The kernels' janitor process.
#include "sandbox/jupyter/kernel_janitor.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <set>

namespace envforge::sandbox::jupyter {
namespace {

// $1: the owner's name prefix ("<pid>-k"); $2: the scratch root. Kills in rounds (a fork may
// race a kill), then removes the cgroups (v1: every hierarchy; v2: the unified one) and the
// kernels' directories.
constexpr char kScript[] = R"(read -r _ignored
prefix="$1"; root="$2"
groups() { for d in /sys/fs/cgroup/*/envforge-kernels/"$prefix"* /sys/fs/cgroup/envforge-kernels/"$prefix"*; do [ -d "$d" ] && echo "$d"; done; }
round=0
while [ $round -lt 20 ]; do
  found=
  for d in $(groups); do
    for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; found=1; done
  done
  [ -z "$found" ] && break
  round=$((round + 1))
  sleep 0.1
done
for d in $(groups); do rmdir "$d" 2>/dev/null; done
rm -rf "$root/$prefix"*
)";

}  // namespace

std::string KernelNamePrefix() { return std::to_string(getpid()) + "-k"; }

Status EnsureKernelJanitor(const std::filesystem::path& scratch_root) {
  static std::mutex mu;
  static std::set<std::string> started;
  std::lock_guard<std::mutex> lock(mu);
  if (started.count(scratch_root.string())) return Status::Ok();
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) return ErrnoError("kernel janitor: pipe", errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, ends[0], 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);  // no terminal signal reaches it
  const std::string prefix = KernelNamePrefix();
  const std::string root = scratch_root.string();
  const char* argv[] = {"/bin/sh", "-c", kScript, "envforge-kernel-janitor", prefix.c_str(), root.c_str(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, "/bin/sh", &actions, &attributes, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(ends[0]);
  if (spawned != 0) {
    close(ends[1]);
    return ErrnoError("kernel janitor: spawn /bin/sh", spawned);
  }
  // The write end stays open (close-on-exec) for the life of this process: its end is the signal.
  // The janitor is not waited for: when it exits after this process, init reaps it.
  started.insert(root);
  return Status::Ok();
}

}  // namespace envforge::sandbox::jupyter
