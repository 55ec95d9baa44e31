// envforge.rollout: environments opened from a directory (or a server's), a backend, the RolloutRunner.
#include "python/rollout_binding.h"

#include <pybind11/stl.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agents/rollout.h"
#include "agents/session_host.h"
#include "agents/trajectory_store.h"
#include "inference/backend.h"
#include "python/json_convert.h"
#include "python/status_error.h"
#include "sandbox/session_manager.h"
#include "server/remote_session_host.h"

namespace py = pybind11;
namespace fs = std::filesystem;

namespace envforge::python {
namespace {

// Opens the bundle named `env` under envs_dir in the manager; returns its id.
Result<std::string> OpenNamedEnvironment(sandbox::SessionManager& manager, const std::string& envs_dir,
                                         const std::string& env) {
  if (fs::is_regular_file(env)) return manager.OpenEnvironment(env);
  std::error_code error;
  if (!fs::is_directory(envs_dir, error)) return InvalidArgumentError("envs_dir '" + envs_dir + "' is not a directory");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(envs_dir, error)) {
    if (entry.path().extension() != ".envdb") continue;
    ENVFORGE_ASSIGN_OR_RETURN(std::string id, manager.OpenEnvironment(entry.path().string()));
    const sandbox::EnvBundle* bundle = manager.FindEnvironment(id);
    if (bundle->manifest.name == env || id == env || entry.path().stem() == env) return id;
    names.push_back(bundle->manifest.name);
  }
  std::string known;
  for (const std::string& name : names) known += (known.empty() ? "" : ", ") + name;
  return NotFoundError("no environment '" + env + "' in " + envs_dir +
                       " (it holds: " + (known.empty() ? "none" : known) + ")");
}

struct RolloutArgs {
  std::string envs_dir, env, backend, model, context_strategy, trajectories;
  std::optional<std::string> task;
  std::optional<std::string> url;  // a running envforge serve: its sessions, not envs_dir's
  std::string token;
  agents::RolloutOptions options;
};

// Where the episodes' sessions live (the manager is null for a server) and the environment's key
// for the host's DescribeEnvironment.
struct Sessions {
  std::unique_ptr<sandbox::SessionManager> manager;
  std::unique_ptr<agents::SessionHost> host;
  std::string env;
};

Result<Sessions> OpenSessions(const RolloutArgs& args) {
  Sessions sessions;
  if (args.url) {
    server::RemoteSessionHostOptions options;
    options.client.token = args.token;
    ENVFORGE_ASSIGN_OR_RETURN(sessions.host, server::RemoteSessionHost::Connect(*args.url, options));
    sessions.env = args.env;
    return sessions;
  }
  ENVFORGE_ASSIGN_OR_RETURN(sessions.manager, sandbox::SessionManager::Create({}));
  ENVFORGE_ASSIGN_OR_RETURN(sessions.env, OpenNamedEnvironment(*sessions.manager, args.envs_dir, args.env));
  sessions.host = std::make_unique<agents::LocalSessionHost>(*sessions.manager);
  return sessions;
}

Json RunRollout(RolloutArgs args) {
  auto strategy = agents::ParseContextStrategy(args.context_strategy);
  if (!strategy.ok()) RaiseStatus(strategy.status());
  args.options.context_strategy = *strategy;
  inference::BackendOptions backend_options;
  backend_options.model_name = args.model;
  backend_options.context_window = args.options.context_window;
  auto backend = inference::OpenBackend(args.backend, backend_options);
  if (!backend.ok()) RaiseStatus(backend.status());
  auto sessions = OpenSessions(args);
  if (!sessions.ok()) RaiseStatus(sessions.status());
  std::unique_ptr<agents::TrajectoryStore> store;
  if (!args.trajectories.empty()) {
    auto opened = agents::TrajectoryStore::Open(args.trajectories);
    if (!opened.ok()) RaiseStatus(opened.status());
    store = std::move(*opened);
    args.options.store = store.get();
  }
  agents::RolloutRunner runner(*sessions->host, **backend, args.options);
  std::vector<std::string> tasks;
  if (args.task) tasks.push_back(*args.task);
  auto rollouts = runner.Run(sessions->env, tasks);
  if (!rollouts.ok()) RaiseStatus(rollouts.status());
  if (store != nullptr) {
    Status flushed = store->Flush();
    if (!flushed.ok()) RaiseStatus(flushed);
  }
  Json out = Json::array();
  const inference::BackendInfo info = (*backend)->info();
  for (const agents::TaskRollout& rollout : *rollouts) {
    Json figures = rollout.ToJson();
    figures["rollout_id"] = runner.rollout_id();
    figures["backend"] = info.spec;
    figures["model"] = info.model;
    out.push_back(std::move(figures));
  }
  return args.task ? out[0] : out;
}

}  // namespace

