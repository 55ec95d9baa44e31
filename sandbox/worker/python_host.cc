// The embedded interpreter: start-up, the analysis module, and the bridge to python/runtime.py.
#include "sandbox/worker/python_host.h"

#include <pybind11/embed.h>

#include "base/json.h"
#include "sandbox/worker/db_module.h"
#include "sandbox/worker/embedded_python.h"

namespace py = pybind11;

namespace envforge::sandbox::worker {
namespace {

// Borrowed forever: the runtime's handle() is called once per frame, so look it up once.
PyObject* g_handle = nullptr;

std::string DescribePythonError(py::error_already_set& error) {
  std::string text = error.what();
  // pybind11 appends the traceback on later lines; the first line names the exception.
  auto newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(0, newline);
}

// Executes one embedded source file as module `name` (registered in sys.modules).
py::module_ LoadEmbeddedModule(const char* name, const char* filename, const char* source) {
  py::module_ module = py::reinterpret_steal<py::module_>(PyModule_New(name));
  if (!module) throw py::error_already_set();
  py::dict globals = module.attr("__dict__");
  globals["__builtins__"] = py::module_::import("builtins");
  globals["__file__"] = filename;
  py::module_::import("sys").attr("modules")[name] = module;
  py::object code = py::reinterpret_steal<py::object>(Py_CompileString(source, filename, Py_file_input));
  if (!code) throw py::error_already_set();
  py::object result = py::reinterpret_steal<py::object>(PyEval_EvalCode(code.ptr(), globals.ptr(), globals.ptr()));
  if (!result) throw py::error_already_set();
  return module;
}

py::module_ AnalysisModule() {
  py::dict modules = py::module_::import("sys").attr("modules");
  if (modules.contains("_envforge_analyze")) return modules["_envforge_analyze"];
  return LoadEmbeddedModule("_envforge_analyze", "<envforge>/analyze.py", embedded::kAnalyze);
}

}  // namespace

Status StartPython() {
  PyConfig config;
  PyConfig_InitIsolatedConfig(&config);
  config.site_import = 0;              // no site-packages: sessions see the standard library only
  config.install_signal_handlers = 0;  // the worker owns SIGINT, SIGPIPE, SIGCHLD
  config.write_bytecode = 0;           // never write __pycache__ (the zygote runs as root)
  config.use_hash_seed = 1;            // a fixed string hash: set order is the same in every
  config.hash_seed = 0;                // zygote, so replays see the same observations
  config.parse_argv = 0;
  try {
    py::initialize_interpreter(&config, 0, nullptr, false);
  } catch (const std::exception& error) {
    return InternalError(std::string("cannot start the embedded Python: ") + error.what());
  }
  return Status::Ok();
}

std::string PythonVersion() {
  std::string version = Py_GetVersion();
  auto space = version.find(' ');
  return space == std::string::npos ? version : version.substr(0, space);
}

std::vector<std::string> PythonImportPaths() {
  std::vector<std::string> paths;
  try {
    for (py::handle entry : py::module_::import("sys").attr("path")) {
      if (!py::isinstance<py::str>(entry)) continue;
      std::string path = entry.cast<std::string>();
      if (path.size() > 1 && path[0] == '/') paths.push_back(path);
    }
  } catch (py::error_already_set&) {
    PyErr_Clear();
  }
  return paths;
}

Result<std::string> RunAnalyze(std::string_view request) {
  try {
    py::module_ analysis = AnalysisModule();
    py::object result = analysis.attr("analyze")(py::str(request.data(), request.size()));
    return result.cast<std::string>();
  } catch (py::error_already_set& error) {
    if (error.matches(PyExc_ValueError) || error.matches(PyExc_TypeError) || error.matches(PyExc_RecursionError)) {
      return InvalidArgumentError("malformed analyze request: " + DescribePythonError(error));
    }
    return InternalError("analysis failed: " + DescribePythonError(error));
  }
}

Status LoadEnvironment(const RuntimeEnvironment& environment, sqlite3* session_db, sqlite3* verifier_db) {
  try {
    AnalysisModule();
    py::module_ runtime = LoadEmbeddedModule("_envforge_runtime", "<envforge>/runtime.py", embedded::kRuntime);
    py::list tools;
    for (const RuntimeTool& tool : environment.tools) tools.append(py::make_tuple(tool.name, tool.input_schema));
    py::list tasks;
    for (const RuntimeTask& task : environment.tasks) {
      tasks.append(
          py::make_tuple(task.id, task.solution_source, task.verifier_source, task.version, task.oracle_source));
    }
    runtime.attr("load")(environment.bundle_path, environment.tools_module, tools, tasks,
                         NewDbObject(session_db, false), NewDbObject(verifier_db, true));
    g_handle = runtime.attr("handle").ptr();
    Py_INCREF(g_handle);
    return Status::Ok();
  } catch (py::error_already_set& error) {
    // runtime.LoadError messages already name the bundle; anything else gets the context here.
    std::string type = py::str(error.type().attr("__name__")).cast<std::string>();
    if (type == "LoadError") return InvalidArgumentError(py::str(error.value()).cast<std::string>());
    return InvalidArgumentError(environment.bundle_path +
                                ": cannot load the environment: " + DescribePythonError(error));
  }
}

void BeforeFork() { PyOS_BeforeFork(); }
void AfterForkParent() { PyOS_AfterFork_Parent(); }
void AfterForkChild() { PyOS_AfterFork_Child(); }

Status StartSession(const SessionSettings& settings) {
  try {
    py::module_::import("_envforge_runtime")
        .attr("start_session")(settings.task, settings.wall_time_ms, settings.max_output_bytes, settings.memory_bytes,
                               settings.disk_bytes);
    return Status::Ok();
  } catch (py::error_already_set& error) {
    return InvalidArgumentError(DescribePythonError(error));
  }
}

Status RecycleInterpreter() {
  try {
    py::object why = py::module_::import("_envforge_runtime").attr("recycle")();
    if (why.is_none()) return Status::Ok();
    return FailedPreconditionError(py::str(why).cast<std::string>());
  } catch (py::error_already_set& error) {
    return FailedPreconditionError("recycle failed: " + DescribePythonError(error));
  }
}

std::string ErrorReply(std::string_view id_json, std::string_view outcome, std::string_view message) {
  Json reply = {{"outcome", outcome}, {"message", message}};
  auto id = ParseJson(id_json);
  reply["id"] = id.ok() ? *id : Json();
  return DumpJson(reply);
}

FrameAction HandleFrame(std::string_view frame) {
  FrameAction action;
  PyObject* bytes = PyBytes_FromStringAndSize(frame.data(), static_cast<Py_ssize_t>(frame.size()));
  PyObject* result = bytes ? PyObject_CallOneArg(g_handle, bytes) : nullptr;
  Py_XDECREF(bytes);
  if (result != nullptr && PyTuple_Check(result) && PyTuple_GET_SIZE(result) == 2 &&
      PyBytes_Check(PyTuple_GET_ITEM(result, 1))) {
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(result, 0));
    PyObject* payload = PyTuple_GET_ITEM(result, 1);
    action.kind = kind == 1   ? FrameAction::Kind::kFork
                  : kind == 2 ? FrameAction::Kind::kClose
                  : kind == 3 ? FrameAction::Kind::kRecycle
                              : FrameAction::Kind::kReply;
    action.payload.assign(PyBytes_AS_STRING(payload), static_cast<size_t>(PyBytes_GET_SIZE(payload)));
    Py_DECREF(result);
    return action;
  }
  // handle() never raises by contract; if it did anyway, answer rather than die.
  Py_XDECREF(result);
  PyErr_Clear();
  auto parsed = ParseJson(frame);
  std::string id = "null";
  if (parsed.ok() && parsed->is_object() && parsed->contains("id")) id = DumpJson((*parsed)["id"]);
  action.payload = ErrorReply(id, "infra_error", "the worker runtime failed to handle the frame");
  return action;
}

}  // namespace envforge::sandbox::worker
