// One rollout episode: the render -> sample -> parse -> call tools loop.
#include "agents/episode.h"

#include <chrono>

#include "agents/context_manager.h"
#include "base/json.h"

namespace envforge::agents {
namespace {

using inference::ChatMessage;
using inference::ChatToolCall;
using Clock = std::chrono::steady_clock;

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Json ToolCallsJson(const std::vector<ChatToolCall>& calls) {
  Json out = Json::array();
  for (const ChatToolCall& call : calls)
    out.push_back({{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}});
  return out;
}

class EpisodeRun {
 public:
  EpisodeRun(SessionHost& host, inference::Backend& backend, const RolloutOptions& options, const EpisodeSpec& spec)
      : host_(host),
        backend_(backend),
        options_(options),
        spec_(spec),
        store_(options.store),
        deadline_(Clock::now() + options.episode_timeout),
        tools_(spec.env->tools) {
    result_.task_id = spec.task->id;
    result_.sample_index = spec.sample_index;
  }

  EpisodeResult Run() {
    auto started = Clock::now();
    Begin();
    if (!ended_) Loop();
    Cleanup();
    result_.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    return std::move(result_);
  }

 private:
  void Begin() {
    if (store_ != nullptr) {
      EpisodeStart start;
      start.env_id = spec_.env->id;
      start.env_name = spec_.env->name;
      start.task_id = spec_.task->id;
      start.task_version = spec_.task->version;
      start.verifier_version = spec_.task->verifier_version;
      start.seed = static_cast<int64_t>(options_.sampling.seed);
      start.client = "rollout";
      start.kind = "rollout";
      start.backend = backend_.info().spec;
      start.model = backend_.info().model;
      start.sampling = {{"temperature", options_.sampling.temperature},
                        {"top_p", options_.sampling.top_p},
                        {"top_k", options_.sampling.top_k},
                        {"seed", options_.sampling.seed},
                        {"thinking", options_.thinking},
                        {"max_turns", options_.max_turns},
                        {"max_tokens", options_.max_tokens},
                        {"max_tokens_per_turn", options_.max_tokens_per_turn},
                        {"context_strategy", std::string(ContextStrategyName(options_.context_strategy))},
                        {"context_window", spec_.context_window},
                        {"record_routing", options_.record_routing},
                        {"record_kept_sets", options_.record_kept_sets}};
      start.rollout_id = spec_.rollout_id;
      start.sample_index = spec_.sample_index;
      result_.episode_id = store_->BeginEpisode(std::move(start));
    }
    HostedSessionOptions session_options;
    session_options.limits = options_.limits;
    auto session = host_.CreateSession(*spec_.env, *spec_.task, session_options);
    if (!session.ok())
      return End(RolloutOutcome::kInfraError, "the session could not start: " + session.status().message());
    session_ = std::move(*session);
    Append({"system", options_.system_prompt.empty() ? std::string(kDefaultSystemPrompt) : options_.system_prompt});
    Append({"user", spec_.task->prompt});
  }

  void Append(ChatMessage message, const std::string& tool_outcome = {}, int64_t step = -1) {
    if (store_ != nullptr) {
      MessageRecord record;
      record.index = message_index_;
      record.role = message.role;
      record.content = message.content;
      record.reasoning_content = message.reasoning_content;
      record.tool_calls = ToolCallsJson(message.tool_calls);
      record.tool_call_id = message.tool_call_id;
      record.tool_outcome = tool_outcome;
      record.step = step;
      record.created_at_us = NowMicros();
      store_->RecordMessage(result_.episode_id, std::move(record));
    }
    message_index_ += 1;
    messages_.push_back(std::move(message));
  }

  void End(RolloutOutcome outcome, std::string detail) {
    if (ended_) return;
    ended_ = true;
    result_.outcome = outcome;
    result_.detail = std::move(detail);
  }

  bool PastDeadline() const { return Clock::now() >= deadline_; }

  void Loop() {
    while (!ended_) {
      if (result_.turns >= options_.max_turns)
        return End(RolloutOutcome::kMaxTurns, "no submission after " + std::to_string(options_.max_turns) + " turns");
      if (TokenBudgetSpent()) return EndMaxTokens();
      if (PastDeadline()) return End(RolloutOutcome::kTimeout, "the episode ran past its wall-clock limit");
      auto completion = Sample();
      if (!completion) return;
      if (!completion->parse_error.empty()) {
        Malformed("Your last message could not be used: " + completion->parse_error +
                  ". Call a tool with the tool-call format, or submit your answer with submit_result.");
      } else if (completion->message.tool_calls.empty()) {
        // A turn cut by the episode's token budget is not a malformed call.
        if (TokenBudgetSpent()) return EndMaxTokens();
        Malformed("You did not call a tool. Call a tool, or submit your answer with submit_result.");
      } else {
        CallTools(*completion);
      }
      if (!ended_) ManageContext();
    }
  }

