// The zygote's private IPC and mount namespaces, entered in its trusted start-up phase (as root,
// single-threaded, before Isolation::ConfineZygote): what one environment's code creates there
// is invisible to every other environment and to the host, and goes away with the zygote.
//
//   IPC    SysV shared memory, message queues, semaphores and POSIX message queues live in the
//          zygote's own IPC namespace (shared by its sessions). A family's objects are removed
//          when the family is released (RemoveIpcObjectsOf); the rest when the namespace dies
//          with the zygote's last process.
//   mounts The zygote's own mount namespace, a slave of the host's (host mounts still show, none
//          of the zygote's reaches the host), with a fresh tmpfs on the scratch root: session
//          directories are files of that tmpfs, which only processes in the namespace can name
//          by path (the host and other zygotes see the host's empty directory). Freed when the
//          namespace dies; nothing to unmount on the host, even after a SIGKILL.
#pragma once

#include <sys/types.h>

#include <string>

namespace envforge::sandbox::worker {

// unshare(CLONE_NEWIPC). "on" or "off: <why>" (not root: EPERM).
std::string EnterPrivateIpcNamespace();

// unshare(CLONE_NEWNS), the whole tree made a recursive slave, then a tmpfs (mode 0711, owned
// by root) mounted on `scratch_root` (created first when missing). "on" or "off: <why>"; a
// failure after unshare leaves the zygote in its own namespace with the host's directory.
std::string EnterPrivateScratch(const std::string& scratch_root);

// Removes every SysV shared memory segment, message queue and semaphore set created by `uid`
// in the caller's IPC namespace (read from /proc/sysvipc), through a RunAsUid helper of that
// uid (IPC_RMID needs the creator's uid or CAP_SYS_ADMIN). Returns how many were removed.
int RemoveIpcObjectsOf(uid_t uid);

}  // namespace envforge::sandbox::worker
