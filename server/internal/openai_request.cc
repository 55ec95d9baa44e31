// Reading /v1 request bodies. Inside this file a bad field throws FieldError, caught at the two
// entry points and returned as an ApiError: the checks read as a list of rules instead of a
// ladder of early returns. Nothing else throws out of here.
#include "server/internal/openai_request.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>

namespace envforge::server::internal {
namespace {

struct FieldError {
  ApiError error;
};

[[noreturn]] void Fail(const std::string& param, const std::string& message) {
  throw FieldError{InvalidField(param, param + ": " + message)};
}

const char* TypeName(const Json& value) {
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number()) return "a number";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

[[noreturn]] void WrongType(const std::string& param, const Json& value, const char* expected) {
  Fail(param, std::string("expected ") + expected + ", got " + TypeName(value));
}

std::string Join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// The field `key` of `object`, or nullptr when absent or null (OpenAI clients send null for
// "not given").
const Json* Find(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::optional<std::string> OptString(const Json& object, const char* key, const std::string& parent = "") {
  const Json* value = Find(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) WrongType(Join(parent, key), *value, "a string");
  return value->get<std::string>();
}

std::optional<bool> OptBool(const Json& object, const char* key, const std::string& parent = "") {
  const Json* value = Find(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) WrongType(Join(parent, key), *value, "a boolean");
  return value->get<bool>();
}

std::optional<double> OptNumber(const Json& object, const char* key, double low, double high) {
  const Json* value = Find(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) WrongType(key, *value, "a number");
  double number = value->get<double>();
  if (!(number >= low && number <= high)) {
    Fail(key, "must be between " + DumpJson(low) + " and " + DumpJson(high) + ", got " + DumpJson(*value));
  }
  return number;
}

std::optional<int64_t> OptInteger(const Json& object, const char* key, int64_t low, int64_t high) {
  const Json* value = Find(object, key);
  if (value == nullptr) return std::nullopt;
  bool integral = value->is_number_integer() ||
                  (value->is_number_float() && std::isfinite(value->get<double>()) &&
                   std::floor(value->get<double>()) == value->get<double>() && std::fabs(value->get<double>()) < 9e15);
  if (!integral) WrongType(key, *value, "an integer");
  if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    Fail(key, "must be at most " + std::to_string(high));
  }
  int64_t number = value->is_number_float() ? static_cast<int64_t>(value->get<double>()) : value->get<int64_t>();
  if (number < low || number > high) {
    Fail(key,
         "must be between " + std::to_string(low) + " and " + std::to_string(high) + ", got " + std::to_string(number));
  }
  return number;
}

// 63 bits: a seed an OpenAI client (or our openai backend) can send back as a signed integer.
uint64_t RandomSeed() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return generator() >> 1;
}

// Any 64-bit integer, signed or unsigned (both spellings of one seed are common).
std::optional<uint64_t> OptSeed(const Json& object) {
  const Json* value = Find(object, "seed");
  if (value == nullptr) return std::nullopt;
  if (value->is_number_unsigned()) return value->get<uint64_t>();
  return static_cast<uint64_t>(*OptInteger(object, "seed", INT64_MIN, INT64_MAX));
}

// model, n, temperature, top_p, top_k, max_tokens, seed, stop, stream: the fields both endpoints
// share.
void ReadCommon(const Json& body, V1Request& request) {
  inference::CompletionRequest& completion = request.completion;
  // Checked against the served name, not passed on: an openai backend sends its own model name.
  request.model = OptString(body, "model").value_or("");
  completion.n = OptInteger(body, "n", 1, kMaxChoices).value_or(1);
  completion.sampling.temperature = OptNumber(body, "temperature", 0, 2).value_or(1.0);
  if (auto top_p = OptNumber(body, "top_p", 0, 1)) {
    if (*top_p <= 0) Fail("top_p", "must be above 0 and at most 1");
    completion.sampling.top_p = *top_p;
  }
  // vLLM's extension; -1 means "no top-k" there.
  if (auto top_k = OptInteger(body, "top_k", -1, 1 << 20)) completion.sampling.top_k = std::max<int64_t>(*top_k, 0);
  auto max_tokens = OptInteger(body, "max_tokens", 1, kMaxTokensLimit);
  if (auto newer = OptInteger(body, "max_completion_tokens", 1, kMaxTokensLimit)) max_tokens = newer;
  if (max_tokens) completion.max_tokens = *max_tokens;
  completion.sampling.seed = OptSeed(body).value_or(RandomSeed());
  if (const Json* stop = Find(body, "stop")) {
    if (stop->is_string()) {
      completion.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > 16) Fail("stop", "at most 16 stop strings, got " + std::to_string(stop->size()));
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string()) WrongType("stop[" + std::to_string(i) + "]", (*stop)[i], "a string");
        completion.stop.push_back((*stop)[i].get<std::string>());
      }
    } else {
      WrongType("stop", *stop, "a string or an array of strings");
    }
    for (size_t i = 0; i < completion.stop.size(); ++i) {
      if (completion.stop[i].empty()) Fail("stop[" + std::to_string(i) + "]", "a stop string must not be empty");
    }
  }
  request.stream = OptBool(body, "stream").value_or(false);
  if (const Json* options = Find(body, "stream_options")) {
    if (!options->is_object()) WrongType("stream_options", *options, "an object");
    request.include_usage = OptBool(*options, "include_usage", "stream_options").value_or(false);
  }
}

