// ForkSession against the real envforge-worker: a copy of a live session that diverges.
#include <doctest/doctest.h>

#include "tests/sandbox/manager_test_util.h"

namespace envforge::sandbox {
namespace {

using testing::Call;
using testing::ManagerFixture;
using toolsets::Outcome;
using toolsets::ToolResult;
using SessionId = SessionManager::SessionId;

TEST_SUITE("sandbox.manager.fork") {
  TEST_CASE("a fork copies the session's state, then the two diverge" * doctest::timeout(30)) {
    ManagerFixture f;
    SessionId parent = f.NewSession("sum_task");
    REQUIRE(f.manager->CallTool(parent, Call("put", {{"key", "a"}, {"value", 1}})).ok());
    REQUIRE(f.manager->CallTool(parent, Call("incr")).content == 1);
    REQUIRE(f.manager->CallTool(parent, Call("incr")).content == 2);

    auto forked = f.manager->ForkSession(parent);
    REQUIRE_MESSAGE(forked.ok(), forked.status().ToString());
    SessionId child = *forked;
    CHECK(child != parent);
    auto parent_info = f.manager->GetSessionInfo(parent);
    auto child_info = f.manager->GetSessionInfo(child);
    REQUIRE(parent_info.ok());
    REQUIRE(child_info.ok());
    CHECK(child_info->parent == parent);
    CHECK(child_info->task_id == "sum_task");
    CHECK(child_info->pid != parent_info->pid);
    CHECK(child_info->zygote_pid == parent_info->zygote_pid);
    CHECK(child_info->scratch_dir != parent_info->scratch_dir);
    // The copy is the zygote's child (CLONE_PARENT), so the zygote reaps it.
    std::vector<pid_t> zygote_children = testing::ChildrenOf(parent_info->zygote_pid);
    CHECK(std::find(zygote_children.begin(), zygote_children.end(), child_info->pid) != zygote_children.end());

    // State copied...
    CHECK(f.manager->CallTool(child, Call("get", {{"key", "a"}})).content == 1);
    CHECK(f.manager->CallTool(child, Call("incr")).content == 3);
    // ...then diverging.
    CHECK(f.manager->CallTool(parent, Call("incr")).content == 3);
    REQUIRE(f.manager->CallTool(child, Call("put", {{"key", "b"}, {"value", 2}})).ok());
    CHECK(f.manager->CallTool(parent, Call("get", {{"key", "b"}})).content.is_null());
    CHECK(f.manager->CallTool(child, Call("incr")).content == 4);

    // The fork keeps the task, and outlives its parent.
    REQUIRE(f.manager->CloseSession(parent).ok());
    auto solved = f.manager->Solve(child);
    REQUIRE_MESSAGE(solved.ok(), solved.status().ToString());
    CHECK(solved->answer == 5);
    CHECK(f.manager->CallTool(child, Call("incr")).content == 5);
    REQUIRE(f.manager->CloseSession(child).ok());
    CHECK_FALSE(testing::ProcessExists(child_info->pid));
    CHECK(testing::ZombieChildrenOf(child_info->zygote_pid).empty());
    CHECK(f.manager->Stats().sessions_forked == 1);
  }

  TEST_CASE("a fork waits behind the session's queued calls" * doctest::timeout(30)) {
    ManagerFixture f;
    SessionId parent = f.NewSession();
    // Requests from one thread keep their order: the fork runs after the first incr and before
    // the second, both queued behind a slow call.
    std::promise<ToolResult> slow, before, after;
    std::promise<Result<SessionId>> forked;
    f.manager->CallToolAsync(parent, Call("slow_echo", {{"text", "x"}, {"seconds", 0.3}}),
                             [&](ToolResult r) { slow.set_value(std::move(r)); });
    f.manager->CallToolAsync(parent, Call("incr"), [&](ToolResult r) { before.set_value(std::move(r)); });
    f.manager->ForkSessionAsync(parent, [&](Result<SessionId> id) { forked.set_value(std::move(id)); });
    f.manager->CallToolAsync(parent, Call("incr"), [&](ToolResult r) { after.set_value(std::move(r)); });
    CHECK(slow.get_future().get().content == "x");
    CHECK(before.get_future().get().content == 1);
    CHECK(after.get_future().get().content == 2);
    Result<SessionId> child = forked.get_future().get();
    REQUIRE_MESSAGE(child.ok(), child.status().ToString());
    CHECK(f.manager->CallTool(*child, Call("incr")).content == 2);
  }

  TEST_CASE("forks of forks, and a fork of a dead session is refused" * doctest::timeout(30)) {
    ManagerFixture f;
    SessionId root = f.NewSession();
    REQUIRE(f.manager->CallTool(root, Call("incr")).content == 1);
    auto a = f.manager->ForkSession(root);
    REQUIRE(a.ok());
    auto b = f.manager->ForkSession(*a);
    REQUIRE(b.ok());
    CHECK(f.manager->CallTool(*b, Call("incr")).content == 2);
    CHECK(f.manager->CallTool(*a, Call("incr")).content == 2);
    CHECK(f.manager->CallTool(root, Call("incr")).content == 2);

    ToolResult crashed = f.manager->CallTool(root, Call("segfault"));
    REQUIRE(crashed.outcome == Outcome::kCrashed);
    auto refused = f.manager->ForkSession(root);
    CHECK(refused.status().code() == StatusCode::kUnavailable);
    CHECK(f.manager->ForkSession(123456).status().code() == StatusCode::kNotFound);
    CHECK(f.manager->CallTool(*b, Call("incr")).content == 3);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
