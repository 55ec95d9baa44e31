// SandboxLimits: defaults, JSON forms and the errors of FromJson.
#include <doctest/doctest.h>

#include "sandbox/sandbox_limits.h"

namespace envforge::sandbox {
namespace {

TEST_SUITE("sandbox.limits") {
  TEST_CASE("defaults match the documented values") {
    SandboxLimits limits;
    CHECK(limits.wall_time == std::chrono::seconds(10));
    CHECK(limits.kill_grace == std::chrono::seconds(1));
    CHECK(limits.cpu_seconds == 60);
    CHECK(limits.memory_bytes == 512 * 1024 * 1024);
    CHECK(limits.max_output_bytes == 1024 * 1024);
    CHECK(limits.max_processes == 16);
    CHECK(limits.max_file_bytes == 512 * 1024 * 1024);
    CHECK(limits.max_open_files == 256);
    CHECK(ValidateLimits(limits).ok());
  }

  TEST_CASE("ToJson reads back, and the wire form is wire.h's LIMITS object") {
    SandboxLimits limits;
    limits.wall_time = std::chrono::milliseconds(1234);
    limits.kill_grace = std::chrono::milliseconds(0);
    limits.max_processes = 3;
    auto back = SandboxLimitsFromJson(ToJson(limits));
    REQUIRE(back.ok());
    CHECK(*back == limits);

    Json wire = ToWireLimits(limits, "/scratch/s1");
    CHECK(wire == Json::parse(R"({"wall_time_ms":1234,"cpu_seconds":60,"memory_bytes":536870912,
                               "max_output_bytes":1048576,"max_processes":3,"max_file_bytes":536870912,
                               "max_open_files":256,"scratch_dir":"/scratch/s1"})"));
    auto from_wire = SandboxLimitsFromJson(wire);
    REQUIRE(from_wire.ok());
    CHECK(from_wire->max_processes == 3);
  }

  TEST_CASE("FromJson overlays a partial object on the base") {
    SandboxLimits base;
    base.cpu_seconds = 7;
    auto limits = SandboxLimitsFromJson(Json{{"wall_time_ms", 500}, {"memory_bytes", 1.0 * (64 << 20)}}, base);
    REQUIRE(limits.ok());
    CHECK(limits->wall_time == std::chrono::milliseconds(500));
    CHECK(limits->memory_bytes == 64 << 20);
    CHECK(limits->cpu_seconds == 7);
  }

  TEST_CASE("FromJson names the bad field") {
    struct Case {
      const char* json;
      const char* expected;
    };
    for (const Case& c : {
             Case{R"({"memory_bytes":"lots"})", "limits.memory_bytes: expected an integer, got \"lots\""},
             Case{R"({"wall_time_ms":0})", "limits.wall_time_ms: must be at least 1, got 0"},
             Case{R"({"cpu_seconds":1.5})", "limits.cpu_seconds: expected an integer"},
             Case{R"({"max_processes":-2})", "limits.max_processes: must be at least 0, got -2"},
             Case{R"({"memory_bytes":1024})", "limits.memory_bytes: must be 0 (unlimited) or at least"},
             Case{R"({"max_open_files":3})", "limits.max_open_files: must be at least 16, got 3"},
             Case{R"({"kill_grace_ms":true})", "limits.kill_grace_ms: expected an integer"},
             Case{R"({"wall_time":10})", "limits.wall_time: unknown field"},
             Case{R"({"scratch_dir":7})", "limits.scratch_dir: expected a string"},
             Case{R"([1,2])", "limits: expected a JSON object"},
         }) {
      CAPTURE(c.json);
      auto limits = SandboxLimitsFromJson(Json::parse(c.json));
      REQUIRE_FALSE(limits.ok());
      CHECK(limits.status().code() == StatusCode::kInvalidArgument);
      CHECK(limits.status().message().find(c.expected) != std::string::npos);
    }
  }

  TEST_CASE("0 means unlimited for memory_bytes and max_processes") {
    auto limits = SandboxLimitsFromJson(Json{{"memory_bytes", 0}, {"max_processes", 0}});
    REQUIRE(limits.ok());
    CHECK(limits->memory_bytes == 0);
    CHECK(limits->max_processes == 0);
  }

  TEST_CASE("ValidateLimits rejects out-of-range values") {
    SandboxLimits limits;
    limits.kill_grace = std::chrono::milliseconds(-1);
    CHECK(ValidateLimits(limits).message().find("kill_grace_ms") != std::string::npos);
    limits = SandboxLimits{};
    limits.max_output_bytes = 0;
    CHECK(ValidateLimits(limits).message().find("max_output_bytes") != std::string::npos);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
