// Process handles by pidfd (Linux >= 5.3): open, signal, and name a signal for messages.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/fd.h"
#include "base/status.h"

namespace envforge::sandbox::internal {

// A pidfd for `pid` (close-on-exec). NotFound when the process is gone.
Result<UniqueFd> PidfdOpen(pid_t pid);
// Sends `sig` through the pidfd. A process that already exited is not an error.
Status PidfdSignal(int pidfd, int sig);
// True when `fd` is a pidfd of process `pid` (its /proc/self/fdinfo names that pid). A
// descriptor received from a worker is checked with it before it is trusted as a pidfd.
bool IsPidfdOf(int fd, pid_t pid);
// True when the process behind `pidfd` has exited (the pidfd polls readable now). A wait on a
// pidfd through the io_context's reactor can complete without that: Asio's epoll reactor
// recycles a closed descriptor's per-descriptor state at once, and an event already collected
// for the closed descriptor is then delivered to whichever descriptor took the state over.
// Check with this before acting on the wait, and wait again when it says false.
bool PidfdExited(int pidfd);
// "SIGSEGV" for 11; "signal 77" for a number with no name.
std::string SignalName(int sig);

}  // namespace envforge::sandbox::internal
