// Session handles and their bookkeeping (see session_registry.h for the invariants).
#include "server/internal/session_registry.h"

#include <random>

namespace envforge::server::internal {

SessionRegistry::Reserve SessionRegistry::TryReserve() {
  std::lock_guard lock(mutex_);
  if (sealed_) return Reserve::kSealed;
  if (slots_.size() + reservations_ >= max_sessions_) return Reserve::kFull;
  ++reservations_;
  return Reserve::kOk;
}

void SessionRegistry::CancelReservation() {
  std::lock_guard lock(mutex_);
  if (reservations_ > 0) --reservations_;
}

bool SessionRegistry::Commit(const std::shared_ptr<SessionEntry>& entry) {
  std::lock_guard lock(mutex_);
  if (reservations_ > 0) --reservations_;
  if (sealed_) return false;
  std::string handle = NewHandle(server_id_);
  while (slots_.count(handle) != 0) handle = NewHandle(server_id_);
  entry->handle = handle;
  slots_.emplace(std::move(handle), Slot{entry, 0, Clock::now()});
  return true;
}

std::shared_ptr<SessionEntry> SessionRegistry::Acquire(const std::string& handle) {
  std::lock_guard lock(mutex_);
  auto it = slots_.find(handle);
  if (it == slots_.end()) return nullptr;
  ++it->second.in_use;
  it->second.last_used = Clock::now();
  return it->second.entry;
}

void SessionRegistry::Release(const std::shared_ptr<SessionEntry>& entry) {
  std::lock_guard lock(mutex_);
  auto it = slots_.find(entry->handle);
  // Removed meanwhile (closed, reset): nothing to release.
  if (it == slots_.end() || it->second.entry != entry) return;
  if (it->second.in_use > 0) --it->second.in_use;
  it->second.last_used = Clock::now();
}

std::shared_ptr<SessionEntry> SessionRegistry::Find(const std::string& handle) const {
  std::lock_guard lock(mutex_);
  auto it = slots_.find(handle);
  return it == slots_.end() ? nullptr : it->second.entry;
}

std::shared_ptr<SessionEntry> SessionRegistry::Remove(const std::string& handle, bool keep_reservation) {
  std::lock_guard lock(mutex_);
  auto it = slots_.find(handle);
  if (it == slots_.end()) return nullptr;
  std::shared_ptr<SessionEntry> entry = std::move(it->second.entry);
  slots_.erase(it);
  if (keep_reservation) ++reservations_;
  return entry;
}

std::vector<std::shared_ptr<SessionEntry>> SessionRegistry::TakeExpired(Clock::time_point now,
                                                                        std::chrono::milliseconds ttl) {
  std::vector<std::shared_ptr<SessionEntry>> expired;
  std::lock_guard lock(mutex_);
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (it->second.in_use == 0 && now - it->second.last_used > ttl) {
      expired.push_back(std::move(it->second.entry));
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

std::vector<std::shared_ptr<SessionEntry>> SessionRegistry::SealAndTakeAll() {
  std::vector<std::shared_ptr<SessionEntry>> all;
  std::lock_guard lock(mutex_);
  sealed_ = true;
  all.reserve(slots_.size());
  for (auto& [handle, slot] : slots_) all.push_back(std::move(slot.entry));
  slots_.clear();
  return all;
}

size_t SessionRegistry::size() const {
  std::lock_guard lock(mutex_);
  return slots_.size();
}

size_t SessionRegistry::reservations() const {
  std::lock_guard lock(mutex_);
  return reservations_;
}

std::string SessionRegistry::NewHandle(const std::string& server_id) {
  static constexpr char kHex[] = "0123456789abcdef";
  thread_local std::random_device device;
  std::string handle = server_id.empty() ? "s-" : "s-" + server_id + "-";
  handle.reserve(handle.size() + 24);
  for (int word = 0; word < 3; ++word) {
    uint32_t bits = device();
    for (int nibble = 0; nibble < 8; ++nibble) {
      handle += kHex[bits & 0xF];
      bits >>= 4;
    }
  }
  return handle;
}

}  // namespace envforge::server::internal
