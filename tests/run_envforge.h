// Runs the real envforge binary (beside the test binary in build/bin) with the arguments and
// returns its exit status and output; a command that cannot be run at all fails the test.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/subprocess.h"

namespace envforge::testing {

inline CommandOutput Envforge(std::vector<std::string> args) {
  args.insert(args.begin(), ExecutableDirectory() + "/envforge");
  CommandOptions options;
  options.timeout = std::chrono::seconds(120);
  auto output = RunCommand(args, options);
  REQUIRE(output.ok());
  return *output;
}

}  // namespace envforge::testing
