// A fresh copy of a repository from its archive or its template.
#include "sandbox/code/repo_source.h"

#include <sys/stat.h>

#include <cerrno>

#include "sandbox/code/repo_snapshot.h"

namespace envforge::sandbox::code {

RepoSource RepoSource::FromArchive(std::string archive) {
  RepoSource source;
  source.archive_ = std::make_shared<const std::string>(std::move(archive));
  return source;
}

RepoSource RepoSource::FromPool(std::shared_ptr<WorkingCopyPool> pool, std::string key) {
  RepoSource source;
  source.pool_ = std::move(pool);
  source.key_ = std::move(key);
  return source;
}

Status RepoSource::MaterializeAt(const std::filesystem::path& dir) const {
  if (pool_) return pool_->Checkout(key_, dir);
  if (!archive_) return FailedPreconditionError("no repository: the source holds neither an archive nor a template");
  if (mkdir(dir.c_str(), 0700) != 0) return ErrnoError("mkdir " + dir.string(), errno);
  return ExtractTar(*archive_, dir);
}

void RepoSource::Release(const std::filesystem::path& dir) const {
  if (pool_) pool_->Discard(dir);
}

}  // namespace envforge::sandbox::code
