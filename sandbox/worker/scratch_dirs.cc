// Scratch directory helpers (see scratch_dirs.h).
#include "sandbox/worker/scratch_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/fd.h"

namespace envforge::sandbox::worker {
namespace {

void RemoveContents(int dir_fd, int depth) {
  if (depth > 256) return;
  int listing = dup(dir_fd);
  if (listing < 0) return;
  DIR* dir = fdopendir(listing);
  if (dir == nullptr) {
    close(listing);
    return;
  }
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (unlinkat(dir_fd, name.c_str(), 0) == 0) continue;
    UniqueFd child(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (child.valid()) RemoveContents(child.get(), depth + 1);
    unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR);
  }
  closedir(dir);
}

Status CopyFile(int from_dir, int to_dir, const char* name, mode_t mode) {
  UniqueFd in(openat(from_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in.valid()) return ErrnoError(std::string("open ") + name, errno);
  UniqueFd out(openat(to_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0777));
  if (!out.valid()) return ErrnoError(std::string("create ") + name, errno);
  char buffer[65536];
  for (;;) {
    ssize_t n = read(in.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(std::string("read ") + name, errno);
    if (n == 0) break;
    ENVFORGE_RETURN_IF_ERROR(WriteFull(out.get(), std::string_view(buffer, static_cast<size_t>(n))));
  }
  return Status::Ok();
}

Status CopyContents(int from_dir, int to_dir, int depth, int max_depth) {
  if (depth > max_depth) return InvalidArgumentError("scratch directory nested too deeply to copy");
  int listing = dup(from_dir);
  if (listing < 0) return ErrnoError("dup", errno);
  DIR* dir = fdopendir(listing);
  if (dir == nullptr) {
    close(listing);
    return ErrnoError("fdopendir", errno);
  }
  Status status;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat info {};
    if (fstatat(from_dir, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(info.st_mode)) {
      status = CopyFile(from_dir, to_dir, name.c_str(), info.st_mode);
    } else if (S_ISDIR(info.st_mode)) {
      if (mkdirat(to_dir, name.c_str(), info.st_mode & 0777) != 0) {
        status = ErrnoError("mkdir " + name, errno);
      } else {
        UniqueFd from_child(openat(from_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        UniqueFd to_child(openat(to_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        status = from_child.valid() && to_child.valid()
                     ? CopyContents(from_child.get(), to_child.get(), depth + 1, max_depth)
                     : ErrnoError("open " + name, errno);
      }
    }
    if (!status.ok()) break;
  }
  closedir(dir);
  return status;
}

}  // namespace

bool IsCleanAbsolutePath(const std::string& path) {
  if (path.size() < 2 || path[0] != '/' || path.back() == '/') return false;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string_view part(path.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

std::string ParentDir(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

Status MakeDirs(const std::string& path, mode_t mode, int uid) {
  int error = mkdir(path.c_str(), mode) == 0 ? 0 : errno;
  if (error == ENOENT) {  // create the missing parents, then try again
    for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
      std::string prefix = path.substr(0, at);
      if (mkdir(prefix.c_str(), 0711) != 0 && errno != EEXIST) return ErrnoError("mkdir " + prefix, errno);
    }
    error = mkdir(path.c_str(), mode) == 0 ? 0 : errno;
  }
  if (error == EEXIST) {
    struct stat info {};
    if (lstat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
      return FailedPreconditionError(path + " exists and is not a directory");
    }
    if (chmod(path.c_str(), mode) != 0) return ErrnoError("chmod " + path, errno);
  } else if (error != 0) {
    return ErrnoError("mkdir " + path, error);
  }
  if (uid >= 0 && lchown(path.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) != 0) {
    return ErrnoError("chown " + path, errno);
  }
  return Status::Ok();
}

Status CopyTree(const std::string& from, const std::string& to, int max_depth) {
  UniqueFd from_dir(open(from.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!from_dir.valid()) return ErrnoError("open " + from, errno);
  UniqueFd to_dir(open(to.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!to_dir.valid()) return ErrnoError("open " + to, errno);
  return CopyContents(from_dir.get(), to_dir.get(), 0, max_depth);
}

Status EmptyDirectory(const std::string& path, mode_t mode) {
  UniqueFd dir(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return ErrnoError("open " + path, errno);
  if (fchmod(dir.get(), mode) != 0) return ErrnoError("chmod " + path, errno);
  RemoveContents(dir.get(), 0);
  int listing = dup(dir.get());
  DIR* stream = listing < 0 ? nullptr : fdopendir(listing);
  if (stream == nullptr) {
    if (listing >= 0) close(listing);
    return ErrnoError("list " + path, errno);
  }
  rewinddir(stream);
  std::string left;
  while (dirent* entry = readdir(stream)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    left = name;
    break;
  }
  closedir(stream);
  if (!left.empty()) return FailedPreconditionError("cannot remove " + path + "/" + left);
  return Status::Ok();
}

void RemoveTree(const std::string& path) {
  if (unlink(path.c_str()) == 0) return;  // a file or a symlink: removed itself
  UniqueFd dir(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.valid()) RemoveContents(dir.get(), 0);
  rmdir(path.c_str());
}

}  // namespace envforge::sandbox::worker
