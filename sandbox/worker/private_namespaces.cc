// The zygote's private IPC and mount namespaces (see private_namespaces.h).
#include "sandbox/worker/private_namespaces.h"

#include <sched.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <vector>

#include "base/fd.h"
#include "sandbox/worker/isolation.h"
#include "sandbox/worker/scratch_dirs.h"

namespace envforge::sandbox::worker {
namespace {

std::string Off(const std::string& what, int error) { return "off: " + what + ": " + std::strerror(error); }

// The ids in `table` (a /proc/sysvipc file) whose owner or creator is `uid`. `cuid_column` is
// the 0-based column of cuid; uid is two columns before it.
std::vector<long> IdsOf(const std::string& table, size_t cuid_column, uid_t uid) {
  std::vector<long> ids;
  auto text = ReadFileToString("/proc/sysvipc/" + table);
  if (!text.ok()) return ids;
  std::istringstream lines(*text);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::vector<std::string> columns;
    for (std::string field; fields >> field;) columns.push_back(field);
    if (columns.size() <= cuid_column) continue;
    auto owner = std::strtoul(columns[cuid_column - 2].c_str(), nullptr, 10);
    auto creator = std::strtoul(columns[cuid_column].c_str(), nullptr, 10);
    if (owner == uid || creator == uid) ids.push_back(std::strtol(columns[1].c_str(), nullptr, 10));
  }
  return ids;
}

struct IpcRemoval {
  std::vector<long> shm, msg, sem;
  int removed = 0;
};

// Runs in a RunAsUid helper: raw system calls only.
int RemoveIpcIds(void* arg) {
  auto* removal = static_cast<IpcRemoval*>(arg);
  for (long id : removal->shm) removal->removed += syscall(SYS_shmctl, id, static_cast<long>(IPC_RMID), 0L) == 0;
  for (long id : removal->msg) removal->removed += syscall(SYS_msgctl, id, static_cast<long>(IPC_RMID), 0L) == 0;
  for (long id : removal->sem) removal->removed += syscall(SYS_semctl, id, 0L, static_cast<long>(IPC_RMID), 0L) == 0;
  return 0;
}

}  // namespace

std::string EnterPrivateIpcNamespace() {
  if (unshare(CLONE_NEWIPC) != 0) return Off("unshare(CLONE_NEWIPC)", errno);
  return "on";
}

std::string EnterPrivateScratch(const std::string& scratch_root) {
  if (unshare(CLONE_NEWNS) != 0) return Off("unshare(CLONE_NEWNS)", errno);
  // The namespace starts as a copy whose mounts share the host's peer groups (systemd makes "/"
  // shared): without this, the tmpfs below would appear on the host too.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return Off("making / a slave mount", errno);
  if (Status made = MakeDirs(scratch_root, 0711, -1); !made.ok()) return "off: " + made.message();
  if (mount("envforge-scratch", scratch_root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0711") != 0) {
    return Off("mounting a tmpfs on " + scratch_root, errno);
  }
  return "on";
}

int RemoveIpcObjectsOf(uid_t uid) {
  IpcRemoval removal;
  removal.shm = IdsOf("shm", 9, uid);
  removal.msg = IdsOf("msg", 9, uid);
  removal.sem = IdsOf("sem", 6, uid);
  if (removal.shm.empty() && removal.msg.empty() && removal.sem.empty()) return 0;
  (void)RunAsUid(uid, RemoveIpcIds, &removal);
  return removal.removed;
}

}  // namespace envforge::sandbox::worker
