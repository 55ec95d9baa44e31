// The zygote: loads one environment, then forks a session per "spawn" and supervises them
// (sandbox/internal/wire.h, CONTROL CHANNEL).
#pragma once

#include <string>

namespace envforge::sandbox::worker {

struct ZygoteOptions {
  std::string bundle_path;
  int control_fd = -1;
  std::string scratch_root;  // default: /tmp/envforge-scratch
};

// Serves the control channel until shutdown or until it closes. Returns the process exit code
// (0 after shutdown, 1 after a fatal start-up error, which was reported as {"op":"fatal"}).
int RunZygote(const ZygoteOptions& options);

}  // namespace envforge::sandbox::worker
