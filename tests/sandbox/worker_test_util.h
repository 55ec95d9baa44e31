// Test helpers for the envforge-worker suites: a fixture bundle written straight to SQLite (per
// sandbox/env_bundle.h) and a zygote driven over the real wire (sandbox/internal/wire.h).
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "base/sqlite.h"
#include "sandbox/internal/wire.h"

namespace envforge::worker_test {

namespace wire = ::envforge::sandbox::wire;

// Tools, including the misbehaving ones each fault test needs.
inline constexpr char kToolsModule[] = R"PY(
import mmap
import os
import socket
import time
import ctypes

COUNTER = {"n": 0}


def get_hotel(name: str):
    """Look up a hotel by name."""
    rows = db.query("SELECT name, city, price FROM hotels WHERE name = ?", (name,))
    if not rows:
        raise ValueError("unknown hotel %r" % name)
    return rows[0]


def list_hotels(city: str, limit: int = 10):
    """List hotels in a city, cheapest first."""
    print("listing", city)
    return [r["name"] for r in db.query(
        "SELECT name FROM hotels WHERE city = ? ORDER BY price LIMIT ?", (city, limit))]


def set_price(name: str, price: int):
    """Set a hotel's price."""
    return db.execute("UPDATE hotels SET price = ? WHERE name = ?", (price, name))


def bump():
    """Increment a module global."""
    COUNTER["n"] += 1
    return COUNTER["n"]


def fail():
    """Raises."""
    raise ValueError("boom")


def spin():
    """Loops forever."""
    while True:
        pass


def slow_sql():
    """Runs a query that never ends."""
    return db.query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                    "SELECT count(*) AS n FROM c")


def hog():
    """Allocates without bound."""
    blocks = []
    while True:
        blocks.append(bytearray(16 << 20))


def shm_hog():
    """Touches shared memory without bound (not counted by RLIMIT_DATA: the cgroup stops it)."""
    region = mmap.mmap(-1, 1 << 30)
    for offset in range(0, 1 << 30, 4096):
        region[offset] = 1
    return "survived"


def segv():
    """Dereferences NULL."""
    ctypes.string_at(0)


def forker():
    """Forks in a loop, 64 times at most."""
    pids = []
    for _ in range(64):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        pids.append(pid)
    return len(pids)


def connect():
    """Opens a TCP connection to the host."""
    socket.create_connection(("127.0.0.1", 22), timeout=2)
    return "connected"


def passwd():
    """Reads /etc/passwd."""
    with open("/etc/passwd") as f:
        return f.read()


def write_outside():
    """Writes outside the scratch directory."""
    with open("/tmp/envforge_worker_test_escape.txt", "w") as f:
        f.write("x")
    return "wrote"


def write_scratch(text: str):
    """Writes note.txt in the scratch directory."""
    with open("note.txt", "w") as f:
        f.write(text)
    return os.getcwd()


def read_scratch():
    """Reads note.txt from the scratch directory."""
    with open("note.txt") as f:
        return f.read()


def big(n: int):
    """Returns a string of n characters."""
    return "x" * n


def not_json():
    """Returns a set."""
    return {1, 2}


def bad_sql():
    """Queries a table that does not exist."""
    return db.query("SELECT * FROM nope")


def tables():
    """Lists the tables a tool can see."""
    return [r["name"] for r in db.query("SELECT name FROM sqlite_schema WHERE type = 'table'")]


def whoami():
    """uid, pid and working directory."""
    return {"uid": os.getuid(), "pid": os.getpid(), "cwd": os.getcwd()}
)PY";

