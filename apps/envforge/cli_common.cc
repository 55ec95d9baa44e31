#include <cstdio>

#include "apps/envforge/commands.h"

namespace envforge::cli {

int Fail(const Status& status, int code, const char* prefix) {
  std::fprintf(stderr, "%s: %s\n", prefix, status.message().c_str());
  return code;
}

int ExitCodeFor(const Status& status) { return ::envforge::ExitCodeFor(status.code()); }

}  // namespace envforge::cli
