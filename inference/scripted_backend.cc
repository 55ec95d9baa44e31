// The scripted backend: recorded responses replayed per conversation (see the header).
#include "inference/scripted_backend.h"

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "base/fd.h"
#include "base/json.h"

namespace envforge::inference {
namespace {

struct ScriptLine {
  int64_t line_number = 0;
  Json body;
};

Status LineError(const std::string& path, int64_t line, const std::string& what) {
  return InvalidArgumentError("scripted backend " + path + ":" + std::to_string(line) + ": " + what);
}

Status CheckLine(const std::string& path, int64_t number, const Json& body) {
  if (!body.is_object()) return LineError(path, number, "a line must be a JSON object");
  for (const char* text_member :
       {"content", "reasoning_content", "text", "when", "finish_reason", "message", "error"}) {
    if (body.contains(text_member) && !body[text_member].is_string()) {
      return LineError(path, number, std::string("'") + text_member + "' must be a string");
    }
  }
  for (const char* number_member : {"script", "completion_tokens", "sleep_ms"}) {
    if (body.contains(number_member) && !body[number_member].is_number_integer()) {
      return LineError(path, number, std::string("'") + number_member + "' must be an integer");
    }
  }
  if (body.contains("error")) {
    static const std::set<std::string> kKinds = {"unavailable", "data_loss", "deadline_exceeded", "invalid_argument"};
    if (!kKinds.count(body["error"].get<std::string>())) {
      return LineError(path, number, "'error' must be unavailable, data_loss, deadline_exceeded or invalid_argument");
    }
  }
  if (body.contains("tool_calls")) {
    if (!body["tool_calls"].is_array()) return LineError(path, number, "'tool_calls' must be an array");
    for (const Json& call : body["tool_calls"]) {
      if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) {
        return LineError(path, number, "each tool call needs a string 'name'");
      }
      if (call.contains("arguments") && !call["arguments"].is_object() && !call["arguments"].is_string()) {
        return LineError(path, number, "tool call 'arguments' must be an object or a JSON text");
      }
    }
  }
  return Status::Ok();
}

Status ErrorOfLine(const Json& body) {
  std::string kind = body["error"].get<std::string>();
  std::string message = "scripted: " + body.value("message", kind);
  if (kind == "data_loss") return DataLossError(message);
  if (kind == "deadline_exceeded") return DeadlineExceededError(message);
  if (kind == "invalid_argument") return InvalidArgumentError(message);
  return UnavailableError(message);
}

class ScriptedBackend final : public Backend {
 public:
  ScriptedBackend(std::string spec, BackendOptions options, std::map<int64_t, std::vector<ScriptLine>> scripts,
                  std::vector<ScriptLine> when_lines)
      : spec_(std::move(spec)), options_(std::move(options)), when_lines_(std::move(when_lines)) {
    for (auto& [number, lines] : scripts) scripts_.push_back({number, std::move(lines)});
    for (size_t i = 0; i < when_lines_.size(); ++i)
      when_groups_[when_lines_[i].body["when"].get<std::string>()].push_back(i);
  }

  BackendInfo info() const override {
    return {"scripted", spec_, options_.model_name.empty() ? "scripted" : options_.model_name, options_.context_window};
  }

  int64_t CountTokens(std::string_view text) const override { return static_cast<int64_t>((text.size() + 3) / 4); }

  void Release(const std::string& cache_handle) override {
    std::lock_guard lock(mutex_);
    handles_.erase(cache_handle);
  }

  Result<CompletionResult> Complete(const CompletionRequest& request) override {
    if (request.n < 1) return InvalidArgumentError("n must be at least 1, got " + std::to_string(request.n));
    const int64_t prompt_tokens = PromptTokens(request);
    if (options_.context_window > 0 && prompt_tokens >= options_.context_window) {
      return ResourceExhaustedError("context length exceeded: the prompt has about " + std::to_string(prompt_tokens) +
                                    " tokens and the context window is " + std::to_string(options_.context_window));
    }
    CompletionResult result;
    result.model = info().model;
    for (int64_t choice = 0; choice < request.n; ++choice) {
      ENVFORGE_ASSIGN_OR_RETURN(Json body, NextLine(request, choice));
      if (body.contains("sleep_ms"))
        std::this_thread::sleep_for(std::chrono::milliseconds(body["sleep_ms"].get<int64_t>()));
      if (body.contains("error")) return ErrorOfLine(body);
      ENVFORGE_ASSIGN_OR_RETURN(Completion completion, MakeCompletion(request, body));
      if (request.on_text && !completion.text.empty()) request.on_text(choice, completion.text);
      result.completion_tokens += completion.completion_tokens;
      result.choices.push_back(std::move(completion));
    }
    result.prompt_tokens = prompt_tokens;
    for (Completion& completion : result.choices) completion.prompt_tokens = prompt_tokens;
    return result;
  }

 private:
  struct Conversation {
    size_t script = 0;
    size_t next_line = 0;
  };

  int64_t PromptTokens(const CompletionRequest& request) const {
    if (request.raw) return CountTokens(request.prompt_text);
    int64_t tokens = 0;
    for (const ChatMessage& message : request.messages) {
      tokens += CountTokens(message.content) + CountTokens(message.reasoning_content) + 4;
      for (const ChatToolCall& call : message.tool_calls)
        tokens += CountTokens(call.name) + CountTokens(DumpJson(call.arguments));
    }
    return tokens;
  }

