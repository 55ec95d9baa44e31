// The service's sessions: opaque handles ("s-" + 24 hex digits, or "s-ID-" + 24 hex digits on a
// server with an id, so that a load balancer can tell a session's owner from its handle alone)
// mapped to SessionManager ids, with
// what the service must remember per episode (its trajectory id, step count, whether its recording
// ended) and what the TTL sweeper needs (requests in flight, last use).
//
// Lifecycle of an entry, as the service drives it:
//
//   TryReserve --Commit--> registered --Remove / TakeExpired / SealAndTakeAll--> gone
//        \--CancelReservation (the create failed)
//
// Invariants:
//   1. entries + reservations <= max_sessions, so a burst of creates cannot overshoot.
//   2. An entry is handed to exactly one remover (close, reset, expiry or shutdown), which then
//      owns closing its manager session and ending its recording: nothing leaks, nothing is
//      closed twice.
//   3. TakeExpired never takes an entry with a request in flight (Acquire .. Release).
//   4. After SealAndTakeAll, TryReserve answers kSealed and Commit refuses: a create racing with
//      shutdown closes its own session.
//
// Thread safety: every method may be called from any thread; SessionEntry's mutable episode
// fields are guarded by its own mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace envforge::server::internal {

struct SessionEntry {
  std::string handle;
  uint64_t manager_id = 0;
  std::string env_id;
  std::string task_id;
  std::optional<int64_t> seed;  // as given at session/create (recorded; kept across reset and fork)
  std::string client;           // the peer that created it (recorded)
  std::string episode_id;       // empty when the service does not record

  std::mutex mutex;
  int64_t steps = 0;           // the next step number of the episode (guarded by mutex)
  bool episode_ended = false;  // EndEpisode was recorded (guarded by mutex)
};

class SessionRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  // `server_id` (may be empty) goes into every handle: see NewHandle.
  SessionRegistry(size_t max_sessions, std::string server_id)
      : max_sessions_(max_sessions), server_id_(std::move(server_id)) {}

  enum class Reserve { kOk, kFull, kSealed };
  Reserve TryReserve();
  void CancelReservation();
  // Registers `entry` under a fresh handle (written into it), consuming a reservation. Returns
  // false (and releases the reservation) when sealed.
  bool Commit(const std::shared_ptr<SessionEntry>& entry);

  // The entry, marked in use and touched; nullptr for an unknown handle. Pair with Release.
  std::shared_ptr<SessionEntry> Acquire(const std::string& handle);
  void Release(const std::shared_ptr<SessionEntry>& entry);
  // The entry without marking it in use (introspection); nullptr when unknown.
  std::shared_ptr<SessionEntry> Find(const std::string& handle) const;

  // Unregisters the entry; with keep_reservation its slot stays reserved (session/reset hands it
  // to the replacement). nullptr for an unknown handle.
  std::shared_ptr<SessionEntry> Remove(const std::string& handle, bool keep_reservation = false);
  // Unregisters every idle entry last used more than `ttl` before `now`.
  std::vector<std::shared_ptr<SessionEntry>> TakeExpired(Clock::time_point now, std::chrono::milliseconds ttl);
  std::vector<std::shared_ptr<SessionEntry>> SealAndTakeAll();

  size_t size() const;
  // Creates reserved and not yet committed or cancelled (sessions starting).
  size_t reservations() const;

  // "s-" + 24 lowercase hex digits from std::random_device; with a server id "s-ID-" + 24 hex.
  static std::string NewHandle(const std::string& server_id = "");

 private:
  struct Slot {
    std::shared_ptr<SessionEntry> entry;
    int in_use = 0;
    Clock::time_point last_used;
  };
  const size_t max_sessions_;
  const std::string server_id_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Slot> slots_;
  size_t reservations_ = 0;
  bool sealed_ = false;
};

}  // namespace envforge::server::internal
