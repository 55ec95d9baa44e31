// The repository an agent gets: a git repository holding the base commit and its history only. No
// later commit, no other branch or tag, no reflog, no remote, no stash: nothing from which the fix
// could be read. Built by fetching exactly the base commit from the source repository into a new
// one (git transfers only objects reachable from it), then pruning.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"

namespace envforge::sandbox::code {

// Writes the repository into `out_dir` (which must not exist): branch "main" at the base commit,
// checked out, clean. Returns the full commit id. Errors: NotFound (no git repository at
// source_repo, or it lacks the commit), Unavailable (git is not installed), Internal (a git step
// failed; its message is included).
Result<std::string> SnapshotRepository(const std::string& source_repo, const std::string& base_commit,
                                       const std::filesystem::path& out_dir);

// A tar archive of the directory's contents (paths relative to it), and its extraction into an
// existing directory. tar must be installed.
Result<std::string> TarDirectory(const std::filesystem::path& dir);
Status ExtractTar(const std::string& archive, const std::filesystem::path& out_dir);

// Runs git with `args` in `repo` (git -C repo ...), bounded time; the stdout on exit 0, else
// Internal with git's stderr.
Result<std::string> RunGit(const std::filesystem::path& repo, const std::vector<std::string>& args,
                           const std::string& stdin_text = "");

}  // namespace envforge::sandbox::code