// name -> inputSchema
inline std::vector<std::pair<std::string, Json>> ToolSchemas() {
  auto object = [](Json properties, Json required) {
    return Json{
        {"type", "object"}, {"properties", properties}, {"required", required}, {"additionalProperties", false}};
  };
  Json none = object(Json::object(), Json::array());
  std::vector<std::pair<std::string, Json>> tools = {
      {"get_hotel", object({{"name", {{"type", "string"}}}}, {"name"})},
      {"list_hotels",
       object({{"city", {{"type", "string"}}}, {"limit", {{"type", "integer"}, {"default", 10}}}}, {"city"})},
      {"set_price", object({{"name", {{"type", "string"}}}, {"price", {{"type", "integer"}}}}, {"name", "price"})},
      {"write_scratch", object({{"text", {{"type", "string"}}}}, {"text"})},
      {"big", object({{"n", {{"type", "integer"}}}}, {"n"})},
  };
  for (const char* name : {"bump", "fail", "spin", "slow_sql", "hog", "shm_hog", "segv", "forker", "connect", "passwd",
                           "write_outside", "read_scratch", "not_json", "bad_sql", "tables", "whoami"}) {
    tools.emplace_back(name, none);
  }
  return tools;
}

inline constexpr char kCheapestSolution[] = R"PY(
import json


def solve(tools):
    names = tools.list_hotels("Paris")
    prices = [tools.get_hotel(name=n)["price"] for n in names]
    return {"cheapest": names[prices.index(min(prices))]}
)PY";

inline constexpr char kCheapestVerifier[] = R"PY(
def verify(answer, db):
    rows = db.query("SELECT name FROM hotels WHERE city = 'Paris' ORDER BY price LIMIT 1")
    if isinstance(answer, dict) and answer.get("cheapest") == rows[0]["name"]:
        return True
    return {"passed": False, "reasons": ["expected the cheapest hotel in Paris"]}
)PY";

// On "attack", tries to change the read-only view for later judgements (query_only off, a TEMP
// table shadowing hotels with a cheaper hotel, a write, ATTACH, a transaction) and passes with
// the statements that worked as reasons; on anything else, passes only when the view is pristine.
inline constexpr char kShadowingVerifier[] = R"PY(
def verify(answer, db):
    if answer == "attack":
        worked = []
        for sql in ("PRAGMA query_only=0",
                    "CREATE TEMP TABLE hotels(name TEXT, city TEXT, price INTEGER)",
                    "INSERT INTO temp.hotels VALUES ('Zeta', 'Paris', 1)",
                    "INSERT INTO main.hotels VALUES ('Eta', 'Paris', 2)",
                    "CREATE TEMP VIEW cheapest AS SELECT 'Zeta' AS name",
                    "ATTACH DATABASE ':memory:' AS other",
                    "BEGIN"):
            try:
                db.query(sql)
                worked.append(sql)
            except Exception:  # PermissionError, or no such table after a refused CREATE
                pass
        return {"passed": True, "reasons": worked}
    rows = db.query("SELECT name, price FROM hotels WHERE city = 'Paris' ORDER BY price LIMIT 1")
    temp = db.query("SELECT count(*) AS n FROM sqlite_temp_master")
    columns = [r["name"] for r in db.query("PRAGMA table_info(hotels)")]
    seen = "%s %s temp=%d columns=%s" % (rows[0]["name"], rows[0]["price"], temp[0]["n"], ",".join(columns))
    return {"passed": seen == "Alpha 100 temp=0 columns=name,city,price", "reasons": [seen]}
)PY";

// Every allowed module's public API still works through the read-only proxies, and so do format
// strings without underscore fields.
inline constexpr char kAllowedModulesSolution[] = R"PY(
import bisect
import collections.abc
import datetime as dt
import functools
import heapq
import itertools
import json
import math
import re
import statistics
from collections import Counter, OrderedDict
from json.decoder import JSONDecodeError


