// The OpenAI-compatible wire format: request bodies, response parsing, SSE stream assembly.
#include "inference/internal/openai_wire.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <utility>
#include <vector>

namespace envforge::inference::openai_wire {
namespace {

std::string Quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

Status ValidateSampling(const CompletionRequest& request) {
  if (request.n < 1) return InvalidArgumentError("n must be at least 1, got " + std::to_string(request.n));
  if (request.max_tokens < 1) {
    return InvalidArgumentError("max_tokens must be at least 1, got " + std::to_string(request.max_tokens));
  }
  const SamplingParams& sampling = request.sampling;
  if (!std::isfinite(sampling.temperature) || sampling.temperature < 0) {
    return InvalidArgumentError("temperature must be a finite number >= 0, got " +
                                std::to_string(sampling.temperature));
  }
  if (!(sampling.top_p > 0 && sampling.top_p <= 1)) {
    return InvalidArgumentError("top_p must be in (0, 1], got " + std::to_string(sampling.top_p));
  }
  if (sampling.top_k < 0) return InvalidArgumentError("top_k must be >= 0, got " + std::to_string(sampling.top_k));
  if (request.top_logprobs < 0 || request.top_logprobs > 20) {
    return InvalidArgumentError("top_logprobs must be in 0..20, got " + std::to_string(request.top_logprobs));
  }
  if (request.top_logprobs > 0 && !request.logprobs) return InvalidArgumentError("top_logprobs needs logprobs");
  return Status::Ok();
}

// OpenAI sends tool-call arguments as JSON text; ChatToolCall holds an object or that text.
Result<std::string> ArgumentsText(const ChatToolCall& call, const std::string& where) {
  if (call.arguments.is_string()) return call.arguments.get<std::string>();
  if (call.arguments.is_null()) return std::string("{}");
  if (call.arguments.is_object()) return DumpJson(call.arguments);
  return InvalidArgumentError(where + ": the arguments of tool call " + Quoted(call.name) +
                              " are neither a JSON object nor its text");
}

// Assigns ids to calls without one and remembers which calls still wait for their tool message.
class ToolCallIds {
 public:
  std::string Assign(const ChatToolCall& call) {
    std::string id = call.id.empty() ? "call_" + std::to_string(count_) : call.id;
    ++count_;
    unanswered_.push_back(id);
    return id;
  }
  void NewAssistantTurn() { unanswered_.clear(); }
  // The id a tool message answers: its own, or the earliest unanswered call's; empty when none.
  std::string Answer(const std::string& tool_call_id) {
    if (!tool_call_id.empty()) {
      auto it = std::find(unanswered_.begin(), unanswered_.end(), tool_call_id);
      if (it != unanswered_.end()) unanswered_.erase(it);
      return tool_call_id;
    }
    if (unanswered_.empty()) return "";
    std::string id = unanswered_.front();
    unanswered_.pop_front();
    return id;
  }

