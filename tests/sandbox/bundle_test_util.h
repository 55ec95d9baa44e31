// Helpers of the bundle suites: scratch directories, fixture copies, file edits and packing with
// the built envforge-worker.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/sqlite.h"
#include "sandbox/env_bundle.h"
#include "sandbox/env_pack.h"

namespace envforge::sandbox::testing {

namespace fs = std::filesystem;

inline fs::path SourceDir() {
  if (const char* dir = std::getenv("ENVFORGE_SOURCE_DIR"); dir != nullptr && *dir != '\0') return dir;
  return ENVFORGE_TEST_SOURCE_DIR;
}

inline fs::path FixtureEnv(const std::string& name) { return SourceDir() / "tests/fixtures/envs" / name; }

// A fresh directory removed (with everything in it) when the object goes away.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("envforge_bundle_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return (path_ / rel).string(); }

 private:
  fs::path path_;
};

// Copies fixture `name` to dir/<name> and returns its path.
inline std::string CopyFixture(const ScratchDir& dir, const std::string& name) {
  fs::path target = dir.path() / name;
  fs::copy(FixtureEnv(name), target, fs::copy_options::recursive);
  return target.string();
}

inline std::string ReadFile(const std::string& path) {
  auto text = ReadFileToString(path);
  REQUIRE_MESSAGE(text.ok(), text.status().ToString());
  return *text;
}

inline void WriteFile(const std::string& path, const std::string& contents) {
  fs::create_directories(fs::path(path).parent_path());
  REQUIRE(WriteFileAtomically(path, contents).ok());
}

// Replaces the first occurrence of `from` in the file; the test fails when it is absent.
inline void EditFile(const std::string& path, const std::string& from, const std::string& to) {
  std::string text = ReadFile(path);
  auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "'" << from << "' not in " << path);
  text.replace(at, from.size(), to);
  WriteFile(path, text);
}

// Runs SQL on a bundle file (to damage it on purpose).
inline void ExecOn(const std::string& path, const std::string& sql) {
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  REQUIRE_MESSAGE(db.ok(), db.status().ToString());
  Status status = db->Exec(sql);
  REQUIRE_MESSAGE(status.ok(), status.ToString());
}

// Every entry of a directory (names only), to prove that a failed pack left nothing behind.
inline std::vector<std::string> ListDir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A stand-in for `envforge-worker analyze` that replies at once with one valid tool and no
// problem (no Python start-up): for tests of the checks made outside the analysis.
inline std::string InstantWorker() {
  static ScratchDir dir;
  static const std::string path = [] {
    std::string script = dir / "instant-worker";
    WriteFile(script,
              "#!/bin/sh\ncat >/dev/null\n"
              "echo '{\"tools\": [{\"name\": \"list_books\", \"description\": \"List books.\", "
              "\"inputSchema\": {\"type\": \"object\"}, \"source\": \"def list_books(): pass\", \"line\": 8}], "
              "\"problems\": []}'\n");
    fs::permissions(script, fs::perms::owner_all);
    return script;
  }();
  return path;
}

inline PackOptions WithInstantWorker() {
  PackOptions options;
  options.worker_path = InstantWorker();
  return options;
}

inline Status Pack(const std::string& source, const std::string& output, PackOptions options = {}) {
  return PackEnvironment(source, output, options);
}

// Packs and loads, failing the test on any error.
inline EnvBundle PackAndLoad(const std::string& source, const std::string& output, PackOptions options = {}) {
  Status packed = Pack(source, output, options);
  REQUIRE_MESSAGE(packed.ok(), packed.ToString());
  auto bundle = EnvBundle::Load(output);
  REQUIRE_MESSAGE(bundle.ok(), bundle.status().ToString());
  return std::move(*bundle);
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace envforge::sandbox::testing