  // Picks the line answering one choice and advances its conversation (under the mutex).
  Result<Json> NextLine(const CompletionRequest& request, int64_t choice) {
    std::string last =
        request.raw ? request.prompt_text : (request.messages.empty() ? "" : request.messages.back().content);
    for (const ScriptLine& line : when_lines_) {
      const std::string& text = line.body["when"].get_ref<const std::string&>();
      if (last.find(text) == std::string::npos) continue;
      std::lock_guard lock(mutex_);
      const std::vector<size_t>& group = when_groups_.at(text);
      return when_lines_[group[when_turns_[text]++ % group.size()]].body;
    }
    std::lock_guard lock(mutex_);
    uint64_t conversation_id = 0;
    auto handle = choice == 0 && !request.continue_from.empty() ? handles_.find(request.continue_from) : handles_.end();
    if (handle != handles_.end()) {
      conversation_id = handle->second;
      handles_.erase(handle);
    } else {
      conversation_id = next_conversation_++;
      conversations_[conversation_id] = {static_cast<size_t>(conversation_id % scripts_.size()), 0};
    }
    Conversation& conversation = conversations_[conversation_id];
    const auto& [script_number, lines] = scripts_[conversation.script];
    if (conversation.next_line >= lines.size()) {
      return UnavailableError("scripted backend " + spec_ + ": script " + std::to_string(script_number) +
                              " has no response for turn " + std::to_string(conversation.next_line) + " (it has " +
                              std::to_string(lines.size()) + ")");
    }
    Json body = lines[conversation.next_line++].body;
    std::string new_handle =
        "scripted-" + std::to_string(conversation_id) + "-" + std::to_string(conversation.next_line);
    handles_[new_handle] = conversation_id;
    body["__handle"] = new_handle;
    return body;
  }

  Result<Completion> MakeCompletion(const CompletionRequest& request, const Json& body) const {
    Completion completion;
    completion.message.role = "assistant";
    if (body.contains("text")) {
      completion.text = body["text"].get<std::string>();
      if (!request.raw) {
        auto parsed = ParseCompletion(completion.text, request.thinking);
        if (parsed.ok()) {
          completion.message = std::move(parsed->message);
        } else {
          completion.parse_error = parsed.status().message();
          completion.message.content = completion.text;
        }
      }
    } else {
      completion.message.content = body.value("content", "");
      completion.message.reasoning_content = body.value("reasoning_content", "");
      int64_t index = 0;
      for (const Json& call : body.value("tool_calls", Json::array())) {
        ChatToolCall tool_call;
        tool_call.id = call.value("id", "call_" + std::to_string(index++));
        tool_call.name = call["name"].get<std::string>();
        Json arguments = call.value("arguments", Json::object());
        if (arguments.is_string()) {
          auto parsed = ParseJson(arguments.get<std::string>(), "arguments of " + tool_call.name, kMaxJsonValueDepth);
          if (parsed.ok() && parsed->is_object()) {
            arguments = std::move(*parsed);
          } else {
            completion.parse_error = "arguments of '" + tool_call.name + "' are not a JSON object: " +
                                     (parsed.ok() ? std::string("not an object") : parsed.status().message());
          }
        }
        tool_call.arguments = std::move(arguments);
        completion.message.tool_calls.push_back(std::move(tool_call));
      }
      completion.text = completion.message.content;
      if (!completion.message.tool_calls.empty()) completion.text += RenderToolCalls(completion.message.tool_calls);
    }
    completion.finish_reason =
        body.value("finish_reason", completion.message.tool_calls.empty() ? "stop" : "tool_calls");
    completion.completion_tokens = body.value(
        "completion_tokens", CountTokens(completion.text) + CountTokens(completion.message.reasoning_content));
    completion.cache_handle = body.value("__handle", "");
    return completion;
  }

  std::string spec_;
  BackendOptions options_;
  std::vector<std::pair<int64_t, std::vector<ScriptLine>>> scripts_;  // ascending script number
  std::vector<ScriptLine> when_lines_;
  std::map<std::string, std::vector<size_t>> when_groups_;  // TEXT -> its lines, in file order
  std::mutex mutex_;
  std::map<std::string, uint64_t> when_turns_;  // TEXT -> requests it answered
  uint64_t next_conversation_ = 0;
  std::map<uint64_t, Conversation> conversations_;
  std::map<std::string, uint64_t> handles_;
};

}  // namespace

Result<std::unique_ptr<Backend>> OpenScriptedBackend(const std::string& path, const BackendOptions& options) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return NotFoundError("scripted backend: cannot read " + path + ": " + text.status().message());
  std::map<int64_t, std::vector<ScriptLine>> scripts;
  std::vector<ScriptLine> when_lines;
  std::istringstream lines(*text);
  std::string line;
  int64_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    auto body = ParseJson(line, "scripted backend " + path + ":" + std::to_string(number));
    if (!body.ok()) return body.status();
    ENVFORGE_RETURN_IF_ERROR(CheckLine(path, number, *body));
    if (body->contains("when")) {
      when_lines.push_back({number, std::move(*body)});
    } else {
      int64_t script = body->value("script", int64_t{0});
      scripts[script].push_back({number, std::move(*body)});
    }
  }
  if (scripts.empty())
    return InvalidArgumentError("scripted backend " + path + ": no response lines (only 'when' lines or none)");
  return std::unique_ptr<Backend>(
      new ScriptedBackend("scripted:" + path, options, std::move(scripts), std::move(when_lines)));
}

}  // namespace envforge::inference