 private:
  int64_t count_ = 0;
  std::deque<std::string> unanswered_;
};

Result<Json> AssistantToWire(const ChatMessage& message, bool send_reasoning, ToolCallIds& ids,
                             const std::string& where) {
  Json wire{{"role", "assistant"}};
  wire["content"] = message.content.empty() && !message.tool_calls.empty() ? Json() : Json(message.content);
  if (send_reasoning && !message.reasoning_content.empty()) wire["reasoning_content"] = message.reasoning_content;
  ids.NewAssistantTurn();
  if (message.tool_calls.empty()) return wire;
  Json calls = Json::array();
  for (const ChatToolCall& call : message.tool_calls) {
    if (call.name.empty()) return InvalidArgumentError(where + ": a tool call has no name");
    ENVFORGE_ASSIGN_OR_RETURN(std::string arguments, ArgumentsText(call, where));
    calls.push_back(Json{{"id", ids.Assign(call)},
                         {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", std::move(arguments)}}}});
  }
  wire["tool_calls"] = std::move(calls);
  return wire;
}

Result<Json> MessagesToWire(const std::vector<ChatMessage>& messages, bool thinking) {
  // DeepSeek-V3.2: reasoning survives tool results and is dropped once a new user message comes.
  int64_t last_user = -1;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == "user") last_user = static_cast<int64_t>(i);
  }
  Json wire = Json::array();
  ToolCallIds ids;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    std::string where = "message " + std::to_string(i) + " (" + message.role + ")";
    if (message.role == "system" || message.role == "user") {
      wire.push_back(Json{{"role", message.role}, {"content", message.content}});
    } else if (message.role == "assistant") {
      bool send_reasoning = thinking && static_cast<int64_t>(i) > last_user;
      ENVFORGE_ASSIGN_OR_RETURN(Json assistant, AssistantToWire(message, send_reasoning, ids, where));
      wire.push_back(std::move(assistant));
    } else if (message.role == "tool") {
      std::string id = ids.Answer(message.tool_call_id);
      if (id.empty()) {
        return InvalidArgumentError(where +
                                    " has no tool_call_id and answers no unanswered tool call of the "
                                    "assistant message before it");
      }
      wire.push_back(Json{{"role", "tool"}, {"tool_call_id", id}, {"content", message.content}});
    } else {
      return InvalidArgumentError(where + ": unknown role " + Quoted(message.role) +
                                  " (expected system, user, assistant or tool)");
    }
  }
  return wire;
}

Status AddTools(const CompletionRequest& request, OrderedJson& body) {
  if (!request.tools.is_array()) return InvalidArgumentError("tools must be a JSON array of tool specs");
  const std::string& choice = request.tool_choice;
  if (choice == "none" || (request.tools.empty() && choice == "auto")) return Status::Ok();
  if (request.tools.empty()) {
    return InvalidArgumentError("tool_choice " + Quoted(choice) + " needs tools, and the request offers none");
  }
  if (choice.empty())
    return InvalidArgumentError("tool_choice is empty (expected auto, none, required or a tool name)");
  // chat_format accepts a spec as JSON text; the server needs the object.
  ENVFORGE_ASSIGN_OR_RETURN(OrderedJson tools, ParseToolSpecs(request.tools, "tools"));
  body["tools"] = ToOpenAiTools(tools);
  if (request.strict_tools) {
    for (OrderedJson& tool : body["tools"]) tool["function"]["strict"] = true;
  }
  if (choice == "auto" || choice == "required") {
    body["tool_choice"] = choice;
  } else {
    body["tool_choice"] = OrderedJson{{"type", "function"}, {"function", {{"name", choice}}}};
  }
  if (!request.parallel_tool_calls) body["parallel_tool_calls"] = false;
  return Status::Ok();
}

void AddSampling(const CompletionRequest& request, OrderedJson& body) {
  body["n"] = request.n;
  body["max_tokens"] = request.max_tokens;
  body["temperature"] = request.sampling.temperature;
  body["top_p"] = request.sampling.top_p;
  body["seed"] = request.sampling.seed;
  if (request.sampling.top_k > 0) body["top_k"] = request.sampling.top_k;  // vLLM/SGLang extension
  if (!request.stop.empty()) body["stop"] = request.stop;
  if (!request.logprobs) return;
  if (request.raw) {
    body["logprobs"] = request.top_logprobs;  // legacy completions: the number of alternatives
  } else {
    body["logprobs"] = true;
    if (request.top_logprobs > 0) body["top_logprobs"] = request.top_logprobs;
  }
}

}  // namespace

Result<OrderedJson> BuildRequestBody(const CompletionRequest& request, const std::string& model, bool stream) {
  ENVFORGE_RETURN_IF_ERROR(ValidateSampling(request));
  OrderedJson body = OrderedJson::object();
  if (!model.empty()) body["model"] = model;
  if (request.raw) {
    body["prompt"] = request.prompt_text;
  } else {
    ENVFORGE_ASSIGN_OR_RETURN(body["messages"], MessagesToWire(request.messages, request.thinking));
    ENVFORGE_RETURN_IF_ERROR(AddTools(request, body));
    if (request.thinking) body["thinking"] = OrderedJson{{"type", "enabled"}};
  }
  AddSampling(request, body);
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = OrderedJson{{"include_usage", true}};
  }
  return body;
}

// ---------------------------------------------------------------------------------------------
// Response parsing.

namespace {

// Reads one response body; every shape error becomes DataLoss naming the URL and the place.
class ResponseReader {
 public:
  ResponseReader(const CompletionRequest& request, std::string_view url) : request_(request), url_(url) {}