void DefineRollout(py::module_& module) {
  module.def(
      "rollout",
      [](const std::string& envs_dir, const std::string& env, std::optional<std::string> task,
         const std::string& backend, int64_t n, const std::string& model, bool thinking, int64_t max_turns,
         int64_t max_tokens, int64_t max_tokens_per_turn, double temperature, double top_p, int64_t top_k,
         uint64_t seed, const std::string& context_strategy, int64_t context_window, int64_t max_invalid_calls,
         double episode_timeout, int64_t concurrency, std::optional<std::string> trajectories, bool record_routing,
         bool record_kept_sets, std::optional<std::string> url, std::optional<std::string> token,
         const std::string& tool_choice) {
        RolloutArgs args{envs_dir,
                         env,
                         backend,
                         model,
                         context_strategy,
                         trajectories.value_or(""),
                         std::move(task),
                         std::move(url),
                         token.value_or(""),
                         {}};
        agents::RolloutOptions& o = args.options;
        o.n = n;
        o.thinking = thinking;
        o.max_turns = max_turns;
        o.max_tokens = max_tokens;
        o.max_tokens_per_turn = max_tokens_per_turn;
        o.sampling.temperature = temperature;
        o.sampling.top_p = top_p;
        o.sampling.top_k = top_k;
        o.sampling.seed = seed;
        o.context_window = context_window;
        o.max_invalid_calls = max_invalid_calls;
        o.episode_timeout = std::chrono::milliseconds(static_cast<int64_t>(episode_timeout * 1000));
        o.concurrency = concurrency;
        o.record_routing = record_routing;
        o.record_kept_sets = record_kept_sets;
        o.tool_choice = tool_choice;
        Json result;
        {
          py::gil_scoped_release release;
          result = RunRollout(std::move(args));
        }
        return JsonToPython(result);
      },
      py::arg("envs_dir"), py::arg("env"), py::arg("task") = py::none(), py::kw_only(), py::arg("backend"),
      py::arg("n") = 1, py::arg("model") = "", py::arg("thinking") = false, py::arg("max_turns") = 32,
      py::arg("max_tokens") = 16384, py::arg("max_tokens_per_turn") = 2048, py::arg("temperature") = 1.0,
      py::arg("top_p") = 1.0, py::arg("top_k") = 0, py::arg("seed") = 0, py::arg("context_strategy") = "none",
      py::arg("context_window") = 0, py::arg("max_invalid_calls") = 3, py::arg("episode_timeout") = 600.0,
      py::arg("concurrency") = 0, py::arg("trajectories") = py::none(), py::arg("record_routing") = false,
      py::arg("record_kept_sets") = false, py::arg("url") = py::none(), py::arg("token") = py::none(),
      py::arg("tool_choice") = "auto",
      "Plays a task (or every task) n times with a backend (embedded:DIR, openai:URL, scripted:FILE); returns pass@k, "
      "mean turns and tokens, outcomes and the episode ids. With url (a running envforge serve, http://HOST:PORT or "
      "ws://HOST:PORT/ws; token its bearer token) the sessions run on that server and env/task name its environment "
      "and task (envs_dir is ignored); the model still runs here. record_routing / record_kept_sets (embedded "
      "backend): "
      "every model turn records the routed experts of the positions it ran and the kept top-k/top-p sets of its "
      "tokens (the DeepSeek-V3.2 paper's keep routing and keep sampling mask) into the trajectories store, where "
      "the episode's token segments expose them as \"routing\" and \"kept\". tool_choice \"required\": every turn "
      "asks for a tool call (the embedded engine decodes it under the DSML tool-call grammar).");
}

}  // namespace envforge::python
