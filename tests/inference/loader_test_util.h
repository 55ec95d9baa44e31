// Shared helpers of the loader tests: temporary directories, tiny checkpoints made by
// scripts/make_tiny_model.py (run with Debian's python3), and rewriting a checkpoint with one
// tensor changed.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "inference/safetensors.h"
#include "tests/temp_dir.h"

namespace envforge::inference::testing {

namespace fs = std::filesystem;

inline std::string SourceDir() { return ENVFORGE_TEST_SOURCE_DIR; }

using ::envforge::testing::TempDir;

// Runs /usr/bin/python3 with the arguments (the first a script path relative to the repository);
// REQUIREs a zero exit and returns stdout.
inline std::string RunPython(std::vector<std::string> args, int timeout_seconds = 120) {
  args[0] = SourceDir() + "/" + args[0];
  args.insert(args.begin(), "/usr/bin/python3");
  CommandOptions options;
  options.timeout = std::chrono::seconds(timeout_seconds);
  Result<CommandOutput> output = RunCommand(args, options);
  REQUIRE(output.ok());
  INFO("stderr: " << output->stderr_text);
  REQUIRE(output->exit_code == 0);
  return output->stdout_text;
}

// Writes a tiny checkpoint into `dir` (no tokenizer, so the tests do not depend on it) and returns
// the generator's JSON report.
inline Json MakeTinyModel(const std::string& dir, const std::vector<std::string>& flags = {}) {
  std::vector<std::string> args = {"scripts/make_tiny_model.py", "--out", dir, "--no-tokenizer"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::string text = RunPython(args);
  Result<Json> report = ParseJson(text.substr(0, text.find('\n')), "make_tiny_model.py report");
  REQUIRE(report.ok());
  return *report;
}

// Copies the checkpoint of `from` (config.json + model.safetensors) to `to`, passing every tensor
// through `edit`, which may change it or return false to drop it.
inline void RewriteCheckpoint(const std::string& from, const std::string& to,
                              const std::function<bool(TensorToWrite&)>& edit) {
  fs::create_directories(to);
  fs::copy_file(fs::path(from) / "config.json", fs::path(to) / "config.json", fs::copy_options::overwrite_existing);
  Result<std::unique_ptr<Checkpoint>> checkpoint = Checkpoint::Open(from);
  REQUIRE(checkpoint.ok());
  std::vector<TensorToWrite> tensors;
  for (const std::string& name : (*checkpoint)->TensorNames()) {
    const TensorInfo* info = (*checkpoint)->Find(name);
    TensorToWrite tensor{name, info->dtype_name, info->shape,
                         std::string(reinterpret_cast<const char*>(info->data), info->nbytes)};
    if (edit(tensor)) tensors.push_back(std::move(tensor));
  }
  Status written = WriteSafetensors((fs::path(to) / "model.safetensors").string(), tensors);
  REQUIRE(written.ok());
}

// Rewrites dir/config.json with `edit` applied to its JSON.
inline void EditConfig(const std::string& dir, const std::function<void(Json&)>& edit) {
  std::string path = dir + "/config.json";
  Result<std::string> text = ReadFileToString(path);
  REQUIRE(text.ok());
  Result<Json> json = ParseJson(*text);
  REQUIRE(json.ok());
  edit(*json);
  REQUIRE(WriteFileAtomically(path, json->dump(2)).ok());
}

inline bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace envforge::inference::testing
