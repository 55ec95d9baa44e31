// The working copies of code sessions: the in-process tree copy (what it keeps, what it refuses)
// and the pool of templates and ready copies (one extraction per task, copies made ahead, a
// checkout is the session's own, discards freed at once).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "sandbox/code/repo_snapshot.h"
#include "sandbox/code/tree_copy.h"
#include "sandbox/code/working_copy_pool.h"
#include "tests/temp_dir.h"

namespace envforge::sandbox::code {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A small repository-like tree: nested files, an executable, a symlink out of the tree, a fifo.
fs::path MakeTree(const TempDir& dir) {
  const fs::path tree = dir.path() / "tree";
  Write(tree / "README.md", "hello\n");
  Write(tree / "src/pkg/mod.py", "def f():\n    return 1\n");
  Write(tree / "bin/run.sh", "#!/bin/sh\necho run\n");
  fs::permissions(tree / "bin/run.sh", fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  fs::create_symlink("/etc/passwd", tree / "src/escape");
  REQUIRE(mkfifo((tree / "pipe").c_str(), 0600) == 0);
  fs::create_directories(tree / "empty/dir");
  Write(tree / ".git/HEAD", "ref: refs/heads/main\n");
  return tree;
}

template <typename Condition>
bool WaitFor(Condition condition) {
  for (int i = 0; i < 500 && !condition(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return condition();
}

TEST_SUITE("code_working_copy") {
  TEST_CASE("a tree copy keeps files, modes, times, symlinks as links and fifos; it is independent") {
    TempDir dir;
    const fs::path tree = MakeTree(dir);
    const fs::file_time_type old_time = fs::file_time_type::clock::now() - std::chrono::hours(24);
    fs::last_write_time(tree / "README.md", old_time);
    const fs::path copy = dir.path() / "copy";
    REQUIRE(CopyTree(tree, copy).ok());
    CHECK(Read(copy / "src/pkg/mod.py") == "def f():\n    return 1\n");
    CHECK(Read(copy / ".git/HEAD") == "ref: refs/heads/main\n");
    CHECK((fs::status(copy / "bin/run.sh").permissions() & fs::perms::owner_exec) != fs::perms::none);
    CHECK(fs::last_write_time(copy / "README.md") == old_time);
    CHECK(fs::is_symlink(copy / "src/escape"));
    CHECK(fs::read_symlink(copy / "src/escape") == "/etc/passwd");
    CHECK(fs::is_fifo(copy / "pipe"));
    CHECK(fs::is_directory(copy / "empty/dir"));
    Write(copy / "README.md", "changed\n");
    CHECK(Read(tree / "README.md") == "hello\n");  // not a hardlink
  }

  TEST_CASE("a tree copy refuses an existing target, drops setuid, and leaves nothing behind on an error") {
    TempDir dir;
    const fs::path tree = MakeTree(dir);
    REQUIRE(chmod((tree / "bin/run.sh").c_str(), 04755) == 0);
    const fs::path copy = dir.path() / "copy";
    REQUIRE(CopyTree(tree, copy).ok());
    struct stat info {};
    REQUIRE(stat((copy / "bin/run.sh").c_str(), &info) == 0);
    CHECK((info.st_mode & 07777) == 0755);
    Status again = CopyTree(tree, copy);
    CHECK(again.code() == StatusCode::kAlreadyExists);
    CHECK(fs::exists(copy / "README.md"));  // the existing copy is left alone
    Status missing = CopyTree(dir.path() / "no-such-tree", dir.path() / "copy2");
    CHECK_FALSE(missing.ok());
    CHECK(missing.message().find("no-such-tree") != std::string::npos);
    CHECK_FALSE(fs::exists(dir.path() / "copy2"));
  }

  TEST_CASE("the pool extracts a task's template once, even when sessions ask at the same time") {
    TempDir dir;
    const std::string archive = TarDirectory(MakeTree(dir)).value();
    auto pool = WorkingCopyPool::Create({dir.path() / "pool", 2}).value();
    std::atomic<int> loads{0};
    auto loader = [&]() -> Result<std::string> {
      ++loads;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return archive;
    };
    std::vector<std::thread> sessions;
    std::atomic<int> ok{0};
    for (int i = 0; i < 4; ++i) {
      sessions.emplace_back([&] { ok += pool->Template("task-1", loader).ok() ? 1 : 0; });
    }
    for (auto& session : sessions) session.join();
    CHECK(ok == 4);
    CHECK(loads == 1);
    CHECK(pool->stats().templates == 1);
  }

  bool Mounted(const fs::path& dir) {
    std::ifstream mountinfo("/proc/self/mountinfo");
    for (std::string line; std::getline(mountinfo, line);) {
      if (line.find(" " + dir.string() + " ") != std::string::npos) return true;
    }
    return false;
  }

  TEST_CASE("copies (no overlay): checkouts are the session's own; copies are made ahead; discards leave at once") {
    TempDir dir;
    const std::string archive = TarDirectory(MakeTree(dir)).value();
    auto pool = WorkingCopyPool::Create({dir.path() / "pool", 2, false}).value();
    CHECK(pool->stats().method == "copy");
    CHECK(pool->Checkout("task-1", dir.path() / "s0").code() == StatusCode::kFailedPrecondition);
    REQUIRE(pool->Template("task-1", [&]() -> Result<std::string> { return archive; }).ok());

    REQUIRE(pool->Checkout("task-1", dir.path() / "s1").ok());  // nothing ready yet: copied
    CHECK(Read(dir.path() / "s1/src/pkg/mod.py") == "def f():\n    return 1\n");
    Write(dir.path() / "s1/src/pkg/mod.py", "broken\n");
    REQUIRE(WaitFor([&] { return pool->stats().copies_made_ahead >= 2; }));
    REQUIRE(pool->Checkout("task-1", dir.path() / "s2").ok());  // a ready one, renamed
    CHECK(Read(dir.path() / "s2/src/pkg/mod.py") == "def f():\n    return 1\n");
    const WorkingCopyPoolStats stats = pool->stats();
    CHECK(stats.copied_checkouts == 1);
    CHECK(stats.ready_checkouts == 1);

    pool->Discard(dir.path() / "s1");
    CHECK_FALSE(fs::exists(dir.path() / "s1"));  // the path is free at once
    REQUIRE(WaitFor([&] { return pool->stats().discarded == 1; }));
    CHECK(fs::is_empty(dir.path() / "pool/trash"));
    pool->Discard(dir.path() / "never-made");  // nothing to do
    CHECK(pool->stats().discarded == 1);
  }

  TEST_CASE("overlays: a checkout is a mount over the template; writes stay in the session's layer") {
    TempDir dir;
    const std::string archive = TarDirectory(MakeTree(dir)).value();
    auto pool = WorkingCopyPool::Create({dir.path() / "pool", 2}).value();
    if (pool->stats().method != "overlay") {
      MESSAGE("skipped: this process may not mount overlays (not root); sessions use copies");
      return;
    }
    const fs::path template_dir = pool->Template("task-1", [&]() -> Result<std::string> { return archive; }).value();
    REQUIRE(pool->Checkout("task-1", dir.path() / "s1").ok());
    REQUIRE(pool->Checkout("task-1", dir.path() / "s2").ok());
    CHECK(Mounted(dir.path() / "s1"));
    Write(dir.path() / "s1/src/pkg/mod.py", "broken\n");
    fs::remove(dir.path() / "s1/README.md");
    CHECK(Read(template_dir / "src/pkg/mod.py") == "def f():\n    return 1\n");
    CHECK(Read(dir.path() / "s2/src/pkg/mod.py") == "def f():\n    return 1\n");
    CHECK(fs::exists(dir.path() / "s2/README.md"));
    CHECK(fs::is_symlink(dir.path() / "s2/src/escape"));
    CHECK(pool->stats().overlay_checkouts == 2);
    CHECK(pool->stats().ready_checkouts + pool->stats().copied_checkouts == 0);

    pool->Discard(dir.path() / "s1");
    CHECK_FALSE(Mounted(dir.path() / "s1"));
    CHECK_FALSE(fs::exists(dir.path() / "s1"));
    REQUIRE(WaitFor([&] { return pool->stats().discarded == 1; }));  // its layer went too
    CHECK(fs::is_empty(dir.path() / "pool/layers") == false);        // s2's is still there
  }

  TEST_CASE("overlay forks copy the parent's layer: new, changed, deleted files and replaced directories") {
    TempDir dir;
    const std::string archive = TarDirectory(MakeTree(dir)).value();
    auto pool = WorkingCopyPool::Create({dir.path() / "pool", 0}).value();
    if (pool->stats().method != "overlay") {
      MESSAGE("skipped: this process may not mount overlays (not root); forks copy the tree");
      return;
    }
    REQUIRE(pool->Template("task-1", [&]() -> Result<std::string> { return archive; }).ok());
    const fs::path parent = dir.path() / "parent", child = dir.path() / "child";
    REQUIRE(pool->Checkout("task-1", parent).ok());
    Write(parent / "NEW.txt", "new\n");
    Write(parent / "src/pkg/mod.py", "changed\n");
    fs::remove(parent / "README.md");        // a whiteout in the layer
    fs::remove_all(parent / "empty");        // a directory deleted ...
    Write(parent / "empty/other.txt", "x");  // ... and made again: opaque, "empty/dir" stays gone
    REQUIRE(pool->Fork(parent, child).ok());
    CHECK(pool->stats().overlay_forks == 1);
    CHECK(Mounted(child));
    CHECK(Read(child / "NEW.txt") == "new\n");
    CHECK(Read(child / "src/pkg/mod.py") == "changed\n");
    CHECK_FALSE(fs::exists(child / "README.md"));
    CHECK(fs::exists(child / "empty/other.txt"));
    CHECK_FALSE(fs::exists(child / "empty/dir"));
    CHECK(Read(child / "bin/run.sh") == "#!/bin/sh\necho run\n");  // from the template
    // From here they go their own ways.
    Write(child / "src/pkg/mod.py", "child's\n");
    Write(parent / "PARENT.txt", "p");
    CHECK(Read(parent / "src/pkg/mod.py") == "changed\n");
    CHECK_FALSE(fs::exists(child / "PARENT.txt"));
    // A directory that is not a checkout of the pool is copied.
    const fs::path plain = dir.path() / "plain";
    REQUIRE(CopyTree(dir.path() / "tree", plain).ok());
    REQUIRE(pool->Fork(plain, dir.path() / "plain-fork").ok());
    CHECK(fs::exists(dir.path() / "plain-fork/README.md"));
    CHECK_FALSE(Mounted(dir.path() / "plain-fork"));
    for (const fs::path& used : {parent, child}) pool->Discard(used);
    CHECK_FALSE(Mounted(child));
  }

  TEST_CASE("overlays a dead process left mounted are detached by the next pool") {
    TempDir dir;
    const std::string archive = TarDirectory(MakeTree(dir)).value();
    auto crashed = WorkingCopyPool::Create({dir.path() / "code-copies-0", 0}).value();
    if (crashed->stats().method != "overlay") {
      MESSAGE("skipped: this process may not mount overlays (not root)");
      return;
    }
    REQUIRE(crashed->Template("task-1", [&]() -> Result<std::string> { return archive; }).ok());
    REQUIRE(crashed->Checkout("task-1", dir.path() / "left-behind").ok());
    // Its owner is now a process that has exited, as after a crash.
    const pid_t child = fork();
    if (child == 0) _exit(0);
    REQUIRE(child > 0);
    REQUIRE(waitpid(child, nullptr, 0) == child);
    { std::ofstream(dir.path() / "code-copies-0/owner.pid", std::ios::trunc) << child; }
    REQUIRE(Mounted(dir.path() / "left-behind"));
    auto next = WorkingCopyPool::Create({dir.path() / "code-copies-1", 0}).value();
    CHECK_FALSE(Mounted(dir.path() / "left-behind"));
    // A live owner's mounts are left alone.
    REQUIRE(next->Template("task-1", [&]() -> Result<std::string> { return archive; }).ok());
    REQUIRE(next->Checkout("task-1", dir.path() / "live").ok());
    auto third = WorkingCopyPool::Create({dir.path() / "code-copies-2", 0}).value();
    CHECK(Mounted(dir.path() / "live"));
    next->Discard(dir.path() / "live");
  }

  TEST_CASE("a failed extraction is not kept, and the pool's directory goes with it") {
    TempDir dir;
    const fs::path root = dir.path() / "pool";
    {
      auto pool = WorkingCopyPool::Create({root, 1}).value();
      auto failed =
          pool->Template("task-1", []() -> Result<std::string> { return DataLossError("the archive blob is gone"); });
      REQUIRE_FALSE(failed.ok());
      CHECK(failed.status().message() == "the archive blob is gone");
      auto garbage = pool->Template("task-1", []() -> Result<std::string> { return std::string("not a tar"); });
      CHECK_FALSE(garbage.ok());
      const std::string archive = TarDirectory(MakeTree(dir)).value();
      REQUIRE(pool->Template("task-1", [&]() -> Result<std::string> { return archive; }).ok());
      REQUIRE(pool->Checkout("task-1", dir.path() / "s1").ok());
      CHECK(fs::exists(dir.path() / "s1/README.md"));
      CHECK(WorkingCopyPool::Create({"", 1}).status().code() == StatusCode::kInvalidArgument);
    }
    CHECK_FALSE(fs::exists(root));
  }

}  // TEST_SUITE
}  // namespace
}  // namespace envforge::sandbox::code
