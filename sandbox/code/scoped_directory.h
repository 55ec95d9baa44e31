// Scratch directories of code runs: a unique name under a root, and removal with everything in it
// when the owner goes away (every return path of a run, errors included).
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace envforge::sandbox::code {

class ScopedDirectory {
 public:
  // An empty path: nothing to remove.
  explicit ScopedDirectory(std::filesystem::path path = {}) : path_(std::move(path)) {}
  ~ScopedDirectory() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScopedDirectory(const ScopedDirectory&) = delete;
  ScopedDirectory& operator=(const ScopedDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// "<root>/<prefix>-<pid>-<n>", n counting up in this process: never the name of another live run.
inline std::filesystem::path UniqueScratchPath(const std::filesystem::path& root, const std::string& prefix) {
  static std::atomic<uint64_t> counter{0};
  return root / (prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
}

}  // namespace envforge::sandbox::code
