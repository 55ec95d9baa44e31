// The embedded backend: chat rendering, multi-turn cache reuse and parsing around a BatchEngine.
#include "inference/embedded_backend.h"

#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "inference/batch_engine.h"
#include "inference/model.h"
#include "inference/token_constraint.h"
#include "inference/tool_call_grammar.h"

namespace envforge::inference {
namespace {

// What a finished choice leaves for the request that continues its conversation.
struct HandleState {
  std::unique_ptr<KvCache> cache;  // holds context minus its last token
  std::vector<int32_t> context;    // prompt + generated tokens (the last one a stop token)
  std::string prompt_text;         // the rendering the choice was generated from
  ChatMessage message;             // the choice's parsed assistant message
  bool thinking = false;
  bool ended_with_stop_token = false;
  std::string tools_key;
};

// The feed of one request: a fresh prompt or a continued conversation.
struct PreparedPrompt {
  std::string prompt_text;
  std::vector<int32_t> context;     // every prompt token, reused ones included
  std::vector<int32_t> new_tokens;  // prompt tokens fed now
  std::unique_ptr<KvCache> cache;   // continued cache, or null
  int64_t reused = 0;               // prompt tokens already in context
  std::vector<int32_t> feed;
  int64_t carried = 0;
};

bool SameAssistantMessage(const ChatMessage& a, const ChatMessage& b, bool thinking) {
  if (a.content != b.content || a.tool_calls.size() != b.tool_calls.size()) return false;
  if (thinking && a.reasoning_content != b.reasoning_content) return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    const Json& x = a.tool_calls[i].arguments;
    const Json& y = b.tool_calls[i].arguments;
    auto normal = [](const Json& value) {
      if (!value.is_string()) return value;
      auto parsed = ParseJson(value.get<std::string>(), "arguments");
      return parsed.ok() ? *parsed : value;
    };
    if (a.tool_calls[i].name != b.tool_calls[i].name || normal(x) != normal(y)) return false;
  }
  return true;
}

size_t CompleteUtf8Prefix(const std::string& text) {
  size_t end = text.size();
  size_t back = 0;
  while (back < 4 && back < end && (static_cast<unsigned char>(text[end - 1 - back]) & 0xC0) == 0x80) ++back;
  if (back < end) {
    auto lead = static_cast<unsigned char>(text[end - 1 - back]);
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (need > back + 1) return end - 1 - back;
  }
  return end;
}

// Per-choice decoding for stop strings and streaming (engine thread).
struct TextWatcher {
  const Tokenizer* tokenizer = nullptr;
  const std::vector<std::string>* stops = nullptr;
  const std::function<void(int64_t, std::string_view)>* on_text = nullptr;
  int64_t choice = 0;
  std::string text;  // the choice's decoded tokens so far (a byte-level decode is their concatenation)
  size_t emitted = 0;
  std::string final_text;
  bool stopped = false;
  size_t max_stop = 0;

  // Returns false when a stop string appeared. Only the new bytes (and the stop's length before
  // them) are searched: an earlier occurrence would have stopped an earlier token.
  bool Add(int32_t token) {
    const size_t before = text.size();
    text += tokenizer->TokenBytes(token);
    for (const std::string& stop : *stops) {
      if (stop.empty()) continue;
      size_t at = text.find(stop, before >= stop.size() - 1 ? before - (stop.size() - 1) : 0);
      if (at != std::string::npos) {
        final_text = text.substr(0, at);
        stopped = true;
        return false;
      }
    }
    size_t safe = CompleteUtf8Prefix(text);
    safe = safe > max_stop ? safe - max_stop : 0;
    if (*on_text && safe > emitted) {
      (*on_text)(choice, std::string_view(text).substr(emitted, safe - emitted));
      emitted = safe;
    }
    return true;
  }
  void Flush(const std::string& full) {
    if (*on_text && full.size() > emitted) (*on_text)(choice, std::string_view(full).substr(emitted));
    emitted = full.size();
  }
};

class EmbeddedBackend final : public Backend {
 public:
  EmbeddedBackend(std::string spec, BackendOptions options, std::unique_ptr<Model> model)
      : spec_(std::move(spec)), options_(std::move(options)), model_(std::move(model)), engine_(*model_) {}

