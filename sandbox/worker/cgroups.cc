// cgroup v1/v2 slots for sessions (see cgroups.h).
#include "sandbox/worker/cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "sandbox/worker/isolation.h"
#include "sandbox/worker/scratch_dirs.h"

namespace envforge::sandbox::worker {
namespace {

constexpr long kCgroup2Magic = 0x63677270;
constexpr long kCgroup1Magic = 0x27e0eb;
constexpr char kMount[] = "/sys/fs/cgroup";

bool IsMount(const std::string& path, long magic) {
  struct statfs info {};
  return statfs(path.c_str(), &info) == 0 && static_cast<long>(info.f_type) == magic;
}

Status WriteValue(const std::string& path, std::string_view value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open " + path, errno);
  if (write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return ErrnoError("write " + path, errno);
  }
  return Status::Ok();
}

std::string ReadValue(const std::string& path) {
  auto text = ReadFileToString(path);
  return text.ok() ? *text : std::string();
}

// "key N" in a flat keyed file (memory.events, pids.events, memory.oom_control).
long long KeyedValue(const std::string& text, std::string_view key) {
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string::npos) {
    bool line_start = at == 0 || text[at - 1] == '\n';
    size_t after = at + key.size();
    if (line_start && after < text.size() && text[after] == ' ') return std::atoll(text.c_str() + after + 1);
    at = after;
  }
  return 0;
}

Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("mkdir " + path, errno);
  return Status::Ok();
}

std::vector<pid_t> Procs(const std::string& dir) {
  std::vector<pid_t> pids;
  std::string text = ReadValue(dir + "/cgroup.procs");
  const char* p = text.c_str();
  while (*p) {
    char* end = nullptr;
    long pid = std::strtol(p, &end, 10);
    if (end == p) break;
    if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
    p = end;
    while (*p == '\n') ++p;
  }
  return pids;
}

}  // namespace

std::unique_ptr<Cgroups> Cgroups::Create(pid_t zygote_pid) {
  auto cgroups = std::unique_ptr<Cgroups>(new Cgroups());
  std::string base = std::string(kMount);
  std::string leaf = "envforge/" + std::to_string(zygote_pid);
  auto fail = [&](const Status& why) {
    cgroups->enabled_ = false;
    cgroups->roots_.clear();
    cgroups->status_ = "off: " + why.message();
    return std::move(cgroups);
  };
  if (IsMount(base, kCgroup2Magic)) {
    cgroups->v2_ = true;
    std::string controllers = ReadValue(base + "/cgroup.controllers");
    if (controllers.find("memory") == std::string::npos || controllers.find("pids") == std::string::npos) {
      return fail(FailedPreconditionError("cgroup v2 at /sys/fs/cgroup lacks the memory or pids controller"));
    }
    // Leaves hold processes; every level above delegates both controllers.
    if (Status s = WriteValue(base + "/cgroup.subtree_control", "+memory +pids"); !s.ok()) return fail(s);
    if (Status s = MakeDir(base + "/envforge"); !s.ok()) return fail(s);
    if (Status s = WriteValue(base + "/envforge/cgroup.subtree_control", "+memory +pids"); !s.ok()) return fail(s);
    if (Status s = MakeDir(base + "/" + leaf); !s.ok()) return fail(s);
    if (Status s = WriteValue(base + "/" + leaf + "/cgroup.subtree_control", "+memory +pids"); !s.ok()) return fail(s);
    cgroups->roots_ = {base + "/" + leaf};
  } else {
    std::string memory = base + "/memory";
    std::string pids = base + "/pids";
    if (!IsMount(memory, kCgroup1Magic) || !IsMount(pids, kCgroup1Magic)) {
      return fail(FailedPreconditionError("neither cgroup v2 at /sys/fs/cgroup nor v1 memory and pids hierarchies are mounted"));
    }
    for (const std::string& root : {memory, pids}) {
      if (Status s = MakeDir(root + "/envforge"); !s.ok()) return fail(s);
      if (Status s = MakeDir(root + "/" + leaf); !s.ok()) return fail(s);
      cgroups->roots_.push_back(root + "/" + leaf);
    }
  }
  cgroups->enabled_ = true;
  cgroups->status_ = "on";
  cgroups->RemoveStale();
  return cgroups;
}

Cgroups::~Cgroups() = default;

