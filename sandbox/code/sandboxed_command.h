// One shell command of a code environment (an install script, a test run, an agent's
// run_command), run to completion in a sandbox: bubblewrap namespaces (user, pid, net, ipc, uts,
// cgroup, mount: no network at all), the filesystem limited to /usr and /etc read-only (the
// toolchains), the working copy read-write at /work (the current directory) and a fresh tmpfs
// /tmp; the shared seccomp deny-list (sandbox/internal/seccomp_rules.h); a cgroup for memory and
// processes; rlimits (core 0, file size, open files); nice 10; and a wall clock that kills every
// process of the command when it runs out.
//
// The environment inside is cleared and set to: PATH, LANG=C.UTF-8, HOME=/tmp/home, TMPDIR=/tmp,
// CI=true, GOCACHE/GOPATH under /tmp with GOTOOLCHAIN=local and GOPROXY=off (Go never reaches for
// the network), npm_config_cache under /tmp, plus SandboxedCommandOptions::env.
//
// Contract:
// - Returns once the command and everything it started have ended (or were killed at the wall
//   clock); a failing command is a result (exit_code, signal), not an error. Errors: Unavailable
//   when bubblewrap is missing or the sandbox cannot start; InvalidArgument for a bad working
//   directory or bind.
// - Each isolation layer either holds or is reported "off: <why>" in the result's isolation; only
//   the namespaces are required. Without root there is no cgroup (memory and process limits off).
// - A command that outlives a SIGKILLed envforge is killed by the kernel janitor
//   (sandbox/jupyter/kernel_janitor.h): its scratch directory and cgroup carry the janitor's
//   "<pid>-k" prefix.
// Thread safety: RunSandboxedCommand may be called from many threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::sandbox::code {

struct CommandLimits {
  int64_t wall_ms = 10 * 60 * 1000;
  int64_t memory_bytes = int64_t{4} << 30;    // cgroup memory.max (builds and test suites)
  int64_t max_processes = 512;                // cgroup pids.max
  int64_t max_file_bytes = int64_t{1} << 30;  // RLIMIT_FSIZE
  int64_t open_files = 4096;                  // RLIMIT_NOFILE
  int64_t tmp_bytes = int64_t{1} << 30;       // size of the /tmp tmpfs
  size_t output_bytes = 256 * 1024;           // the tail of the output kept in the result

  Json ToJson() const;
};

struct SandboxedCommandOptions {
  std::string command;            // run as /bin/sh -c COMMAND
  std::filesystem::path workdir;  // an existing directory: /work inside, read-write
  // Further host directories bound read-write: (host path, absolute path inside).
  std::vector<std::pair<std::filesystem::path, std::string>> binds;
  std::vector<std::pair<std::string, std::string>> env;  // added after the defaults
  CommandLimits limits;
  std::filesystem::path scratch_root = "/tmp/envforge-code";
  std::string bwrap = "/usr/bin/bwrap";
};

struct SandboxedCommandResult {
  int exit_code = -1;      // valid when signal == 0 and !timed_out
  int signal = 0;          // the signal that ended the shell, or 0
  bool timed_out = false;  // killed at the wall clock
  bool out_of_memory = false;
  bool pids_limited = false;
  std::string output;        // stdout and stderr interleaved: the last limits.output_bytes bytes
  int64_t output_bytes = 0;  // everything the command wrote, kept or not
  double seconds = 0;
  Json isolation;  // {"namespaces", "seccomp", "cgroup", "rlimits", "filesystem", "network"}

  bool succeeded() const { return signal == 0 && !timed_out && exit_code == 0; }
  // "exit code 1", "signal 9", "wall clock (600 s)", "memory limit"...
  std::string EndReason() const;
};

Result<SandboxedCommandResult> RunSandboxedCommand(const SandboxedCommandOptions& options);

}  // namespace envforge::sandbox::code
