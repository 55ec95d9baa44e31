// Templates and ready copies of code tasks' repositories.
#include "sandbox/code/working_copy_pool.h"

#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>
#include <vector>

#include "base/fd.h"

#include "base/sha256.h"
#include "sandbox/code/repo_snapshot.h"
#include "sandbox/code/tree_copy.h"

namespace envforge::sandbox::code {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOwnerFile = "owner.pid";

// overlayfs splits its options at ',' and lowerdir at ':'; such paths cannot be named there.
bool NameableInOverlayOptions(const fs::path& path) { return path.string().find_first_of(",:\\") == std::string::npos; }

Status Mount(const fs::path& lower, const fs::path& upper, const fs::path& work, const fs::path& at) {
  const std::string data = "lowerdir=" + lower.string() + ",upperdir=" + upper.string() + ",workdir=" + work.string();
  if (mount("overlay", at.c_str(), "overlay", MS_NOSUID | MS_NODEV, data.c_str()) != 0) {
    return ErrnoError("overlay mount at " + at.string(), errno);
  }
  return Status::Ok();
}

// Whether this process may mount overlays: one tiny mount, undone at once.
bool ProbeOverlay(const fs::path& root) {
  const fs::path probe = root / "probe";
  std::error_code error;
  for (const char* part : {"lower", "upper", "work", "merged"}) fs::create_directories(probe / part, error);
  bool mounted = !error && NameableInOverlayOptions(root) &&
                 Mount(probe / "lower", probe / "upper", probe / "work", probe / "merged").ok();
  if (mounted) umount2((probe / "merged").c_str(), MNT_DETACH);
  fs::remove_all(probe, error);
  return mounted;
}

// /proc/self/mountinfo escapes space, tab, newline and backslash as a backslash and three octal
// digits.
std::string UnescapeMountField(const std::string& field) {
  std::string plain;
  for (size_t i = 0; i < field.size(); ++i) {
    const bool escaped =
        field[i] == '\\' && i + 3 < field.size() && field.find_first_not_of("01234567", i + 1) >= i + 4;
    if (!escaped) {
      plain += field[i];
      continue;
    }
    plain += static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8));
    i += 3;
  }
  return plain;
}

bool OwnerAlive(const fs::path& pool_root) {
  std::ifstream owner(pool_root / kOwnerFile);
  long pid = 0;
  if (!(owner >> pid) || pid <= 0) return false;
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// Overlays of pools whose process is gone (a crash, SIGKILL): detached, so their layers can go.
void DetachStaleOverlays() {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::vector<fs::path> stale;
  for (std::string line; std::getline(mountinfo, line);) {
    const size_t separator = line.find(" - overlay ");
    const size_t upper = line.find("upperdir=", separator == std::string::npos ? line.size() : separator);
    if (separator == std::string::npos || upper == std::string::npos) continue;
    std::string upper_dir = line.substr(upper + 9, line.find_first_of(", ", upper) - upper - 9);
    const size_t layers = upper_dir.rfind("/layers/");
    if (layers == std::string::npos || upper_dir.find("/code-copies-") == std::string::npos) continue;
    if (OwnerAlive(UnescapeMountField(upper_dir.substr(0, layers)))) continue;
    std::istringstream fields(line.substr(0, separator));
    std::string field;
    for (int i = 0; i < 5 && fields >> field; ++i) {
    }
    stale.push_back(UnescapeMountField(field));
  }
  for (const fs::path& mount_point : stale) umount2(mount_point.c_str(), MNT_DETACH);
}

}  // namespace

struct WorkingCopyPool::TaskCopies {
  std::string name;  // the key's hash: a directory name whatever the key holds
  fs::path template_dir;
  std::mutex extract_mu;  // held through the one extraction
  std::atomic<bool> extracted{false};
  std::deque<fs::path> ready;  // the pool's mu_
  int being_made = 0;          // the pool's mu_
};

Json WorkingCopyPoolStats::ToJson() const {
  return Json{{"method", method},
              {"templates", templates},
              {"overlay_checkouts", overlay_checkouts},
              {"overlay_forks", overlay_forks},
              {"ready_checkouts", ready_checkouts},
              {"copied_checkouts", copied_checkouts},
              {"copies_made_ahead", copies_made_ahead},
              {"discarded", discarded}};
}