Result<CgroupSlot> Cgroups::NewSlot() {
  if (!enabled_) return FailedPreconditionError("cgroups are off");
  CgroupSlot slot;
  slot.name = "s" + std::to_string(next_++);
  slot.v2 = v2_;
  for (const std::string& root : roots_) {
    std::string dir = root + "/" + slot.name;
    if (mkdir(dir.c_str(), 0755) != 0) {
      Status error = ErrnoError("mkdir " + dir, errno);
      for (const std::string& made : slot.dirs) rmdir(made.c_str());
      return error;
    }
    slot.dirs.push_back(dir);
    UniqueFd procs(open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!procs.valid()) return ErrnoError("open " + dir + "/cgroup.procs", errno);
    slot.procs.push_back(std::move(procs));
  }
  const std::string& pids_dir = slot.dirs.back();  // v1: the pids hierarchy; v2: the only one
  slot.pids_events.Reset(open((pids_dir + "/pids.events").c_str(), O_RDONLY | O_CLOEXEC));
  return slot;
}

Status Cgroups::SetLimits(const CgroupSlot& slot, int64_t memory_bytes, int64_t max_processes) {
  std::string memory = memory_bytes > 0 ? std::to_string(memory_bytes) : (slot.v2 ? "max" : "-1");
  std::string pids = max_processes > 0 ? std::to_string(max_processes) : "max";
  if (slot.v2) {
    ENVFORGE_RETURN_IF_ERROR(WriteValue(slot.dirs[0] + "/memory.max", memory));
    (void)WriteValue(slot.dirs[0] + "/memory.swap.max", "0");  // absent without swap accounting
    return WriteValue(slot.dirs[0] + "/pids.max", pids);
  }
  ENVFORGE_RETURN_IF_ERROR(WriteValue(slot.dirs[0] + "/memory.limit_in_bytes", memory));
  return WriteValue(slot.dirs[1] + "/pids.max", pids);
}

Status Cgroups::JoinSelf(CgroupSlot& slot) {
  for (UniqueFd& procs : slot.procs) {
    if (write(procs.get(), "0", 1) != 1) return ErrnoError("joining the session cgroup", errno);
    procs.Reset();
  }
  return Status::Ok();
}

Status Cgroups::Move(const CgroupSlot& slot, pid_t pid, int as_uid) {
  std::string text = std::to_string(pid);
  if (as_uid < 0) {
    for (const std::string& dir : slot.dirs) ENVFORGE_RETURN_IF_ERROR(WriteValue(dir + "/cgroup.procs", text));
    return Status::Ok();
  }
  // Everything the helper needs is prepared here: it may only make raw system calls.
  struct Writes {
    std::vector<std::string> paths;
    const std::string* text;
    size_t failed = 0;
  } writes{{}, &text, 0};
  for (const std::string& dir : slot.dirs) writes.paths.push_back(dir + "/cgroup.procs");
  int error = RunAsUid(static_cast<uid_t>(as_uid), [](void* arg) -> int {
    auto* w = static_cast<Writes*>(arg);
    for (size_t i = 0; i < w->paths.size(); ++i) {
      long fd = syscall(SYS_openat, AT_FDCWD, w->paths[i].c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        w->failed = i;
        return errno;
      }
      long n = syscall(SYS_write, fd, w->text->data(), w->text->size());
      int write_error = errno;
      syscall(SYS_close, fd);
      if (n != static_cast<long>(w->text->size())) {
        w->failed = i;
        return n < 0 ? write_error : EIO;
      }
    }
    return 0;
  }, &writes);
  if (error != 0) {
    return ErrnoError("write " + (writes.paths.empty() ? std::string("cgroup.procs") : writes.paths[writes.failed]),
                      error);
  }
  return Status::Ok();
}

CgroupUsage Cgroups::Inspect(const CgroupSlot& slot) const {
  CgroupUsage usage;
  if (slot.dirs.empty()) return usage;
  if (v2_) {
    usage.oom_killed = KeyedValue(ReadValue(slot.dirs[0] + "/memory.events"), "oom_kill") > 0;
    usage.pids_limited = KeyedValue(ReadValue(slot.dirs[0] + "/pids.events"), "max") > 0;
  } else {
    usage.oom_killed = KeyedValue(ReadValue(slot.dirs[0] + "/memory.oom_control"), "oom_kill") > 0;
    usage.pids_limited = KeyedValue(ReadValue(slot.dirs[1] + "/pids.events"), "max") > 0;
  }
  return usage;
}

