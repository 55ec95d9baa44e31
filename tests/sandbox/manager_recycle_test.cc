// Recycled sessions (ManagerOptions::episodes_per_session_process): a closed session's process
// serves the next episode of its environment, put back to the zygote's state, against the real
// worker. What an episode leaves behind must not reach the next one; what recycling cannot undo
// must make the worker refuse (the process is then closed, and the next create forks).
#include <doctest/doctest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/sandbox/manager_test_util.h"

namespace envforge::sandbox::testing {
namespace {

// Tools that leave every kind of trace an episode can leave, and ones recycling must refuse.
constexpr const char* kRecycleTools = R"PY(
import decimal
import functools
import random
import threading

_seen = []
_config = {"mode": "pristine"}


class _Ledger:
    entries = []


@functools.lru_cache(maxsize=None)
def _squared(n):
    return n * n


def _remember(note, notes=[]):
    notes.append(note)
    return len(notes)


def _scaled(x, factor=2, label=("x",)):
    return x * factor


def episode_state(note):
    old_umask = os.umask(0o022)
    seen = {
        "seen": len(_seen), "mode": _config["mode"], "ledger": len(_Ledger.entries),
        "items": [r["name"] for r in db.query("SELECT name FROM items ORDER BY id")],
        "files": sorted(os.listdir(".")), "env": os.environ.get("EPISODE_NOTE"),
        "environ": dict(os.environ),
        "random": random.random(), "precision": decimal.getcontext().prec,
        "last": globals().get("LAST"), "remembered": _remember(note),
        "cache": _squared.cache_info().currsize, "umask": old_umask,
        "sigusr1_default": signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL,
        "sigusr2_ignored": signal.getsignal(signal.SIGUSR2) == signal.SIG_IGN,
        "rowid": db.last_insert_rowid(), "scaled": _scaled(1),
    }
    _seen.append(note)
    _config["mode"] = note
    _Ledger.entries.append(note)
    globals()["LAST"] = note
    db.execute("INSERT INTO items(name) VALUES (?)", (note,))
    db.execute("DELETE FROM items WHERE name = 'apple'")
    with open("trace.txt", "w") as f:
        f.write(note)
    os.mkdir("sub")
    with open("sub/deep.txt", "w") as f:
        f.write(note)
    os.environ["EPISODE_NOTE"] = note
    random.seed(note)
    decimal.getcontext().prec = 5
    _squared(7)
    signal.signal(signal.SIGUSR1, lambda *args: None)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    _scaled.__defaults__ = (10, ("y",))  # immutable defaults, replaced rather than changed
    for key in sorted(os.environ)[:1]:  # one the zygote had (EPISODE_NOTE is set above)
        if key != "EPISODE_NOTE":
            del os.environ[key]
    os.chdir("sub")
    return seen


def set_pragma():
    db.execute("PRAGMA reverse_unordered_selects = 1")
    return "set"


def shadow_table():
    db.execute("CREATE TEMP VIEW items AS SELECT 1 AS id, 'fake' AS name")
    return "shadowed"


def start_thread(seconds):
    threading.Thread(target=time.sleep, args=(seconds,), daemon=True).start()
    return "started"


def start_orphan(seconds):
    # A grandchild whose parent exits at once: it is nobody's child here any more.
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            time.sleep(seconds)
        os._exit(0)
    os.waitpid(pid, 0)
    return "started"


def run_child():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return "done"
)PY";

const std::vector<FixtureTool>& RecycleToolSpecs() {
  static const std::vector<FixtureTool> tools = {
      {"episode_state", R"({"type":"object","properties":{"note":{"type":"string"}},"required":["note"]})"},
      {"set_pragma", R"({"type":"object","properties":{}})"},
      {"shadow_table", R"({"type":"object","properties":{}})"},
      {"start_thread", R"({"type":"object","properties":{"seconds":{"type":"number"}},"required":["seconds"]})"},
      {"start_orphan", R"({"type":"object","properties":{"seconds":{"type":"number"}},"required":["seconds"]})"},
      {"run_child", R"({"type":"object","properties":{}})"},
  };
  return tools;
}

ManagerOptions RecycleOptions(size_t episodes = 8) {
  ManagerOptions options;
  options.limits = FastLimits();
  options.episodes_per_session_process = episodes;
  return options;
}

struct RecycleFixture {
  TempDir dir;
  std::unique_ptr<SessionManager> manager;
  std::string env_id;

  explicit RecycleFixture(ManagerOptions options = RecycleOptions(), const std::string& extra_source = "") {
    auto created = SessionManager::Create(std::move(options));
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    manager = std::move(created).value();
    std::string bundle = WriteFixtureBundle(dir / "recycle.envdb", "recycle", std::string(kRecycleTools) + extra_source,
                                            RecycleToolSpecs());
    auto opened = manager->OpenEnvironment(bundle);
    REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
    env_id = *opened;
  }

