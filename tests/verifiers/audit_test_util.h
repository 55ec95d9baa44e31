// Helpers of the verifier-audit suites: scratch directories, copies of the reference trip
// environment with files replaced, packing, and session lanes over the built envforge-worker.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "sandbox/env_bundle.h"
#include "sandbox/env_pack.h"
#include "verifiers/audit.h"
#include "verifiers/judge_lane.h"
#include "tests/temp_dir.h"

namespace envforge::verifiers::testing {

namespace fs = std::filesystem;

inline fs::path SourceDir() {
  if (const char* dir = std::getenv("ENVFORGE_SOURCE_DIR"); dir != nullptr && *dir != '\0') return dir;
  return ENVFORGE_TEST_SOURCE_DIR;
}

inline fs::path TripSource() { return SourceDir() / "data/envs/trip_planning"; }

using ::envforge::testing::TempDir;

inline std::string ReadText(const std::string& path) {
  auto text = ReadFileToString(path);
  REQUIRE_MESSAGE(text.ok(), text.status().ToString());
  return *text;
}

inline void WriteText(const std::string& path, const std::string& contents) {
  fs::create_directories(fs::path(path).parent_path());
  REQUIRE(WriteFileAtomically(path, contents).ok());
}

// Copies the trip environment into dir/trip (without generated caches) and returns its path.
inline std::string CopyTrip(const TempDir& dir) {
  fs::path target = dir.path() / "trip";
  fs::copy(TripSource(), target, fs::copy_options::recursive);
  for (auto it = fs::recursive_directory_iterator(target); it != fs::recursive_directory_iterator(); ++it) {
    if (it->path().filename() == "__pycache__") {
      fs::remove_all(it->path());
      it.disable_recursion_pending();
    }
  }
  return target.string();
}

inline std::string Pack(const std::string& source, const std::string& output) {
  Status packed = sandbox::PackEnvironment(source, output);
  INFO(packed.ToString());
  REQUIRE(packed.ok());
  return output;
}

// Lanes over real sessions, with short limits so that hanging judges stay cheap.
struct SessionLanes {
  std::vector<std::unique_ptr<SessionJudgeLane>> owned;
  std::vector<JudgeLane*> lanes;
  explicit SessionLanes(const std::string& bundle, size_t count = 2,
                        std::chrono::milliseconds wall_time = std::chrono::milliseconds(2000)) {
    sandbox::ManagerOptions options;
    options.limits.wall_time = wall_time;
    options.limits.kill_grace = std::chrono::milliseconds(500);
    for (size_t i = 0; i < count; ++i) {
      auto lane = SessionJudgeLane::Create(bundle, options);
      REQUIRE_MESSAGE(lane.ok(), lane.status().ToString());
      lanes.push_back(lane->get());
      owned.push_back(std::move(lane).value());
    }
  }
};

// Audit options small enough for tests, large enough to expose the faults of the fixtures.
inline AuditOptions SmallOptions() {
  AuditOptions options;
  options.samples = 1500;
  options.neighbourhood = 1000;
  options.walk = 1000;
  options.rejudge_samples = 200;
  options.max_findings_per_kind = 100000;  // keep every finding: tests look for specific answers
  return options;
}

inline AuditReport Audit(const std::string& bundle_path, const std::vector<JudgeLane*>& lanes, AuditOptions options) {
  auto bundle = sandbox::EnvBundle::Load(bundle_path);
  REQUIRE_MESSAGE(bundle.ok(), bundle.status().ToString());
  auto report = RunAudit(*bundle, lanes, options);
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  return std::move(report).value();
}

inline std::vector<const Finding*> FindingsOf(const TaskAudit& audit, const std::string& kind) {
  std::vector<const Finding*> out;
  for (const auto& finding : audit.findings) {
    if (finding.kind == kind) out.push_back(&finding);
  }
  return out;
}

// The effective JSON of an answer text (its JSON, else the raw string), as the judges see it.
inline Json AnswerJson(const std::string& text) {
  auto parsed = ParseJson(text);
  return parsed.ok() ? *parsed : Json(text);
}

}  // namespace envforge::verifiers::testing
