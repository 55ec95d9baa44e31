// Helpers of the session-manager suites: a fixture environment written straight into a bundle
// file (env_bundle.h's schema), a manager over the built envforge-worker, and process probes.
#pragma once

#include <dirent.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/json.h"
#include "base/sqlite.h"
#include "sandbox/env_bundle.h"
#include "sandbox/session_manager.h"
#include "toolsets/tool_protocol.h"
#include "tests/temp_dir.h"

namespace envforge::sandbox::testing {

namespace fs = std::filesystem;

// tools.py of the fixture: well-behaved tools plus one per fault the sandbox must contain.
inline constexpr const char* kFixtureTools = R"PY(
"""Fixture tools for the session-manager tests."""
import ctypes
import os
import signal
import socket
import time

_state = {"counter": 0, "values": {}}


def echo(text):
    return text


def add(a, b):
    return a + b


def incr():
    _state["counter"] += 1
    return _state["counter"]


def put(key, value):
    _state["values"][key] = value
    return sorted(_state["values"])


def get(key):
    return _state["values"].get(key)


def count_items():
    return db.query("SELECT COUNT(*) AS n FROM items")[0]["n"]  # noqa: F821


def slow_echo(text, seconds):
    time.sleep(seconds)
    return text


def fail(message):
    raise ValueError(message)


def spin():
    n = 0
    while True:
        n += 1


def stuck_in_c(seconds):
    # Blocks every catchable signal, then sleeps inside libc: only SIGKILL ends it early.
    signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP})
    ctypes.CDLL(None).sleep(int(seconds))
    return "woke up"


def hog_memory():
    blocks = []
    while True:
        blocks.append(b"\x01" * (32 << 20))


def segfault():
    # A kernel-half address: unmapped for every user process (page 0 may be mapped on some hosts).
    return ctypes.string_at(0xFFFF800000000000, 16)


def fork_loop(count):
    started = 0
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            time.sleep(1)
            os._exit(0)
        started += 1
    return started


def connect(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(("127.0.0.1", port))
    s.close()
    return "connected"


def read_file(path):
    with open(path) as f:
        return f.read(64)


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    return len(text)


def big_output(size):
    return "x" * size


def nest(depth, raw):
    # A list nested `depth` levels deep, returned (raw false) or written as a frame of its own
    # straight into the session's socket (raw true), as a hostile tool could.
    if raw:
        body = b"[" * depth + b"]" * depth
        frame = len(body).to_bytes(4, "little") + body
        for fd in range(3, 256):
            try:
                if os.fstat(fd).st_mode & 0o170000 == 0o140000:
                    os.write(fd, frame)
            except OSError:
                pass
        time.sleep(5)
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value


def break_protocol(oversized):
    # Writes a bogus frame straight into the session's socket, ahead of the real reply.
    frame = b"\xff\xff\xff\xff" if oversized else b"\x05\x00\x00\x00}{{{{"
    sent = 0
    for fd in range(3, 256):
        try:
            if os.fstat(fd).st_mode & 0o170000 == 0o140000:
                os.write(fd, frame)
                sent += 1
        except OSError:
            pass
    return sent
)PY";

struct FixtureTool {
  const char* name;
  const char* schema;
};

inline const std::vector<FixtureTool>& FixtureToolSpecs() {
  static const std::vector<FixtureTool> tools = {
      {"echo",
       R"({"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false})"},
      {"add",
       R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false})"},
      {"incr", R"({"type":"object","properties":{},"additionalProperties":false})"},
      {"put", R"({"type":"object","properties":{"key":{"type":"string"},"value":{}},"required":["key","value"]})"},
      {"get", R"({"type":"object","properties":{"key":{"type":"string"}},"required":["key"]})"},
      {"count_items", R"({"type":"object","properties":{}})"},
      {"slow_echo",
       R"({"type":"object","properties":{"text":{"type":"string"},"seconds":{"type":"number","minimum":0}},"required":["text","seconds"]})"},
      {"fail", R"({"type":"object","properties":{"message":{"type":"string"}},"required":["message"]})"},
      {"spin", R"({"type":"object","properties":{}})"},
      {"stuck_in_c", R"({"type":"object","properties":{"seconds":{"type":"integer"}},"required":["seconds"]})"},
      {"hog_memory", R"({"type":"object","properties":{}})"},
      {"segfault", R"({"type":"object","properties":{}})"},
      {"fork_loop", R"({"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]})"},
      {"connect", R"({"type":"object","properties":{"port":{"type":"integer"}},"required":["port"]})"},
      {"read_file", R"({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]})"},
      {"write_file",
       R"({"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path","text"]})"},
      {"big_output", R"({"type":"object","properties":{"size":{"type":"integer"}},"required":["size"]})"},
      {"break_protocol", R"({"type":"object","properties":{"oversized":{"type":"boolean"}},"required":["oversized"]})"},
      {"nest",
       R"({"type":"object","properties":{"depth":{"type":"integer"},"raw":{"type":"boolean"}},"required":["depth","raw"]})"},
  };
  return tools;
}

