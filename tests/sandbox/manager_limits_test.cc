// SandboxLimits: defaults, JSON forms and the errors of FromJson.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "sandbox/sandbox_limits.h"
#include "tests/sandbox/manager_test_util.h"

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
    CHECK(limits.disk_bytes == 256 * 1024 * 1024);
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
                               "max_open_files":256,"disk_bytes":268435456,"scratch_dir":"/scratch/s1"})"));
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
             Case{R"({"disk_bytes":4096})", "limits.disk_bytes: must be 0 (no budget of its own) or at least 1048576"},
             Case{R"({"disk_bytes":-1})", "limits.disk_bytes: must be at least 0, got -1"},
             Case{R"({"disk_bytes":"1G"})", "limits.disk_bytes: expected an integer"},
             Case{R"([1,2])", "limits: expected a JSON object"},
         }) {
      CAPTURE(c.json);
      auto limits = SandboxLimitsFromJson(Json::parse(c.json));
      REQUIRE_FALSE(limits.ok());
      CHECK(limits.status().code() == StatusCode::kInvalidArgument);
      CHECK(limits.status().message().find(c.expected) != std::string::npos);
    }
  }

  TEST_CASE("disk_bytes reads back from JSON and travels on the wire; 0 means no budget of its own") {
    auto limits = SandboxLimitsFromJson(Json{{"disk_bytes", 8 << 20}});
    REQUIRE(limits.ok());
    CHECK(limits->disk_bytes == 8 << 20);
    CHECK(ToJson(*limits)["disk_bytes"] == 8 << 20);
    CHECK(ToWireLimits(*limits, "/s")["disk_bytes"] == 8 << 20);
    auto none = SandboxLimitsFromJson(Json{{"disk_bytes", 0}});
    REQUIRE(none.ok());
    CHECK(none->disk_bytes == 0);
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

  // Mount points at or under `root` in the test process's (the manager's) mount table.
  std::vector<std::string> HostMountsUnder(const std::string& root) {
    std::ifstream in("/proc/self/mountinfo");
    std::vector<std::string> found;
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string id, parent, device, source, mount_point;
      fields >> id >> parent >> device >> source >> mount_point;
      if (mount_point == root || mount_point.rfind(root + "/", 0) == 0) found.push_back(mount_point);
    }
    return found;
  }

  TEST_CASE("a session's disk budget answers limit disk through the manager; none is mounted on the host" *
            doctest::timeout(60)) {
    testing::ManagerFixture f;
    std::string root = f.manager->options().scratch_root;
    SandboxLimits small = testing::FastLimits();
    small.disk_bytes = 1 << 20;
    SessionManager::SessionId tight = f.NewSession("", small);
    SessionManager::SessionId roomy = f.NewSession();
    if (testing::IsolationLayer(*f.manager, f.env_id, "session_disk") != "on") {
      MESSAGE("no disk budgets here: " << testing::IsolationLayer(*f.manager, f.env_id, "session_disk"));
      return;
    }
    std::string two_mib(2 << 20, 'x');
    auto tight_info = f.manager->GetSessionInfo(tight);
    REQUIRE(tight_info.ok());
    CHECK(tight_info->limits.disk_bytes == 1 << 20);
    toolsets::ToolResult full = f.manager->CallTool(
        tight, testing::Call("write_file", {{"path", tight_info->scratch_dir + "/big.txt"}, {"text", two_mib}}));
    INFO(toolsets::ToJson(full).dump());
    CHECK(full.outcome == toolsets::Outcome::kToolError);
    CHECK(full.limit == "disk");
    CHECK(full.message.find("disk budget is 1048576 bytes") != std::string::npos);
    // The session lives on, and another session's budget is its own.
    CHECK(f.manager->CallTool(tight, testing::Call("add", {{"a", 1}, {"b", 2}})).content == 3);
    auto roomy_info = f.manager->GetSessionInfo(roomy);
    REQUIRE(roomy_info.ok());
    toolsets::ToolResult fits = f.manager->CallTool(
        roomy, testing::Call("write_file", {{"path", roomy_info->scratch_dir + "/big.txt"}, {"text", two_mib}}));
    CHECK(fits.outcome == toolsets::Outcome::kOk);
    CHECK(HostMountsUnder(root).empty());
    f.manager.reset();
    CHECK(HostMountsUnder(root).empty());
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