  Result<CompletionResult> Read(std::string_view body) {
    Result<Json> parsed = ParseJson(body, "response body");
    if (!parsed.ok()) return Bad("not JSON (" + parsed.status().message() + "); it begins " + Quoted(Snippet(body)));
    const Json& root = *parsed;
    if (!root.is_object()) return Bad("not a JSON object");
    if (!root.contains("choices") && root.contains("error"))
      return Bad("an error object instead of choices: " + DumpJson(root["error"]));
    if (!root.contains("choices") || !root["choices"].is_array()) return Bad("no choices array");
    if (root["choices"].empty()) return Bad("the choices array is empty");
    CompletionResult result;
    if (root.contains("model") && root["model"].is_string()) result.model = root["model"].get<std::string>();
    std::vector<std::pair<int64_t, Completion>> choices;
    for (size_t k = 0; k < root["choices"].size(); ++k) {
      std::string where = "choices[" + std::to_string(k) + "]";
      const Json& choice = root["choices"][k];
      if (!choice.is_object()) return Bad(where + " is not an object");
      int64_t index = static_cast<int64_t>(k);
      if (choice.contains("index")) {
        if (!choice["index"].is_number_integer()) return Bad(where + ".index is not an integer");
        index = choice["index"].get<int64_t>();
      }
      ENVFORGE_ASSIGN_OR_RETURN(Completion completion, ReadChoice(choice, where));
      choices.emplace_back(index, std::move(completion));
    }
    std::stable_sort(choices.begin(), choices.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t k = 0; k + 1 < choices.size(); ++k) {
      if (choices[k].first == choices[k + 1].first)
        return Bad("two choices have index " + std::to_string(choices[k].first));
    }
    for (auto& [index, completion] : choices) result.choices.push_back(std::move(completion));
    ENVFORGE_RETURN_IF_ERROR(ReadUsage(root, result));
    return result;
  }

 private:
  Status Bad(const std::string& what) const {
    return DataLossError("openai response from " + std::string(url_) + ": " + what);
  }

  static std::string Snippet(std::string_view body) {
    if (body.size() <= 120) return std::string(body);
    return std::string(body.substr(0, 120)) + "...";
  }

  // A string member that may be absent or null (both read as empty).
  Result<std::string> OptionalString(const Json& object, const char* key, const std::string& where) const {
    if (!object.contains(key) || object[key].is_null()) return std::string();
    if (!object[key].is_string()) return Bad(where + "." + key + " is not a string or null");
    return object[key].get<std::string>();
  }

  Result<Completion> ReadChoice(const Json& choice, const std::string& where) const {
    Completion completion;
    completion.message.role = "assistant";
    ENVFORGE_ASSIGN_OR_RETURN(completion.finish_reason, OptionalString(choice, "finish_reason", where));
    if (request_.raw) {
      if (!choice.contains("text") || !choice["text"].is_string()) return Bad(where + ".text is not a string");
      completion.text = choice["text"].get<std::string>();
      completion.message.content = completion.text;
      ENVFORGE_RETURN_IF_ERROR(ReadRawLogprobs(choice, where, completion));
      return completion;
    }
    if (!choice.contains("message") || !choice["message"].is_object()) return Bad(where + " has no message object");
    const Json& message = choice["message"];
    std::string message_where = where + ".message";
    ENVFORGE_ASSIGN_OR_RETURN(completion.message.content, OptionalString(message, "content", message_where));
    completion.text = completion.message.content;
    // DeepSeek and vLLM name it reasoning_content; some newer servers say reasoning.
    const char* reasoning_key = message.contains("reasoning_content") ? "reasoning_content" : "reasoning";
    ENVFORGE_ASSIGN_OR_RETURN(completion.message.reasoning_content,
                              OptionalString(message, reasoning_key, message_where));
    ENVFORGE_RETURN_IF_ERROR(ReadToolCalls(message, message_where, completion));
    ENVFORGE_RETURN_IF_ERROR(ReadChatLogprobs(choice, where, completion));
    CheckToolChoice(completion);
    return completion;
  }

