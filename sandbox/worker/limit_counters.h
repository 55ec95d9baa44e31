// Limit counters a session reads after a failed call, to name the limit that caused it.
// (Implemented in db_module.cc, beside the `_envforge` module that exposes them to Python.)
#pragma once

namespace envforge::sandbox::worker {

// The session's pids cgroup "events" file, opened before the session dropped its privileges
// (-1: none). `_envforge.pids_limit_hits()` reads how often a fork failed at pids.max there, so
// the runtime can report a fork refused by the processes limit as limit "processes".
void SetPidsEventsFd(int fd);

}  // namespace envforge::sandbox::worker
