// Scratch directories: creation, copying (session fork) and removal, never following symlinks
// a session may have planted.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"

namespace envforge::sandbox::worker {

// mkdir -p of every missing component (mode 0711, owned by the caller), then `path` itself with
// `mode`, chowned to uid/gid when uid >= 0. An existing `path` is accepted (and chowned).
Status MakeDirs(const std::string& path, mode_t mode, int uid);
// Copies the contents of directory `from` into the existing directory `to`: directories and
// regular files only (symlinks, devices, sockets are skipped), at most `max_depth` levels.
Status CopyTree(const std::string& from, const std::string& to, int max_depth = 64);
// rm -rf that works through directory descriptors opened with O_NOFOLLOW: a symlink swapped in
// for a directory is removed itself, its target is never touched. Best effort.
void RemoveTree(const std::string& path);
// Removes everything inside directory `path` (as RemoveTree does) and sets its mode to `mode`.
// FailedPrecondition naming the first entry left (one the caller may not remove), or the error
// of opening it.
Status EmptyDirectory(const std::string& path, mode_t mode);
// "/a/b/c" -> "/a/b". Absolute, normalised paths only (see IsCleanAbsolutePath).
std::string ParentDir(const std::string& path);
// Absolute, no "." or ".." components, no empty components, no trailing slash, not "/".
bool IsCleanAbsolutePath(const std::string& path);

}  // namespace envforge::sandbox::worker