  SessionManager::SessionId NewSession(const std::string& task = "sum_task") {
    auto id = manager->CreateSession(env_id, SessionOptions{task, {}});
    REQUIRE_MESSAGE(id.ok(), id.status().ToString());
    return *id;
  }

  pid_t PidOf(SessionManager::SessionId id) {
    auto info = manager->GetSessionInfo(id);
    REQUIRE(info.ok());
    if (!WaitFor([&] { return manager->GetSessionInfo(id).value().pid != 0; })) FAIL("session without a pid");
    return manager->GetSessionInfo(id).value().pid;
  }

  Json Ok(SessionManager::SessionId id, const std::string& tool, Json arguments = Json::object()) {
    toolsets::ToolResult result = manager->CallTool(id, Call(tool, std::move(arguments)));
    INFO(tool << ": " << result.message);
    REQUIRE(result.ok());
    return result.content;
  }

  // Closes `id` and waits until the worker answered its recycle (or refused it).
  void CloseAndSettle(SessionManager::SessionId id) {
    const ManagerStats before = manager->Stats();
    REQUIRE(manager->CloseSession(id).ok());
    REQUIRE(WaitFor([&] {
      ManagerStats now = manager->Stats();
      return now.sessions_recycled + now.recycles_refused > before.sessions_recycled + before.recycles_refused;
    }));
  }
};

TEST_CASE("a recycled session's next episode sees nothing of the one before") {
  if (::geteuid() != 0) return;  // recycling needs a uid per family (the worker runs as root)
  RecycleFixture fixture;
  SessionManager::SessionId first = fixture.NewSession();
  const pid_t pid = fixture.PidOf(first);
  Json fresh = fixture.Ok(first, "episode_state", {{"note", "one"}});
  CHECK(fresh["items"] == Json::array({"apple", "pear", "plum"}));
  CHECK(fresh["files"] == Json::array());
  CHECK(fresh["remembered"] == 1);
  CHECK(fresh["seen"] == 0);
  fixture.CloseAndSettle(first);
  ManagerStats stats = fixture.manager->Stats();
  CHECK(stats.sessions_recycled == 1);
  CHECK(stats.recycles_refused == 0);
  CHECK(stats.recycled_idle == 1);
  CHECK(stats.live_sessions == 0);

  SessionManager::SessionId second = fixture.NewSession();
  CHECK(second != first);
  CHECK(fixture.PidOf(second) == pid);  // the same process
  CHECK(fixture.manager->Stats().recycled_idle == 0);
  CHECK(fixture.manager->Stats().recycled_taken == 1);
  Json again = fixture.Ok(second, "episode_state", {{"note", "two"}});
  // Data, scratch files, working directory, globals, containers, class attributes, default
  // arguments (changed in place or replaced), lru caches, decimal, environ (set and removed),
  // umask, signal handlers (a function's and SIG_IGN): as the fork had them; random
  // reseeded, as every fork reseeds it.
  CHECK(again["random"] != fresh["random"]);
  again.erase("random");
  fresh.erase("random");
  CHECK(again == fresh);

  // The closed id is gone for good; the new one is a session of its task.
  toolsets::ToolResult stale = fixture.manager->CallTool(first, Call("echo", {{"text", "hi"}}));
  CHECK(stale.outcome == toolsets::Outcome::kInvalidCall);
  CHECK(stale.message.find("unknown session") != std::string::npos);
  toolsets::ToolResult verdict = fixture.manager->CallTool(second, Call("submit_result", {{"answer_text", "5"}}));
  REQUIRE(verdict.ok());
  CHECK(verdict.content["passed"] == true);
  CHECK(fixture.manager->Solve(second).value().answer_text == "5");
}

TEST_CASE("a create right after a close waits for that recycle instead of forking; so does a reset") {
  if (::geteuid() != 0) return;
  RecycleFixture fixture;
  SessionManager::SessionId first = fixture.NewSession();
  const pid_t pid = fixture.PidOf(first);
  fixture.Ok(first, "incr");
  REQUIRE(fixture.manager->CloseSession(first).ok());
  SessionManager::SessionId second = fixture.NewSession();  // the recycle is still under way
  CHECK(fixture.PidOf(second) == pid);
  CHECK(fixture.Ok(second, "incr") == 1);  // module state as the zygote left it
  auto reset = fixture.manager->ResetSession(second);
  REQUIRE(reset.ok());
  CHECK(*reset != second);
  CHECK(fixture.PidOf(*reset) == pid);
  CHECK(fixture.Ok(*reset, "incr") == 1);
  ManagerStats stats = fixture.manager->Stats();
  CHECK(stats.recycled_taken == 2);
  CHECK(stats.sessions_recycled == 2);
  CHECK(stats.zygote_starts == 1);
}

TEST_CASE("what recycling cannot undo makes the worker refuse, and the next create forks") {
  if (::geteuid() != 0) return;
  RecycleFixture fixture;
  struct Case {
    const char* tool;
    Json arguments;
  };
  const std::vector<Case> cases = {
      {"set_pragma", Json::object()},
      {"shadow_table", Json::object()},
      {"start_thread", {{"seconds", 5}}},
      {"start_orphan", {{"seconds", 5}}},
  };
  uint64_t refused = 0;
  for (const Case& c : cases) {
    CAPTURE(c.tool);
    SessionManager::SessionId session = fixture.NewSession();
    const pid_t pid = fixture.PidOf(session);
    fixture.Ok(session, c.tool, c.arguments);
    fixture.CloseAndSettle(session);
    CHECK(fixture.manager->Stats().recycles_refused == ++refused);
    CHECK(WaitFor([&] { return !ProcessExists(pid) || ProcessState(pid) == "Z"; }));
    SessionManager::SessionId next = fixture.NewSession();
    CHECK(fixture.PidOf(next) != pid);
    fixture.Ok(next, "echo", {{"text", "fresh"}});
    REQUIRE(fixture.manager->CloseSession(next).ok());
  }
  // A child that exited and was reaped is no obstacle.
  SessionManager::SessionId session = fixture.NewSession();
  fixture.Ok(session, "run_child");
  const uint64_t recycled = fixture.manager->Stats().sessions_recycled;
  fixture.CloseAndSettle(session);
  CHECK(fixture.manager->Stats().sessions_recycled == recycled + 1);
}

TEST_CASE("sessions that must not be recycled are closed: a limit hit, a fork, the gold solution, the episode cap") {
  if (::geteuid() != 0) return;
  RecycleFixture fixture(RecycleOptions(/*episodes=*/2));
  auto closed_not_recycled = [&](SessionManager::SessionId id) {
    const pid_t pid = fixture.PidOf(id);
    const ManagerStats before = fixture.manager->Stats();
    REQUIRE(fixture.manager->CloseSession(id).ok());
    CHECK(WaitFor([&] { return !ProcessExists(pid) || ProcessState(pid) == "Z"; }));
    ManagerStats after = fixture.manager->Stats();
    CHECK(after.sessions_recycled == before.sessions_recycled);
    CHECK(after.recycles_refused == before.recycles_refused);
  };
  SessionManager::SessionId timed_out = fixture.NewSession();
  toolsets::ToolResult slow = fixture.manager->CallTool(timed_out, Call("slow_echo", {{"text", "x"}, {"seconds", 5}}));
  CHECK(slow.outcome == toolsets::Outcome::kTimeout);
  closed_not_recycled(timed_out);

  SessionManager::SessionId parent = fixture.NewSession();
  auto copy = fixture.manager->ForkSession(parent);
  REQUIRE(copy.ok());
  closed_not_recycled(*copy);
  closed_not_recycled(parent);

  SessionManager::SessionId solved = fixture.NewSession();
  REQUIRE(fixture.manager->Solve(solved).ok());
  closed_not_recycled(solved);

  // Two episodes per process: the second close ends it.
  SessionManager::SessionId first = fixture.NewSession();
  const pid_t pid = fixture.PidOf(first);
  fixture.CloseAndSettle(first);
  SessionManager::SessionId second = fixture.NewSession();
  CHECK(fixture.PidOf(second) == pid);
  closed_not_recycled(second);
}

TEST_CASE("state tools.py keeps in a value that cannot be copied makes every recycle refuse") {
  if (::geteuid() != 0) return;
  RecycleFixture fixture(RecycleOptions(), "\n_guard = threading.Lock()\n");
  SessionManager::SessionId session = fixture.NewSession();
  const pid_t pid = fixture.PidOf(session);
  fixture.Ok(session, "echo", {{"text", "hi"}});
  fixture.CloseAndSettle(session);
  CHECK(fixture.manager->Stats().recycles_refused == 1);
  CHECK(fixture.PidOf(fixture.NewSession()) != pid);
}

TEST_CASE("idle recycled processes are closed after idle_judge_timeout; the default recycles nothing") {
  if (::geteuid() != 0) return;
  ManagerOptions options = RecycleOptions();
  options.idle_judge_timeout = std::chrono::milliseconds(200);
  RecycleFixture fixture(options);
  SessionManager::SessionId session = fixture.NewSession();
  const pid_t pid = fixture.PidOf(session);
  fixture.CloseAndSettle(session);
  CHECK(WaitFor([&] { return fixture.manager->Stats().recycled_idle_closed == 1; }));
  CHECK(fixture.manager->Stats().recycled_idle == 0);
  CHECK(WaitFor([&] { return !ProcessExists(pid) || ProcessState(pid) == "Z"; }));

  RecycleFixture plain(RecycleOptions(/*episodes=*/1));
  SessionManager::SessionId once = plain.NewSession();
  const pid_t once_pid = plain.PidOf(once);
  REQUIRE(plain.manager->CloseSession(once).ok());
  CHECK(WaitFor([&] { return !ProcessExists(once_pid) || ProcessState(once_pid) == "Z"; }));
  CHECK(plain.manager->Stats().sessions_recycled == 0);
  CHECK(plain.PidOf(plain.NewSession()) != once_pid);
}

}  // namespace
}  // namespace envforge::sandbox::testing
