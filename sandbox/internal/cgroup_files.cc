// The cgroup file system (see cgroup_files.h).
#include "sandbox/internal/cgroup_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>

#include "base/fd.h"

namespace envforge::sandbox::internal::cgroup {
namespace {

constexpr long kCgroup2Magic = 0x63677270;
constexpr long kCgroup1Magic = 0x27e0eb;

bool IsMount(const std::string& path, long magic) {
  struct statfs info {};
  return statfs(path.c_str(), &info) == 0 && static_cast<long>(info.f_type) == magic;
}

}  // namespace

bool IsV2Mount(const std::string& path) { return IsMount(path, kCgroup2Magic); }
bool IsV1Mount(const std::string& path) { return IsMount(path, kCgroup1Magic); }

Status WriteFile(const std::string& path, std::string_view value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open " + path, errno);
  if (write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return ErrnoError("write " + std::string(value) + " to " + path, errno);
  }
  return Status::Ok();
}

std::string ReadFile(const std::string& path) {
  auto text = ReadFileToString(path);
  return text.ok() ? *text : std::string();
}

Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("mkdir " + path, errno);
  return Status::Ok();
}

int64_t KeyedValue(const std::string& text, std::string_view key) {
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string::npos) {
    bool line_start = at == 0 || text[at - 1] == '\n';
    size_t after = at + key.size();
    if (line_start && after < text.size() && text[after] == ' ') return std::atoll(text.c_str() + after + 1);
    at = after;
  }
  return 0;
}

std::vector<pid_t> Procs(const std::string& dir) {
  std::vector<pid_t> pids;
  std::string text = ReadFile(dir + "/cgroup.procs");
  const char* p = text.c_str();
  for (char* end = nullptr;; p = end) {
    long pid = std::strtol(p, &end, 10);
    if (end == p) break;
    if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

Status SetLimits(const Group& group, int64_t memory_bytes, int64_t max_processes) {
  std::string memory = memory_bytes > 0 ? std::to_string(memory_bytes) : (group.v2 ? "max" : "-1");
  std::string pids = max_processes > 0 ? std::to_string(max_processes) : "max";
  if (group.v2) {
    ENVFORGE_RETURN_IF_ERROR(WriteFile(group.memory_dir + "/memory.max", memory));
    (void)WriteFile(group.memory_dir + "/memory.swap.max", "0");
  } else {
    ENVFORGE_RETURN_IF_ERROR(WriteFile(group.memory_dir + "/memory.limit_in_bytes", memory));
    // memsw may never be below the memory limit: only a finite one has a finite twin.
    if (memory_bytes > 0) (void)WriteFile(group.memory_dir + "/memory.memsw.limit_in_bytes", memory);
  }
  return WriteFile(group.pids_dir + "/pids.max", pids);
}

Events ReadEvents(const Group& group) {
  Events events;
  const char* oom_file = group.v2 ? "/memory.events" : "/memory.oom_control";
  events.oom_killed = KeyedValue(ReadFile(group.memory_dir + oom_file), "oom_kill") > 0;
  events.pids_limited = KeyedValue(ReadFile(group.pids_dir + "/pids.events"), "max") > 0;
  return events;
}

void KillAll(const Group& group) {
  (void)WriteFile(group.pids_dir + "/pids.max", "0");  // nothing left in there may fork any more
  if (group.v2 && WriteFile(group.pids_dir + "/cgroup.kill", "1").ok()) return;
  for (int round = 0; round < 50; ++round) {
    std::vector<pid_t> pids = Procs(group.pids_dir);
    if (pids.empty()) return;
    for (pid_t pid : pids) kill(pid, SIGKILL);
    timespec pause{0, 200000};  // 0.2 ms: let the kernel deliver before the next look
    nanosleep(&pause, nullptr);
  }
}

}  // namespace envforge::sandbox::internal::cgroup
