// envforge bench rollout: N episodes of one task on the embedded engine, all at once (continuous
// batching, shared prompt, KV caches kept across turns) versus the same N one after another, and
// how many prompt tokens the engine ran through the model per unique context token.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "agents/rollout.h"
#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/progress.h"
#include "apps/envforge/solve_task.h"
#include "base/cleanup_registry.h"
#include "inference/backend.h"
#include "sandbox/session_manager.h"

namespace envforge::cli {
namespace {

struct RunFigures {
  double seconds = 0;
  int64_t episodes = 0;
  int64_t generated_tokens = 0;
  int64_t prefilled_tokens = 0;
  int64_t unique_context_tokens = 0;
  int64_t turns = 0;
  Json engine;
  Json ToJson() const {
    return {{"seconds", seconds},
            {"episodes", episodes},
            {"turns", turns},
            {"generated_tokens", generated_tokens},
            {"episodes_per_s", episodes / seconds},
            {"generated_tokens_per_s", static_cast<double>(generated_tokens) / seconds},
            {"prefill_tokens", prefilled_tokens},
            {"unique_context_tokens", unique_context_tokens},
            {"engine", engine}};
  }
};

Result<RunFigures> PlayOnce(sandbox::SessionManager& manager, const std::string& env_id, const std::string& task,
                            const std::string& model_dir, bool dense, agents::RolloutOptions options,
                            const char* label) {
  inference::BackendOptions backend_options;
  backend_options.dense_attention = dense;
  ENVFORGE_ASSIGN_OR_RETURN(auto backend, inference::OpenBackend("embedded:" + model_dir, backend_options));
  Progress progress(label, static_cast<size_t>(options.n));
  options.on_episode = [&progress](int64_t done, int64_t) { progress.Update(static_cast<size_t>(done)); };
  agents::RolloutRunner runner(manager, *backend, options);
  auto started = std::chrono::steady_clock::now();
  ENVFORGE_ASSIGN_OR_RETURN(auto rollouts, runner.Run(env_id, {task}));
  RunFigures figures;
  figures.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  progress.Finish();
  int64_t first_prompt = 0;
  for (const agents::EpisodeResult& episode : rollouts[0].episodes) {
    if (episode.outcome == agents::RolloutOutcome::kInfraError)
      return UnavailableError("an episode failed: " + episode.detail);
    figures.episodes += 1;
    figures.turns += episode.turns;
    figures.generated_tokens += episode.generated_tokens;
    figures.prefilled_tokens += episode.prefilled_tokens;
    figures.unique_context_tokens += episode.new_prompt_tokens - episode.first_prompt_tokens;
    first_prompt = episode.first_prompt_tokens;
  }
  figures.unique_context_tokens += first_prompt;  // the shared first prompt, once
  figures.engine = backend->Stats();
  return figures;
}

// Generated tokens per second of the engine's decode Forward calls alone.
double DecodeTokensPerSecond(const Json& engine) {
  const double seconds = engine.value("decode_seconds", 0.0);
  return seconds > 0 ? engine.value("decode_tokens", int64_t{0}) / seconds : 0;
}

// Where a run's engine time went: prefill and decode Forward seconds, tokens/s and the mean batch.
void PrintEngineTime(const char* run, const Json& engine) {
  const double prefill_seconds = engine.value("prefill_seconds", 0.0);
  const auto prefill_tokens = engine.value("prefill_tokens", int64_t{0});
  const auto decode_steps = std::max<int64_t>(engine.value("decode_steps", int64_t{0}), 1);
  std::printf("%s engine: prefill %.2f s (%.0f tokens/s), decode %.2f s (%.0f tokens/s, mean batch %.1f)\n", run,
              prefill_seconds, prefill_seconds > 0 ? prefill_tokens / prefill_seconds : 0.0,
              engine.value("decode_seconds", 0.0), DecodeTokensPerSecond(engine),
              static_cast<double>(engine.value("decode_tokens", int64_t{0})) / static_cast<double>(decode_steps));
  std::printf("%s model: indexer %.2f s, attention %.2f s, the rest %.2f s\n", run,
              engine.value("indexer_seconds", 0.0), engine.value("attention_seconds", 0.0),
              engine.value("rest_seconds", 0.0));
  const auto constrained = engine.value("constrained_tokens", int64_t{0});
  if (constrained > 0) {
    const double seconds = engine.value("constraint_seconds", 0.0);
    std::printf("%s tool-call grammar: %lld tokens masked in %.2f s (%.1f us per token)\n", run,
                static_cast<long long>(constrained), seconds, 1e6 * seconds / static_cast<double>(constrained));
  }
}

int BenchRollout(const ParsedArgs& parsed) {
  const char* kCommand = "envforge bench rollout";
  auto model_dir = parsed.Option("--model");
  auto env_path = parsed.Option("--env");
  auto task = parsed.Option("--task");  // the three are required by the declaration
  auto n = parsed.IntOption("-n", 1, 100'000);
  auto max_turns = parsed.IntOption("--max-turns", 1, 10'000);
  auto per_turn = parsed.IntOption("--max-tokens-per-turn", 1, 1'000'000);
  auto seed = parsed.IntOption("--seed", 0, INT64_MAX);
  for (const auto* value : {&n, &max_turns, &per_turn, &seed}) {
    if (!value->ok()) return Fail(value->status(), kExitUsage, kCommand);
  }
  agents::RolloutOptions options;
  options.n = *n;
  options.max_turns = *max_turns;
  options.max_invalid_calls = *max_turns;
  options.max_tokens_per_turn = *per_turn;
  options.max_tokens = *max_turns * *per_turn;
  options.sampling.seed = static_cast<uint64_t>(*seed);
  options.tool_choice = parsed.OptionOr("--tool-choice");
  options.strict_tools = parsed.Has("--strict-tools");

  RaiseFileLimit();
  InstallCleanupSignalHandlers();
  auto manager = sandbox::SessionManager::Create(sandbox::ManagerOptions{});
  if (!manager.ok()) return Fail(manager.status(), kExitInfra, kCommand);
  auto env_id = (*manager)->OpenEnvironment(*env_path);
  if (!env_id.ok()) return Fail(env_id.status(), ExitCodeFor(env_id.status()), kCommand);

  options.concurrency = *n;
  const bool dense = parsed.Has("--dense");
  auto concurrent = PlayOnce(**manager, *env_id, *task, *model_dir, dense, options, "concurrent");
  if (!concurrent.ok()) return Fail(concurrent.status(), ExitCodeFor(concurrent.status()), kCommand);
  Json report = {{"model", *model_dir},
                 {"env", *env_path},
                 {"task", *task},
                 {"n", *n},
                 {"max_turns", *max_turns},
                 {"max_tokens_per_turn", *per_turn},
                 {"tool_choice", options.tool_choice},
                 {"strict_tools", options.strict_tools},
                 {"dense_attention", dense},
                 {"concurrent", concurrent->ToJson()}};
  report["recompute_ratio"] = static_cast<double>(concurrent->prefilled_tokens) /
                              static_cast<double>(std::max<int64_t>(concurrent->unique_context_tokens, 1));
  if (!parsed.Has("--skip-sequential")) {
    options.concurrency = 1;
    auto sequential = PlayOnce(**manager, *env_id, *task, *model_dir, dense, options, "sequential");
    if (!sequential.ok()) return Fail(sequential.status(), ExitCodeFor(sequential.status()), kCommand);
    report["sequential"] = sequential->ToJson();
    report["speedup_tokens_per_s"] = (static_cast<double>(concurrent->generated_tokens) / concurrent->seconds) /
                                     (static_cast<double>(sequential->generated_tokens) / sequential->seconds);
    report["speedup_decode_tokens_per_s"] =
        DecodeTokensPerSecond(concurrent->engine) / std::max(DecodeTokensPerSecond(sequential->engine), 1e-9);
  }
  if (parsed.Has("--json")) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::printf("concurrent: %lld episodes in %.2f s, %.1f episodes/s, %.0f generated tokens/s\n",
                static_cast<long long>(concurrent->episodes), concurrent->seconds,
                concurrent->episodes / concurrent->seconds,
                static_cast<double>(concurrent->generated_tokens) / concurrent->seconds);
    if (report.contains("sequential")) {
      std::printf("sequential: %.2f s, %.0f generated tokens/s; concurrent/sequential tokens/s = %.2fx\n",
                  report["sequential"]["seconds"].get<double>(),
                  report["sequential"]["generated_tokens_per_s"].get<double>(),
                  report["speedup_tokens_per_s"].get<double>());
    }
    std::printf("recompute ratio (prefill tokens / unique context tokens): %.3f\n",
                report["recompute_ratio"].get<double>());
    PrintEngineTime("concurrent", concurrent->engine);
    if (report.contains("sequential")) {
      PrintEngineTime("sequential", report["sequential"]["engine"]);
      std::printf("decode only: concurrent/sequential tokens/s = %.2fx\n",
                  report["speedup_decode_tokens_per_s"].get<double>());
    }
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> BenchRolloutCommands() {
  return {
      {{.name = "bench rollout",
        .summary =
            "N episodes at once vs one after another on the embedded engine: episodes/s, generated tokens/s, their "
            "ratio, and prefill tokens / unique context tokens",
        .details =
            "Plays N episodes of the task with the embedded engine twice: all N at once, then one after another (a "
            "fresh engine each time). prefill_tokens / unique_context_tokens of the concurrent run is 1.0 when no "
            "prompt token was computed twice (the N episodes share their first prompt, counted once). Malformed "
            "calls do not end an episode here (max invalid calls = max turns), so every episode plays its turns.",
        .options = {{.name = "--model", .metavar = "DIR", .help = "the model directory", .required = true},
                    {.name = "--env", .metavar = "X.envdb", .help = "the environment", .required = true},
                    {.name = "--task", .metavar = "ID", .help = "the task played", .required = true},
                    {.name = "-n", .metavar = "N", .help = "episodes", .default_text = "100"},
                    {.name = "--max-turns", .metavar = "T", .help = "model turns per episode", .default_text = "8"},
                    {.name = "--max-tokens-per-turn",
                     .metavar = "M",
                     .help = "generated tokens per model turn",
                     .default_text = "64"},
                    {.name = "--seed", .metavar = "S", .help = "the sampling seed", .default_text = "0"},
                    {.name = "--skip-sequential", .help = "only the concurrent run"},
                    {.name = "--dense", .help = "dense attention instead of DSA's top-k (same weights)"},
                    {.name = "--tool-choice",
                     .metavar = "auto|required",
                     .help = "required: turns decoded under the tool-call grammar (its mask time is reported)",
                     .default_text = "auto"},
                    {.name = "--strict-tools",
                     .help = "every tool strict (with --tool-choice auto: a turn is text alone or calls decoded "
                             "under the tool-call grammar)"},
                    JsonOption("the figures as JSON")}},
       BenchRollout},
  };
}

}  // namespace envforge::cli