  Status ReadToolCalls(const Json& message, const std::string& where, Completion& completion) const {
    if (!message.contains("tool_calls") || message["tool_calls"].is_null()) return Status::Ok();
    if (!message["tool_calls"].is_array()) return Bad(where + ".tool_calls is not an array");
    const Json& calls = message["tool_calls"];
    for (size_t j = 0; j < calls.size(); ++j) {
      std::string call_where = where + ".tool_calls[" + std::to_string(j) + "]";
      const Json& call = calls[j];
      if (!call.is_object()) return Bad(call_where + " is not an object");
      if (!call.contains("function") || !call["function"].is_object())
        return Bad(call_where + " has no function object");
      const Json& function = call["function"];
      ChatToolCall parsed;
      ENVFORGE_ASSIGN_OR_RETURN(parsed.id, OptionalString(call, "id", call_where));
      ENVFORGE_ASSIGN_OR_RETURN(parsed.name, OptionalString(function, "name", call_where + ".function"));
      if (parsed.name.empty()) return Bad(call_where + ".function has no name");
      ENVFORGE_RETURN_IF_ERROR(ReadArguments(function, call_where, parsed, completion));
      completion.message.tool_calls.push_back(std::move(parsed));
    }
    return Status::Ok();
  }

  // The arguments are JSON text; text that is not a JSON object stays as it is (a Json string)
  // and the choice's parse_error says why: the model's mistake, not the server's.
  Status ReadArguments(const Json& function, const std::string& where, ChatToolCall& call,
                       Completion& completion) const {
    if (!function.contains("arguments") || function["arguments"].is_null()) return Status::Ok();
    const Json& arguments = function["arguments"];
    if (arguments.is_object()) {
      call.arguments = arguments;
      return Status::Ok();
    }
    if (!arguments.is_string()) return Bad(where + ".function.arguments is not a string");
    const std::string& text = arguments.get_ref<const std::string&>();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) return Status::Ok();  // no arguments: {}
    Result<Json> parsed = ParseJson(text, "arguments", kMaxJsonValueDepth);
    std::string problem;
    if (!parsed.ok()) {
      problem = parsed.status().message();
    } else if (!parsed->is_object()) {
      problem = "arguments are not a JSON object";
    }
    if (problem.empty()) {
      call.arguments = std::move(*parsed);
      return Status::Ok();
    }
    call.arguments = text;
    AddParseError(completion, "tool call " + Quoted(call.name) + ": " + problem);
    return Status::Ok();
  }

  void CheckToolChoice(Completion& completion) const {
    const std::string& choice = request_.tool_choice;
    if (choice == "auto" || choice == "none" || request_.tools.empty()) return;
    const auto& calls = completion.message.tool_calls;
    if (choice == "required") {
      if (calls.empty()) AddParseError(completion, "tool_choice is 'required' and the choice made no tool call");
      return;
    }
    bool called =
        std::any_of(calls.begin(), calls.end(), [&](const ChatToolCall& call) { return call.name == choice; });
    if (!called) AddParseError(completion, "tool_choice names " + Quoted(choice) + " and the choice did not call it");
  }

  static void AddParseError(Completion& completion, const std::string& error) {
    completion.parse_error += (completion.parse_error.empty() ? "" : "; ") + error;
  }

  Result<double> Logprob(const Json& value, const std::string& where) const {
    if (!value.is_number()) return Bad(where + " is not a number");
    return value.get<double>();
  }

  Status ReadChatLogprobs(const Json& choice, const std::string& where, Completion& completion) const {
    if (!choice.contains("logprobs") || choice["logprobs"].is_null()) return Status::Ok();
    const Json& logprobs = choice["logprobs"];
    if (!logprobs.is_object()) return Bad(where + ".logprobs is not an object");
    if (!logprobs.contains("content") || logprobs["content"].is_null()) return Status::Ok();
    if (!logprobs["content"].is_array()) return Bad(where + ".logprobs.content is not an array");
    const Json& content = logprobs["content"];
    for (size_t t = 0; t < content.size(); ++t) {
      std::string token_where = where + ".logprobs.content[" + std::to_string(t) + "]";
      const Json& token = content[t];
      if (!token.is_object() || !token.contains("token") || !token["token"].is_string()) {
        return Bad(token_where + " has no token string");
      }
      completion.token_texts.push_back(token["token"].get<std::string>());
      ENVFORGE_ASSIGN_OR_RETURN(double logprob, Logprob(token.value("logprob", Json()), token_where + ".logprob"));
      completion.logprobs.push_back(logprob);
      std::vector<TokenAlternative> alternatives;
      if (token.contains("top_logprobs") && !token["top_logprobs"].is_null()) {
        if (!token["top_logprobs"].is_array()) return Bad(token_where + ".top_logprobs is not an array");
        for (const Json& alternative : token["top_logprobs"]) {
          if (!alternative.is_object() || !alternative.contains("token") || !alternative["token"].is_string()) {
            return Bad(token_where + ".top_logprobs has an entry without a token string");
          }
          TokenAlternative parsed;
          parsed.text = alternative["token"].get<std::string>();
          ENVFORGE_ASSIGN_OR_RETURN(
              parsed.logprob, Logprob(alternative.value("logprob", Json()), token_where + ".top_logprobs[].logprob"));
          alternatives.push_back(std::move(parsed));
        }
      }
      completion.top_logprobs.push_back(std::move(alternatives));
    }
    completion.completion_tokens = static_cast<int64_t>(completion.token_texts.size());
    return Status::Ok();
  }

