// Running a child program to completion with bounded time and output.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace envforge {

struct CommandOutput {
  int exit_code = -1;     // valid when term_signal == 0
  int term_signal = 0;    // the signal that ended the child, or 0
  bool timed_out = false;  // the child was killed because it ran past the timeout
  std::string stdout_text;
  std::string stderr_text;
};

struct CommandOptions {
  std::string stdin_text;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  size_t max_output_bytes = 64 << 20;  // per stream; the rest is discarded
};

// Runs argv[0] (looked up on PATH when it has no '/') with argv. Fails only when the program
// could not be started; a non-zero exit is reported in CommandOutput.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options = {});

}  // namespace envforge
