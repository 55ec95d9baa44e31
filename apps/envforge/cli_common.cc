#include <cstdio>

#include "apps/envforge/commands.h"

namespace envforge::cli {

int Fail(const Status& status, int code, const char* prefix) {
  std::fprintf(stderr, "%s: %s\n", prefix, status.message().c_str());
  return code;
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kDataLoss:
    case StatusCode::kAlreadyExists:
      return kExitUsage;
    default:
      return kExitInfra;
  }
}

}  // namespace envforge::cli