  // Legacy /completions logprobs: parallel arrays tokens, token_logprobs, top_logprobs ({text: lp}).
  Status ReadRawLogprobs(const Json& choice, const std::string& where, Completion& completion) const {
    if (!choice.contains("logprobs") || choice["logprobs"].is_null()) return Status::Ok();
    const Json& logprobs = choice["logprobs"];
    std::string lp_where = where + ".logprobs";
    if (!logprobs.is_object()) return Bad(lp_where + " is not an object");
    const Json tokens = logprobs.value("tokens", Json::array());
    const Json values = logprobs.value("token_logprobs", Json::array());
    const Json tops = logprobs.value("top_logprobs", Json());
    if (!tokens.is_array() || !values.is_array() || tokens.size() != values.size()) {
      return Bad(lp_where + ".tokens and token_logprobs are not arrays of one length");
    }
    if (!tops.is_null() && (!tops.is_array() || tops.size() != tokens.size())) {
      return Bad(lp_where + ".top_logprobs is not an array as long as tokens");
    }
    for (size_t t = 0; t < tokens.size(); ++t) {
      if (!tokens[t].is_string()) return Bad(lp_where + ".tokens[" + std::to_string(t) + "] is not a string");
      completion.token_texts.push_back(tokens[t].get<std::string>());
      // The first token of an echoed prompt has no logprob (null).
      completion.logprobs.push_back(values[t].is_number() ? values[t].get<double>() : 0.0);
      std::vector<TokenAlternative> alternatives;
      if (!tops.is_null() && tops[t].is_object()) {
        for (const auto& [text, value] : tops[t].items()) {
          ENVFORGE_ASSIGN_OR_RETURN(double logprob,
                                    Logprob(value, lp_where + ".top_logprobs[" + std::to_string(t) + "]"));
          alternatives.push_back(TokenAlternative{-1, text, logprob});
        }
      }
      completion.top_logprobs.push_back(std::move(alternatives));
    }
    completion.completion_tokens = static_cast<int64_t>(completion.token_texts.size());
    return Status::Ok();
  }

  Status ReadUsage(const Json& root, CompletionResult& result) const {
    int64_t counted = 0;
    for (const Completion& completion : result.choices) counted += completion.completion_tokens;
    result.completion_tokens = counted;
    if (!root.contains("usage") || root["usage"].is_null()) return Status::Ok();
    const Json& usage = root["usage"];
    if (!usage.is_object()) return Bad("usage is not an object");
    for (const char* key : {"prompt_tokens", "completion_tokens"}) {
      if (usage.contains(key) && !usage[key].is_number_integer())
        return Bad(std::string("usage.") + key + " is not an integer");
    }
    result.prompt_tokens = usage.value("prompt_tokens", int64_t{0});
    result.completion_tokens = usage.value("completion_tokens", counted);
    return Status::Ok();
  }

  const CompletionRequest& request_;
  std::string_view url_;
};

}  // namespace

Result<CompletionResult> ParseResponse(std::string_view body, const CompletionRequest& request, std::string_view url) {
  return ResponseReader(request, url).Read(body);
}

// ---------------------------------------------------------------------------------------------
// Server-sent events.

namespace {
constexpr size_t kMaxEventBytes = 64 << 20;  // one event's data; a stream never needs more
}  // namespace