Result<std::shared_ptr<WorkingCopyPool>> WorkingCopyPool::Create(WorkingCopyPoolOptions options) {
  if (options.root.empty()) return InvalidArgumentError("working copy pool: root is empty");
  if (options.ready_per_task < 0) return InvalidArgumentError("working copy pool: ready_per_task is negative");
  std::error_code error;
  for (const char* part : {"templates", "ready", "trash", "layers"}) {
    fs::create_directories(options.root / part, error);
    if (error)
      return InternalError("working copy pool: mkdir " + (options.root / part).string() + ": " + error.message());
  }
  ENVFORGE_RETURN_IF_ERROR(WriteFileAtomically((options.root / kOwnerFile).string(), std::to_string(getpid())));
  DetachStaleOverlays();
  const bool overlay = options.try_overlay && ProbeOverlay(options.root);
  std::shared_ptr<WorkingCopyPool> pool(new WorkingCopyPool(std::move(options)));
  pool->overlay_ = overlay;
  pool->stats_.method = overlay ? "overlay" : "copy";
  return pool;
}

WorkingCopyPool::WorkingCopyPool(WorkingCopyPoolOptions options)
    : options_(std::move(options)), thread_([this] { Loop(); }) {}

WorkingCopyPool::~WorkingCopyPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (const auto& [dir, overlay] : overlays_) umount2(dir.c_str(), MNT_DETACH);  // sessions outlived the pool
  std::error_code ignored;
  fs::remove_all(options_.root, ignored);
}

std::shared_ptr<WorkingCopyPool::TaskCopies> WorkingCopyPool::Find(const std::string& key) {
  std::lock_guard lock(mu_);
  std::shared_ptr<TaskCopies>& task = tasks_[key];
  if (!task) {
    task = std::make_shared<TaskCopies>();
    task->name = Sha256Hex(key).substr(0, 16);
    task->template_dir = options_.root / "templates" / task->name;
  }
  return task;
}

Result<fs::path> WorkingCopyPool::Template(const std::string& key, const ArchiveLoader& load_archive) {
  std::shared_ptr<TaskCopies> task = Find(key);
  std::lock_guard extracting(task->extract_mu);
  if (task->extracted) return task->template_dir;
  std::error_code error;
  fs::remove_all(task->template_dir, error);  // what a failed extraction left
  fs::create_directories(task->template_dir, error);
  if (error) return InternalError("working copy pool: mkdir " + task->template_dir.string() + ": " + error.message());
  Result<std::string> archive = load_archive();
  Status extracted = archive.ok() ? ExtractTar(*archive, task->template_dir) : archive.status();
  if (!extracted.ok()) {
    fs::remove_all(task->template_dir, error);
    return extracted;
  }
  task->extracted = true;
  std::lock_guard lock(mu_);
  ++stats_.templates;
  return task->template_dir;
}

Status WorkingCopyPool::Checkout(const std::string& key, const fs::path& dir) {
  std::shared_ptr<TaskCopies> task = Find(key);
  if (!task->extracted) return FailedPreconditionError("working copy pool: no template for " + key + " yet");
  if (overlay_ && NameableInOverlayOptions(dir) && MountOverlay(task->template_dir, dir).ok()) {
    std::lock_guard lock(mu_);
    ++stats_.overlay_checkouts;
    return Status::Ok();
  }
  fs::path ready;
  {
    std::lock_guard lock(mu_);
    if (!task->ready.empty()) {
      ready = std::move(task->ready.front());
      task->ready.pop_front();
    }
  }
  Status placed = FailedPreconditionError("no ready copy");
  if (!ready.empty()) {
    placed =
        std::rename(ready.c_str(), dir.c_str()) == 0 ? Status::Ok() : ErrnoError("rename into " + dir.string(), errno);
    if (!placed.ok()) Discard(ready);  // another filesystem, most likely: copy instead
  }
  const bool was_ready = placed.ok();
  if (!placed.ok()) placed = CopyTree(task->template_dir, dir);
  {
    std::lock_guard lock(mu_);
    ++(was_ready ? stats_.ready_checkouts : stats_.copied_checkouts);
  }
  ScheduleRefill(task);
  return placed;
}

