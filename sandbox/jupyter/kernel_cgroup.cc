// Kernel cgroups on v1 or v2.
#include "sandbox/jupyter/kernel_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <sstream>
#include <thread>

namespace envforge::sandbox::jupyter {
namespace {

constexpr long kCgroup2Magic = 0x63677270;
constexpr char kMount[] = "/sys/fs/cgroup";
constexpr char kGroup[] = "envforge-kernels";

bool IsCgroup2(const std::string& path) {
  struct statfs info {};
  return statfs(path.c_str(), &info) == 0 && static_cast<long>(info.f_type) == kCgroup2Magic;
}

// The file's text, or "" when it cannot be read (a controller file of a removed group).
std::string ReadFile(const std::string& path) {
  Result<std::string> text = ReadFileToString(path);
  return text.ok() ? *text : std::string();
}

Status WriteFile(const std::string& path, const std::string& value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("cgroup: open " + path, errno);
  if (write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return ErrnoError("cgroup: write " + value + " to " + path, errno);
  }
  return Status::Ok();
}

// The number after `key` in a "key value" per line file, or -1.
int64_t KeyedValue(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string name;
  int64_t value = 0;
  while (lines >> name >> value) {
    if (name == key) return value;
  }
  return -1;
}

Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("cgroup: mkdir " + path, errno);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<KernelCgroup>> KernelCgroup::Create(const std::string& name, int64_t memory_bytes,
                                                           int64_t max_processes) {
  std::unique_ptr<KernelCgroup> group(new KernelCgroup());
  group->v2_ = IsCgroup2(kMount);
  const std::vector<std::string> hierarchies =
      group->v2_ ? std::vector<std::string>{kMount}
                 : std::vector<std::string>{std::string(kMount) + "/memory", std::string(kMount) + "/pids",
                                            std::string(kMount) + "/cpuacct"};
  for (const std::string& root : hierarchies) {
    if (access((root + "/cgroup.procs").c_str(), W_OK) != 0) {
      return UnavailableError("cgroup: " + root + " is not a writable cgroup hierarchy");
    }
    Status made = MakeDir(root + "/" + kGroup);
    if (made.ok() && group->v2_) {
      // Best effort: the controllers must be enabled on every level above the kernel's group.
      (void)WriteFile(root + "/cgroup.subtree_control", "+memory +pids +cpu");
      (void)WriteFile(root + "/" + kGroup + "/cgroup.subtree_control", "+memory +pids +cpu");
    }
    const std::string dir = root + "/" + kGroup + "/" + name;
    if (made.ok()) made = MakeDir(dir);
    if (!made.ok()) return UnavailableError(made.message());
    group->dirs_.push_back(dir);
    group->procs_.emplace_back(open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!group->procs_.back().valid()) return ErrnoError("cgroup: open " + dir + "/cgroup.procs", errno);
  }
  const std::string memory_dir = group->Dir("memory");
  const std::string pids_dir = group->Dir("pids");
  if (memory_bytes > 0) {
    ENVFORGE_RETURN_IF_ERROR(WriteFile(memory_dir + (group->v2_ ? "/memory.max" : "/memory.limit_in_bytes"),
                                       std::to_string(memory_bytes)));
    if (group->v2_) (void)WriteFile(memory_dir + "/memory.swap.max", "0");
    else (void)WriteFile(memory_dir + "/memory.memsw.limit_in_bytes", std::to_string(memory_bytes));
  }
  if (max_processes > 0) ENVFORGE_RETURN_IF_ERROR(WriteFile(pids_dir + "/pids.max", std::to_string(max_processes)));
  return group;
}

std::string KernelCgroup::Dir(const char* controller) const {
  if (v2_) return dirs_[0];
  const std::string what = controller;
  return what == "memory" ? dirs_[0] : what == "pids" ? dirs_[1] : dirs_[2];
}

double KernelCgroup::CpuSeconds() const {
  if (v2_) return static_cast<double>(std::max<int64_t>(0, KeyedValue(ReadFile(Dir("cpu") + "/cpu.stat"), "usage_usec"))) / 1e6;
  const std::string text = ReadFile(Dir("cpuacct") + "/cpuacct.usage");
  return text.empty() ? 0.0 : static_cast<double>(std::stoll(text)) / 1e9;
}

bool KernelCgroup::OomKilled() const {
  if (v2_) return KeyedValue(ReadFile(Dir("memory") + "/memory.events"), "oom_kill") > 0;
  return KeyedValue(ReadFile(Dir("memory") + "/memory.oom_control"), "oom_kill") > 0;
}

bool KernelCgroup::PidsLimited() const {
  return KeyedValue(ReadFile(Dir("pids") + "/pids.events"), "max") > 0;
}

int64_t KernelCgroup::MemoryBytes() const {
  return std::atoll(ReadFile(Dir("memory") + (v2_ ? "/memory.current" : "/memory.usage_in_bytes")).c_str());
}

std::vector<pid_t> KernelCgroup::Pids() const {
  std::vector<pid_t> pids;
  std::istringstream listed(ReadFile(Dir("pids") + "/cgroup.procs"));
  pid_t pid = 0;
  while (listed >> pid) pids.push_back(pid);
  return pids;
}

void KernelCgroup::KillAll() const {
  if (v2_ && WriteFile(dirs_[0] + "/cgroup.kill", "1").ok()) return;
  for (int round = 0; round < 5; ++round) {
    bool any = false;
    for (const std::string& dir : dirs_) {
      std::istringstream pids(ReadFile(dir + "/cgroup.procs"));
      pid_t pid = 0;
      while (pids >> pid) {
        any = true;
        kill(pid, SIGKILL);
      }
    }
    if (!any) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
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
