// envforge rollout X.envdb | --url URL --env NAME: a backend plays the environment's tasks, N
// episodes each (agents/rollout.h), in sessions of this process or of a running envforge serve
// (server/remote_session_host.h); a progress bar, then per task pass@k, mean turns and tokens,
// outcomes.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "agents/rollout.h"
#include "agents/session_host.h"
#include "agents/trajectory_store.h"
#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/progress.h"
#include "apps/envforge/search_judge_option.h"
#include "apps/envforge/solve_task.h"
#include "base/cleanup_registry.h"
#include "inference/backend.h"
#include "sandbox/session_manager.h"
#include "server/remote_session_host.h"

namespace envforge::cli {
namespace {

// Where the episodes' sessions live: a SessionManager here with the bundle opened in it, or a
// server. `env` is what the host's DescribeEnvironment takes.
struct Sessions {
  std::unique_ptr<sandbox::SessionManager> manager;  // null for a server
  std::unique_ptr<agents::SessionHost> host;
  std::string env;
  std::string where;  // "" or " on URL", for the closing line
};

// X.envdb, or --url (with --env, maybe --token): exactly one. A usage error says what is missing.
Status CheckWhere(const ParsedArgs& parsed) {
  const bool remote = parsed.Option("--url").has_value();
  if (remote && !parsed.positional.empty())
    return InvalidArgumentError("give X.envdb or --url URL --env NAME, not both");
  if (!remote && parsed.positional.empty())
    return InvalidArgumentError("give the environment: X.envdb, or --url URL --env NAME (a running envforge serve)");
  if (remote && !parsed.Option("--env"))
    return InvalidArgumentError("--url needs --env NAME (the server's environment)");
  ENVFORGE_RETURN_IF_ERROR(CheckSearchJudgeOptions(parsed));
  if (remote && parsed.Given("--search-judge"))
    return InvalidArgumentError(
        "--search-judge judges answers in this process's sessions; with --url give it to "
        "envforge serve");
  if (!remote && (parsed.Option("--env") || parsed.Option("--token")))
    return InvalidArgumentError("--env and --token go with --url (X.envdb names the environment itself)");
  return Status::Ok();
}

Result<Sessions> OpenSessions(const ParsedArgs& parsed) {
  Sessions sessions;
  if (auto url = parsed.Option("--url")) {
    server::RemoteSessionHostOptions options;
    options.client.token = parsed.OptionOr("--token");
    if (const char* from_env = std::getenv("ENVFORGE_SERVE_TOKEN"); options.client.token.empty() && from_env)
      options.client.token = from_env;
    ENVFORGE_ASSIGN_OR_RETURN(sessions.host, server::RemoteSessionHost::Connect(*url, options));
    sessions.env = *parsed.Option("--env");
    sessions.where = " on " + *url;
    return sessions;
  }
  sandbox::ManagerOptions manager_options;
  ENVFORGE_ASSIGN_OR_RETURN(manager_options.search_answer_judge, SearchJudgeFrom(parsed));
  ENVFORGE_ASSIGN_OR_RETURN(sessions.manager, sandbox::SessionManager::Create(std::move(manager_options)));
  ENVFORGE_ASSIGN_OR_RETURN(sessions.env, sessions.manager->OpenEnvironment(parsed.positional[0]));
  sessions.host = std::make_unique<agents::LocalSessionHost>(*sessions.manager);
  return sessions;
}

Status ReadOptions(const ParsedArgs& args, agents::RolloutOptions& options) {
  struct IntOption {
    const char* name;
    long long min, max;
    int64_t* out;
  };
  int64_t seed64 = 0, top_k64 = 0, timeout64 = 0;
  const IntOption ints[] = {
      // defaults: the declarations' (RolloutCommands)
      {"-n", 1, 1'000'000, &options.n},
      {"--max-turns", 1, 100'000, &options.max_turns},
      {"--max-tokens", 1, 100'000'000, &options.max_tokens},
      {"--max-tokens-per-turn", 1, 10'000'000, &options.max_tokens_per_turn},
      {"--max-invalid-calls", 1, 1000, &options.max_invalid_calls},
      {"--seed", 0, INT64_MAX, &seed64},
      {"--top-k", 0, 100'000'000, &top_k64},
      {"--episode-timeout", 1, 7 * 24 * 3600, &timeout64},
  };
  for (const IntOption& option : ints) {
    ENVFORGE_ASSIGN_OR_RETURN(long long value, args.IntOption(option.name, option.min, option.max));
    *option.out = value;
  }
  // Computed defaults: 0 leaves them to the rollout (the backend's window; min(all, 256) episodes at once).
  ENVFORGE_ASSIGN_OR_RETURN(options.context_window, args.ComputedIntOption("--context-window", 0, 0, 100'000'000));
  ENVFORGE_ASSIGN_OR_RETURN(options.concurrency, args.ComputedIntOption("--concurrency", 0, 0, 100'000));
  options.sampling.seed = static_cast<uint64_t>(seed64);
  options.sampling.top_k = top_k64;
  options.episode_timeout = std::chrono::seconds(timeout64);
  ENVFORGE_ASSIGN_OR_RETURN(options.sampling.temperature, args.DoubleOption("--temperature"));
  ENVFORGE_ASSIGN_OR_RETURN(options.sampling.top_p, args.DoubleOption("--top-p"));
  ENVFORGE_ASSIGN_OR_RETURN(options.context_strategy,
                            agents::ParseContextStrategy(args.OptionOr("--context-strategy")));
  options.thinking = args.Has("--thinking");
  options.tool_choice = args.OptionOr("--tool-choice");
  options.strict_tools = args.Has("--strict-tools");
  options.record_routing = args.Has("--record-routing");
  options.record_kept_sets = args.Has("--record-kept-sets");
  if (auto limits = args.Option("--limits")) {
    ENVFORGE_ASSIGN_OR_RETURN(Json json, ParseJson(*limits, "--limits"));
    ENVFORGE_ASSIGN_OR_RETURN(sandbox::SandboxLimits parsed,
                              sandbox::SandboxLimitsFromJson(json, sandbox::SandboxLimits{}));
    ENVFORGE_RETURN_IF_ERROR(sandbox::ValidateLimits(parsed));
    options.limits = parsed;
  }
  return Status::Ok();
}

void PrintTask(const agents::TaskRollout& task) {
  std::printf("task %s (%s): %zu episodes, %" PRId64 " scored, %" PRId64 " passed\n", task.task_id.c_str(),
              task.env_name.c_str(), task.episodes.size(), task.scored, task.passed);
  if (task.pass_at_k.empty()) {
    std::printf("  pass@k       no scored episode\n");
  } else {
    std::printf("  pass@k      ");
    for (auto [k, value] : task.pass_at_k) std::printf(" k=%" PRId64 ":%.3f", k, value);
    std::printf("\n");
  }
  std::printf("  mean turns   %.2f   mean generated tokens %.1f\n", task.mean_turns, task.mean_generated_tokens);
  std::printf("  outcomes    ");
  for (agents::RolloutOutcome outcome : agents::kAllRolloutOutcomes) {
    auto it = task.outcomes.find(std::string(agents::RolloutOutcomeName(outcome)));
    if (it != task.outcomes.end()) std::printf(" %s %" PRId64, it->first.c_str(), it->second);
  }
  std::printf("\n");
}

int Rollout(const ParsedArgs& parsed) {
  const char* kCommand = "envforge rollout";
  if (Status where = CheckWhere(parsed); !where.ok()) return Fail(where, kExitUsage, kCommand);
  auto backend_spec = parsed.Option("--backend");  // required by the declaration
  auto task_list = parsed.Option("--task");
  if (task_list.has_value() == parsed.Has("--all")) {
    return Fail(InvalidArgumentError("give exactly one of --task ID[,ID...] and --all"), kExitUsage, kCommand);
  }
  agents::RolloutOptions options;
  Status read = ReadOptions(parsed, options);
  if (!read.ok()) return Fail(read, kExitUsage, kCommand);
  if ((options.record_routing || options.record_kept_sets) && !parsed.Option("--trajectories")) {
    return Fail(InvalidArgumentError("--record-routing and --record-kept-sets need --trajectories (where they go)"),
                kExitUsage, kCommand);
  }

  inference::BackendOptions backend_options;
  backend_options.model_name = parsed.OptionOr("--model");
  backend_options.api_key_env = parsed.OptionOr("--api-key-env");
  backend_options.device = parsed.OptionOr("--device");
  backend_options.dense_attention = parsed.Has("--dense");
  if (backend_options.dense_attention && backend_spec->rfind("embedded:", 0) != 0) {
    return Fail(InvalidArgumentError("--dense applies to the embedded backend only"), kExitUsage, kCommand);
  }
  backend_options.context_window = options.context_window;
  backend_options.max_concurrency = 256;
  auto backend = inference::OpenBackend(*backend_spec, backend_options);
  if (!backend.ok()) return Fail(backend.status(), ExitCodeFor(backend.status()), kCommand);

  RaiseFileLimit();
  InstallCleanupSignalHandlers();
  auto sessions = OpenSessions(parsed);
  if (!sessions.ok()) return Fail(sessions.status(), ExitCodeFor(sessions.status()), kCommand);
  std::unique_ptr<agents::TrajectoryStore> store;
  if (auto trajectories = parsed.Option("--trajectories")) {
    auto opened = agents::TrajectoryStore::Open(*trajectories);
    if (!opened.ok()) return Fail(opened.status(), ExitCodeFor(opened.status()), kCommand);
    store = std::move(*opened);
    options.store = store.get();
  }
  std::vector<std::string> tasks = task_list ? SplitCommas(*task_list) : std::vector<std::string>{};
  auto described = sessions->host->DescribeEnvironment(sessions->env);
  if (!described.ok()) return Fail(described.status(), ExitCodeFor(described.status()), kCommand);
  const size_t task_count = tasks.empty() ? described->tasks.size() : tasks.size();
  Progress progress("rollout", task_count * static_cast<size_t>(options.n));
  options.on_episode = [&progress](int64_t done, int64_t total) {
    progress.Update(static_cast<size_t>(done), std::to_string(total - done) + " left");
  };
  agents::RolloutRunner runner(*sessions->host, **backend, options);
  auto started = std::chrono::steady_clock::now();
  auto rollouts = runner.Run(sessions->env, tasks);
  if (!rollouts.ok()) return Fail(rollouts.status(), ExitCodeFor(rollouts.status()), kCommand);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  progress.Finish("done");
  if (store != nullptr) {
    Status flushed = store->Flush();
    if (!flushed.ok()) return Fail(flushed.WithContext("writing trajectories"), kExitInfra, kCommand);
  }

  int64_t episodes = 0, infra = 0;
  std::string first_infra;
  for (const agents::TaskRollout& task : *rollouts) {
    for (const agents::EpisodeResult& episode : task.episodes) {
      episodes += 1;
      if (episode.outcome != agents::RolloutOutcome::kInfraError) continue;
      infra += 1;
      if (first_infra.empty()) first_infra = episode.detail;
    }
  }
  const inference::BackendInfo info = (*backend)->info();
  for (const agents::TaskRollout& task : *rollouts) {
    if (parsed.Has("--json")) {
      Json line = task.ToJson();
      line["rollout_id"] = runner.rollout_id();
      line["backend"] = info.spec;
      line["model"] = info.model;
      std::printf("%s\n", line.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
    } else {
      PrintTask(task);
    }
  }
  if (!parsed.Has("--json")) {
    std::printf("rollout %s: %" PRId64 " episodes in %.1f s with %s%s%s%s\n", runner.rollout_id().c_str(), episodes,
                seconds, info.spec.c_str(), sessions->where.c_str(), store ? ", recorded in " : "",
                store ? store->path().c_str() : "");
  }
  if (episodes > 0 && infra == episodes) {
    return Fail(UnavailableError("every episode failed on the infrastructure; the first: " + first_infra), kExitInfra,
                kCommand);
  }
  return kExitOk;
}

// The declared options followed by the search judge's.
std::vector<OptionDecl> WithSearchJudge(std::vector<OptionDecl> options) {
  const std::vector<OptionDecl> judge = SearchJudgeOptions("search environments (X.envdb)");
  options.insert(options.end(), judge.begin(), judge.end());
  return options;
}

}  // namespace

std::vector<Command> RolloutCommands() {
  const std::string sampling = "sampling";
  return {
      {{.name = "rollout",
        .positionals = "[X.envdb]",
        .summary = "N episodes per task played by a model: pass@k for k = 1, 2, 4, ... N, mean turns and tokens, "
                   "outcomes by kind",
        .details = "A backend plays the environment's tasks (--task or --all), N episodes per task, each in a fresh "
                   "sandbox session; prints per task pass@k (unbiased estimator), mean turns and generated tokens, and "
                   "episode outcomes by kind. Episodes that end infra_error are not scored.\n"
                   "The sessions run here (X.envdb) or on a running envforge serve (--url URL --env NAME [--token T]): "
                   "then the model runs in this process and the tools and verifier on the server, and --trajectories "
                   "records the versions the server reports; a session the server loses (closed, expired, the server "
                   "gone) ends its episode infra_error.\n"
                   "Exit 0 done, 2 bad input (unknown backend, a model that does not load, unknown environment or "
                   "task, N < 1), 3 infrastructure (the server cannot be reached, or every episode failed on the "
                   "backend or the runtime).",
        .options = WithSearchJudge(
            {{.name = "--backend",
              .metavar = "SPEC",
              .help = "embedded:MODEL_DIR (the embedded DSA engine; episodes batched, KV caches kept across turns) | "
                      "openai:URL (an OpenAI-compatible server, URL like http://host:8000/v1) | scripted:FILE.jsonl "
                      "(recorded responses, inference/scripted_backend.h)",
              .required = true},
             {.name = "--url",
              .metavar = "URL",
              .help = "play on a running envforge serve (http://HOST:PORT[/rpc] or ws://HOST:PORT[/ws]) instead of "
                      "X.envdb"},
             {.name = "--env", .metavar = "NAME", .help = "with --url: the server's environment (name or id)"},
             {.name = "--token",
              .metavar = "T",
              .help = "with --url: the server's bearer token (or ENVFORGE_SERVE_TOKEN)"},
             {.name = "--task", .metavar = "ID[,ID...]", .help = "the tasks played (or --all)"},
             {.name = "--all", .help = "every task of the environment"},
             {.name = "-n", .metavar = "N", .help = "episodes per task", .default_text = "1"},
             {.name = "--model", .metavar = "NAME", .help = "model name sent to / reported by the backend"},
             {.name = "--api-key-env",
              .metavar = "VAR",
              .help = "openai: the environment variable holding the API key"},
             {.name = "--device",
              .metavar = "cpu|cuda|auto",
              .help = "embedded: where the engine runs",
              .default_text = "cpu"},
             {.name = "--dense", .help = "embedded: dense attention instead of DSA's top-k (same weights)"},
             {.name = "--thinking", .help = "thinking mode (reasoning kept across tool results)"},
             {.name = "--tool-choice",
              .metavar = "auto|required",
              .help = "required: every turn calls a tool (embedded: decoded under the tool-call grammar, a "
                      "structured answer as JSON of the task's answer_schema)",
              .default_text = "auto"},
             {.name = "--strict-tools",
              .help = "every tool strict, the prompt unchanged (embedded, with --tool-choice auto: a turn is text "
                      "alone or calls decoded under the tool-call grammar; openai: strict function specs)"},
             {.name = "--max-turns", .metavar = "T", .help = "model turns per episode", .default_text = "32"},
             {.name = "--max-tokens", .metavar = "M", .help = "generated tokens per episode", .default_text = "16384"},
             {.name = "--max-tokens-per-turn",
              .metavar = "M",
              .help = "generated tokens per model turn",
              .default_text = "2048"},
             {.name = "--temperature",
              .metavar = "X",
              .help = "sampling temperature",
              .default_text = "1",
              .section = sampling},
             {.name = "--top-p", .metavar = "P", .help = "nucleus sampling", .default_text = "1", .section = sampling},
             {.name = "--top-k",
              .metavar = "K",
              .help = "the K likeliest tokens (0: all)",
              .default_text = "0",
              .section = sampling},
             {.name = "--seed", .metavar = "S", .help = "the sampling seed", .default_text = "0", .section = sampling},
             {.name = "--context-strategy",
              .metavar = "none|summary|discard75|discard-all",
              .help = "what happens at 80% of the context window",
              .default_text = "none"},
             {.name = "--context-window",
              .metavar = "W",
              .help = "tokens",
              .default_text = "the backend's",
              .computed = true},
             {.name = "--max-invalid-calls",
              .metavar = "K",
              .help = "malformed calls in a row that end an episode",
              .default_text = "3"},
             {.name = "--episode-timeout", .metavar = "S", .help = "seconds per episode", .default_text = "600"},
             {.name = "--concurrency",
              .metavar = "C",
              .help = "episodes at once",
              .default_text = "min(all, 256)",
              .computed = true},
             LimitsOption(),
             {.name = "--trajectories",
              .metavar = "F.sqlite",
              .help = "record every episode (messages, tokens, logprobs, tool steps, verdict)"},
             {.name = "--record-routing",
              .help = "embedded, with --trajectories: record the routed experts of every position each turn runs "
                      "(keep routing; `traj show --json` gives them per position as tokens[].routing)"},
             {.name = "--record-kept-sets",
              .help = "embedded, with --trajectories: record each token's top-k/top-p kept set when it is smaller "
                      "than the vocabulary (keep sampling mask; tokens[].kept)"},
             JsonOption("one JSON object per task on stdout")}),
        .min_positional = 0,
        .max_positional = 1},
       Rollout},
  };
}

}  // namespace envforge::cli
