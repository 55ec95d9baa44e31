// Shared helpers of the model-area tests: temporary directories, tiny checkpoints made once per
// test binary by scripts/make_tiny_model.py, and runs of the numpy reference forward
// (tests/inference/reference_model.py), both with Debian's /usr/bin/python3.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "tests/temp_dir.h"

namespace envforge::inference::model_testing {

namespace fs = std::filesystem;

inline std::string SourceDir() { return ENVFORGE_TEST_SOURCE_DIR; }

using ::envforge::testing::TempDir;

// Runs /usr/bin/python3 SCRIPT ARGS (script relative to the repository); REQUIREs exit 0.
inline std::string RunPython(std::vector<std::string> args, int timeout_seconds = 180) {
  args[0] = SourceDir() + "/" + args[0];
  args.insert(args.begin(), "/usr/bin/python3");
  CommandOptions options;
  options.timeout = std::chrono::seconds(timeout_seconds);
  Result<CommandOutput> output = RunCommand(args, options);
  REQUIRE(output.ok());
  INFO("command: " << args[1] << "\nstderr: " << output->stderr_text);
  REQUIRE(output->exit_code == 0);
  return output->stdout_text;
}

// A tiny model directory per (dtype, arch, extra flags), generated once per process.
inline std::string TinyModel(const std::string& dtype, const std::string& arch = "v32", bool tokenizer = false) {
  static TempDir dir;
  static std::map<std::string, std::string> made;
  std::string key = dtype + "_" + arch + (tokenizer ? "_tok" : "");
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  std::string out = dir / key;
  std::vector<std::string> args = {
      "scripts/make_tiny_model.py", "--out", out, "--preset", "tiny", "--dtype", dtype, "--arch", arch};
  if (!tokenizer) args.push_back("--no-tokenizer");
  RunPython(args);
  made[key] = out;
  return out;
}

inline std::string JoinIds(const std::vector<int32_t>& ids) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) text += (i ? "," : "") + std::to_string(ids[i]);
  return text;
}

// The reference's JSON result for tokens (see reference_model.py).
inline Json RunReference(const std::string& model_dir, const std::vector<int32_t>& tokens,
                         std::vector<std::string> flags = {}) {
  TempDir dir;
  std::string out = dir / "reference.json";
  std::vector<std::string> args = {
      "tests/inference/reference_model.py", "--model", model_dir, "--tokens", JoinIds(tokens), "--out", out};
  args.insert(args.end(), flags.begin(), flags.end());
  RunPython(args);
  Result<std::string> text = ReadFileToString(out);
  REQUIRE(text.ok());
  Result<Json> json = ParseJson(*text, "reference output");
  REQUIRE(json.ok());
  return *json;
}

// Deterministic pseudo-random token ids in [low, vocab).
inline std::vector<int32_t> PromptTokens(int count, int64_t vocab, uint32_t seed = 1, int32_t low = 2) {
  std::vector<int32_t> ids;
  uint32_t state = seed * 2654435761u + 12345u;
  for (int i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    ids.push_back(low + static_cast<int32_t>((state >> 8) % static_cast<uint32_t>(vocab - low)));
  }
  return ids;
}

}  // namespace envforge::inference::model_testing
