// A code session's working copy and the tools on it (toolsets/code_tools.h): read_file, list_dir,
// search_code, edit_file, apply_patch, run_command, run_tests, and the diff submit_result grades.
//
// Safety: the working copy belongs to the agent, .git included, so envforge never runs git or any
// other program on it outside the sandbox (a planted core.fsmonitor or hook would run on the
// host): apply_patch, search_code, run_command, run_tests and Diff run in RunSandboxedCommand;
// read_file, list_dir and edit_file are done here with openat2(RESOLVE_BENEATH), so no path or
// symlink reaches outside the working copy.
//
// Results: ok with a JSON content, or tool_error with a message a model can act on ("no file
// src/x.py", "old_text occurs 3 times"). Outputs are bounded (a file view at 2,000 lines or
// 256 KiB, a listing at 1,000 entries, a search at max_results lines, a command's output at its
// last 64 KiB).
// Thread safety: one thread at a time (a session's runner).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "sandbox/code/repo_source.h"
#include "sandbox/code/sandboxed_command.h"
#include "toolsets/tool_protocol.h"

namespace envforge::sandbox::code {

struct CodeWorkspaceOptions {
  std::string test_command;
  std::string junit_producer = "auto";
  std::string test_subset_command;  // code_instance.h; empty: a subset runs the whole suite
  CommandLimits command_limits;     // run_command (its timeout_seconds caps wall_ms lower)
  CommandLimits test_limits;        // run_tests
  std::filesystem::path scratch_root = "/tmp/envforge-code";
  // Disposes of the working copy when the workspace goes (working_copy_pool.h's Discard removes
  // it in the background); empty: removed at once.
  std::function<void(const std::filesystem::path&)> discard;
};

class CodeWorkspace {
 public:
  // Puts the repository at `dir` (which must not exist) and works there.
  static Result<std::unique_ptr<CodeWorkspace>> Create(const RepoSource& repo, const std::filesystem::path& dir,
                                                       CodeWorkspaceOptions options);
  // Works in `dir`, which already holds the working copy (a checkout of working_copy_pool.h, a
  // fork's copy); it is the workspace's from now on.
  static Result<std::unique_ptr<CodeWorkspace>> Open(const std::filesystem::path& dir, CodeWorkspaceOptions options);
  ~CodeWorkspace();  // disposes of the directory (options.discard)
  CodeWorkspace(const CodeWorkspace&) = delete;
  CodeWorkspace& operator=(const CodeWorkspace&) = delete;

  toolsets::ToolResult Call(const toolsets::ToolCall& call);
  // The working copy against the base commit (new files included, binary-safe), computed in the
  // sandbox.
  Result<std::string> Diff();
  const std::filesystem::path& dir() const { return dir_; }

 private:
  CodeWorkspace() = default;
  Result<Json> ReadFile(const Json& arguments);
  Result<Json> ListDir(const Json& arguments);
  Result<Json> SearchCode(const Json& arguments);
  Result<Json> EditFile(const Json& arguments);
  Result<Json> ApplyPatch(const Json& arguments);
  Result<Json> RunCommand(const Json& arguments);
  Result<Json> RunTests(const Json& arguments);
  // A command in the sandbox with `files` (name -> contents) readable at /input, and `env` set.
  Result<SandboxedCommandResult> Sandboxed(const std::string& command, const CommandLimits& limits,
                                           const std::vector<std::pair<std::string, std::string>>& files = {},
                                           const std::filesystem::path& junit_dir = {},
                                           const std::vector<std::pair<std::string, std::string>>& env = {});

  std::filesystem::path dir_;  // the working copy
  CodeWorkspaceOptions options_;
  int root_fd_ = -1;
};

}  // namespace envforge::sandbox::code