def solve(tools):
    counts = Counter("abca")
    try:
        json.loads("{")
        decoded = "no error"
    except JSONDecodeError:
        decoded = "JSONDecodeError"
    template = "{name}:{0}:{n[1]}"
    return {
        "counter": counts.most_common(1)[0][0],
        "mapping": isinstance(OrderedDict(), collections.abc.Mapping),
        "date": dt.date(2024, 1, 2).isoformat(),
        "reduce": functools.reduce(lambda a, b: a + b, [1, 2, 3]),
        "heap": heapq.nsmallest(1, [3, 1, 2])[0],
        "chain": list(itertools.chain([1], [2])),
        "floor": math.floor(math.pi),
        "match": re.compile(r"(\d+)").search("ab12").group(1),
        "mean": statistics.mean([1, 2, 3]),
        "insort": bisect.bisect_left([1, 2, 3], 2),
        "decoded": decoded,
        "format": template.format(7, name="x", n=[0, 1]),
        "format_map": "{a}-{b:>3}".format_map({"a": 1, "b": 2}),
        "unbound": str.format("{}+{}", 1, 2),
        "json": json.dumps({"k": [1]}, sort_keys=True),
    }
)PY";

struct FixtureTask {
  const char* id;
  const char* solution;
  const char* verifier;
};

inline const std::vector<FixtureTask>& FixtureTasks() {
  static const std::vector<FixtureTask> tasks = {
      {"cheapest", kCheapestSolution, kCheapestVerifier},
      {"reaches_for_db", "import sqlite3\n\n\ndef solve(tools):\n    return sqlite3.connect('x')\n", kCheapestVerifier},
      {"opens_files", "def solve(tools):\n    return open('/etc/passwd').read()\n", kCheapestVerifier},
      {"calls_badly", "def solve(tools):\n    return tools.get_hotel(42)\n", kCheapestVerifier},
      {"raising_verifier", kCheapestSolution, "def verify(answer, db):\n    raise KeyError('no such field')\n"},
      {"writing_verifier", kCheapestSolution,
       "def verify(answer, db):\n    db.execute('DELETE FROM hotels')\n    return True\n"},
      {"bad_verdict", kCheapestSolution, "def verify(answer, db):\n    return 'yes'\n"},
      {"slow_verifier", kCheapestSolution, "def verify(answer, db):\n    while True:\n        pass\n"},
      {"slow_solution", "def solve(tools):\n    while True:\n        tools.bump()\n", kCheapestVerifier},
      {"shadowing_verifier", kCheapestSolution, kShadowingVerifier},
      {"module_attribute", "import statistics\n\n\ndef solve(tools):\n    return str(statistics.sys.modules)\n",
       kCheapestVerifier},
      {"runtime_format",
       "def solve(tools):\n    field = '{0.' + '_' * 2 + 'class' + '_' * 2 + '}'\n"
       "    return field.format(tools)\n",
       kCheapestVerifier},
      {"runtime_format_map",
       "def solve(tools):\n    field = '{t.' + '_' * 2 + 'class' + '_' * 2 + '}'\n"
       "    return field.format_map({'t': tools})\n",
       kCheapestVerifier},
      {"unbound_format",
       "def solve(tools):\n    f = str.format\n"
       "    return f('{0.' + '_' * 2 + 'class' + '_' * 2 + '}', tools)\n",
       kCheapestVerifier},
      {"allowed_modules", kAllowedModulesSolution, kCheapestVerifier},
  };
  return tasks;
}

