// The outcome of one <testcase>: its status and message, from its failure/error/skipped children
// or, when it has none, from the status/result attributes gtest and ctest write. The rules are
// listed under STATUS in verifiers/junit_report.h.
#pragma once

#include <string>

#include <pugixml.hpp>

#include "verifiers/junit_report.h"

namespace envforge::verifiers::internal {

struct Outcome {
  TestStatus status = TestStatus::kPass;
  std::string message;  // clean (ANSI escapes stripped, trimmed, bounded by kJunitMaxMessageBytes)
  bool flaky = false;   // a <flakyFailure>/<flakyError>: passed on a rerun
};

Outcome ReadOutcome(pugi::xml_node testcase);

}  // namespace envforge::verifiers::internal
