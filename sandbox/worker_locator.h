// Finding the envforge-worker executable.
#pragma once

#include <string>

#include "base/status.h"

namespace envforge::sandbox {

// In order: $ENVFORGE_WORKER, then envforge-worker beside the running executable (every build
// product lands in build/bin), then the build tree this library was compiled in. NotFound names
// every place that was tried.
Result<std::string> FindWorkerExecutable();

}  // namespace envforge::sandbox
