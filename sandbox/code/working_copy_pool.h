// Working copies of code tasks' repositories, fast whatever the repository's size.
//
// A session's working copy must appear fast (goal: under 50 ms for a 5,000-file repository).
// Measured here (ext4, 5,000 files, 24 MB): a tar extraction or an in-process copy takes about
// 90 ms warm, and seconds once many copies fill the page cache with dirty pages (writeback
// throttles the writer: 50 back-to-back copies took p90 3.2 s). So, per task, a template directory
// is extracted once from the bundle's archive, and a session's copy is, in order of preference:
//  1. an overlay mount: the template as the read-only lower layer, an empty upper layer for the
//     session's changes (about 1 ms, nothing copied; a change copies up only the file it touches).
//     Needs the right to mount (root, or CAP_SYS_ADMIN); probed once at Create.
//  2. a ready copy made ahead on the background thread, moved into place with a rename.
//  3. a copy of the template made while the session waits (no archive read, no tar process).
// Hardlinked copies would share inodes (an agent's in-place write would change the template);
// ext4 has no reflinks; bubblewrap 0.8 has no --overlay.
//
// Layout under `root` (made by Create, removed with everything in it by the destructor):
// templates/<key hash>, layers/<n>/{upper,work} (overlay), ready/<key hash>-<n> (copies),
// trash/<n>, owner.pid. A checkout's `dir` must be on root's filesystem for a ready copy to be
// renamed (else it is copied). Mounts a crashed process left are detached by the next pool's
// Create (their owner.pid names a dead process).
//
// Thread safety: every method may be called from any thread. One background thread makes the
// copies ahead and removes discarded directories, so neither costs a session's time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/json.h"
#include "base/status.h"

namespace envforge::sandbox::code {

struct WorkingCopyPoolOptions {
  std::filesystem::path root;
  // Copies kept ready per task once the task has had a session (0: every checkout copies).
  // Not used when overlays are.
  int ready_per_task = 2;
  bool try_overlay = true;  // false: copies only (for measuring them)
};

struct WorkingCopyPoolStats {
  std::string method;     // "overlay" or "copy"
  int64_t templates = 0;  // extracted from an archive
  int64_t overlay_checkouts = 0;
  int64_t overlay_forks = 0;
  int64_t ready_checkouts = 0;   // a ready copy renamed into place
  int64_t copied_checkouts = 0;  // none was ready: the template copied while the session waited
  int64_t copies_made_ahead = 0;
  int64_t discarded = 0;
  Json ToJson() const;
};

class WorkingCopyPool {
 public:
  using ArchiveLoader = std::function<Result<std::string>()>;

  static Result<std::shared_ptr<WorkingCopyPool>> Create(WorkingCopyPoolOptions options);
  ~WorkingCopyPool();  // stops the thread (copies not yet made are dropped) and removes root
  WorkingCopyPool(const WorkingCopyPool&) = delete;
  WorkingCopyPool& operator=(const WorkingCopyPool&) = delete;

  // The template of `key` (any string: a task of one bundle), extracted from load_archive()'s tar
  // on the first call; later and concurrent calls wait for that one extraction and reuse it. A
  // failed extraction is not kept: the next call tries again.
  Result<std::filesystem::path> Template(const std::string& key, const ArchiveLoader& load_archive);
  // Puts a working copy of key's template at `dir` (which must not exist): an overlay, a ready
  // copy moved there, or the template copied there (see above); copies then top key's ready
  // copies up in the background. FailedPrecondition when Template(key) has not succeeded.
  Status Checkout(const std::string& key, const std::filesystem::path& dir);
  // A copy of the working copy at `parent` (a checkout of this pool, or any directory) at `child`,
  // which must not exist: for an overlay, a new overlay over the same template whose upper layer
  // is a copy of the parent's (only what the parent changed is copied); else a copy of the tree.
  // The parent must not change meanwhile (the caller runs this between the parent's tool calls).
  Status Fork(const std::filesystem::path& parent, const std::filesystem::path& child);
  // Takes `dir` away at once (unmounted when it is an overlay, renamed into the trash; its path is
  // free on return) and removes it in the background. Any directory may be discarded (a fork's
  // copy); one on another filesystem is removed here.
  void Discard(const std::filesystem::path& dir);

  WorkingCopyPoolStats stats() const;

 private:
  struct TaskCopies;
  explicit WorkingCopyPool(WorkingCopyPoolOptions options);
  std::shared_ptr<TaskCopies> Find(const std::string& key);
  void ScheduleRefill(const std::shared_ptr<TaskCopies>& task);
  void Loop();
  void MakeCopyAhead(const std::shared_ptr<TaskCopies>& task);
  // A new layer directory (with an empty work/ and, unless upper_from is given, an empty upper/;
  // else a copy of that layer's upper/), mounted over `lower` at `dir`.
  Status MountOverlay(const std::filesystem::path& lower, const std::filesystem::path& dir,
                      const std::filesystem::path& upper_from = {});
  std::filesystem::path TrashPath();

  WorkingCopyPoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<std::string, std::shared_ptr<TaskCopies>> tasks_;
  std::deque<std::shared_ptr<TaskCopies>> refills_;  // one entry per copy to make
  std::deque<std::filesystem::path> removals_;
  bool overlay_ = false;  // probed at Create
  struct Overlay {
    std::filesystem::path layer;  // upper/ and work/
    std::filesystem::path lower;  // the template
  };
  std::map<std::filesystem::path, Overlay> overlays_;  // by mounted directory
  uint64_t next_name_ = 0;
  bool stopping_ = false;
  WorkingCopyPoolStats stats_;
  std::thread thread_;
};

}  // namespace envforge::sandbox::code
