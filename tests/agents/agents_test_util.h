// Helpers of the agents suites: temporary directories, step records and polling.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "agents/trajectory_store.h"
#include "base/json.h"
#include "toolsets/tool_protocol.h"
#include "tests/temp_dir.h"

namespace envforge::agents::testing {

namespace fs = std::filesystem;

using ::envforge::testing::TempDir;

inline std::string SourceDir() {
  const char* dir = std::getenv("ENVFORGE_SOURCE_DIR");
  return dir != nullptr ? dir : ENVFORGE_TEST_SOURCE_DIR;
}

// Opens (creates) a trajectory store; REQUIREs success.
inline std::unique_ptr<TrajectoryStore> OpenStore(const std::string& path, TrajectoryStoreOptions options = {}) {
  auto store = TrajectoryStore::Open(path, options);
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  return std::move(store).value();
}

// A step whose ok result carries `content`.
inline StepRecord OkStep(int64_t number, const std::string& tool, Json arguments, Json content) {
  StepRecord step;
  step.step = number;
  step.tool = tool;
  step.arguments = std::move(arguments);
  step.result.call_id = std::to_string(number);
  step.result.outcome = toolsets::Outcome::kOk;
  step.result.content = std::move(content);
  step.result.duration_us = 42;
  step.started_at_us = 1'700'000'000'000'000 + number;
  step.duration_us = 42;
  return step;
}

// Polls `predicate` every 5 ms until it holds or `timeout` passes (a wait, not a timed assertion).
template <typename Predicate>
bool WaitFor(Predicate predicate, std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return predicate();
}

}  // namespace envforge::agents::testing
