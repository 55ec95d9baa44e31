#include "sandbox/worker_locator.h"

#include <unistd.h>

#include <cstdlib>

#include "base/fd.h"

namespace envforge::sandbox {

Result<std::string> FindWorkerExecutable() {
  std::string tried;
  auto usable = [&tried](const std::string& path) {
    if (!tried.empty()) tried += ", ";
    tried += path;
    return ::access(path.c_str(), X_OK) == 0;
  };
  if (const char* env = std::getenv("ENVFORGE_WORKER"); env != nullptr && *env != '\0') {
    if (usable(env)) return std::string(env);
  }
  std::string beside = ExecutableDirectory() + "/envforge-worker";
  if (usable(beside)) return beside;
  std::string built = ENVFORGE_BUILD_BIN_DIR "/envforge-worker";
  if (usable(built)) return built;
  return NotFoundError("envforge-worker not found (tried " + tried + "); build it or set ENVFORGE_WORKER");
}

}  // namespace envforge::sandbox
