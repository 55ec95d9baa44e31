// Waiting for a process's exit on its pidfd through an io_context, without taking a completion
// alone for the exit (PidfdExited, pidfd.h, says why it is not proof).
#pragma once

#include <boost/asio/posix/stream_descriptor.hpp>
#include <memory>

#include "sandbox/internal/pidfd.h"

namespace envforge::sandbox::internal {

// Calls ((*owner).*on_exit)() once the process behind the owner's pidfd descriptor has exited. A
// completion that is not an exit waits again; nothing is called once the owner is gone, the
// descriptor is closed, or the wait is cancelled.
template <typename Owner>
void WatchForExit(const std::shared_ptr<Owner>& owner, boost::asio::posix::stream_descriptor Owner::*pidfd,
                  void (Owner::*on_exit)()) {
  ((*owner).*pidfd)
      .async_wait(boost::asio::posix::descriptor_base::wait_read,
                  [weak = std::weak_ptr<Owner>(owner), pidfd, on_exit](const boost::system::error_code& ec) {
                    if (ec) return;
                    std::shared_ptr<Owner> self = weak.lock();
                    if (!self || !((*self).*pidfd).is_open()) return;
                    if (!PidfdExited(((*self).*pidfd).native_handle())) return WatchForExit(self, pidfd, on_exit);
                    ((*self).*on_exit)();
                  });
}

}  // namespace envforge::sandbox::internal
