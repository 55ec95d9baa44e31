// The `envforge` Python module: a client of a running `envforge serve` (Client) and an in-process
// runtime (Runtime) with the same session API.
//
//   import envforge
//   with envforge.Runtime("envs/") as rt:                 # or envforge.Client("http://127.0.0.1:8080")
//       with rt.create_session("trip_planning", "three_day_trip") as s:
//           print(s.prompt, [t["name"] for t in s.tools])
//           r = s.call("get_all_cities")                  # ToolResult: r.outcome, r.content, ...
//           v = s.submit('{"city": "Paris"}')             # {"passed": ..., "score": ..., ...}
//
// Both speak the JSON-RPC methods of server/rpc_service.h: the Runtime hands requests to an
// in-process RpcService, the Client sends them over HTTP or WebSocket (server/rpc_client.h). So a
// script written against one works unchanged against the other. JSON-RPC errors arrive as
// envforge.RpcError (code, message, data); bad Python arguments raise TypeError/ValueError.
// Blocking calls release the GIL. Sessions, runtimes and clients are not thread-safe objects:
// share one per thread (the Runtime itself may be used from several threads).
//
// Beside the session API: envforge.rollout (python/rollout_binding.h); encode_chat,
// parse_completion and DEFAULT_SYSTEM_PROMPT (python/chat_binding.h); Tokenizer
// (python/tokenizer_binding.h); model_logits (python/model_binding.h). ToolResult.message_text is
// the tool message the rollout loop writes for a result (agents::ToolMessageText).
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <future>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "agents/episode.h"
#include "base/json.h"
#include "python/chat_binding.h"
#include "python/json_convert.h"
#include "python/model_binding.h"
#include "python/rollout_binding.h"
#include "python/rpc_endpoint.h"
#include "python/tokenizer_binding.h"
#include "python/trajectory_binding.h"
#include "toolsets/tool_protocol.h"

namespace py = pybind11;

namespace envforge::python {
namespace {

py::object& RpcErrorType() {
  static py::object* type = nullptr;
  if (type == nullptr) type = new py::object();  // set in the module init; leaked on purpose
  return *type;
}

// Raises envforge.RpcError(code, message, data) from a failure.
[[noreturn]] void RaiseRpcError(const RpcFailure& failure) {
  py::object error = RpcErrorType()(failure.code, failure.message, JsonToPython(failure.data));
  PyErr_SetObject(RpcErrorType().ptr(), error.ptr());
  throw py::error_already_set();
}

// Runs a call with the GIL released and converts the outcome.
Json CallOrRaise(Endpoint& endpoint, const std::string& method, Json params) {
  RpcOutcome outcome;
  {
    py::gil_scoped_release release;
    outcome = endpoint.Call(method, std::move(params));
  }
  if (outcome.failure) RaiseRpcError(*outcome.failure);
  return std::move(outcome.result);
}

struct ToolResultView {
  Json json;
  std::string outcome() const { return json.value("outcome", ""); }
  bool ok() const { return outcome() == "ok"; }
  // The rollout loop's tool message for this result (agents::ToolMessageText).
  std::string MessageText() const {
    Result<toolsets::ToolResult> result = toolsets::ToolResultFromJson(json);
    // The JSON is a tools/call answer, written by toolsets::ToJson: it always reads back.
    if (!result.ok()) throw std::runtime_error("ToolResult.message_text: " + result.status().message());
    return agents::ToolMessageText(*result);
  }
};

// Each environment's tool list, read once per connection (envs/get) for the sessions created
// without one (session/create's "tools": false: about 8 KB less per create).
class ToolListCache {
 public:
  Json Of(Endpoint& endpoint, const std::string& env_id) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = by_env_.find(env_id); it != by_env_.end()) return it->second;
    }
    Json tools = CallOrRaise(endpoint, "envs/get", {{"env", env_id}}).value("tools", Json::array());
    std::lock_guard lock(mutex_);
    return by_env_.emplace(env_id, std::move(tools)).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, Json> by_env_;  // guarded by mutex_
};

class Session {
 public:
  Session(std::shared_ptr<Endpoint> endpoint, std::shared_ptr<ToolListCache> tool_lists, Json created)
      : endpoint_(std::move(endpoint)), tool_lists_(std::move(tool_lists)), created_(std::move(created)) {
    id_ = created_.value("session", "");
  }
  const std::string& id() const { return id_; }
  py::object prompt() const { return JsonToPython(created_.value("prompt", Json())); }
  py::object tools() const {
    if (auto tools = created_.find("tools"); tools != created_.end()) return JsonToPython(*tools);
    return JsonToPython(tool_lists_->Of(*endpoint_, created_.value("env", Json::object()).value("id", "")));
  }
  py::object versions() const { return JsonToPython(created_.value("versions", Json::object())); }
  py::object trajectory() const { return JsonToPython(created_.value("trajectory", Json())); }
  bool closed() const { return closed_; }