// A message's content: a string, an array of text parts, or null (where `nullable`).
std::string ReadContent(const Json& message, const std::string& param, bool nullable) {
  const Json* content = Find(message, "content");
  if (content == nullptr) {
    if (!nullable) Fail(param + ".content", "required for this role");
    return {};
  }
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) WrongType(param + ".content", *content, "a string or an array of content parts");
  std::string text;
  for (size_t j = 0; j < content->size(); ++j) {
    const Json& part = (*content)[j];
    std::string part_param = param + ".content[" + std::to_string(j) + "]";
    if (!part.is_object()) WrongType(part_param, part, "an object");
    std::string type = OptString(part, "type", part_param).value_or("");
    if (type != "text") Fail(part_param + ".type", "only text parts are supported, got '" + type + "'");
    auto part_text = OptString(part, "text", part_param);
    if (!part_text) Fail(part_param + ".text", "required");
    if (j > 0) text += "\n";
    text += *part_text;
  }
  return text;
}

// Arguments as JSON text holding an object (kept as text: EncodeChat keeps its key order) or an
// object.
Json ReadArguments(const Json& function, const std::string& param) {
  const Json* arguments = Find(function, "arguments");
  if (arguments == nullptr) return Json::object();
  if (arguments->is_object()) return *arguments;
  if (!arguments->is_string()) WrongType(param, *arguments, "a string of JSON");
  auto parsed = ParseJson(arguments->get<std::string>(), param, kMaxJsonValueDepth);
  if (!parsed.ok()) Fail(param, "not valid JSON: " + parsed.status().message());
  if (!parsed->is_object()) Fail(param, "must be a JSON object, got " + std::string(TypeName(*parsed)));
  return *arguments;
}

std::vector<inference::ChatToolCall> ReadToolCalls(const Json& message, const std::string& param) {
  std::vector<inference::ChatToolCall> calls;
  const Json* tool_calls = Find(message, "tool_calls");
  if (tool_calls == nullptr) return calls;
  if (!tool_calls->is_array()) WrongType(param + ".tool_calls", *tool_calls, "an array");
  for (size_t j = 0; j < tool_calls->size(); ++j) {
    const Json& call = (*tool_calls)[j];
    std::string call_param = param + ".tool_calls[" + std::to_string(j) + "]";
    if (!call.is_object()) WrongType(call_param, call, "an object");
    std::string type = OptString(call, "type", call_param).value_or("function");
    if (type != "function")
      Fail(call_param + ".type", "only \"function\" tool calls are supported, got '" + type + "'");
    const Json* function = Find(call, "function");
    if (function == nullptr || !function->is_object()) Fail(call_param + ".function", "required: {name, arguments}");
    inference::ChatToolCall parsed;
    parsed.id = OptString(call, "id", call_param).value_or("");
    auto name = OptString(*function, "name", call_param + ".function");
    if (!name || name->empty()) Fail(call_param + ".function.name", "required");
    parsed.name = *name;
    parsed.arguments = ReadArguments(*function, call_param + ".function.arguments");
    calls.push_back(std::move(parsed));
  }
  return calls;
}

