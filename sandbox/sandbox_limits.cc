#include "sandbox/sandbox_limits.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace envforge::sandbox {
namespace {

constexpr int64_t kMinMemoryBytes = int64_t{16} << 20;
constexpr int64_t kMinOpenFiles = 16;  // the interpreter and its session socket need a few
constexpr int64_t kMinDiskBytes = int64_t{1} << 20;

// Reads an integer field; floats with a fractional part, strings, booleans and values below
// `minimum` are rejected with a message naming the field.
Status ReadInt(const Json& json, const char* key, int64_t minimum, int64_t* out) {
  auto it = json.find(key);
  if (it == json.end()) return Status::Ok();
  const Json& value = *it;
  int64_t n = 0;
  if (value.is_number_unsigned()) {
    n = static_cast<int64_t>(std::min<uint64_t>(value.get<uint64_t>(), std::numeric_limits<int64_t>::max()));
  } else if (value.is_number_integer()) {
    n = value.get<int64_t>();
  } else if (double d = value.is_number_float() ? value.get<double>() : 0.5;
             value.is_number_float() && d == std::floor(d) && std::fabs(d) < 9.0e18) {
    n = static_cast<int64_t>(d);  // 1.0 is an integer, as JSON Schema says
  } else {
    return InvalidArgumentError(std::string("limits.") + key + ": expected an integer, got " + DumpJson(value));
  }
  if (n < minimum) {
    return InvalidArgumentError(std::string("limits.") + key + ": must be at least " + std::to_string(minimum) +
                                ", got " + std::to_string(n));
  }
  *out = n;
  return Status::Ok();
}

}  // namespace

Status ValidateLimits(const SandboxLimits& limits) {
  if (limits.wall_time.count() < 1) return InvalidArgumentError("limits.wall_time_ms: must be at least 1");
  if (limits.kill_grace.count() < 0) return InvalidArgumentError("limits.kill_grace_ms: must not be negative");
  if (limits.cpu_seconds < 1) return InvalidArgumentError("limits.cpu_seconds: must be at least 1");
  if (limits.memory_bytes != 0 && limits.memory_bytes < kMinMemoryBytes) {
    return InvalidArgumentError("limits.memory_bytes: must be 0 (unlimited) or at least " +
                                std::to_string(kMinMemoryBytes));
  }
  if (limits.max_output_bytes < 1) return InvalidArgumentError("limits.max_output_bytes: must be at least 1");
  if (limits.max_processes < 0) return InvalidArgumentError("limits.max_processes: must not be negative");
  if (limits.max_file_bytes < 1) return InvalidArgumentError("limits.max_file_bytes: must be at least 1");
  if (limits.max_open_files < kMinOpenFiles) {
    return InvalidArgumentError("limits.max_open_files: must be at least " + std::to_string(kMinOpenFiles));
  }
  if (limits.disk_bytes != 0 && limits.disk_bytes < kMinDiskBytes) {
    return InvalidArgumentError("limits.disk_bytes: must be 0 (no budget of its own) or at least " +
                                std::to_string(kMinDiskBytes));
  }
  return Status::Ok();
}

Json ToJson(const SandboxLimits& limits) {
  return Json{{"wall_time_ms", limits.wall_time.count()},
              {"kill_grace_ms", limits.kill_grace.count()},
              {"cpu_seconds", limits.cpu_seconds},
              {"memory_bytes", limits.memory_bytes},
              {"max_output_bytes", limits.max_output_bytes},
              {"max_processes", limits.max_processes},
              {"max_file_bytes", limits.max_file_bytes},
              {"max_open_files", limits.max_open_files},
              {"disk_bytes", limits.disk_bytes}};
}

Json ToWireLimits(const SandboxLimits& limits, const std::string& scratch_dir) {
  Json wire = ToJson(limits);
  wire.erase("kill_grace_ms");
  wire["scratch_dir"] = scratch_dir;
  return wire;
}

Result<SandboxLimits> SandboxLimitsFromJson(const Json& json, const SandboxLimits& base) {
  if (!json.is_object()) return InvalidArgumentError("limits: expected a JSON object, got " + DumpJson(json));
  static constexpr const char* kKnown[] = {"wall_time_ms",     "kill_grace_ms", "cpu_seconds",    "memory_bytes",
                                           "max_output_bytes", "max_processes", "max_file_bytes", "max_open_files",
                                           "disk_bytes",       "scratch_dir"};
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return it.key() == k; }) ==
        std::end(kKnown)) {
      return InvalidArgumentError("limits." + it.key() +
                                  ": unknown field (known: wall_time_ms, kill_grace_ms, cpu_seconds, memory_bytes, "
                                  "max_output_bytes, max_processes, max_file_bytes, max_open_files, disk_bytes)");
    }
  }
  if (auto it = json.find("scratch_dir"); it != json.end() && !it->is_string()) {
    return InvalidArgumentError("limits.scratch_dir: expected a string, got " + DumpJson(*it));
  }
  SandboxLimits limits = base;
  int64_t wall = limits.wall_time.count();
  int64_t grace = limits.kill_grace.count();
  ENVFORGE_RETURN_IF_ERROR(ReadInt(json, "wall_time_ms", 1, &wall));
  ENVFORGE_RETURN_IF_ERROR(ReadInt(json, "kill_grace_ms", 0, &grace));
  ENVFORGE_RETURN_IF_ERROR(ReadInt(json, "cpu_seconds", 1, &limits.cpu_seconds));
  ENVFORGE_RETURN_IF_ERROR(ReadInt(json, "memory_bytes", 0, &limits.memory_bytes));
  ENVFORGE_RETURN_IF_ERROR(ReadInt(json, "max_output_bytes", 1, &limits.max_output_bytes));
  ENVFORGE_RETURN_IF_ERROR(ReadInt(json, "max_processes", 0, &limits.max_processes));
  ENVFORGE_RETURN_IF_ERROR(ReadInt(json, "max_file_bytes", 1, &limits.max_file_bytes));
  ENVFORGE_RETURN_IF_ERROR(ReadInt(json, "max_open_files", kMinOpenFiles, &limits.max_open_files));
  ENVFORGE_RETURN_IF_ERROR(ReadInt(json, "disk_bytes", 0, &limits.disk_bytes));
  limits.wall_time = std::chrono::milliseconds(wall);
  limits.kill_grace = std::chrono::milliseconds(grace);
  ENVFORGE_RETURN_IF_ERROR(ValidateLimits(limits));
  return limits;
}

}  // namespace envforge::sandbox
