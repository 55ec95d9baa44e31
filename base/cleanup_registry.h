// Temporary paths that must not outlive the process that made them: a bundle being packed
// ("<out>.tmp.<pid>.<n>"), an audit's scratch root (/tmp/envforge-audit-<pid>-<n>).
//
// Every exit path is covered by one of three mechanisms:
//   * normal returns, errors and exceptions: the owner's destructor removes the path (the owner,
//     not this registry, is responsible for that);
//   * SIGINT, SIGTERM, SIGHUP: the handlers of InstallCleanupSignalHandlers() remove every path
//     registered at that moment, then the signal is re-raised with its default action, so the
//     process still ends "killed by signal N";
//   * SIGKILL (and power loss) cannot be caught: the next run sweeps the leftovers of processes
//     that no longer exist (SweepDeadProcessEntries), named after their pid.
//
// The registry is a fixed table of slots read by the signal handler: registering and
// unregistering never allocate under a lock the handler could need, and the handler uses only
// async-signal-safe system calls (unlink, openat, getdents64, unlinkat, close). A path longer than
// PATH_MAX, or one registered while every slot is taken, is simply not cleaned on a signal
// (Register returns 0); the sweep of the next run still finds it.
//
// Thread safety: Register/Unregister from any thread. The handlers are process-wide; only a
// command-line program installs them (a library never does).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace envforge {

enum class CleanupKind {
  kFile,  // unlink the path, and "<path>-journal" (a SQLite rollback journal beside it)
  kTree,  // remove the directory and everything below it, never following symlinks
};

// Registers `path` for removal on a signal. Returns a handle for UnregisterCleanupPath, or 0 when
// the path could not be registered (too long, or all slots taken).
int RegisterCleanupPath(const std::string& path, CleanupKind kind);
// Forgets a registration (0 is ignored). Call it once the path is published or removed.
void UnregisterCleanupPath(int handle);

// Owns one registration.
class ScopedCleanupPath {
 public:
  ScopedCleanupPath() = default;
  ScopedCleanupPath(const std::string& path, CleanupKind kind) : handle_(RegisterCleanupPath(path, kind)) {}
  ~ScopedCleanupPath() { UnregisterCleanupPath(handle_); }
  ScopedCleanupPath(ScopedCleanupPath&& other) noexcept : handle_(other.handle_) { other.handle_ = 0; }
  ScopedCleanupPath& operator=(ScopedCleanupPath&& other) noexcept {
    if (this != &other) {
      UnregisterCleanupPath(handle_);
      handle_ = other.handle_;
      other.handle_ = 0;
    }
    return *this;
  }
  ScopedCleanupPath(const ScopedCleanupPath&) = delete;
  ScopedCleanupPath& operator=(const ScopedCleanupPath&) = delete;
  void Release() {
    UnregisterCleanupPath(handle_);
    handle_ = 0;
  }

 private:
  int handle_ = 0;
};

// Installs the SIGINT, SIGTERM and SIGHUP handlers described above (idempotent).
void InstallCleanupSignalHandlers();

// Removes the entries of directory `dir` for which `owner_of(name)` returns the pid of a process
// that does not exist any more (kill(pid, 0) fails with ESRCH) and that belong to this user
// (files or directories, removed whole). Entries whose owner is alive, unknown (nullopt) or another
// user's are left alone. Returns the number of entries removed; errors are ignored (best effort).
size_t SweepDeadProcessEntries(const std::string& dir,
                               const std::function<std::optional<pid_t>(std::string_view name)>& owner_of);

// Parses the decimal pid at the start of `text` (up to the first non-digit); nullopt when there is
// none or it does not fit a pid. A helper for owner_of functions.
std::optional<pid_t> LeadingPid(std::string_view text);

// The pid of a per-process name "<prefix><pid>-<n>" (n: decimal digits) and, with `bare_pid_too`,
// of "<prefix><pid>" as well; nullopt for any other name. An owner_of for SweepDeadProcessEntries.
std::optional<pid_t> PidOfProcessName(std::string_view name, std::string_view prefix, bool bare_pid_too = false);

}  // namespace envforge