inference::ChatMessage ReadMessage(const Json& message, size_t index) {
  std::string param = "messages[" + std::to_string(index) + "]";
  if (!message.is_object()) WrongType(param, message, "an object");
  inference::ChatMessage parsed;
  auto role = OptString(message, "role", param);
  if (!role) Fail(param + ".role", "required");
  parsed.role = *role;
  if (parsed.role != "system" && parsed.role != "user" && parsed.role != "assistant" && parsed.role != "tool") {
    Fail(param + ".role", "unknown role '" + parsed.role + "' (expected system, user, assistant or tool)");
  }
  bool assistant = parsed.role == "assistant";
  parsed.content = ReadContent(message, param, assistant);
  if (assistant) {
    parsed.reasoning_content = OptString(message, "reasoning_content", param).value_or("");
    parsed.tool_calls = ReadToolCalls(message, param);
  }
  if (parsed.role == "tool") {
    auto id = OptString(message, "tool_call_id", param);
    if (!id) Fail(param + ".tool_call_id", "required for a tool message");
    parsed.tool_call_id = *id;
  }
  return parsed;
}

// Tool names of OpenAI-style ({type, function: {name}}) or MCP-style ({name}) specs.
std::vector<std::string> ReadTools(const Json& body, OrderedJson* tools) {
  std::vector<std::string> names;
  const Json* given = Find(body, "tools");
  if (given == nullptr) return names;
  if (!given->is_array()) WrongType("tools", *given, "an array");
  for (size_t i = 0; i < given->size(); ++i) {
    const Json& tool = (*given)[i];
    std::string param = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) WrongType(param, tool, "an object");
    const Json* function = Find(tool, "function");
    if (function != nullptr) {
      std::string type = OptString(tool, "type", param).value_or("function");
      if (type != "function") Fail(param + ".type", "only \"function\" tools are supported, got '" + type + "'");
      if (!function->is_object()) WrongType(param + ".function", *function, "an object");
    }
    const Json& spec = function != nullptr ? *function : tool;
    std::string spec_param = function != nullptr ? param + ".function" : param;
    auto name = OptString(spec, "name", spec_param);
    if (!name || name->empty()) Fail(spec_param + ".name", "required");
    names.push_back(*name);
  }
  *tools = *given;
  return names;
}

std::string ReadToolChoice(const Json& body, const std::vector<std::string>& tool_names) {
  const Json* choice = Find(body, "tool_choice");
  if (choice == nullptr) return "auto";
  std::string chosen;
  if (choice->is_string()) {
    chosen = choice->get<std::string>();
    if (chosen != "auto" && chosen != "none" && chosen != "required") {
      Fail("tool_choice",
           "expected \"auto\", \"none\", \"required\" or {type: \"function\", function: {name}}, got '" + chosen + "'");
    }
    if (chosen == "required" && tool_names.empty()) Fail("tool_choice", "\"required\" needs tools");
    return chosen;
  }
  if (!choice->is_object()) WrongType("tool_choice", *choice, "a string or an object");
  const Json* function = Find(*choice, "function");
  if (function == nullptr || !function->is_object()) Fail("tool_choice.function", "required: {name}");
  auto name = OptString(*function, "name", "tool_choice.function");
  if (!name || name->empty()) Fail("tool_choice.function.name", "required");
  if (std::find(tool_names.begin(), tool_names.end(), *name) == tool_names.end()) {
    Fail("tool_choice.function.name", "no tool named '" + *name + "' in tools");
  }
  return *name;
}