  // One model turn; nullopt when the episode ended.
  std::optional<inference::Completion> Sample() {
    inference::CompletionRequest request = BaseRequest();
    request.messages = messages_;
    request.continue_from = handle_;
    request.record_routing = options_.record_routing;
    request.record_kept_sets = options_.record_kept_sets;
    const int64_t turn = result_.turns;
    request.sampling.seed = TurnSeed(options_.sampling.seed, spec_.task->id, spec_.sample_index, turn);
    request.max_tokens = std::min(options_.max_tokens_per_turn, options_.max_tokens - result_.generated_tokens);
    const int64_t started_us = NowMicros();
    auto started = Clock::now();
    Result<inference::CompletionResult> answer = backend_.Complete(request);
    handle_.clear();
    if (!answer.ok()) {
      const Status& status = answer.status();
      if (status.code() == StatusCode::kResourceExhausted &&
          status.message().rfind("context length exceeded", 0) == 0) {
        End(RolloutOutcome::kContextExhausted, status.message());
      } else if (status.code() == StatusCode::kInvalidArgument) {
        End(RolloutOutcome::kInfraError, "the backend refused the request: " + status.message());
      } else {
        End(RolloutOutcome::kInfraError, "the backend failed: " + status.ToString());
      }
      return std::nullopt;
    }
    if (answer->choices.empty()) {
      End(RolloutOutcome::kInfraError, "the backend returned no choice");
      return std::nullopt;
    }
    inference::Completion completion = std::move(answer->choices[0]);
    handle_ = completion.cache_handle;
    result_.turns += 1;
    result_.generated_tokens += completion.completion_tokens;
    result_.prompt_tokens = std::max(result_.prompt_tokens, completion.prompt_tokens);
    result_.prefilled_tokens += completion.prefilled_tokens;
    result_.new_prompt_tokens += static_cast<int64_t>(completion.new_prompt_tokens.size());
    if (turn == 0) result_.first_prompt_tokens = static_cast<int64_t>(completion.new_prompt_tokens.size());
    context_tokens_ = completion.prompt_tokens + completion.completion_tokens;
    if (context_tokens_ == completion.completion_tokens) context_tokens_ += EstimateTokens(backend_, messages_);
    RecordTurn(completion, turn, started_us, std::chrono::duration<double, std::micro>(Clock::now() - started).count());
    return completion;
  }

  inference::CompletionRequest BaseRequest() const {
    inference::CompletionRequest request;
    request.model = backend_.info().model;
    request.tools = tools_;
    request.tool_choice = options_.tool_choice;
    request.strict_tools = options_.strict_tools;
    request.answer_schema = spec_.task->answer_schema;
    request.thinking = options_.thinking;
    request.sampling = options_.sampling;
    request.max_tokens = options_.max_tokens_per_turn;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    request.timeout = std::max(left, std::chrono::milliseconds(1));
    return request;
  }

  // Moves the completion's routing and kept ids (which nothing after it reads) into the record.
  void RecordTurn(inference::Completion& completion, int64_t turn, int64_t started_us, double duration_us) {
    ChatMessage message = completion.message;
    message.role = "assistant";
    if (!completion.parse_error.empty()) {
      message.content = completion.text;
      message.tool_calls.clear();
    }
    const int64_t index = message_index_;
    Append(std::move(message));
    if (store_ == nullptr) return;
    ModelTurnRecord record;
    record.turn = turn;
    record.message_index = index;
    record.input_tokens = completion.new_prompt_tokens;
    record.reused_tokens = completion.reused_tokens;
    record.prompt_tokens = completion.prompt_tokens;
    record.output_tokens = completion.tokens;
    record.logprobs = completion.logprobs;
    record.kept_counts = completion.kept_counts;
    record.routing_start = completion.routing_start;
    record.routing_width = completion.routing_width;
    record.routing = std::move(completion.routing);
    record.kept_vocab = completion.kept_vocab;
    record.kept_ids = std::move(completion.kept_ids);
    record.finish_reason = completion.finish_reason;
    record.parse_error = completion.parse_error;
    record.raw_text = completion.text;
    record.started_at_us = started_us;
    record.duration_us = static_cast<int64_t>(duration_us);
    store_->RecordModelTurn(result_.episode_id, std::move(record));
  }