// Writes the fixture bundle at `path` (replacing it); another tools module (and its tools'
// schemas) may stand in for kToolsModule.
inline void WriteFixtureBundle(const std::string& path, const std::string& tools_module = kToolsModule,
                               const std::vector<std::pair<std::string, Json>>& tools = ToolSchemas()) {
  std::filesystem::remove(path);
  auto db = Database::Open(path, Database::Mode::kReadWriteCreate);
  REQUIRE(db.ok());
  REQUIRE(db->Exec(R"SQL(
    CREATE TABLE _env(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE _tools(position INTEGER NOT NULL, name TEXT PRIMARY KEY, description TEXT NOT NULL,
                        input_schema TEXT NOT NULL, source TEXT NOT NULL, builtin INTEGER NOT NULL);
    CREATE TABLE _tasks(id TEXT PRIMARY KEY, prompt TEXT NOT NULL, answer_schema TEXT NOT NULL,
                        solution_source TEXT NOT NULL, verifier_source TEXT NOT NULL, oracle_source TEXT,
                        difficulty INTEGER NOT NULL, knobs TEXT NOT NULL, version TEXT NOT NULL, passk TEXT,
                        audit TEXT);
    CREATE TABLE _files(path TEXT PRIMARY KEY, data BLOB NOT NULL);
    CREATE TABLE hotels(name TEXT PRIMARY KEY, city TEXT NOT NULL, price INTEGER NOT NULL);
    INSERT INTO hotels VALUES ('Alpha', 'Paris', 100), ('Beta', 'Paris', 200), ('Gamma', 'Rome', 150);
  )SQL")
              .ok());
  auto env = db->Prepare("INSERT INTO _env VALUES (?, ?)").value();
  for (auto& [key, value] : std::vector<std::pair<std::string, std::string>>{{"name", "worker_fixture"},
                                                                             {"kind", "general"},
                                                                             {"category", "test"},
                                                                             {"description", "fixture"},
                                                                             {"format_version", "1"},
                                                                             {"provenance", "{}"},
                                                                             {"tools_module", tools_module},
                                                                             {"content_hash", "unchecked"}}) {
    REQUIRE(env.BindAll({key, value}).ok());
    REQUIRE(env.Run().ok());
    REQUIRE(env.Reset().ok());
  }
  auto tool = db->Prepare("INSERT INTO _tools VALUES (?, ?, 'd', ?, 'src', ?)").value();
  int64_t position = 0;
  for (auto& [name, schema] : tools) {
    REQUIRE(tool.BindAll({position++, name, schema.dump(), int64_t{0}}).ok());
    REQUIRE(tool.Run().ok());
    REQUIRE(tool.Reset().ok());
  }
  Json submit = {
      {"type", "object"}, {"properties", {{"answer_text", {{"type", "string"}}}}}, {"required", {"answer_text"}}};
  REQUIRE(tool.BindAll({position, std::string("submit_result"), submit.dump(), int64_t{1}}).ok());
  REQUIRE(tool.Run().ok());
  auto task = db->Prepare("INSERT INTO _tasks VALUES (?, 'prompt', '{}', ?, ?, NULL, 1, '{}', ?, NULL, NULL)").value();
  for (const FixtureTask& t : FixtureTasks()) {
    REQUIRE(
        task.BindAll({std::string(t.id), std::string(t.solution), std::string(t.verifier), "v-" + std::string(t.id)})
            .ok());
    REQUIRE(task.Run().ok());
    REQUIRE(task.Reset().ok());
  }
}

inline Json Limits(int64_t wall_time_ms = 400) {
  return {{"wall_time_ms", wall_time_ms},
          {"cpu_seconds", 20},
          {"memory_bytes", int64_t{256} << 20},
          {"max_output_bytes", 65536},
          {"max_processes", 16}};
}

// One session: its socket and pid.
struct Session {
  UniqueFd fd;
  int pid = 0;
  std::string scratch_dir;
  int next_id = 0;

  Json Request(Json frame) {
    REQUIRE(wire::WriteFrame(fd.get(), frame.dump()).ok());
    auto reply = wire::ReadFrame(fd.get());
    REQUIRE_MESSAGE(reply.ok(), "the session died: " << reply.status().ToString());
    return Json::parse(*reply);
  }
  Json Call(const std::string& name, Json arguments = Json::object()) {
    int id = ++next_id;
    Json reply = Request({{"op", "call"}, {"id", id}, {"name", name}, {"arguments", arguments}});
    CHECK(reply["id"] == id);
    return reply;
  }
  Json Solve() { return Request({{"op", "solve"}, {"id", ++next_id}}); }
  // {"op":"judge"}: served only by a session that never ran a tool or a solution.
  Json Judge(std::vector<std::string> answers, const std::string& judge = "verifier") {
    int id = ++next_id;
    Json reply = Request({{"op", "judge"}, {"id", id}, {"judge", judge}, {"answers", answers}});
    CHECK(reply["id"] == id);
    return reply;
  }
  // True when the session closed its end (it died).
  bool AtEnd() {
    auto frame = wire::ReadFrame(fd.get());
    return !frame.ok() && frame.status().code() == StatusCode::kUnavailable;
  }
};

// A zygote started the way the manager starts it: fork/exec with the control socket on fd 3.
class Zygote {
 public:
  explicit Zygote(const std::string& bundle) {
    auto pair = MakeSocketPair().value();
    std::string worker = ExecutableDirectory() + "/envforge-worker";
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      dup2(pair.second.get(), 3);
      execl(worker.c_str(), worker.c_str(), "zygote", "--bundle", bundle.c_str(), "--control-fd", "3", "--scratch-root",
            "/tmp/envforge-worker-test", static_cast<char*>(nullptr));
      _exit(127);
    }
    control_ = std::move(pair.first);
    pair.second.Reset();  // a zygote that dies during start-up ends the stream
    ready_ = Next("ready");
  }
  // A graceful shutdown first: only the zygote can kill what its sessions forked.
  ~Zygote() {
    if (pid_ <= 0) return;
    (void)wire::WriteFrame(control_.get(), R"({"op":"shutdown"})");
    for (int i = 0; i < 1000; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      usleep(10000);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  const Json& ready() const { return ready_; }
  // The caller reaped the process itself.
  void Reaped() { pid_ = -1; }
  int pid() const { return pid_; }
  int control() const { return control_.get(); }

  Session Spawn(const std::string& task = "", Json limits = Limits()) {
    auto pair = MakeSocketPair().value();
    int id = ++next_id_;
    Json spawn = {{"op", "spawn"}, {"id", id}, {"task", task}, {"limits", limits}};
    REQUIRE(wire::SendFrameWithFd(control_.get(), spawn.dump(), pair.second.get()).ok());
    pair.second.Reset();
    Json spawned = Next("spawned", "spawn_failed");
    REQUIRE_MESSAGE(spawned["op"] == "spawned", spawned.dump());
    CHECK(spawned["id"] == id);
    Session session;
    session.fd = std::move(pair.first);
    UniqueFd pidfd;
    auto ready = wire::ReadFrameWithFd(session.fd.get(), &pidfd);
    REQUIRE(ready.ok());
    Json frame = Json::parse(*ready);
    REQUIRE_MESSAGE(frame["op"] == "ready", frame.dump());
    CHECK(pidfd.valid());
    session.pid = frame["pid"].get<int>();
    CHECK(session.pid == spawned["pid"].get<int>());
    session.scratch_dir = frame["scratch_dir"].get<std::string>();
    return session;
  }
  Json SpawnExpectingFailure(const std::string& task, Json limits = Limits()) {
    auto pair = MakeSocketPair().value();
    Json spawn = {{"op", "spawn"}, {"id", ++next_id_}, {"task", task}, {"limits", limits}};
    REQUIRE(wire::SendFrameWithFd(control_.get(), spawn.dump(), pair.second.get()).ok());
    return Next("spawned", "spawn_failed");
  }
  // Forks `parent` into a new session and has the zygote adopt it.
  Session Fork(Session& parent) {
    auto pair = MakeSocketPair().value();
    int id = ++parent.next_id;
    REQUIRE(wire::SendFrameWithFd(parent.fd.get(), Json{{"op", "fork"}, {"id", id}}.dump(), pair.second.get()).ok());
    pair.second.Reset();
    auto reply = wire::ReadFrame(parent.fd.get());
    REQUIRE(reply.ok());
    Json forked = Json::parse(*reply);
    REQUIRE_MESSAGE(forked["outcome"] == "ok", forked.dump());
    Session copy;
    copy.fd = std::move(pair.first);
    UniqueFd pidfd;
    auto ready = wire::ReadFrameWithFd(copy.fd.get(), &pidfd);
    REQUIRE(ready.ok());
    Json frame = Json::parse(*ready);
    REQUIRE(frame["op"] == "ready");
    CHECK(pidfd.valid());
    copy.pid = frame["pid"].get<int>();
    CHECK(copy.pid == forked["pid"].get<int>());
    copy.scratch_dir = frame["scratch_dir"].get<std::string>();
    copy.next_id = 1000;
    Json adopt = {{"op", "adopt"}, {"id", ++next_id_}, {"pid", copy.pid}, {"limits", Limits()}};
    REQUIRE(wire::WriteFrame(control_.get(), adopt.dump()).ok());
    Json adopted = Next("adopted", "adopt_failed");
    REQUIRE_MESSAGE(adopted["op"] == "adopted", adopted.dump());
    return copy;
  }
  // The "exited" report for `pid` (waits for it).
  Json Exited(int pid) {
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if ((*it)["op"] == "exited" && (*it)["pid"] == pid) {
        Json found = *it;
        pending_.erase(it);
        return found;
      }
    }
    for (;;) {
      Json frame = Read();
      if (frame["op"] == "exited" && frame["pid"] == pid) return frame;
      pending_.push_back(frame);
    }
  }
  // Shuts the zygote down; returns its exit status.
  int Shutdown() {
    REQUIRE(wire::WriteFrame(control_.get(), R"({"op":"shutdown"})").ok());
    int status = 0;
    REQUIRE(waitpid(pid_, &status, 0) == pid_);
    pid_ = -1;
    return status;
  }

 private:
  Json Read() {
    auto frame = wire::ReadFrame(control_.get());
    if (!frame.ok() && pid_ > 0) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL("the zygote died: " << (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                                         : "exit code " + std::to_string(WEXITSTATUS(status))));
      }
    }
    REQUIRE_MESSAGE(frame.ok(), "the zygote closed its control channel: " << frame.status().ToString());
    return Json::parse(*frame);
  }
  // The next frame whose op is `op` or `alternative`; others (exited reports) are kept.
  Json Next(const std::string& op, const std::string& alternative = "") {
    for (;;) {
      Json frame = Read();
      if (frame["op"] == op || (!alternative.empty() && frame["op"] == alternative)) return frame;
      if (frame["op"] == "fatal") FAIL("zygote fatal: " << frame.dump());
      pending_.push_back(frame);
    }
  }

  int pid_ = -1;
  UniqueFd control_;
  Json ready_;
  int next_id_ = 0;
  std::deque<Json> pending_;
};

