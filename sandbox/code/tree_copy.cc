// A directory tree copied with openat-relative calls (no path re-resolution, symlinks never
// followed).
#include "sandbox/code/tree_copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "base/fd.h"

namespace envforge::sandbox::code {
namespace {

namespace fs = std::filesystem;

constexpr mode_t kPermissionBits = 0777;

// Reading the entries first keeps the directory stream closed while the subtree is copied, so
// deep trees use one descriptor per level, not two.
Result<std::vector<std::string>> EntryNames(int dir_fd, const std::string& where) {
  const int stream_fd = dup(dir_fd);
  if (stream_fd < 0) return ErrnoError("copy: dup " + where, errno);
  DIR* stream = fdopendir(stream_fd);
  if (stream == nullptr) {
    close(stream_fd);
    return ErrnoError("copy: read directory " + where, errno);
  }
  std::vector<std::string> names;
  while (const dirent* entry = readdir(stream)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(stream);
  return names;
}

// read/write for the filesystems and kernels where copy_file_range cannot (EXDEV before Linux
// 5.19, some FUSE and network filesystems).
Status CopyFileDataByReading(int from_fd, int to_fd, const std::string& where) {
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = read(from_fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoError("copy: read " + where, errno);
    if (got == 0) return Status::Ok();
    for (ssize_t done = 0; done < got;) {
      const ssize_t put = write(to_fd, buffer + done, static_cast<size_t>(got - done));
      if (put < 0 && errno == EINTR) continue;
      if (put < 0) return ErrnoError("copy: write " + where, errno);
      done += put;
    }
  }
}

Status CopyFileData(int from_fd, int to_fd, off_t size, const std::string& where) {
  off_t left = size;
  while (left > 0) {
    const ssize_t copied = copy_file_range(from_fd, nullptr, to_fd, nullptr, static_cast<size_t>(left), 0);
    if (copied < 0 && errno == EINTR) continue;
    if (copied < 0 && left == size && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
      return CopyFileDataByReading(from_fd, to_fd, where);
    }
    if (copied < 0) return ErrnoError("copy: " + where, errno);
    if (copied == 0) break;  // the file shrank while being copied
    left -= copied;
  }
  return Status::Ok();
}

Status SetTimes(int dir_fd, const std::string& name, const struct stat& info, const std::string& where) {
  const timespec times[2] = {info.st_atim, info.st_mtim};
  if (utimensat(dir_fd, name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
    return ErrnoError("copy: times of " + where, errno);
  return Status::Ok();
}

// The overlay's own attributes of an entry (opaque directories, copy-up origins), copied between
// open descriptors.
Status CopyOverlayAttributes(int from_fd, int to_fd, const std::string& where) {
  char names[4096];
  const ssize_t length = flistxattr(from_fd, names, sizeof(names));
  if (length < 0) return errno == ENOTSUP ? Status::Ok() : ErrnoError("copy: list attributes of " + where, errno);
  for (ssize_t at = 0; at < length; at += static_cast<ssize_t>(std::strlen(names + at)) + 1) {
    const std::string name = names + at;
    if (!name.starts_with("trusted.overlay.")) continue;
    char value[4096];
    const ssize_t size = fgetxattr(from_fd, name.c_str(), value, sizeof(value));
    if (size < 0) return ErrnoError("copy: attribute " + name + " of " + where, errno);
    if (fsetxattr(to_fd, name.c_str(), value, static_cast<size_t>(size), 0) != 0) {
      return ErrnoError("copy: set attribute " + name + " of " + where, errno);
    }
  }
  return Status::Ok();
}

Status CopyRegular(int from_dir, int to_dir, const std::string& name, const struct stat& info, const std::string& where,
                   const TreeCopyOptions& options) {
  UniqueFd from(openat(from_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!from.valid()) return ErrnoError("copy: open " + where, errno);
  UniqueFd to(openat(to_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                     info.st_mode & kPermissionBits));
  if (!to.valid()) return ErrnoError("copy: create " + where, errno);
  ENVFORGE_RETURN_IF_ERROR(CopyFileData(from.get(), to.get(), info.st_size, where));
  if (options.overlay_layer) ENVFORGE_RETURN_IF_ERROR(CopyOverlayAttributes(from.get(), to.get(), where));
  const timespec times[2] = {info.st_atim, info.st_mtim};
  if (futimens(to.get(), times) != 0) return ErrnoError("copy: times of " + where, errno);
  return Status::Ok();
}

Status CopySymlink(int from_dir, int to_dir, const std::string& name, const struct stat& info,
                   const std::string& where) {
  std::string target(static_cast<size_t>(info.st_size) + 1, '\0');
  const ssize_t length = readlinkat(from_dir, name.c_str(), target.data(), target.size());
  if (length < 0) return ErrnoError("copy: readlink " + where, errno);
  target.resize(static_cast<size_t>(length));
  if (symlinkat(target.c_str(), to_dir, name.c_str()) != 0) return ErrnoError("copy: symlink " + where, errno);
  return SetTimes(to_dir, name, info, where);
}

Status CopyDirectoryContents(int from_dir, int to_dir, const std::string& where, const TreeCopyOptions& options);

Status CopyEntry(int from_dir, int to_dir, const std::string& name, const std::string& where,
                 const TreeCopyOptions& options) {
  struct stat info {};
  if (fstatat(from_dir, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) return ErrnoError("copy: stat " + where, errno);
  if (S_ISREG(info.st_mode)) return CopyRegular(from_dir, to_dir, name, info, where, options);
  if (options.overlay_layer && S_ISCHR(info.st_mode) && info.st_rdev == makedev(0, 0)) {
    if (mknodat(to_dir, name.c_str(), S_IFCHR | (info.st_mode & kPermissionBits), makedev(0, 0)) != 0) {
      return ErrnoError("copy: whiteout " + where, errno);
    }
    return Status::Ok();
  }
  if (S_ISLNK(info.st_mode)) return CopySymlink(from_dir, to_dir, name, info, where);
  if (S_ISFIFO(info.st_mode)) {
    if (mkfifoat(to_dir, name.c_str(), info.st_mode & kPermissionBits) != 0)
      return ErrnoError("copy: mkfifo " + where, errno);
    return Status::Ok();
  }
  if (!S_ISDIR(info.st_mode)) return Status::Ok();  // sockets and devices: see the header
  // Created writable for the copy, given its own mode (and times) once its contents are in.
  if (mkdirat(to_dir, name.c_str(), 0700) != 0) return ErrnoError("copy: mkdir " + where, errno);
  UniqueFd from(openat(from_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  UniqueFd to(openat(to_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!from.valid() || !to.valid()) return ErrnoError("copy: open directory " + where, errno);
  ENVFORGE_RETURN_IF_ERROR(CopyDirectoryContents(from.get(), to.get(), where, options));
  if (options.overlay_layer) ENVFORGE_RETURN_IF_ERROR(CopyOverlayAttributes(from.get(), to.get(), where));
  if (fchmod(to.get(), info.st_mode & kPermissionBits) != 0) return ErrnoError("copy: chmod " + where, errno);
  const timespec times[2] = {info.st_atim, info.st_mtim};
  if (futimens(to.get(), times) != 0) return ErrnoError("copy: times of " + where, errno);
  return Status::Ok();
}

Status CopyDirectoryContents(int from_dir, int to_dir, const std::string& where, const TreeCopyOptions& options) {
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<std::string> names, EntryNames(from_dir, where));
  for (const std::string& name : names) {
    ENVFORGE_RETURN_IF_ERROR(CopyEntry(from_dir, to_dir, name, where + "/" + name, options));
  }
  return Status::Ok();
}

Status CopyInto(const fs::path& from, const fs::path& to, const TreeCopyOptions& options) {
  UniqueFd from_fd(open(from.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!from_fd.valid()) return ErrnoError("copy: open " + from.string(), errno);
  if (mkdir(to.c_str(), 0700) != 0) {
    if (errno == EEXIST) return AlreadyExistsError("copy: " + to.string() + " exists");
    return ErrnoError("copy: mkdir " + to.string(), errno);
  }
  UniqueFd to_fd(open(to.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!to_fd.valid()) return ErrnoError("copy: open " + to.string(), errno);
  ENVFORGE_RETURN_IF_ERROR(CopyDirectoryContents(from_fd.get(), to_fd.get(), from.string(), options));
  if (options.overlay_layer) ENVFORGE_RETURN_IF_ERROR(CopyOverlayAttributes(from_fd.get(), to_fd.get(), from.string()));
  struct stat info {};
  if (fstat(from_fd.get(), &info) != 0) return ErrnoError("copy: stat " + from.string(), errno);
  if (fchmod(to_fd.get(), info.st_mode & kPermissionBits) != 0) return ErrnoError("copy: chmod " + to.string(), errno);
  return Status::Ok();
}

}  // namespace

Status CopyTree(const fs::path& from, const fs::path& to, TreeCopyOptions options) {
  Status copied = CopyInto(from, to, options);
  if (!copied.ok() && copied.code() != StatusCode::kAlreadyExists) {
    std::error_code ignored;
    fs::remove_all(to, ignored);
  }
  return copied;
}

}  // namespace envforge::sandbox::code