  bool TokenBudgetSpent() const { return result_.generated_tokens >= options_.max_tokens; }
  void EndMaxTokens() {
    End(RolloutOutcome::kMaxTokens, "the episode generated its " + std::to_string(options_.max_tokens) + " tokens");
  }

  void Malformed(std::string note) {
    CountInvalid();
    if (ended_) return;
    Append({"user", std::move(note)});
  }

  void CountInvalid() {
    result_.invalid_calls += 1;
    consecutive_invalid_ += 1;
    if (consecutive_invalid_ >= options_.max_invalid_calls) {
      End(RolloutOutcome::kInvalidCalls, std::to_string(consecutive_invalid_) + " malformed tool calls in a row");
    }
  }

  void CallTools(const inference::Completion& completion) {
    bool any_invalid = false;
    for (const ChatToolCall& call : completion.message.tool_calls) {
      if (PastDeadline()) return End(RolloutOutcome::kTimeout, "the episode ran past its wall-clock limit");
      toolsets::ToolCall tool_call;
      tool_call.id = call.id;
      tool_call.name = call.name;
      tool_call.arguments = call.arguments.is_object() ? call.arguments : Json::object();
      const int64_t started_us = NowMicros();
      toolsets::ToolResult result = session_->CallTool(tool_call);
      const int64_t step = steps_++;
      result_.tool_calls += 1;
      RecordStep(step, tool_call, result, started_us);
      Append({"tool", ToolMessageText(result), "", {}, call.id}, std::string(toolsets::OutcomeName(result.outcome)),
             step);
      if (call.name == toolsets::kSubmitResultTool && Submitted(tool_call, result)) return;
      if (result.outcome == toolsets::Outcome::kCrashed)
        return End(RolloutOutcome::kCrashed, "the session died: " + result.message);
      if (result.outcome == toolsets::Outcome::kInfraError)
        return End(RolloutOutcome::kInfraError, "the runtime failed a tool call: " + result.message);
      if (result.outcome == toolsets::Outcome::kInvalidCall) any_invalid = true;
    }
    if (any_invalid) {
      CountInvalid();
    } else {
      consecutive_invalid_ = 0;
    }
  }

  // True when the submission ended the episode.
  bool Submitted(const toolsets::ToolCall& call, const toolsets::ToolResult& result) {
    if (result.outcome == toolsets::Outcome::kInfraError) {
      End(RolloutOutcome::kInfraError, "the verifier could not judge the answer: " + result.message);
      return true;
    }
    if (!result.ok()) return false;  // invalid_call (bad arguments) and the like: the model may retry
    result_.verdict = result.content;
    result_.passed = result.content.value("passed", false);
    result_.score = result.content.value("score", result_.passed ? 1.0 : 0.0);
    result_.answer_text = call.arguments.value("answer_text", "");
    if (store_ != nullptr) store_->RecordSubmit(result_.episode_id, result_.answer_text, result.content);
    End(RolloutOutcome::kSubmitted,
        result_.passed ? "submitted; the verifier passed it" : "submitted; the verifier failed it");
    return true;
  }

  void RecordStep(int64_t step, const toolsets::ToolCall& call, const toolsets::ToolResult& result,
                  int64_t started_us) {
    if (store_ == nullptr) return;
    StepRecord record;
    record.step = step;
    record.tool = call.name;
    record.arguments = call.arguments;
    record.result = result;
    record.started_at_us = started_us;
    record.duration_us = static_cast<int64_t>(result.duration_us);
    store_->RecordStep(result_.episode_id, std::move(record));
  }