void Cgroups::KillAll(const CgroupSlot& slot) {
  if (slot.dirs.empty()) return;
  const std::string& pids_dir = slot.dirs.back();
  (void)WriteValue(pids_dir + "/pids.max", "0");  // nothing left in there may fork any more
  if (v2_ && WriteValue(pids_dir + "/cgroup.kill", "1").ok()) return;
  for (int round = 0; round < 50; ++round) {
    std::vector<pid_t> pids = Procs(pids_dir);
    if (pids.empty()) return;
    for (pid_t pid : pids) kill(pid, SIGKILL);
    timespec pause{0, 200000};  // 0.2 ms: let the kernel deliver before the next look
    nanosleep(&pause, nullptr);
  }
}

void Cgroups::Release(CgroupSlot slot) {
  slot.procs.clear();
  slot.pids_events.Reset();
  std::vector<std::string> busy;
  for (const std::string& dir : slot.dirs) {
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) busy.push_back(dir);
  }
  if (!busy.empty()) pending_.push_back(std::move(busy));
}

void Cgroups::RetryReleases() {
  std::vector<std::vector<std::string>> still;
  // A directory the kernel keeps busy for minutes is left to the next zygote's stale sweep.
  if (++release_attempts_ > 600) {
    pending_.clear();
    release_attempts_ = 0;
    return;
  }
  for (auto& dirs : pending_) {
    std::vector<std::string> busy;
    for (const std::string& dir : dirs) {
      if (rmdir(dir.c_str()) != 0 && errno != ENOENT) busy.push_back(dir);
    }
    if (!busy.empty()) still.push_back(std::move(busy));
  }
  pending_ = std::move(still);
  if (pending_.empty()) release_attempts_ = 0;
}

void Cgroups::RemoveStale() {
  // envforge/<pid> of a zygote that is gone (killed without a shutdown): kill what it left
  // running (its sessions' own children outlive it otherwise) and remove the directories.
  for (const std::string& root : roots_) {
    std::string parent = ParentDir(root);
    DIR* dir = opendir(parent.c_str());
    if (dir == nullptr) continue;
    std::vector<std::string> stale;
    while (dirent* entry = readdir(dir)) {
      if (entry->d_type != DT_DIR || entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
      long pid = std::strtol(entry->d_name, nullptr, 10);
      if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(parent + "/" + entry->d_name);
    }
    closedir(dir);
    for (const std::string& zygote_dir : stale) {
      DIR* slots = opendir(zygote_dir.c_str());
      if (slots == nullptr) continue;
      std::vector<std::string> children;
      while (dirent* entry = readdir(slots)) {
        if (entry->d_type == DT_DIR && entry->d_name[0] != '.') children.push_back(zygote_dir + "/" + entry->d_name);
      }
      closedir(slots);
      for (const std::string& child : children) {
        CgroupSlot slot;
        slot.dirs = {child};
        KillAll(slot);
        rmdir(child.c_str());
      }
      rmdir(zygote_dir.c_str());
    }
  }
}

void Cgroups::Shutdown() {
  if (!enabled_) return;
  for (const std::string& root : roots_) {
    DIR* dir = opendir(root.c_str());
    if (dir == nullptr) continue;
    std::vector<std::string> children;
    while (dirent* entry = readdir(dir)) {
      if (entry->d_type == DT_DIR && entry->d_name[0] != '.') children.push_back(root + "/" + entry->d_name);
    }
    closedir(dir);
    for (const std::string& child : children) {
      CgroupSlot slot;
      slot.dirs = {child};
      KillAll(slot);
    }
  }
  // Dead processes leave their cgroup when reaped: the caller reaps, then calls RetryReleases.
  for (const std::string& root : roots_) {
    DIR* dir = opendir(root.c_str());
    if (dir == nullptr) continue;
    std::vector<std::string> children;
    while (dirent* entry = readdir(dir)) {
      if (entry->d_type == DT_DIR && entry->d_name[0] != '.') children.push_back(root + "/" + entry->d_name);
    }
    closedir(dir);
    for (const std::string& child : children) {
      if (rmdir(child.c_str()) != 0 && errno != ENOENT) pending_.push_back({child});
    }
  }
  pending_.push_back({roots_.begin(), roots_.end()});
}

}  // namespace envforge::sandbox::worker
