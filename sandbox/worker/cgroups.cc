// cgroup v1/v2 slots for sessions (see cgroups.h).
#include "sandbox/worker/cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/internal/cgroup_files.h"
#include "sandbox/worker/isolation.h"
#include "sandbox/worker/scratch_dirs.h"

namespace envforge::sandbox::worker {
namespace {

namespace cgroup = internal::cgroup;
using cgroup::MakeDir;
using cgroup::ReadFile;
using cgroup::WriteFile;

// The slot's directories as the cgroup library names them.
cgroup::Group GroupOf(const CgroupSlot& slot) { return {slot.v2, slot.dirs.front(), slot.dirs.back()}; }

}  // namespace

std::unique_ptr<Cgroups> Cgroups::Create(pid_t zygote_pid) {
  auto cgroups = std::unique_ptr<Cgroups>(new Cgroups());
  std::string base = cgroup::kMount;
  std::string leaf = "envforge/" + std::to_string(zygote_pid);
  auto fail = [&](const Status& why) {
    cgroups->enabled_ = false;
    cgroups->roots_.clear();
    cgroups->status_ = "off: " + why.message();
    return std::move(cgroups);
  };
  if (cgroup::IsV2Mount(base)) {
    cgroups->v2_ = true;
    std::string controllers = ReadFile(base + "/cgroup.controllers");
    if (controllers.find("memory") == std::string::npos || controllers.find("pids") == std::string::npos) {
      return fail(FailedPreconditionError("cgroup v2 at /sys/fs/cgroup lacks the memory or pids controller"));
    }
    // Leaves hold processes; every level above delegates both controllers.
    if (Status s = WriteFile(base + "/cgroup.subtree_control", "+memory +pids"); !s.ok()) return fail(s);
    if (Status s = MakeDir(base + "/envforge"); !s.ok()) return fail(s);
    if (Status s = WriteFile(base + "/envforge/cgroup.subtree_control", "+memory +pids"); !s.ok()) return fail(s);
    if (Status s = MakeDir(base + "/" + leaf); !s.ok()) return fail(s);
    if (Status s = WriteFile(base + "/" + leaf + "/cgroup.subtree_control", "+memory +pids"); !s.ok()) return fail(s);
    cgroups->roots_ = {base + "/" + leaf};
  } else {
    std::string memory = base + "/memory";
    std::string pids = base + "/pids";
    if (!cgroup::IsV1Mount(memory) || !cgroup::IsV1Mount(pids)) {
      return fail(FailedPreconditionError(
          "neither cgroup v2 at /sys/fs/cgroup nor v1 memory and pids hierarchies are mounted"));
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
  return cgroup::SetLimits(GroupOf(slot), memory_bytes, max_processes);
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
    for (const std::string& dir : slot.dirs) ENVFORGE_RETURN_IF_ERROR(WriteFile(dir + "/cgroup.procs", text));
    return Status::Ok();
  }
  // Everything the helper needs is prepared here: it may only make raw system calls.
  struct Writes {
    std::vector<std::string> paths;
    const std::string* text;
    size_t failed = 0;
  } writes{{}, &text, 0};
  for (const std::string& dir : slot.dirs) writes.paths.push_back(dir + "/cgroup.procs");
  int error = RunAsUid(
      static_cast<uid_t>(as_uid),
      [](void* arg) -> int {
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
      },
      &writes);
  if (error != 0) {
    return ErrnoError("write " + (writes.paths.empty() ? std::string("cgroup.procs") : writes.paths[writes.failed]),
                      error);
  }
  return Status::Ok();
}

CgroupUsage Cgroups::Inspect(const CgroupSlot& slot) const {
  if (slot.dirs.empty()) return {};
  cgroup::Events events = cgroup::ReadEvents(GroupOf(slot));
  return {events.oom_killed, events.pids_limited};
}

void Cgroups::KillAll(const CgroupSlot& slot) {
  if (!slot.dirs.empty()) cgroup::KillAll(GroupOf(slot));
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
      if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        stale.push_back(parent + "/" + entry->d_name);
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
        slot.v2 = v2_;
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
      slot.v2 = v2_;
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