StreamAssembler::StreamAssembler(bool raw, std::function<void(int64_t, std::string_view)> on_text, std::string url)
    : raw_(raw), on_text_(std::move(on_text)), url_(std::move(url)) {}

Status StreamAssembler::Malformed(std::string_view what) const {
  return DataLossError("openai response from " + url_ + ": stream " + std::string(what));
}

Status StreamAssembler::Feed(std::string_view bytes) {
  if (done_) return Status::Ok();  // whatever follows [DONE] is not part of the answer
  pending_.append(bytes);
  size_t start = 0;
  for (size_t end; !done_ && (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string_view line(pending_.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      // A blank line ends the event.
      if (!event_data_.empty()) {
        std::string data = std::move(event_data_);
        event_data_.clear();
        ENVFORGE_RETURN_IF_ERROR(Dispatch(data));
      }
    } else if (line.substr(0, 5) == "data:") {
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (!event_data_.empty()) event_data_ += '\n';
      event_data_.append(line);
    }
    // Comments (":") and the event/id/retry fields carry nothing a completion needs.
  }
  pending_.erase(0, std::min(start, pending_.size()));
  if (pending_.size() + event_data_.size() > kMaxEventBytes) return Malformed("event larger than 64 MiB");
  return Status::Ok();
}

Status StreamAssembler::Dispatch(std::string_view data) {
  if (data == "[DONE]") {
    done_ = true;
    return Status::Ok();
  }
  Result<Json> chunk = ParseJson(data, "stream chunk");
  if (!chunk.ok()) return Malformed("chunk is not JSON (" + chunk.status().message() + ")");
  if (!chunk->is_object()) return Malformed("chunk is not a JSON object");
  if (chunk->contains("error") && !(*chunk)["error"].is_null()) {
    const Json& error = (*chunk)["error"];
    std::string message = error.is_object() && error.contains("message") && error["message"].is_string()
                              ? error["message"].get<std::string>()
                              : DumpJson(error);
    return UnavailableError("openai server " + url_ + " failed mid-stream: " + message);
  }
  any_chunk_ = true;
  return MergeChunk(*chunk);
}

Status StreamAssembler::MergeChunk(const Json& chunk) {
  if (chunk.contains("model") && chunk["model"].is_string()) model_ = chunk["model"].get<std::string>();
  if (chunk.contains("usage") && !chunk["usage"].is_null()) {
    if (!chunk["usage"].is_object()) return Malformed("chunk's usage is not an object");
    usage_ = chunk["usage"];
  }
  if (!chunk.contains("choices") || chunk["choices"].is_null()) return Status::Ok();
  if (!chunk["choices"].is_array()) return Malformed("chunk's choices is not an array");
  for (const Json& choice : chunk["choices"]) ENVFORGE_RETURN_IF_ERROR(MergeChoice(choice));
  return Status::Ok();
}

namespace {

// Appends a string piece; absent and null are no piece. False when the member is another type.
bool AppendPiece(const Json& object, const char* key, std::string& into, bool* seen = nullptr) {
  if (!object.contains(key) || object[key].is_null()) return true;
  if (!object[key].is_string()) return false;
  into += object[key].get_ref<const std::string&>();
  if (seen) *seen = true;
  return true;
}

}  // namespace

Status StreamAssembler::MergeChoice(const Json& delta_choice) {
  if (!delta_choice.is_object()) return Malformed("chunk has a choice that is not an object");
  int64_t index = 0;
  if (delta_choice.contains("index")) {
    if (!delta_choice["index"].is_number_integer()) return Malformed("chunk's choice index is not an integer");
    index = delta_choice["index"].get<int64_t>();
  }
  ChoicePieces& pieces = choices_[index];
  size_t content_before = pieces.content.size();
  if (raw_) {
    if (!AppendPiece(delta_choice, "text", pieces.content, &pieces.has_content))
      return Malformed("chunk's text is not a string");
  } else if (delta_choice.contains("delta") && !delta_choice["delta"].is_null()) {
    const Json& delta = delta_choice["delta"];
    if (!delta.is_object()) return Malformed("chunk's delta is not an object");
    if (!AppendPiece(delta, "content", pieces.content, &pieces.has_content))
      return Malformed("delta.content is not a string");
    const char* reasoning_key = delta.contains("reasoning_content") ? "reasoning_content" : "reasoning";
    if (!AppendPiece(delta, reasoning_key, pieces.reasoning, &pieces.has_reasoning)) {
      return Malformed(std::string("delta.") + reasoning_key + " is not a string");
    }
    if (delta.contains("tool_calls") && !delta["tool_calls"].is_null()) {
      if (!delta["tool_calls"].is_array()) return Malformed("delta.tool_calls is not an array");
      for (const Json& call : delta["tool_calls"]) {
        if (!call.is_object()) return Malformed("delta.tool_calls has an entry that is not an object");
        int64_t call_index = static_cast<int64_t>(pieces.tool_calls.size());
        if (call.contains("index")) {
          if (!call["index"].is_number_integer()) return Malformed("delta.tool_calls[].index is not an integer");
          call_index = call["index"].get<int64_t>();
        }
        ToolCallPieces& target = pieces.tool_calls[call_index];
        if (!AppendPiece(call, "id", target.id)) return Malformed("delta.tool_calls[].id is not a string");
        if (call.contains("function") && !call["function"].is_null()) {
          const Json& function = call["function"];
          if (!function.is_object() || !AppendPiece(function, "name", target.name) ||
              !AppendPiece(function, "arguments", target.arguments)) {
            return Malformed("delta.tool_calls[].function is not {name?, arguments?} strings");
          }
        }
      }
    }
  }
  if (delta_choice.contains("finish_reason") && !delta_choice["finish_reason"].is_null()) {
    if (!delta_choice["finish_reason"].is_string()) return Malformed("chunk's finish_reason is not a string");
    pieces.finish_reason = delta_choice["finish_reason"];
  }
  if (delta_choice.contains("logprobs") && !delta_choice["logprobs"].is_null()) {
    const Json& logprobs = delta_choice["logprobs"];
    if (!logprobs.is_object()) return Malformed("chunk's logprobs is not an object");
    if (pieces.logprobs.is_null()) pieces.logprobs = Json::object();
    for (const auto& [key, value] : logprobs.items()) {
      if (!value.is_array()) continue;  // e.g. text_offset-free servers send nulls
      Json& into = pieces.logprobs[key];
      if (!into.is_array()) into = Json::array();
      for (const Json& item : value) into.push_back(item);
    }
  }
  if (on_text_ && pieces.content.size() > content_before) {
    delivered_text_ = true;
    on_text_(index, std::string_view(pieces.content).substr(content_before));
  }
  return Status::Ok();
}

Json StreamAssembler::AssembledChoice(int64_t index) const {
  const ChoicePieces& pieces = choices_.at(index);
  Json choice{{"index", index}, {"finish_reason", pieces.finish_reason}};
  if (!pieces.logprobs.is_null()) choice["logprobs"] = pieces.logprobs;
  if (raw_) {
    choice["text"] = pieces.content;
    return choice;
  }
  Json message{{"role", "assistant"}};
  message["content"] = pieces.has_content ? Json(pieces.content) : Json();
  if (pieces.has_reasoning) message["reasoning_content"] = pieces.reasoning;
  if (!pieces.tool_calls.empty()) {
    Json calls = Json::array();
    for (const auto& [call_index, call] : pieces.tool_calls) {
      Json wire{{"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
      if (!call.id.empty()) wire["id"] = call.id;
      calls.push_back(std::move(wire));
    }
    message["tool_calls"] = std::move(calls);
  }
  choice["message"] = std::move(message);
  return choice;
}

Result<std::string> StreamAssembler::Finish() {
  if (!done_) {
    // A last event not followed by a blank line still counts.
    ENVFORGE_RETURN_IF_ERROR(Feed("\n\n"));
  }
  if (!any_chunk_) return Malformed("ended without a single chunk");
  Json choices = Json::array();
  for (const auto& [index, pieces] : choices_) {
    if (!done_ && pieces.finish_reason.is_null()) {
      return Malformed("ended before data: [DONE] with choice " + std::to_string(index) + " unfinished");
    }
    choices.push_back(AssembledChoice(index));
  }
  Json response{{"object", raw_ ? "text_completion" : "chat.completion"}, {"choices", std::move(choices)}};
  if (!model_.empty()) response["model"] = model_;
  if (!usage_.is_null()) response["usage"] = usage_;
  return DumpJson(response);
}

}  // namespace envforge::inference::openai_wire
