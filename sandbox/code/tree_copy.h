// Copying a working copy: a directory tree duplicated in this process (no `cp` or `tar`
// process per copy), for the templates and ready copies of code sessions
// (working_copy_pool.h) and for forks of a session's working copy.
//
// What is copied: directories, regular files (data through copy_file_range, so a filesystem that
// can share extents does), symlinks (as links, never followed), fifos; permission bits (setuid,
// setgid and sticky dropped) and modification times. Sockets and device nodes are skipped: a
// repository archive has none, and an agent's run_command may leave a socket behind.
// Ownership is not kept (the copy belongs to this process's user).
#pragma once

#include <filesystem>

#include "base/status.h"

namespace envforge::sandbox::code {

struct TreeCopyOptions {
  // An overlayfs upper layer (working_copy_pool.h's forks): whiteouts (character devices 0:0,
  // a deleted lower file) are made again, and directories and files keep their
  // "trusted.overlay.*" extended attributes (an opaque directory hides the lower one). Needs the
  // privileges that mounting overlays needs.
  bool overlay_layer = false;
};

// Copies the contents of directory `from` into `to`, which must not exist (AlreadyExists
// otherwise). On an error `to` is removed again, so no half-made copy is left under that name.
Status CopyTree(const std::filesystem::path& from, const std::filesystem::path& to, TreeCopyOptions options = {});

}  // namespace envforge::sandbox::code
