// The mounter: a helper process that mounts each session family's disk budget, a size-limited
// tmpfs on the family's scratch directory, inside the zygote's private mount namespace
// (private_namespaces.h).
//
// The confined zygote cannot mount (no CAP_SYS_ADMIN; seccomp denies the mount family), so it
// forks this helper in its trusted start-up phase, before ConfineZygote: root, only
// CAP_SYS_ADMIN left, no_new_privs, outside the zygote's Landlock domain (the zygote can neither
// ptrace it nor, with Landlock scoping, signal it). It serves one request at a time on a
// SOCK_SEQPACKET socket and trusts nothing in them:
//   mount    a new directory (mkdir by the helper: it must not exist) whose parent is reached
//            from the scratch root without symlinks, magic links or mount crossings; a tmpfs
//            of `bytes` (size) and bytes/4 KiB inodes (at least 1024), root directory owned by
//            a family uid (the zygote's family range only), mode 0700, nosuid, nodev; attached
//            through the new mount API to that directory's descriptor (no path re-lookup);
//   unmount  only a directory this helper mounted: detached, then the empty directory removed.
// At most kMaxFamilies mounts at once. It exits when the zygote closes the socket or dies
// (PR_SET_PDEATHSIG); the namespace, and every tmpfs in it, goes with the zygote's last process.
//
// Errors come back as an errno, turned into a Status naming the directory.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/fd.h"
#include "base/status.h"

namespace envforge::sandbox::worker {

class ScratchMounter {
 public:
  // Forks the helper. Must run single-threaded, as root, in the private mount namespace whose
  // tmpfs is mounted on `scratch_root`, before the zygote confines itself.
  static Result<std::unique_ptr<ScratchMounter>> Start(const std::string& scratch_root, uid_t family_uid_first,
                                                       uid_t family_uid_last);
  // Closes the channel and reaps the helper (unless Forget() said it is gone).
  ~ScratchMounter();
  ScratchMounter(const ScratchMounter&) = delete;
  ScratchMounter& operator=(const ScratchMounter&) = delete;

  // Creates `dir` and mounts a tmpfs of `bytes` on it, owned by `uid`.
  Status Mount(const std::string& dir, uid_t uid, int64_t bytes);
  // Unmounts what Mount put on `dir` and removes the directory.
  Status Unmount(const std::string& dir);

  pid_t pid() const { return pid_; }
  // The helper was reaped by someone else (the zygote's SIGCHLD handling).
  void Forget() { pid_ = 0; }

 private:
  ScratchMounter(pid_t pid, UniqueFd channel) : pid_(pid), channel_(std::move(channel)) {}
  Status Request(char op, const std::string& dir, uid_t uid, int64_t bytes);

  pid_t pid_;
  UniqueFd channel_;
};

}  // namespace envforge::sandbox::worker
