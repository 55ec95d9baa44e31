// The JSON nesting bound (base/json.h) at the manager's entry points, against the real worker:
// tool arguments and tool results at the value bound pass and one level past it answer a typed
// error; a raw frame nested past the document bound, from a session or from a zygote, is a
// protocol violation that ends only the peer that sent it; a bundle whose JSON nests too deep does
// not load. 100,000 levels (what crashed the manager) take the same paths.
#include <doctest/doctest.h>

#include "tests/sandbox/manager_test_util.h"

namespace envforge::sandbox {
namespace {

using testing::Call;
using testing::ManagerFixture;
using toolsets::Outcome;
using toolsets::ToolResult;

ManagerOptions FastOptions() {
  ManagerOptions options;
  options.limits = testing::FastLimits();
  return options;
}

// A list nested `depth` levels deep around `innermost` (depth 0 is the value itself).
Json NestedList(int depth, Json innermost = 1) {
  Json value = std::move(innermost);
  for (int i = 0; i < depth; ++i) {
    Json wrapper = Json::array();
    wrapper.push_back(std::move(value));
    value = std::move(wrapper);
  }
  return value;
}

TEST_SUITE("sandbox.manager.depth") {
  TEST_CASE("tool arguments: at the value bound they reach the tool, one level past it is invalid_call" *
            doctest::timeout(60)) {
    ManagerFixture f(FastOptions());
    auto session = f.NewSession();
    // {"key": k, "value": V} nests one level more than V.
    Json at_bound = NestedList(kMaxJsonValueDepth - 2, Json::array());
    ToolResult stored = f.manager->CallTool(session, Call("put", {{"key", "deep"}, {"value", at_bound}}));
    INFO(ToJson(stored).dump());
    REQUIRE(stored.outcome == Outcome::kOk);
    ToolResult read_back = f.manager->CallTool(session, Call("get", {{"key", "deep"}}));
    CHECK(read_back.outcome == Outcome::kOk);
    CHECK(read_back.content == at_bound);

    ToolResult past =
        f.manager->CallTool(session, Call("put", {{"key", "deeper"}, {"value", NestedList(kMaxJsonValueDepth)}}));
    CHECK(past.outcome == Outcome::kInvalidCall);
    CHECK(past.session_alive);
    CHECK(past.message == "arguments of 'put' nest deeper than 100 levels of arrays and objects");

    // 100,000 levels, built in process as a C++ caller could: refused before anything copies or
    // walks it.
    // (Assembled by moves: an initializer list would copy it, recursively.)
    Json huge_arguments = Json::object();
    huge_arguments["key"] = "huge";
    huge_arguments["value"] = NestedList(100'000);
    ToolResult huge = f.manager->CallTool(session, Call("put", std::move(huge_arguments)));
    CHECK(huge.outcome == Outcome::kInvalidCall);
    CHECK(f.manager->CallTool(session, Call("incr")).content == 1);
  }

  TEST_CASE("tool results: at the value bound they come back, past it the tool answers tool_error" *
            doctest::timeout(60)) {
    ManagerFixture f(FastOptions());
    auto session = f.NewSession();
    ToolResult at_bound = f.manager->CallTool(session, Call("nest", {{"depth", kMaxJsonValueDepth}, {"raw", false}}));
    INFO(ToJson(at_bound).dump().substr(0, 400));
    REQUIRE(at_bound.outcome == Outcome::kOk);
    CHECK(JsonDepthWithin(at_bound.content, kMaxJsonValueDepth));
    CHECK_FALSE(JsonDepthWithin(at_bound.content, kMaxJsonValueDepth - 1));

    ToolResult past = f.manager->CallTool(session, Call("nest", {{"depth", kMaxJsonValueDepth + 1}, {"raw", false}}));
    CHECK(past.outcome == Outcome::kToolError);
    CHECK(past.session_alive);
    CHECK(past.message == "tool 'nest' returned a value nested deeper than 100 levels of lists and dicts");

    // Deeper than Python's encoder recurses: still a typed tool_error, the session lives on.
    ToolResult far = f.manager->CallTool(session, Call("nest", {{"depth", 100'000}, {"raw", false}}));
    CHECK(far.outcome == Outcome::kToolError);
    CHECK(far.session_alive);
    CHECK(f.manager->CallTool(session, Call("incr")).content == 1);
  }

  TEST_CASE("a session that writes a frame nested past the document bound is killed; its neighbour lives" *
            doctest::timeout(60)) {
    ManagerFixture f(FastOptions());
    auto neighbour = f.NewSession();
    REQUIRE(f.manager->CallTool(neighbour, Call("incr")).content == 1);
    for (int depth : {kMaxJsonDepth + 1, 100'000}) {
      CAPTURE(depth);
      auto victim = f.NewSession();
      pid_t pid = f.manager->GetSessionInfo(victim)->pid;
      ToolResult broken = f.manager->CallTool(victim, Call("nest", {{"depth", depth}, {"raw", true}}));
      INFO(ToJson(broken).dump());
      CHECK(broken.outcome == Outcome::kCrashed);
      CHECK_FALSE(broken.session_alive);
      CHECK(broken.message.find("protocol violation") != std::string::npos);
      CHECK(broken.message.find("session frame nests deeper than 128 levels") != std::string::npos);
      CHECK(testing::WaitFor([&] { return !testing::ProcessExists(pid); }));
    }
    ToolResult alive = f.manager->CallTool(neighbour, Call("incr"));
    CHECK(alive.outcome == Outcome::kOk);
    CHECK(alive.content == 2);
  }

  TEST_CASE("a zygote that writes a control frame nested too deep fails its environment, not the manager" *
            doctest::timeout(60)) {
    testing::TempDir dir;
    auto created = SessionManager::Create(FastOptions());
    REQUIRE(created.ok());
    auto& manager = **created;
    // The salt is appended to tools.py after a comment marker: a leading newline makes it code, run
    // in the zygote at import time. It writes 100,000 levels into every socket it holds (the
    // control channel among them).
    const std::string hostile =
        "\nimport os as _os\n"
        "_body = b'[' * 100000 + b']' * 100000\n"
        "for _fd in range(3, 64):\n"
        "    try:\n"
        "        if _os.fstat(_fd).st_mode & 0o170000 == 0o140000:\n"
        "            _os.write(_fd, len(_body).to_bytes(4, 'little') + _body)\n"
        "    except OSError:\n"
        "        pass\n";
    auto hostile_env = manager.OpenEnvironment(testing::WriteFixtureBundle(dir / "hostile.envdb", hostile));
    REQUIRE_MESSAGE(hostile_env.ok(), hostile_env.status().ToString());
    auto refused = manager.CreateSession(*hostile_env);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == StatusCode::kUnavailable);
    CHECK(refused.status().message().find("zygote control frame nests deeper than 128 levels") != std::string::npos);

    auto healthy_env = manager.OpenEnvironment(testing::WriteFixtureBundle(dir / "healthy.envdb"));
    REQUIRE(healthy_env.ok());
    auto session = manager.CreateSession(*healthy_env);
    REQUIRE_MESSAGE(session.ok(), session.status().ToString());
    CHECK(manager.CallTool(*session, Call("incr")).content == 1);
  }

  TEST_CASE("a bundle whose JSON nests past the document bound does not load, with the column named" *
            doctest::timeout(30)) {
    testing::TempDir dir;
    const std::string path = testing::WriteFixtureBundle(dir / "deep.envdb");
    {
      auto db = Database::Open(path, Database::Mode::kReadWrite);
      REQUIRE(db.ok());
      testing::Exec(*db, "UPDATE _tools SET input_schema = ? WHERE name = 'echo'",
                    {std::string(200'000, '[') + std::string(200'000, ']')});
      auto hash = ComputeContentHash(path);
      REQUIRE_MESSAGE(hash.ok(), hash.status().ToString());
      testing::Exec(*db, "UPDATE _env SET value = ? WHERE key = 'content_hash'", {*hash});
    }
    auto created = SessionManager::Create(FastOptions());
    REQUIRE(created.ok());
    auto opened = (*created)->OpenEnvironment(path);
    REQUIRE_FALSE(opened.ok());
    INFO(opened.status().ToString());
    CHECK(opened.status().message().find("input_schema nests deeper than 128 levels") != std::string::npos);
  }
}

}  // namespace
}  // namespace envforge::sandbox