  void ManageContext() {
    const int64_t window = spec_.context_window;
    size_t last_turn = messages_.size();
    while (last_turn > 0 && messages_[last_turn - 1].role != "assistant") --last_turn;
    const int64_t tokens =
        context_tokens_ +
        EstimateTokens(backend_, {messages_.begin() + static_cast<std::ptrdiff_t>(last_turn), messages_.end()});
    if (window <= 0 || static_cast<double>(tokens) <= options_.context_threshold * static_cast<double>(window)) return;
    if (options_.context_strategy == ContextStrategy::kNone) return;  // the next turn fails if it no longer fits
    inference::CompletionRequest base = BaseRequest();
    base.sampling.seed =
        TurnSeed(options_.sampling.seed, spec_.task->id, spec_.sample_index, -1 - result_.context_events);
    base.max_tokens = std::min<int64_t>(options_.max_tokens_per_turn, std::max<int64_t>(window / 4, 16));
    // The handle stays: the next turn names it, and a backend with caches finds that the
    // conversation no longer extends it and prefills afresh (dropping the cache); a scripted
    // backend keeps walking the episode's script.
    Result<ContextEvent> event = ApplyContextStrategy(options_.context_strategy, messages_, backend_, base);
    if (!event.ok()) {
      if (event.status().code() == StatusCode::kResourceExhausted)
        return End(RolloutOutcome::kContextExhausted, "the summary did not fit: " + event.status().message());
      return End(RolloutOutcome::kInfraError, "context management failed: " + event.status().ToString());
    }
    event->tokens_before = std::max(event->tokens_before, tokens);
    result_.context_events += 1;
    RecordContext(*event);
    if (static_cast<double>(event->tokens_after) > options_.context_threshold * static_cast<double>(window)) {
      End(RolloutOutcome::kContextExhausted, "the context still holds " + std::to_string(event->tokens_after) +
                                                 " tokens after " +
                                                 std::string(ContextStrategyName(options_.context_strategy)));
    }
    context_tokens_ = event->tokens_after;
  }

  void RecordContext(const ContextEvent& event) {
    if (store_ == nullptr) return;
    ContextEventRecord record;
    record.seq = result_.context_events - 1;
    record.turn = result_.turns - 1;
    record.strategy = std::string(ContextStrategyName(event.strategy));
    record.tokens_before = event.tokens_before;
    record.tokens_after = event.tokens_after;
    record.messages_dropped = event.messages_dropped;
    record.summary = event.summary;
    record.created_at_us = NowMicros();
    store_->RecordContextEvent(result_.episode_id, std::move(record));
    // The conversation restarted: the messages that stay are recorded again, in order, so the
    // stored conversation is what the model saw from here on.
    std::vector<ChatMessage> kept = std::move(messages_);
    messages_.clear();
    for (ChatMessage& message : kept) Append(std::move(message));
  }

  void Cleanup() {
    if (!handle_.empty()) backend_.Release(handle_);
    if (session_ != nullptr) (void)session_->Close();
    if (store_ != nullptr && !result_.episode_id.empty())
      store_->EndEpisode(result_.episode_id, ToEpisodeOutcome(result_.outcome));
  }

  SessionHost& host_;
  inference::Backend& backend_;
  const RolloutOptions& options_;
  const EpisodeSpec& spec_;
  TrajectoryStore* store_;
  Clock::time_point deadline_;
  Json tools_;
  EpisodeResult result_;
  std::unique_ptr<HostedSession> session_;  // null until created
  std::vector<ChatMessage> messages_;
  int64_t message_index_ = 0;
  std::string handle_;
  int64_t steps_ = 0;
  int64_t consecutive_invalid_ = 0;
  int64_t context_tokens_ = 0;
  bool ended_ = false;
};

}  // namespace

std::string ToolMessageText(const toolsets::ToolResult& result) {
  // DumpJson: a message may quote what the model wrote (an unknown tool's name), which need not be
  // valid UTF-8; a strict dump would throw out of the episode.
  if (result.ok()) return result.content.is_string() ? result.content.get<std::string>() : DumpJson(result.content);
  Json error = {{"outcome", std::string(toolsets::OutcomeName(result.outcome))}, {"message", result.message}};
  if (!result.limit.empty()) error["limit"] = result.limit;
  return DumpJson(error);
}

uint64_t TurnSeed(uint64_t run_seed, const std::string& task_id, int64_t sample_index, int64_t turn) {
  uint64_t hash = SplitMix(run_seed);
  for (unsigned char c : task_id) hash = SplitMix(hash ^ c);
  hash = SplitMix(hash ^ static_cast<uint64_t>(sample_index));
  return SplitMix(hash ^ static_cast<uint64_t>(turn));
}

EpisodeResult RunEpisode(SessionHost& host, inference::Backend& backend, const RolloutOptions& options,
                         const EpisodeSpec& spec) {
  return EpisodeRun(host, backend, options, spec).Run();
}

EpisodeResult RunEpisode(sandbox::SessionManager& manager, inference::Backend& backend, const RolloutOptions& options,
                         const EpisodeSpec& spec) {
  LocalSessionHost host(manager);
  return RunEpisode(host, backend, options, spec);
}

}  // namespace envforge::agents