using ::envforge::testing::TempDir;

inline void Exec(Database& db, const std::string& sql, const std::vector<SqlValue>& values) {
  auto stmt = db.Prepare(sql);
  REQUIRE_MESSAGE(stmt.ok(), stmt.status().ToString());
  REQUIRE(stmt->BindAll(values).ok());
  Status run = stmt->Run();
  REQUIRE_MESSAGE(run.ok(), run.ToString());
}

// Writes the fixture bundle: a data table `items` (3 rows), the tools above, and task
// "sum_task" whose gold solution adds 2 and 3 through the tools. `salt` changes the content
// (and so the environment id). `extra_source` is appended to tools.py and `extra_tools` to its
// tool list (a suite's own hostile tools). Returns the path.
inline std::string WriteFixtureBundle(const std::string& path, const std::string& salt = "",
                                      const std::string& extra_source = "",
                                      const std::vector<FixtureTool>& extra_tools = {}) {
  std::error_code ignored;
  fs::remove(path, ignored);
  {
    auto db = Database::Open(path, Database::Mode::kReadWriteCreate);
    REQUIRE_MESSAGE(db.ok(), db.status().ToString());
    REQUIRE(
        db->Exec("CREATE TABLE _env(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                 "CREATE TABLE _tools(position INTEGER NOT NULL, name TEXT PRIMARY KEY, description TEXT NOT NULL,"
                 " input_schema TEXT NOT NULL, source TEXT NOT NULL, builtin INTEGER NOT NULL);"
                 "CREATE TABLE _tasks(id TEXT PRIMARY KEY, prompt TEXT NOT NULL, answer_schema TEXT NOT NULL,"
                 " solution_source TEXT NOT NULL, verifier_source TEXT NOT NULL, oracle_source TEXT,"
                 " difficulty INTEGER NOT NULL, knobs TEXT NOT NULL, version TEXT NOT NULL, passk TEXT, audit TEXT);"
                 "CREATE TABLE _files(path TEXT PRIMARY KEY, data BLOB NOT NULL);"
                 "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
                 "INSERT INTO items(name) VALUES ('apple'), ('pear'), ('plum');")
            .ok());
    std::string tools_module = kFixtureTools;
    if (!salt.empty()) tools_module += "\n# salt: " + salt + "\n";
    tools_module += extra_source;
    const std::vector<std::pair<std::string, std::string>> env = {
        {"name", "manager_fixture"},    {"kind", "general"},
        {"category", "tests"},          {"description", "Fixture environment of the session-manager tests."},
        {"format_version", "1"},        {"provenance", R"({"generator":"manager_test_util.h"})"},
        {"tools_module", tools_module}, {"content_hash", std::string(64, '0')},
    };
    for (const auto& [key, value] : env) Exec(*db, "INSERT INTO _env VALUES (?, ?)", {key, value});
    int64_t position = 0;
    std::vector<FixtureTool> tools = FixtureToolSpecs();
    tools.insert(tools.end(), extra_tools.begin(), extra_tools.end());
    for (const FixtureTool& tool : tools) {
      Exec(*db, "INSERT INTO _tools VALUES (?, ?, ?, ?, ?, 0)",
           {position++, std::string(tool.name), std::string("fixture tool ") + tool.name, std::string(tool.schema),
            std::string("def ") + tool.name + "(...): ..."});
    }
    toolsets::ToolSpec submit = toolsets::SubmitResultSpec();
    Exec(*db, "INSERT INTO _tools VALUES (?, ?, ?, ?, ?, 1)",
         {position++, submit.name, submit.description, DumpJson(submit.input_schema), std::string("(runtime)")});
    Exec(*db, "INSERT INTO _tasks VALUES (?, ?, ?, ?, ?, NULL, 1, '{}', 'pending', NULL, NULL)",
         {std::string("sum_task"), std::string("What is 2 + 3? Answer with the integer."),
          std::string(R"({"type":"integer"})"), std::string("def solve(tools):\n    return tools.add(2, 3)\n"),
          std::string("def verify(answer, db):\n    return answer == 5\n")});
  }
  auto hash = ComputeContentHash(path);
  REQUIRE_MESSAGE(hash.ok(), hash.status().ToString());
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  REQUIRE(db.ok());
  Exec(*db, "UPDATE _env SET value = ? WHERE key = 'content_hash'", {*hash});
  TaskRecord task;
  task.id = "sum_task";
  task.prompt = "What is 2 + 3? Answer with the integer.";
  task.solution_source = "def solve(tools):\n    return tools.add(2, 3)\n";
  task.verifier_source = "def verify(answer, db):\n    return answer == 5\n";
  Exec(*db, "UPDATE _tasks SET version = ? WHERE id = 'sum_task'", {TaskVersion(*hash, task)});
  return path;
}

inline toolsets::ToolCall Call(const std::string& name, Json arguments = Json::object(), std::string id = "") {
  toolsets::ToolCall call;
  call.id = std::move(id);
  call.name = name;
  call.arguments = std::move(arguments);
  return call;
}

// Short limits so the fault tests stay fast.
inline SandboxLimits FastLimits() {
  SandboxLimits limits;
  limits.wall_time = std::chrono::milliseconds(1500);
  limits.kill_grace = std::chrono::milliseconds(500);
  limits.memory_bytes = int64_t{256} << 20;
  return limits;
}

// One manager with the fixture environment open.
struct ManagerFixture {
  TempDir dir;
  std::unique_ptr<SessionManager> manager;
  std::string env_id;

  explicit ManagerFixture(ManagerOptions options = {}) {
    auto created = SessionManager::Create(std::move(options));
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    manager = std::move(created).value();
    auto opened = manager->OpenEnvironment(WriteFixtureBundle(dir / "fixture.envdb"));
    REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
    env_id = *opened;
  }

  SessionManager::SessionId NewSession(const std::string& task = "", std::optional<SandboxLimits> limits = {}) {
    auto id = manager->CreateSession(env_id, SessionOptions{task, limits});
    REQUIRE_MESSAGE(id.ok(), id.status().ToString());
    return *id;
  }
};

// Process probes.
inline bool ProcessExists(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

// "R", "S", "Z", ... from /proc/<pid>/stat; empty when gone.
inline std::string ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return "";
  return text.substr(paren + 2, 1);
}

// Clock ticks of CPU time `pid` has used (utime + stime of /proc/<pid>/stat); -1 when gone.
inline long ProcessCpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int index = 3; index <= 15 && fields >> field; ++index) {  // field 3 is the state
    if (index == 14) utime = std::stol(field);
    if (index == 15) stime = std::stol(field);
  }
  return utime + stime;
}

// Children of `pid`, from /proc/<pid>/task/*/children.
inline std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> children;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "children");
    pid_t child;
    while (in >> child) children.push_back(child);
  }
  return children;
}

inline std::vector<pid_t> ZombieChildrenOf(pid_t pid) {
  std::vector<pid_t> zombies;
  for (pid_t child : ChildrenOf(pid)) {
    if (ProcessState(child) == "Z") zombies.push_back(child);
  }
  return zombies;
}

inline size_t OpenFdCount() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

// Polls `predicate` every 10 ms until it holds or `timeout` passes.
template <typename Predicate>
bool WaitFor(Predicate predicate, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return predicate();
}

inline std::string IsolationLayer(SessionManager& manager, const std::string& env_id, const std::string& layer) {
  for (const ZygoteInfo& zygote : manager.Zygotes()) {
    if (zygote.env_id == env_id && zygote.isolation.contains(layer) && zygote.isolation[layer].is_string()) {
      return zygote.isolation[layer].get<std::string>();
    }
  }
  return "";
}

}  // namespace envforge::sandbox::testing