bool ReadThinking(const Json& body) {
  bool thinking = false;
  if (const Json* switch_ = Find(body, "thinking")) {
    if (!switch_->is_object()) WrongType("thinking", *switch_, "an object {type: \"enabled\" | \"disabled\"}");
    std::string type = OptString(*switch_, "type", "thinking").value_or("");
    if (type != "enabled" && type != "disabled")
      Fail("thinking.type", "expected \"enabled\" or \"disabled\", got '" + type + "'");
    thinking = type == "enabled";
  }
  if (const Json* kwargs = Find(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) WrongType("chat_template_kwargs", *kwargs, "an object");
    for (const char* key : {"thinking", "enable_thinking"}) {
      if (auto value = OptBool(*kwargs, key, "chat_template_kwargs")) thinking = *value;
    }
  }
  return thinking;
}

void ReadChat(const Json& body, V1Request& request) {
  request.chat = true;
  ReadCommon(body, request);
  inference::CompletionRequest& completion = request.completion;
  const Json* messages = Find(body, "messages");
  if (messages == nullptr) Fail("messages", "required");
  if (!messages->is_array()) WrongType("messages", *messages, "an array");
  if (messages->empty()) Fail("messages", "must hold at least one message");
  for (size_t i = 0; i < messages->size(); ++i) completion.messages.push_back(ReadMessage((*messages)[i], i));
  std::vector<std::string> tool_names = ReadTools(body, &completion.tools);
  completion.tool_choice = ReadToolChoice(body, tool_names);
  completion.parallel_tool_calls = OptBool(body, "parallel_tool_calls").value_or(true);
  completion.thinking = ReadThinking(body);
  completion.logprobs = OptBool(body, "logprobs").value_or(false);
  completion.top_logprobs = OptInteger(body, "top_logprobs", 0, 20).value_or(0);
  if (completion.top_logprobs > 0 && !completion.logprobs) Fail("top_logprobs", "needs \"logprobs\": true");
}

void ReadCompletion(const Json& body, V1Request& request) {
  request.chat = false;
  request.completion.max_tokens = 16;  // OpenAI's default for /v1/completions
  ReadCommon(body, request);
  inference::CompletionRequest& completion = request.completion;
  completion.raw = true;
  const Json* prompt = Find(body, "prompt");
  if (prompt == nullptr) Fail("prompt", "required");
  if (prompt->is_array()) {
    if (prompt->size() != 1)
      Fail("prompt", "one prompt per request (got an array of " + std::to_string(prompt->size()) + ")");
    prompt = &(*prompt)[0];
  }
  if (!prompt->is_string()) WrongType("prompt", *prompt, "a string");
  completion.prompt_text = prompt->get<std::string>();
  if (OptBool(body, "echo").value_or(false)) Fail("echo", "echo is not supported");
  if (!OptString(body, "suffix").value_or("").empty()) Fail("suffix", "suffix is not supported");
  if (auto logprobs = OptInteger(body, "logprobs", 0, 5)) {
    request.legacy_logprobs = *logprobs;
    completion.logprobs = true;
    completion.top_logprobs = *logprobs;
  }
}

template <typename Reader>
std::variant<V1Request, ApiError> Read(const Json& body, Reader reader) {
  if (!body.is_object()) return InvalidField("", "the request body must be a JSON object");
  V1Request request;
  try {
    reader(body, request);
  } catch (const FieldError& error) {
    return error.error;
  } catch (const Json::exception& error) {
    return InvalidField("", std::string("malformed request: ") + error.what());
  }
  return request;
}

}  // namespace

std::variant<V1Request, ApiError> ParseChatRequest(const OrderedJson& body) {
  auto parsed = Read(Json(body), ReadChat);
  // Read saw the tools sorted; the prompt shows them as the client wrote them.
  if (auto* request = std::get_if<V1Request>(&parsed); request != nullptr && body.contains("tools")) {
    request->completion.tools = body["tools"];
  }
  return parsed;
}

std::variant<V1Request, ApiError> ParseCompletionRequest(const Json& body) { return Read(body, ReadCompletion); }

}  // namespace envforge::server::internal
