// Starting child programs: SpawnProcess (a long-lived child with a chosen descriptor layout,
// reaped by the caller) and RunCommand (to completion, with bounded time and output). The
// project's one process launcher: the sandbox manager starts its zygotes with SpawnProcess.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace envforge {

struct CommandOutput {
  int exit_code = -1;      // valid when term_signal == 0
  int term_signal = 0;     // the signal that ended the child, or 0
  bool timed_out = false;  // the child was killed because it ran past the timeout
  std::string stdout_text;
  std::string stderr_text;
};

struct CommandOptions {
  std::string stdin_text;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  size_t max_output_bytes = 64 << 20;  // per stream; the rest is discarded
};

// A descriptor of the child: the caller's `source` becomes the child's `target`. Sources are
// moved out of the way before any target is written, so a source may be another entry's target.
struct ChildFd {
  int target = -1;
  int source = -1;
};
inline constexpr size_t kMaxChildFds = 16;

// Starts argv[0] (looked up on PATH when it has no '/') with argv and returns its pid; the caller
// owns the child (reaps it, or opens a pidfd of it). The child has exactly the `fds` targets,
// plus whichever of 0, 1 and 2 `fds` does not name (inherited as they are); every other
// descriptor is closed at exec. Between fork and exec only async-signal-safe calls run, so a
// multi-threaded caller may use it. InvalidArgument for an empty argv or more than kMaxChildFds
// entries; when the program cannot be started, the error "cannot run <argv[0]>: <why>" (the
// child already reaped).
Result<pid_t> SpawnProcess(const std::vector<std::string>& argv, const std::vector<ChildFd>& fds);

// Runs argv[0] (looked up on PATH when it has no '/') with argv, through SpawnProcess: stdin,
// stdout and stderr are pipes, no other descriptor of the caller reaches it. Fails only when the
// program could not be started; a non-zero exit is reported in CommandOutput.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options = {});

}  // namespace envforge
