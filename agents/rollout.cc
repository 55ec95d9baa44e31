// RolloutRunner: (task, sample) episodes on a pool of threads, then per-task figures.
#include "agents/rollout.h"

#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "agents/episode.h"
#include "agents/pass_at_k.h"

namespace envforge::agents {
namespace {

std::string NewRolloutId() {
  std::random_device device;
  static const char kHex[] = "0123456789abcdef";
  std::string id = "r-";
  for (int i = 0; i < 16; ++i) id += kHex[device() % 16];
  return id;
}

Status CheckOptions(const RolloutOptions& options) {
  if (options.n < 1) return InvalidArgumentError("-n must be at least 1, got " + std::to_string(options.n));
  if (options.first_sample < 0) return InvalidArgumentError("the first sample index must be >= 0");
  if (options.max_turns < 1) return InvalidArgumentError("--max-turns must be at least 1");
  if (options.max_tokens < 1) return InvalidArgumentError("--max-tokens must be at least 1");
  if (options.max_tokens_per_turn < 1) return InvalidArgumentError("max tokens per turn must be at least 1");
  if (options.max_invalid_calls < 1) return InvalidArgumentError("--max-invalid-calls must be at least 1");
  if (options.tool_choice != "auto" && options.tool_choice != "required") {
    return InvalidArgumentError("--tool-choice must be auto or required, got '" + options.tool_choice + "'");
  }
  if (!(options.sampling.temperature >= 0)) return InvalidArgumentError("--temperature must be >= 0");
  if (!(options.sampling.top_p > 0 && options.sampling.top_p <= 1))
    return InvalidArgumentError("--top-p must be in (0, 1]");
  if (!(options.context_threshold > 0 && options.context_threshold <= 1))
    return InvalidArgumentError("the context threshold must be in (0, 1]");
  if (options.context_window < 0) return InvalidArgumentError("--context-window must be >= 0");
  if (options.concurrency < 0) return InvalidArgumentError("--concurrency must be >= 0");
  return Status::Ok();
}

}  // namespace

EpisodeOutcome ToEpisodeOutcome(RolloutOutcome outcome) {
  switch (outcome) {
    case RolloutOutcome::kSubmitted: return EpisodeOutcome::kSubmitted;
    case RolloutOutcome::kMaxTurns: return EpisodeOutcome::kMaxTurns;
    case RolloutOutcome::kMaxTokens: return EpisodeOutcome::kMaxTokens;
    case RolloutOutcome::kContextExhausted: return EpisodeOutcome::kContextExhausted;
    case RolloutOutcome::kInvalidCalls: return EpisodeOutcome::kInvalidCalls;
    case RolloutOutcome::kTimeout: return EpisodeOutcome::kTimeout;
    case RolloutOutcome::kCrashed: return EpisodeOutcome::kCrashed;
    case RolloutOutcome::kInfraError: return EpisodeOutcome::kInfraError;
  }
  return EpisodeOutcome::kInfraError;
}

std::string_view RolloutOutcomeName(RolloutOutcome outcome) { return EpisodeOutcomeName(ToEpisodeOutcome(outcome)); }

std::string_view ContextStrategyName(ContextStrategy strategy) {
  switch (strategy) {
    case ContextStrategy::kNone: return "none";
    case ContextStrategy::kSummary: return "summary";
    case ContextStrategy::kDiscard75: return "discard75";
    case ContextStrategy::kDiscardAll: return "discard-all";
  }
  return "none";
}

Result<ContextStrategy> ParseContextStrategy(std::string_view name) {
  for (ContextStrategy strategy :
       {ContextStrategy::kNone, ContextStrategy::kSummary, ContextStrategy::kDiscard75, ContextStrategy::kDiscardAll}) {
    if (ContextStrategyName(strategy) == name) return strategy;
  }
  return InvalidArgumentError("unknown context strategy '" + std::string(name) +
                              "' (none, summary, discard75, discard-all)");
}

void Summarize(TaskRollout& rollout) {
  rollout.scored = rollout.passed = 0;
  rollout.outcomes.clear();
  rollout.pass_at_k.clear();
  double turns = 0, tokens = 0;
  for (const EpisodeResult& episode : rollout.episodes) {
    rollout.outcomes[std::string(RolloutOutcomeName(episode.outcome))] += 1;
    turns += static_cast<double>(episode.turns);
    tokens += static_cast<double>(episode.generated_tokens);
    if (episode.outcome == RolloutOutcome::kInfraError) continue;
    rollout.scored += 1;
    rollout.passed += episode.passed ? 1 : 0;
  }
  const auto count = static_cast<double>(std::max<size_t>(rollout.episodes.size(), 1));
  rollout.mean_turns = turns / count;
  rollout.mean_generated_tokens = tokens / count;
  for (int64_t k : PassAtKPoints(rollout.scored)) {
    rollout.pass_at_k.push_back({k, *PassAtK(rollout.scored, rollout.passed, k)});
  }
}

Json TaskRollout::ToJson() const {
  Json pass = Json::object();
  for (auto [k, value] : pass_at_k) pass[std::to_string(k)] = value;
  Json episodes_json = Json::array();
  for (const EpisodeResult& episode : episodes) {
    episodes_json.push_back({{"id", episode.episode_id},
                             {"sample", episode.sample_index},
                             {"outcome", std::string(RolloutOutcomeName(episode.outcome))},
                             {"passed", episode.passed},
                             {"score", episode.score},
                             {"turns", episode.turns},
                             {"tool_calls", episode.tool_calls},
                             {"invalid_calls", episode.invalid_calls},
                             {"generated_tokens", episode.generated_tokens},
                             {"context_events", episode.context_events},
                             {"seconds", episode.seconds},
                             {"detail", episode.detail}});
  }
  return {{"env", env_name},
          {"env_id", env_id},
          {"task", task_id},
          {"n", static_cast<int64_t>(episodes.size())},
          {"scored", scored},
          {"passed", passed},
          {"pass_at_k", std::move(pass)},
          {"mean_turns", mean_turns},
          {"mean_generated_tokens", mean_generated_tokens},
          {"outcomes", outcomes},
          {"episodes", std::move(episodes_json)}};
}

RolloutRunner::RolloutRunner(SessionHost& host, inference::Backend& backend, RolloutOptions options)
    : host_(host), backend_(backend), options_(std::move(options)), rollout_id_(NewRolloutId()) {}

RolloutRunner::RolloutRunner(sandbox::SessionManager& manager, inference::Backend& backend, RolloutOptions options)
    : owned_host_(std::make_unique<LocalSessionHost>(manager)),
      host_(*owned_host_),
      backend_(backend),
      options_(std::move(options)),
      rollout_id_(NewRolloutId()) {}

Result<std::vector<TaskRollout>> RolloutRunner::Run(const std::string& env, const std::vector<std::string>& task_ids) {
  ENVFORGE_RETURN_IF_ERROR(CheckOptions(options_));
  ENVFORGE_ASSIGN_OR_RETURN(const HostedEnv described, host_.DescribeEnvironment(env));
  std::vector<const HostedTask*> tasks;
  for (const std::string& id : task_ids) {
    const HostedTask* task = described.FindTask(id);
    if (task == nullptr) return NotFoundError("environment '" + described.name + "' has no task '" + id + "'");
    tasks.push_back(task);
  }
  if (task_ids.empty()) {
    for (const HostedTask& task : described.tasks) tasks.push_back(&task);
  }
  if (tasks.empty()) return InvalidArgumentError("environment '" + described.name + "' has no tasks");
  const int64_t window = options_.context_window > 0 ? options_.context_window : backend_.info().context_window;
  if (window <= 0 && options_.context_strategy != ContextStrategy::kNone) {
    return InvalidArgumentError(
        "context strategy " + std::string(ContextStrategyName(options_.context_strategy)) +
        " needs a context window, and the backend does not know its own: give --context-window");
  }

  std::vector<TaskRollout> rollouts(tasks.size());
  std::vector<EpisodeSpec> specs;
  for (size_t t = 0; t < tasks.size(); ++t) {
    rollouts[t].env_id = described.id;
    rollouts[t].env_name = described.name;
    rollouts[t].task_id = tasks[t]->id;
    rollouts[t].episodes.resize(static_cast<size_t>(options_.n));
    for (int64_t i = 0; i < options_.n; ++i)
      specs.push_back({&described, tasks[t], options_.first_sample + i, rollout_id_, window});
  }
  const auto total = static_cast<int64_t>(specs.size());
  int64_t threads = options_.concurrency > 0 ? options_.concurrency : std::min<int64_t>(total, 256);
  threads = std::min(threads, total);
  std::atomic<int64_t> next{0};
  std::mutex progress_mutex;
  int64_t done = 0;
  auto worker = [&] {
    for (int64_t i = next++; i < total; i = next++) {
      const EpisodeSpec& spec = specs[static_cast<size_t>(i)];
      EpisodeResult episode = RunEpisode(host_, backend_, options_, spec);
      const size_t task_index = static_cast<size_t>(i / options_.n);
      std::lock_guard lock(progress_mutex);
      rollouts[task_index].episodes[static_cast<size_t>(spec.sample_index - options_.first_sample)] =
          std::move(episode);
      done += 1;
      if (options_.on_episode) options_.on_episode(done, total);
    }
  };
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < threads; ++i) pool.emplace_back(worker);
  for (std::thread& thread : pool) thread.join();
  for (TaskRollout& rollout : rollouts) Summarize(rollout);
  return rollouts;
}

}  // namespace envforge::agents
