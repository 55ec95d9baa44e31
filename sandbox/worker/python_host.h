// The worker's embedded CPython: starting it, the analysis entry point, and the zygote/session
// runtime (python/runtime.py) driven from C++. pybind11 stays inside python_host.cc and
// db_module.cc so the other translation units compile fast.
//
// Threading: the worker is single-threaded; the calling thread holds the GIL from StartPython()
// on. Every function here must be called from that thread.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace envforge::sandbox::worker {

// Starts the interpreter in isolated mode (no site, no PYTHON* environment variables, no user
// site-packages, no signal handlers of its own), so a session's behaviour never depends on the
// host's Python configuration. Internal error when CPython cannot start.
Status StartPython();
// "3.11.2".
std::string PythonVersion();
// The absolute entries of sys.path (the standard library, lib-dynload, the zip): where the
// interpreter imports from, which the confined zygote must still be able to read. It depends on
// where CPython found its prefix, not necessarily /usr.
std::vector<std::string> PythonImportPaths();

// `envforge-worker analyze`: the request JSON text -> the result JSON text. InvalidArgument when
// the request is malformed (the analysis could not run).
Result<std::string> RunAnalyze(std::string_view request);

// What the zygote hands to the runtime: everything comes from the bundle's reserved tables.
struct RuntimeTool {
  std::string name;
  std::string input_schema;  // JSON text
};
struct RuntimeTask {
  std::string id;
  std::string solution_source;
  std::string verifier_source;
  std::string version;
  std::string oracle_source;  // empty: the task has no oracle
};
struct RuntimeEnvironment {
  std::string bundle_path;  // for messages
  std::string tools_module;
  std::vector<RuntimeTool> tools;  // without submit_result
  std::vector<RuntimeTask> tasks;
};

// Zygote start-up: registers the `_envforge` module, runs tools.py as module `tools` with the
// global `db` bound to session_db, compiles every solution and verifier (and checks them with
// the analysis rules), preimports the modules sessions use, then collects and freezes the heap.
// The databases must outlive the interpreter. InvalidArgument names the file and the problem.
Status LoadEnvironment(const RuntimeEnvironment& environment, sqlite3* session_db, sqlite3* verifier_db);

// Around fork()/clone() of the interpreter process.
void BeforeFork();
void AfterForkParent();
void AfterForkChild();

// In a new session (or a forked copy: task empty keeps the current binding). The numbers come
// from the session's SandboxLimits (sandbox_limits.h, where their defaults live).
struct SessionSettings {
  std::string task;  // empty: no task (submit_result and solve are refused)
  int64_t wall_time_ms = 0;
  int64_t max_output_bytes = 0;
  int64_t memory_bytes = 0;  // for messages only
  int64_t disk_bytes = 0;    // the family's disk budget, for messages and limit "disk" (0: none)
};
Status StartSession(const SessionSettings& settings);

// Puts the interpreter back to the zygote's state for a new episode (runtime.py's recycle(): the
// data, tools.py's globals, random, environ, signal handlers, ...), after the session's C++ side
// checked that nothing else of the episode runs. FailedPrecondition naming why when it cannot:
// the process must then not serve another episode.
Status RecycleInterpreter();

// One frame from the manager. kReply: payload is the reply frame. kFork, kRecycle: payload is
// the request (JSON text) for the C++ side to carry out. kClose: exit.
struct FrameAction {
  enum class Kind { kReply, kFork, kClose, kRecycle } kind = Kind::kReply;
  std::string payload;
};
FrameAction HandleFrame(std::string_view frame);
// The JSON reply {"id":id,"outcome":outcome,"message":message} (id: JSON text).
std::string ErrorReply(std::string_view id_json, std::string_view outcome, std::string_view message);

}  // namespace envforge::sandbox::worker