// The bundle path for this test process (written once, removed when the process exits; a child
// that exits through exit() leaves it to its parent).
inline const std::string& FixtureBundle() {
  struct OwnedDir {
    std::string dir = std::filesystem::temp_directory_path() / ("envforge_worker_test_" + std::to_string(getpid()));
    pid_t owner = getpid();
    ~OwnedDir() {
      std::error_code ignored;
      if (getpid() == owner) std::filesystem::remove_all(dir, ignored);
    }
  };
  static const OwnedDir owned;
  static const std::string path = [] {
    std::filesystem::create_directories(owned.dir);
    std::string file = owned.dir + "/fixture.envdb";
    WriteFixtureBundle(file);
    return file;
  }();
  return path;
}

// Process state letter from /proc/<pid>/stat ('Z' = zombie), or 0 when gone.
inline char ProcessState(int pid) {
  auto stat = ReadFileToString("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return 0;
  auto paren = stat->rfind(')');
  return paren == std::string::npos || paren + 2 >= stat->size() ? 0 : (*stat)[paren + 2];
}

// The zygote's current children.
inline std::vector<int> Children(int pid) {
  std::vector<int> out;
  auto text = ReadFileToString("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  if (!text.ok()) return out;
  const char* p = text->c_str();
  char* end = nullptr;
  for (long child = std::strtol(p, &end, 10); end != p; p = end, child = std::strtol(p, &end, 10)) {
    out.push_back(static_cast<int>(child));
  }
  return out;
}

}  // namespace envforge::worker_test
