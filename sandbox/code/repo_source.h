// Where a fresh copy of a code task's repository comes from: the tar archive a code bundle stores
// (extracted per copy), or a task of a working copy pool (working_copy_pool.h: an overlay over the
// task's template, or a copy of it). Grading and validation make fresh copies through this,
// whichever the caller holds, and hand each back with Release.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "base/status.h"
#include "sandbox/code/working_copy_pool.h"

namespace envforge::sandbox::code {

class RepoSource {
 public:
  // The archive is shared, not copied, between the copies of a source.
  static RepoSource FromArchive(std::string archive);
  // `key`'s template must have been made (WorkingCopyPool::Template).
  static RepoSource FromPool(std::shared_ptr<WorkingCopyPool> pool, std::string key);

  // Puts the repository at `dir`, which must not exist.
  Status MaterializeAt(const std::filesystem::path& dir) const;
  // Done with a copy MaterializeAt made: the pool's are discarded (an overlay must be unmounted
  // before its directory can go); an archive's extraction is left for the caller to remove.
  void Release(const std::filesystem::path& dir) const;

 private:
  std::shared_ptr<const std::string> archive_;
  std::shared_ptr<WorkingCopyPool> pool_;
  std::string key_;
};

}  // namespace envforge::sandbox::code