  BackendInfo info() const override {
    std::string name = options_.model_name;
    if (name.empty()) name = std::filesystem::path(model_->dir()).filename().string();
    if (name.empty()) name = std::filesystem::path(model_->dir()).parent_path().filename().string();
    return {"embedded", spec_, name, ContextWindow()};
  }

  std::string WeightsSha256() const override {
    std::call_once(weights_hashed_, [this] { weights_sha256_ = model_->weights().checkpoint().ContentSha256(); });
    return weights_sha256_;
  }

  int64_t CountTokens(std::string_view text) const override {
    return static_cast<int64_t>(model_->tokenizer()->Encode(text).size());
  }

  void Release(const std::string& cache_handle) override {
    std::lock_guard lock(mutex_);
    handles_.erase(cache_handle);
  }

  Json Stats() const override {
    Json stats = engine_.Stats().ToJson();
    std::lock_guard lock(mutex_);
    stats["cached_conversations"] = handles_.size();
    stats["continuations_reused"] = continuations_reused_;
    stats["continuations_missed"] = continuations_missed_;
    return stats;
  }

  Result<CompletionResult> Complete(const CompletionRequest& request) override;

 private:
  int64_t ContextWindow() const {
    int64_t model_limit = model_->config().max_position_embeddings;
    if (options_.context_window > 0 && (model_limit <= 0 || options_.context_window < model_limit))
      return options_.context_window;
    return model_limit;
  }
  static std::string ToolsKey(const CompletionRequest& request) {
    return request.tool_choice == "none" ? "none" : request.tools.dump();
  }
  Result<PreparedPrompt> Prepare(const CompletionRequest& request);
  Result<std::shared_ptr<const TokenConstraint>> ToolCallConstraintFor(const CompletionRequest& request);
  bool Continue(const CompletionRequest& request, HandleState& state, PreparedPrompt& prepared) const;
  Completion MakeChoice(const CompletionRequest& request, EngineChoice& choice, TextWatcher& watcher,
                        const PreparedPrompt& prepared, int64_t prefilled);
  void TakeRecordings(const CompletionRequest& request, int64_t routing_start, EngineChoice& choice,
                      Completion& completion) const;
  void KeepHandle(Completion& completion, HandleState state);

