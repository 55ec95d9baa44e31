// Kernel cgroups on v1 or v2 (the cgroup files themselves: sandbox/internal/cgroup_files.h).
#include "sandbox/jupyter/kernel_cgroup.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "sandbox/internal/cgroup_files.h"

namespace envforge::sandbox::jupyter {
namespace {

namespace cgroup = internal::cgroup;

constexpr char kGroup[] = "envforge-kernels";

// The hierarchies a kernel's group lives in: v2 one; v1 memory, pids and cpuacct, in that order.
std::vector<std::string> Hierarchies(bool v2) {
  const std::string mount = cgroup::kMount;
  if (v2) return {mount};
  return {mount + "/memory", mount + "/pids", mount + "/cpuacct"};
}

}  // namespace

Result<std::unique_ptr<KernelCgroup>> KernelCgroup::Create(const std::string& name, int64_t memory_bytes,
                                                           int64_t max_processes) {
  std::unique_ptr<KernelCgroup> group(new KernelCgroup());
  group->v2_ = cgroup::IsV2Mount(cgroup::kMount);
  for (const std::string& root : Hierarchies(group->v2_)) {
    if (access((root + "/cgroup.procs").c_str(), W_OK) != 0) {
      return UnavailableError("cgroup: " + root + " is not a writable cgroup hierarchy");
    }
    Status made = cgroup::MakeDir(root + "/" + kGroup);
    if (made.ok() && group->v2_) {
      // Best effort: the controllers must be enabled on every level above the kernel's group.
      (void)cgroup::WriteFile(root + "/cgroup.subtree_control", "+memory +pids +cpu");
      (void)cgroup::WriteFile(root + "/" + kGroup + "/cgroup.subtree_control", "+memory +pids +cpu");
    }
    const std::string dir = root + "/" + kGroup + "/" + name;
    if (made.ok()) made = cgroup::MakeDir(dir);
    if (!made.ok()) return UnavailableError("cgroup: " + made.message());
    group->dirs_.push_back(dir);
    group->procs_.emplace_back(open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!group->procs_.back().valid()) return ErrnoError("cgroup: open " + dir + "/cgroup.procs", errno);
  }
  Status limited = cgroup::SetLimits(group->Group(), memory_bytes, max_processes);
  if (!limited.ok()) return limited.WithContext("cgroup");
  return group;
}

internal::cgroup::Group KernelCgroup::Group() const { return {v2_, dirs_[0], v2_ ? dirs_[0] : dirs_[1]}; }

double KernelCgroup::CpuSeconds() const {
  if (v2_) return static_cast<double>(cgroup::KeyedValue(cgroup::ReadFile(dirs_[0] + "/cpu.stat"), "usage_usec")) / 1e6;
  const std::string text = cgroup::ReadFile(dirs_[2] + "/cpuacct.usage");
  return static_cast<double>(std::atoll(text.c_str())) / 1e9;
}

bool KernelCgroup::OomKilled() const { return cgroup::ReadEvents(Group()).oom_killed; }

bool KernelCgroup::PidsLimited() const { return cgroup::ReadEvents(Group()).pids_limited; }

int64_t KernelCgroup::MemoryBytes() const {
  return std::atoll(cgroup::ReadFile(dirs_[0] + (v2_ ? "/memory.current" : "/memory.usage_in_bytes")).c_str());
}

std::vector<pid_t> KernelCgroup::Pids() const { return cgroup::Procs(Group().pids_dir); }

void KernelCgroup::KillAll() const {
  // Every hierarchy: on v1 a process may sit in the memory group and not yet in the pids one.
  for (const std::string& dir : dirs_) cgroup::KillAll({v2_, dir, dir});
}

KernelCgroup::~KernelCgroup() {
  if (dirs_.empty()) return;
  KillAll();
  procs_.clear();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (const std::string& dir : dirs_) {
    while (rmdir(dir.c_str()) != 0 && errno == EBUSY && std::chrono::steady_clock::now() < deadline) {
      KillAll();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace envforge::sandbox::jupyter
