#include "base/cleanup_registry.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>

namespace envforge {
namespace {

// Slot states. The handler reads a slot only in kRegistered; a writer owns it in kBusy.
constexpr int kFree = 0;
constexpr int kBusy = 1;
constexpr int kRegistered = 2;

constexpr size_t kSlots = 64;
constexpr int kMaxTreeDepth = 48;
constexpr const char kJournalSuffix[] = "-journal";

struct Slot {
  std::atomic<int> state{kFree};
  CleanupKind kind = CleanupKind::kFile;
  char path[PATH_MAX] = {};
};

std::array<Slot, kSlots>& Slots() {
  static std::array<Slot, kSlots> slots;  // constructed before any handler can run (Install reads it)
  return slots;
}

// ---- Async-signal-safe removal ------------------------------------------------------------------

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

bool IsDotOrDotDot(const char* name) {
  return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

// Removes `name` under `dir_fd`: a file or symlink by unlink, a directory by emptying it through a
// descriptor opened with O_NOFOLLOW (a symlink swapped in is removed itself, never followed).
void RemoveTreeAt(int dir_fd, const char* name, int depth) {
  if (::unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT) return;
  if (depth >= kMaxTreeDepth) return;
  int fd = ::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buffer[2048];
  // Removing entries while reading a directory may make getdents skip some: read it again from
  // the start until a pass removes nothing.
  for (int pass = 0; pass < 16; ++pass) {
    if (::lseek(fd, 0, SEEK_SET) != 0) break;
    bool removed_any = false;
    while (true) {
      long bytes = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer);
      if (bytes <= 0) break;
      for (long at = 0; at < bytes;) {
        auto* entry = reinterpret_cast<LinuxDirent64*>(buffer + at);
        at += entry->d_reclen;
        if (IsDotOrDotDot(entry->d_name)) continue;
        RemoveTreeAt(fd, entry->d_name, depth + 1);
        removed_any = true;
      }
    }
    if (!removed_any) break;
  }
  ::close(fd);
  ::unlinkat(dir_fd, name, AT_REMOVEDIR);
}

void RemoveFileAndJournal(const char* path) {
  ::unlink(path);
  char journal[PATH_MAX + sizeof kJournalSuffix];
  size_t length = 0;
  while (path[length] != '\0' && length < PATH_MAX) {
    journal[length] = path[length];
    ++length;
  }
  for (size_t i = 0; i < sizeof kJournalSuffix; ++i) journal[length + i] = kJournalSuffix[i];
  ::unlink(journal);
}

void CleanupOnSignal(int signal_number) {
  int saved_errno = errno;
  for (Slot& slot : Slots()) {
    if (slot.state.load(std::memory_order_acquire) != kRegistered) continue;
    if (slot.kind == CleanupKind::kFile) {
      RemoveFileAndJournal(slot.path);
    } else {
      RemoveTreeAt(AT_FDCWD, slot.path, 0);
    }
  }
  errno = saved_errno;
  // SA_RESETHAND restored the default action on entry; the signal is blocked until this handler
  // returns, then it ends the process as it would have without the handler.
  ::raise(signal_number);
}

}  // namespace

int RegisterCleanupPath(const std::string& path, CleanupKind kind) {
  if (path.empty() || path.size() >= PATH_MAX) return 0;
  auto& slots = Slots();
  for (size_t i = 0; i < slots.size(); ++i) {
    int expected = kFree;
    if (!slots[i].state.compare_exchange_strong(expected, kBusy, std::memory_order_acq_rel)) continue;
    slots[i].kind = kind;
    std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
    slots[i].state.store(kRegistered, std::memory_order_release);
    return static_cast<int>(i) + 1;
  }
  return 0;
}

void UnregisterCleanupPath(int handle) {
  if (handle <= 0 || static_cast<size_t>(handle) > kSlots) return;
  // The path bytes are left as they are: a handler that saw kRegistered just before may still be
  // reading them; they are overwritten only by a later Register, which takes the slot first.
  Slots()[static_cast<size_t>(handle) - 1].state.store(kFree, std::memory_order_release);
}

void InstallCleanupSignalHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    (void)Slots();
    for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction current {};
      if (::sigaction(signal_number, nullptr, &current) != 0) continue;
      // A signal ignored by whoever started us (nohup, a background job) stays ignored.
      if (current.sa_handler == SIG_IGN) continue;
      struct sigaction action {};
      action.sa_handler = CleanupOnSignal;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESETHAND;
      ::sigaction(signal_number, &action, nullptr);
    }
  });
}

std::optional<pid_t> LeadingPid(std::string_view text) {
  size_t digits = 0;
  long long value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    value = value * 10 + (text[digits] - '0');
    if (value > INT_MAX) return std::nullopt;
    ++digits;
  }
  if (digits == 0 || value <= 0) return std::nullopt;
  return static_cast<pid_t>(value);
}

std::optional<pid_t> PidOfProcessName(std::string_view name, std::string_view prefix, bool bare_pid_too) {
  if (!name.starts_with(prefix)) return std::nullopt;
  std::string_view rest = name.substr(prefix.size());
  auto pid = LeadingPid(rest);
  if (!pid) return std::nullopt;
  std::string_view after = rest.substr(std::to_string(*pid).size());
  if (after.empty()) return bare_pid_too ? pid : std::nullopt;
  bool counter =
      after.size() >= 2 && after[0] == '-' && after.find_first_not_of("0123456789", 1) == std::string_view::npos;
  return counter ? pid : std::nullopt;
}

size_t SweepDeadProcessEntries(const std::string& dir,
                               const std::function<std::optional<pid_t>(std::string_view name)>& owner_of) {
  namespace fs = std::filesystem;
  std::error_code ec;
  size_t removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::optional<pid_t> owner = owner_of(name);
    if (!owner || *owner == ::getpid()) continue;
    if (::kill(*owner, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge (EPERM)
    struct stat info {};
    if (::lstat(it->path().c_str(), &info) != 0 || info.st_uid != ::geteuid()) continue;
    std::error_code remove_error;
    if (fs::remove_all(it->path(), remove_error) > 0 && !remove_error) ++removed;
  }
  return removed;
}

}  // namespace envforge
