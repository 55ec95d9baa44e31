// Placeholder until its helper lands the command.
#include "apps/envforge/commands.h"

namespace envforge::cli {

int RunServeCommand(const std::vector<std::string>&) {
  return Fail(Status(StatusCode::kFailedPrecondition, "not implemented yet"), kExitInfra);
}

}  // namespace envforge::cli
