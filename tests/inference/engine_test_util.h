// Helpers of the batch-engine suites.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <future>

#include "base/status.h"
#include "inference/batch_engine.h"

namespace envforge::inference::engine_testing {

// The engine's answer to a request, which must come within `wait` and succeed.
inline EngineResult MustAnswer(std::future<Result<EngineResult>>& future,
                               std::chrono::seconds wait = std::chrono::seconds(120)) {
  REQUIRE(future.wait_for(wait) == std::future_status::ready);
  Result<EngineResult> result = future.get();
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  return std::move(*result);
}

inline EngineResult MustAnswer(std::future<Result<EngineResult>>&& future,
                               std::chrono::seconds wait = std::chrono::seconds(120)) {
  return MustAnswer(future, wait);
}

}  // namespace envforge::inference::engine_testing
