// envforge.encode_chat, envforge.parse_completion, envforge.DEFAULT_SYSTEM_PROMPT. Messages are read
// from their JSON form (PythonToJson) into inference::ChatMessage; a field that does not fit raises
// ValueError naming it; everything else is EncodeChat's to judge.
#include "python/chat_binding.h"

#include <string>
#include <utility>
#include <vector>

#include "agents/rollout.h"
#include "base/json.h"
#include "inference/chat_format.h"
#include "python/json_convert.h"
#include "python/status_error.h"

namespace py = pybind11;

namespace envforge::python {
namespace {

using inference::ChatMessage;
using inference::ChatToolCall;

const char* TypeName(const Json& value) {
  if (value.is_string()) return "str";
  if (value.is_boolean()) return "bool";
  if (value.is_number_integer() || value.is_number_unsigned()) return "int";
  if (value.is_number()) return "float";
  if (value.is_array()) return "list";
  if (value.is_object()) return "dict";
  return "None";
}

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw py::value_error(where + ": " + what);
}

// object[key] as a string; "" when absent or None.
std::string OptionalString(const Json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return {};
  if (!it->is_string()) Fail(where + "." + key, std::string("expected a str, got ") + TypeName(*it));
  return it->get<std::string>();
}

// {"name", "arguments", "id"?} or OpenAI's {"id", "type": "function", "function": {"name", "arguments"}}.
ChatToolCall ReadToolCall(const Json& call, const std::string& where) {
  if (!call.is_object()) Fail(where, std::string("expected a dict, got ") + TypeName(call));
  ChatToolCall parsed;
  parsed.id = OptionalString(call, "id", where);
  const Json* body = &call;
  std::string body_where = where;
  if (auto function = call.find("function"); function != call.end()) {
    std::string type = OptionalString(call, "type", where);
    if (!type.empty() && type != "function") Fail(where + ".type", "expected \"function\", got '" + type + "'");
    body_where = where + ".function";
    if (!function->is_object())
      Fail(body_where, std::string("expected a dict {name, arguments}, got ") + TypeName(*function));
    body = &*function;
  }
  parsed.name = OptionalString(*body, "name", body_where);
  if (parsed.name.empty()) Fail(body_where + ".name", "a tool call needs a name");
  // A dict or JSON text; anything else goes on to EncodeChat, which says it must be an object.
  auto arguments = body->find("arguments");
  parsed.arguments = arguments == body->end() || arguments->is_null() ? Json::object() : *arguments;
  return parsed;
}

ChatMessage ReadMessage(const Json& message, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!message.is_object()) Fail(where, std::string("expected a dict, got ") + TypeName(message));
  ChatMessage parsed;
  parsed.role = OptionalString(message, "role", where);
  if (parsed.role.empty()) Fail(where + ".role", "required (system, user, assistant or tool)");
  parsed.content = OptionalString(message, "content", where);
  parsed.reasoning_content = OptionalString(message, "reasoning_content", where);
  parsed.tool_call_id = OptionalString(message, "tool_call_id", where);
  const bool assistant = parsed.role == "assistant";
  if (!assistant && !parsed.reasoning_content.empty())
    Fail(where + ".reasoning_content", "only assistant messages have reasoning");
  if (auto calls = message.find("tool_calls"); calls != message.end() && !calls->is_null()) {
    if (!calls->is_array()) Fail(where + ".tool_calls", std::string("expected a list, got ") + TypeName(*calls));
    if (!assistant && !calls->empty()) Fail(where + ".tool_calls", "only assistant messages have tool calls");
    for (size_t i = 0; i < calls->size(); ++i) {
      parsed.tool_calls.push_back(ReadToolCall((*calls)[i], where + ".tool_calls[" + std::to_string(i) + "]"));
    }
  }
  return parsed;
}

std::string EncodeChat(const py::object& messages, const py::object& tools, bool thinking, bool drop_thinking,
                       bool add_bos) {
  if (!py::isinstance<py::list>(messages) && !py::isinstance<py::tuple>(messages)) {
    throw py::value_error("messages: expected a list of dicts, got " +
                          std::string(py::str(messages.get_type().attr("__name__"))));
  }
  Json messages_json = PythonToJson(messages);
  std::vector<ChatMessage> parsed;
  parsed.reserve(messages_json.size());
  for (size_t i = 0; i < messages_json.size(); ++i) parsed.push_back(ReadMessage(messages_json[i], i));
  inference::ChatEncodeOptions options;
  options.thinking = thinking;
  options.drop_thinking = drop_thinking;
  options.add_bos = add_bos;
  if (!tools.is_none()) {
    options.tools = PythonToJson(tools);
    if (!options.tools.is_array())
      throw py::value_error(std::string("tools: expected a list of tool specs, got ") + TypeName(options.tools));
  }
  Result<std::string> text = inference::EncodeChat(parsed, options);
  if (!text.ok()) RaiseStatus(text.status());
  return std::move(text).value();
}

py::dict ParseCompletion(const std::string& text, bool thinking) {
  Result<inference::ParsedCompletion> parsed = inference::ParseCompletion(text, thinking);
  if (!parsed.ok()) RaiseStatus(parsed.status());
  py::list calls;
  for (const ChatToolCall& call : parsed->message.tool_calls) {
    py::dict entry;
    entry["name"] = call.name;
    entry["arguments"] = JsonToPython(call.arguments);
    calls.append(std::move(entry));
  }
  py::dict out;
  out["content"] = parsed->message.content;
  out["reasoning_content"] = parsed->message.reasoning_content;
  out["tool_calls"] = std::move(calls);
  out["finished"] = parsed->finished;
  out["truncated"] = parsed->truncated;
  return out;
}

}  // namespace

void DefineChat(py::module_& module) {
  module.attr("DEFAULT_SYSTEM_PROMPT") = py::str(std::string(agents::kDefaultSystemPrompt));
  module.def("encode_chat", &EncodeChat, py::arg("messages"), py::arg("tools") = py::none(),
             py::arg("thinking") = false, py::arg("drop_thinking") = true, py::arg("add_bos") = true,
             "Renders a conversation in the DeepSeek-V3.2 chat format byte for byte as the engine does.");
  module.def(
      "parse_completion", &ParseCompletion, py::arg("text"), py::arg("thinking") = false,
      "Parses generated text: {content, reasoning_content, tool_calls: [{name, arguments}], finished, truncated}.");
}

}  // namespace envforge::python