  std::string spec_;
  BackendOptions options_;
  std::unique_ptr<Model> model_;
  mutable std::once_flag weights_hashed_;
  mutable std::string weights_sha256_;
  BatchEngine engine_;
  mutable std::mutex mutex_;
  std::map<std::string, HandleState> handles_;
  std::deque<std::string> handle_order_;
  uint64_t next_handle_ = 0;
  int64_t continuations_reused_ = 0;
  int64_t continuations_missed_ = 0;
  std::once_flag trie_once_;
  std::shared_ptr<const VocabTrie> trie_;  // built by the first constrained request
  // Grammars by (thinking, parallel calls, tool_choice, answer schema, tools): an episode's turns share one, and
  // the tasks of one answer schema do (under mutex_).
  std::map<std::string, std::shared_ptr<const ToolCallGrammar>> grammars_;
};

constexpr size_t kMaxGrammars = 64;

// OpenAI's strict function calling: a tool spec with `strict: true`, at the top (the Responses
// API's form) or in its "function" object (Chat Completions'); ToOpenAiTools moves the first into
// the second. Text that does not parse is not strict here, and the prompt's rendering reports it.
bool AnyStrictTool(const OrderedJson& tools) {
  Result<OrderedJson> specs = ParseToolSpecs(tools, "tools");
  if (!specs.ok()) return false;
  for (const OrderedJson& tool : ToOpenAiTools(*specs)) {
    const OrderedJson& function = tool["function"];
    if (function.is_object() && function.value("strict", false) == true) return true;
  }
  return false;
}

// Whether a request decodes under the tool-call grammar: tool_choice "required" or a tool's name,
// or "auto" over strict tools (the calls then optional).
bool DecodesUnderGrammar(const CompletionRequest& request) {
  if (request.raw || request.tool_choice == "none") return false;
  return request.tool_choice != "auto" || request.strict_tools || AnyStrictTool(request.tools);
}

// tool_choice "required" or a tool's name: the completion is decoded under the DSML tool-call
// grammar (tool_call_grammar.h), so it always parses into calls of offered tools; "auto" over
// strict tools: into content alone or calls of offered tools.
Result<std::shared_ptr<const TokenConstraint>> EmbeddedBackend::ToolCallConstraintFor(
    const CompletionRequest& request) {
  const std::string answer = request.answer_schema.is_null() ? std::string() : DumpJson(request.answer_schema);
  const std::string key = std::string(request.thinking ? "t" : "f") + (request.parallel_tool_calls ? "p" : "1") +
                          request.tool_choice + "\n" + answer + "\n" + ToolsKey(request);
  std::shared_ptr<const ToolCallGrammar> grammar;
  {
    std::lock_guard lock(mutex_);
    if (auto it = grammars_.find(key); it != grammars_.end()) grammar = it->second;
  }
  if (grammar == nullptr) {
    ToolCallGrammarOptions options;
    options.thinking = request.thinking;
    if (request.tool_choice == "auto") {
      options.calls_optional = true;
    } else if (request.tool_choice != "required") {
      options.only_tool = request.tool_choice;
    }
    if (!request.answer_schema.is_null()) options.answer_schema = OrderedJson::parse(answer);
    if (!request.parallel_tool_calls) options.max_invokes = 1;
    auto built = ToolCallGrammar::Build(request.tools, options);
    if (!built.ok()) {
      return InvalidArgumentError("tool_choice \"" + request.tool_choice + "\": " + built.status().message());
    }
    grammar = *built;
    std::lock_guard lock(mutex_);
    if (grammars_.size() >= kMaxGrammars) grammars_.clear();  // a bound, not an LRU: tool sets rarely vary
    grammars_.emplace(key, grammar);
  }
  std::call_once(trie_once_, [this] { trie_ = VocabTrie::Build(*model_->tokenizer()); });
  return std::shared_ptr<const TokenConstraint>(
      std::make_shared<ToolCallConstraint>(grammar, trie_, static_cast<int32_t>(model_->config().eos_token_id)));
}

bool EmbeddedBackend::Continue(const CompletionRequest& request, HandleState& state, PreparedPrompt& prepared) const {
  if (state.thinking != request.thinking || state.tools_key != ToolsKey(request)) return false;
  size_t assistant = request.messages.size();
  while (assistant > 0 && request.messages[assistant - 1].role != "assistant") --assistant;
  if (assistant == 0) return false;
  const size_t index = assistant - 1;
  if (!SameAssistantMessage(request.messages[index], state.message, request.thinking)) return false;
  ChatEncodeOptions encode;
  encode.thinking = request.thinking;
  if (request.tool_choice != "none") encode.tools = request.tools;
  std::vector<ChatMessage> before(request.messages.begin(),
                                  request.messages.begin() + static_cast<std::ptrdiff_t>(index));
  auto before_text = EncodeChat(before, encode);
  if (!before_text.ok() || *before_text != state.prompt_text) return false;
  before.push_back(request.messages[index]);
  auto through_text = EncodeChat(before, encode);
  if (!through_text.ok() || prepared.prompt_text.compare(0, through_text->size(), *through_text) != 0) return false;
  prepared.new_tokens =
      model_->tokenizer()->Encode(std::string_view(prepared.prompt_text).substr(through_text->size()));
  if (prepared.new_tokens.empty()) return false;
  if (!state.ended_with_stop_token) {
    // The turn was cut by max_tokens: the rendering closes it with EOS, which the model never
    // sampled; it is fed as a prompt token.
    prepared.new_tokens.insert(prepared.new_tokens.begin(), static_cast<int32_t>(model_->config().eos_token_id));
  }
  prepared.reused = static_cast<int64_t>(state.context.size());
  prepared.context = std::move(state.context);
  prepared.feed = {prepared.context.back()};
  prepared.feed.insert(prepared.feed.end(), prepared.new_tokens.begin(), prepared.new_tokens.end());
  prepared.context.insert(prepared.context.end(), prepared.new_tokens.begin(), prepared.new_tokens.end());
  prepared.carried = 1;
  prepared.cache = std::move(state.cache);
  return true;
}

Result<PreparedPrompt> EmbeddedBackend::Prepare(const CompletionRequest& request) {
  const Tokenizer& tokenizer = *model_->tokenizer();
  PreparedPrompt prepared;
  if (request.raw) {
    prepared.prompt_text = request.prompt_text;
    prepared.new_tokens = tokenizer.Encode(request.prompt_text);
    const auto bos = static_cast<int32_t>(model_->config().bos_token_id);
    if (prepared.new_tokens.empty() || prepared.new_tokens.front() != bos)
      prepared.new_tokens.insert(prepared.new_tokens.begin(), bos);
  } else {
    ChatEncodeOptions encode;
    encode.thinking = request.thinking;
    if (request.tool_choice != "none") encode.tools = request.tools;
    ENVFORGE_ASSIGN_OR_RETURN(prepared.prompt_text, EncodeChat(request.messages, encode));
    if (!request.continue_from.empty()) {
      std::optional<HandleState> state;
      {
        std::lock_guard lock(mutex_);
        auto it = handles_.find(request.continue_from);
        if (it != handles_.end()) {
          state = std::move(it->second);
          handles_.erase(it);
        }
      }
      bool reused = state.has_value() && Continue(request, *state, prepared);
      std::lock_guard lock(mutex_);
      (reused ? continuations_reused_ : continuations_missed_) += 1;
      if (reused) return prepared;
    }
    prepared.new_tokens = tokenizer.Encode(prepared.prompt_text);
  }
  prepared.context = prepared.new_tokens;
  prepared.feed = prepared.new_tokens;
  return prepared;
}

void EmbeddedBackend::KeepHandle(Completion& completion, HandleState state) {
  std::lock_guard lock(mutex_);
  completion.cache_handle = "e-" + std::to_string(next_handle_++);
  handles_[completion.cache_handle] = std::move(state);
  handle_order_.push_back(completion.cache_handle);
  while (handles_.size() > kMaxHandles && !handle_order_.empty()) {
    handles_.erase(handle_order_.front());
    handle_order_.pop_front();
  }
  // Handles continued or released leave stale names behind; keep the order list bounded too.
  if (handle_order_.size() > 4 * kMaxHandles) {
    std::deque<std::string> live;
    for (const std::string& name : handle_order_) {
      if (handles_.count(name)) live.push_back(name);
    }
    handle_order_ = std::move(live);
  }
}

Completion EmbeddedBackend::MakeChoice(const CompletionRequest& request, EngineChoice& choice, TextWatcher& watcher,
                                       const PreparedPrompt& prepared, int64_t prefilled) {
  const Tokenizer& tokenizer = *model_->tokenizer();
  Completion completion;
  completion.message.role = "assistant";
  completion.tokens = choice.tokens;
  completion.logprobs = choice.logprobs;
  completion.kept_counts = choice.kept_counts;
  for (int32_t token : choice.tokens) completion.token_texts.push_back(tokenizer.TokenBytes(token));
  for (const auto& alternatives : choice.top_logprobs) {
    std::vector<TokenAlternative> row;
    for (const EngineAlternative& alternative : alternatives) {
      row.push_back({alternative.token, tokenizer.TokenBytes(alternative.token), alternative.logprob});
    }
    completion.top_logprobs.push_back(std::move(row));
  }
  const size_t text_tokens = choice.tokens.size() - (choice.stopped_by_token ? 1 : 0);
  completion.text = choice.stopped_by_callback && watcher.stopped
                        ? watcher.final_text
                        : tokenizer.Decode(std::span<const int32_t>(choice.tokens.data(), text_tokens));
  watcher.Flush(completion.text);
  completion.finish_reason = choice.stopped_by_token || choice.stopped_by_callback ? "stop" : "length";
  completion.prompt_tokens = static_cast<int64_t>(prepared.context.size());
  completion.reused_tokens = prepared.reused;
  completion.new_prompt_tokens = prepared.new_tokens;
  completion.prefilled_tokens = prefilled;
  completion.completion_tokens = static_cast<int64_t>(choice.tokens.size());
  if (request.raw) return completion;

  std::string parse_text = completion.text;
  if (choice.stopped_by_token) parse_text += tokenizer.Decode(std::span<const int32_t>(&choice.tokens.back(), 1));
  auto parsed = ParseCompletion(parse_text, request.thinking);
  if (parsed.ok()) {
    completion.message = std::move(parsed->message);
    if (!completion.message.tool_calls.empty() && choice.stopped_by_token) completion.finish_reason = "tool_calls";
  } else {
    completion.parse_error = parsed.status().message();
    completion.message.content = completion.text;
  }
  if (request.tool_choice == "required" && completion.parse_error.empty() && completion.message.tool_calls.empty()) {
    completion.parse_error = "tool_choice is \"required\" but the completion calls no tool";
  }
  if (!request.parallel_tool_calls && completion.parse_error.empty() && completion.message.tool_calls.size() > 1) {
    completion.parse_error = "parallel_tool_calls is false but the completion calls " +
                             std::to_string(completion.message.tool_calls.size()) + " tools";
  }
  for (size_t i = 0; i < completion.message.tool_calls.size(); ++i) {
    completion.message.tool_calls[i].id = "call_" + std::to_string(i);
  }
  // A choice cut by a stop string has tokens in its cache that its text leaves out: not continuable.
  if (!choice.stopped_by_callback && !choice.tokens.empty()) {
    HandleState state;
    state.ended_with_stop_token = choice.stopped_by_token;
    state.cache = std::move(choice.cache);
    state.context = prepared.context;
    state.context.insert(state.context.end(), choice.tokens.begin(), choice.tokens.end());
    state.prompt_text = prepared.prompt_text;
    state.message = completion.message;
    state.thinking = request.thinking;
    state.tools_key = ToolsKey(request);
    KeepHandle(completion, std::move(state));
  }
  return completion;
}

// Keep routing and keep sampling mask, as the request asked (backend.h, Completion).
void EmbeddedBackend::TakeRecordings(const CompletionRequest& request, int64_t routing_start, EngineChoice& choice,
                                     Completion& completion) const {
  if (request.record_routing) {
    completion.routing_start = routing_start;
    completion.routing_width = model_->config().routing_width();
    completion.routing = std::move(choice.routing);
  }
  if (request.record_kept_sets) {
    completion.kept_vocab = model_->config().vocab_size;
    completion.kept_ids = std::move(choice.kept_ids);
  }
}

Result<CompletionResult> EmbeddedBackend::Complete(const CompletionRequest& request) {
  if (request.n < 1) return InvalidArgumentError("n must be at least 1, got " + std::to_string(request.n));
  if (request.max_tokens < 0) return InvalidArgumentError("max_tokens must be >= 0");
  if (request.top_logprobs < 0 || request.top_logprobs > 20)
    return InvalidArgumentError("top_logprobs must be in 0..20");
  std::shared_ptr<const TokenConstraint> constraint;
  if (DecodesUnderGrammar(request)) {
    ENVFORGE_ASSIGN_OR_RETURN(constraint, ToolCallConstraintFor(request));
  }
  ENVFORGE_ASSIGN_OR_RETURN(PreparedPrompt prepared, Prepare(request));
  const int64_t window = ContextWindow();
  const auto prompt_tokens = static_cast<int64_t>(prepared.context.size());
  if (window > 0 && prompt_tokens >= window) {
    return ResourceExhaustedError("context length exceeded: the prompt has " + std::to_string(prompt_tokens) +
                                  " tokens and the context window is " + std::to_string(window));
  }
  EngineRequest engine_request;
  engine_request.cache = std::move(prepared.cache);
  engine_request.feed = prepared.feed;
  engine_request.carried_tokens = prepared.carried;
  engine_request.share_prompt = engine_request.cache == nullptr;
  for (int64_t i = 0; i < request.n; ++i)
    engine_request.choices.push_back({request.sampling, static_cast<uint64_t>(i)});
  engine_request.max_tokens = window > 0 ? std::min(request.max_tokens, window - prompt_tokens) : request.max_tokens;
  engine_request.max_length = window;
  engine_request.top_logprobs = request.logprobs ? request.top_logprobs : 0;
  engine_request.record_routing = request.record_routing;
  engine_request.record_kept_sets = request.record_kept_sets;
  engine_request.constraint = std::move(constraint);
  std::vector<TextWatcher> watchers(static_cast<size_t>(request.n));
  size_t max_stop = 0;
  for (const std::string& stop : request.stop) max_stop = std::max(max_stop, stop.size());
  for (int64_t i = 0; i < request.n; ++i) {
    watchers[i] = {
        model_->tokenizer(), &request.stop, &request.on_text, i, {}, 0, {}, false, max_stop > 0 ? max_stop - 1 : 0};
  }
  if (request.on_text || !request.stop.empty()) {
    engine_request.on_token = [&watchers](int64_t choice, int32_t token) { return watchers[choice].Add(token); };
  }
  Result<EngineResult> engine_result = engine_.Submit(std::move(engine_request)).get();
  if (!engine_result.ok()) return engine_result.status();

  CompletionResult result;
  result.model = info().model;
  result.prompt_tokens = prompt_tokens;
  for (size_t i = 0; i < engine_result->choices.size(); ++i) {
    int64_t prefilled = i == 0 ? engine_result->prefilled_tokens : 0;
    result.choices.push_back(MakeChoice(request, engine_result->choices[i], watchers[i], prepared, prefilled));
    TakeRecordings(request, engine_result->routing_start, engine_result->choices[i], result.choices.back());
    result.completion_tokens += result.choices.back().completion_tokens;
  }
  return result;
}

}  // namespace

Result<std::unique_ptr<Backend>> OpenEmbeddedBackend(const std::string& model_dir, const BackendOptions& options) {
  ModelOptions model_options;
  model_options.device = options.device.empty() ? "cpu" : options.device;
  model_options.dense_attention = options.dense_attention;
  auto model = Model::Load(model_dir, model_options);
  if (!model.ok())
    return Status(model.status().code(), "backend embedded:" + model_dir + ": " + model.status().message());
  if ((*model)->tokenizer() == nullptr) {
    return InvalidArgumentError("backend embedded:" + model_dir + ": the model directory has no tokenizer.json");
  }
  // The spec recorded with every trajectory says when DSA was off.
  std::string spec = "embedded:" + model_dir + (options.dense_attention ? " (dense attention)" : "");
  return std::unique_ptr<Backend>(new EmbeddedBackend(std::move(spec), options, std::move(*model)));
}

}  // namespace envforge::inference