Status WorkingCopyPool::MountOverlay(const fs::path& lower, const fs::path& dir, const fs::path& upper_from) {
  const fs::path layer = options_.root / "layers" / std::to_string([this] {
                           std::lock_guard lock(mu_);
                           return next_name_++;
                         }());
  std::error_code error;
  fs::create_directories(layer / "work", error);
  if (error) return InternalError("working copy pool: mkdir " + layer.string() + ": " + error.message());
  Status upper =
      upper_from.empty() ? Status::Ok() : CopyTree(upper_from / "upper", layer / "upper", {.overlay_layer = true});
  if (upper.ok() && upper_from.empty()) fs::create_directories(layer / "upper", error);
  if (upper.ok() && mkdir(dir.c_str(), 0755) != 0) upper = ErrnoError("mkdir " + dir.string(), errno);
  if (upper.ok()) upper = Mount(lower, layer / "upper", layer / "work", dir);
  if (!upper.ok()) {
    fs::remove(dir, error);
    fs::remove_all(layer, error);
    return upper;
  }
  std::lock_guard lock(mu_);
  overlays_[dir] = Overlay{layer, lower};
  return Status::Ok();
}

Status WorkingCopyPool::Fork(const fs::path& parent, const fs::path& child) {
  std::optional<Overlay> overlay;
  {
    std::lock_guard lock(mu_);
    if (auto it = overlays_.find(parent); it != overlays_.end()) overlay = it->second;
  }
  if (!overlay || !NameableInOverlayOptions(child)) return CopyTree(parent, child);
  // The parent's upper layer is read while mounted; it does not change (see the header), and the
  // overlay's cached view of it is what the upper layer holds once the parent's calls returned.
  ENVFORGE_RETURN_IF_ERROR(MountOverlay(overlay->lower, child, overlay->layer));
  std::lock_guard lock(mu_);
  ++stats_.overlay_forks;
  return Status::Ok();
}

fs::path WorkingCopyPool::TrashPath() {
  std::lock_guard lock(mu_);
  return options_.root / "trash" / std::to_string(next_name_++);
}

void WorkingCopyPool::Discard(const fs::path& dir) {
  std::error_code error;
  fs::path layer;
  {
    std::lock_guard lock(mu_);
    if (auto it = overlays_.find(dir); it != overlays_.end()) {
      layer = it->second.layer;
      overlays_.erase(it);
    }
  }
  if (!layer.empty()) {
    // Detached: a process still in the directory (a leftover of the session) cannot keep it busy.
    umount2(dir.c_str(), MNT_DETACH);
    fs::remove(dir, error);
    return Discard(layer);
  }
  if (!fs::exists(fs::symlink_status(dir, error))) return;
  const fs::path trash = TrashPath();
  if (std::rename(dir.c_str(), trash.c_str()) != 0) {
    fs::remove_all(dir, error);
    std::lock_guard lock(mu_);
    ++stats_.discarded;
    return;
  }
  {
    std::lock_guard lock(mu_);
    removals_.push_back(std::move(trash));
  }
  wake_.notify_one();
}

WorkingCopyPoolStats WorkingCopyPool::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void WorkingCopyPool::ScheduleRefill(const std::shared_ptr<TaskCopies>& task) {
  {
    std::lock_guard lock(mu_);
    while (static_cast<int>(task->ready.size()) + task->being_made < options_.ready_per_task) {
      ++task->being_made;
      refills_.push_back(task);
    }
  }
  wake_.notify_one();
}

// Copies first (a session may be waiting for one), removals when no copy is due.
void WorkingCopyPool::Loop() {
  for (;;) {
    std::shared_ptr<TaskCopies> refill;
    fs::path removal;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !refills_.empty() || !removals_.empty(); });
      if (stopping_) return;
      if (!refills_.empty()) {
        refill = std::move(refills_.front());
        refills_.pop_front();
      } else {
        removal = std::move(removals_.front());
        removals_.pop_front();
      }
    }
    if (refill) {
      MakeCopyAhead(refill);
      continue;
    }
    std::error_code ignored;
    fs::remove_all(removal, ignored);
    std::lock_guard lock(mu_);
    ++stats_.discarded;
  }
}

void WorkingCopyPool::MakeCopyAhead(const std::shared_ptr<TaskCopies>& task) {
  fs::path copy;
  {
    std::lock_guard lock(mu_);
    copy = options_.root / "ready" / (task->name + "-" + std::to_string(next_name_++));
  }
  const Status made = CopyTree(task->template_dir, copy);
  std::lock_guard lock(mu_);
  --task->being_made;
  if (!made.ok()) return;  // the next checkout copies for itself, and schedules another
  task->ready.push_back(std::move(copy));
  ++stats_.copies_made_ahead;
}

}  // namespace envforge::sandbox::code