  ToolResultView Call(const std::string& name, const py::kwargs& arguments) {
    CheckOpen();
    Json args = arguments ? PythonToJson(arguments) : Json::object();
    return ToolResultView{
        CallOrRaise(*endpoint_, "tools/call", {{"session", id_}, {"name", name}, {"arguments", args}})};
  }
  ToolResultView CallWith(const std::string& name, const py::dict& arguments) {
    CheckOpen();
    return ToolResultView{CallOrRaise(*endpoint_, "tools/call",
                                      {{"session", id_}, {"name", name}, {"arguments", PythonToJson(arguments)}})};
  }
  py::object Submit(const py::object& answer) {
    CheckOpen();
    // The verifier receives the answer text; a non-string answer is sent as its JSON text.
    std::string text = py::isinstance<py::str>(answer) ? answer.cast<std::string>() : DumpJson(PythonToJson(answer));
    return JsonToPython(CallOrRaise(*endpoint_, "session/submit", {{"session", id_}, {"answer", text}}));
  }
  Session Fork() {
    CheckOpen();
    Json forked = CallOrRaise(*endpoint_, "session/fork", {{"session", id_}});
    // A fork shares the parent's prompt, tools and versions; the server answers only its handle.
    Json created = created_;
    created["session"] = forked.value("session", "");
    created["trajectory"] = forked.value("trajectory", Json());
    return Session(endpoint_, tool_lists_, std::move(created));
  }
  Session Reset() {
    CheckOpen();
    Json created = CallOrRaise(*endpoint_, "session/reset", {{"session", id_}});
    closed_ = true;  // the old handle is gone
    return Session(endpoint_, tool_lists_, std::move(created));
  }
  void Close() {
    if (closed_) return;
    closed_ = true;
    CallOrRaise(*endpoint_, "session/close", {{"session", id_}});
  }

 private:
  void CheckOpen() const {
    if (closed_) throw py::value_error("session " + id_ + " is closed");
  }
  std::shared_ptr<Endpoint> endpoint_;
  std::shared_ptr<ToolListCache> tool_lists_;
  Json created_;
  std::string id_;
  bool closed_ = false;
};

// The methods Runtime and Client share.
class Connection {
 public:
  explicit Connection(std::shared_ptr<Endpoint> endpoint) : endpoint_(std::move(endpoint)) {}
  py::object Envs() {
    return JsonToPython(CallOrRaise(*endpoint_, "envs/list", Json::object()).value("envs", Json::array()));
  }
  py::object Env(const std::string& env) { return JsonToPython(CallOrRaise(*endpoint_, "envs/get", {{"env", env}})); }
  py::object Tasks(const std::string& env) {
    return JsonToPython(CallOrRaise(*endpoint_, "tasks/list", {{"env", env}}).value("tasks", Json::array()));
  }
  Session CreateSession(const std::string& env, const std::string& task, std::optional<int64_t> seed) {
    Json params = {{"env", env}, {"task", task}, {"tools", false}};  // Session.tools reads them once per env
    if (seed) params["seed"] = *seed;
    return Session(endpoint_, tool_lists_, CallOrRaise(*endpoint_, "session/create", std::move(params)));
  }
  py::object Stats() { return JsonToPython(CallOrRaise(*endpoint_, "server/stats", Json::object())); }
  // A raw JSON-RPC call, for methods without a wrapper.
  py::object Call(const std::string& method, const py::object& params) {
    return JsonToPython(CallOrRaise(*endpoint_, method, params.is_none() ? Json::object() : PythonToJson(params)));
  }
  void Close() {
    py::gil_scoped_release release;
    endpoint_->Close();
  }

 private:
  std::shared_ptr<Endpoint> endpoint_;
  std::shared_ptr<ToolListCache> tool_lists_ = std::make_shared<ToolListCache>();
};

Connection MakeRuntime(const std::string& envs_dir, std::optional<std::string> trajectories, size_t max_sessions,
                       double session_ttl_s, const py::object& limits) {
  RuntimeOptions options;
  options.envs_dir = envs_dir;
  options.trajectories_path = trajectories.value_or("");
  options.max_sessions = max_sessions;
  options.session_ttl = std::chrono::milliseconds(static_cast<int64_t>(session_ttl_s * 1000));
  options.limits = limits.is_none() ? Json() : PythonToJson(limits);
  Result<std::shared_ptr<Endpoint>> endpoint = [&] {
    py::gil_scoped_release release;
    return MakeRuntimeEndpoint(options);
  }();
  if (!endpoint.ok()) RaiseRpcError(FailureFromStatus(endpoint.status()));
  return Connection(std::move(endpoint).value());
}

Connection MakeClient(const std::string& url, std::optional<std::string> token, double timeout_s) {
  Result<std::shared_ptr<Endpoint>> endpoint = [&] {
    py::gil_scoped_release release;
    return MakeClientEndpoint(url, token.value_or(""),
                              std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  }();
  if (!endpoint.ok()) RaiseRpcError(FailureFromStatus(endpoint.status()));
  return Connection(std::move(endpoint).value());
}

template <typename T>
void AddContextManager(py::class_<T>& cls) {
  cls.def(
      "__enter__", [](T& self) -> T& { return self; }, py::return_value_policy::reference_internal);
  cls.def("__exit__", [](T& self, const py::object&, const py::object&, const py::object&) {
    self.Close();
    return false;
  });
}

}  // namespace
}  // namespace envforge::python

PYBIND11_MODULE(envforge, m) {
  using namespace envforge::python;
  using envforge::Json;
  m.doc() = "envforge: agentic RL environments (sessions, tools, verifiers) for trainers";

  py::dict scope;
  py::exec(R"(
class RpcError(Exception):
    """A JSON-RPC error from envforge: .code (int), .message (str), .data (JSON or None)."""
    def __init__(self, code, message, data=None):
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message
        self.data = data
    @property
    def retryable(self):
        return bool(isinstance(self.data, dict) and self.data.get("retryable"))
)",
           py::globals(), scope);
  RpcErrorType() = scope["RpcError"];
  RpcErrorType().attr("__module__") = "envforge";
  m.attr("RpcError") = RpcErrorType();

  py::class_<ToolResultView>(m, "ToolResult", "The typed result of one tool call (ARCHITECTURE.md, outcomes).")
      .def_property_readonly("outcome", &ToolResultView::outcome)
      .def_property_readonly("ok", &ToolResultView::ok)
      .def_property_readonly("content",
                             [](const ToolResultView& r) { return JsonToPython(r.json.value("content", Json())); })
      .def_property_readonly("message", [](const ToolResultView& r) { return r.json.value("message", std::string()); })
      .def_property_readonly("limit",
                             [](const ToolResultView& r) { return JsonToPython(r.json.value("limit", Json())); })
      .def_property_readonly("session_alive",
                             [](const ToolResultView& r) { return r.json.value("session_alive", true); })
      .def_property_readonly("duration_us",
                             [](const ToolResultView& r) { return r.json.value("duration_us", int64_t{0}); })
      .def_property_readonly("message_text", &ToolResultView::MessageText,
                             "The text the rollout loop puts in the tool message for this result (what a model reads).")
      .def("to_dict", [](const ToolResultView& r) { return JsonToPython(r.json); })
      .def("__repr__", [](const ToolResultView& r) {
        std::string content = envforge::DumpJson(r.json.value("content", envforge::Json()));
        if (content.size() > 80) content = content.substr(0, 77) + "...";
        return "ToolResult(outcome=" + r.outcome() + ", content=" + content + ")";
      });

  py::class_<Session> session(m, "Session", "One episode: a sandboxed copy of an environment with a task.");
  session.def_property_readonly("id", &Session::id)
      .def_property_readonly("prompt", &Session::prompt)
      .def_property_readonly("tools", &Session::tools)
      .def_property_readonly("versions", &Session::versions)
      .def_property_readonly("trajectory", &Session::trajectory)
      .def_property_readonly("closed", &Session::closed)
      .def("call", &Session::Call, py::arg("name"), "Calls a tool with keyword arguments; returns a ToolResult.")
      .def("call_with", &Session::CallWith, py::arg("name"), py::arg("arguments"),
           "Calls a tool with a dict of arguments (for argument names that are not identifiers).")
      .def("submit", &Session::Submit, py::arg("answer"), "Submits the answer; returns the verifier's verdict dict.")
      .def("fork", &Session::Fork, "A copy of this session, mid-episode.")
      .def("reset", &Session::Reset, "Closes this session and returns a fresh one of the same task.")
      .def("close", &Session::Close)
      .def("__repr__", [](const Session& s) { return "Session(" + s.id() + (s.closed() ? ", closed)" : ")"); });
  AddContextManager(session);

  py::class_<Connection> connection(m, "_Connection");
  connection.def("envs", &Connection::Envs, "Every environment: [{id, name, kind, tasks, ...}].")
      .def("env", &Connection::Env, py::arg("env"))
      .def("tasks", &Connection::Tasks, py::arg("env"))
      .def("create_session", &Connection::CreateSession, py::arg("env"), py::arg("task"), py::arg("seed") = py::none())
      .def("stats", &Connection::Stats)
      .def("call", &Connection::Call, py::arg("method"), py::arg("params") = py::none(), "A raw JSON-RPC call.")
      .def("close", &Connection::Close);
  AddContextManager(connection);

  m.def("Runtime", &MakeRuntime, py::arg("envs_dir"), py::arg("trajectories") = py::none(),
        py::arg("max_sessions") = 1024, py::arg("session_ttl") = 600.0, py::arg("limits") = py::none(),
        "An in-process runtime over every *.envdb in envs_dir (no server needed).");
  m.def("Client", &MakeClient, py::arg("url"), py::arg("token") = py::none(), py::arg("timeout") = 60.0,
        "A client of `envforge serve` (http://host:port or ws://host:port/ws).");
  DefineRollout(m);
  DefineChat(m);
  DefineTokenizer(m);
  DefineModel(m);
  DefineTrajectories(m);
}
