#include "inference/chat_format.h"

#include <optional>
#include <utility>

namespace envforge::inference {
namespace {

// Key order matters for byte-exact prompts (the reference renders dicts in insertion order), so
// everything rendered goes through OrderedJson: tools and response formats arrive as OrderedJson
// (the client's order) or as JSON text (its own order); tool-call arguments are Json (sorted).

// The tools block of the reference encoder (its TOOLS_SYSTEM_TEMPLATE with the DSML marker and
// think tokens filled in), split around the tool schemas.
constexpr std::string_view kToolsBlockHead =
    "## Tools\n"
    "\n"
    "You have access to a set of tools you can use to answer the user's question.\n"
    "You can invoke functions by writing a \"<｜DSML｜function_calls>\" block like the following as part of "
    "your reply to the user:\n"
    "<｜DSML｜function_calls>\n"
    "<｜DSML｜invoke name=\"$FUNCTION_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$FUNCTION_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜function_calls>\n"
    "\n"
    "String and scalar parameters should be specified as is without any escaping or quotes, while lists "
    "and objects should use JSON format. The \"string\" attribute should be set to \"true\" for string "
    "type parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n"
    "\n"
    "If the thinking_mode is enabled, then after function results you should strongly consider "
    "outputting a thinking block. Here is an example:\n"
    "\n"
    "<｜DSML｜function_calls>\n"
    "...\n"
    "</｜DSML｜function_calls>\n"
    "\n"
    "<function_results>\n"
    "...\n"
    "</function_results>\n"
    "\n"
    "<think>...thinking about results</think>\n"
    "\n"
    "Here are the functions available in JSONSchema format:\n"
    "<functions>\n";
constexpr std::string_view kToolsBlockTail = "\n</functions>\n";

constexpr std::string_view kResponseFormatHead =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

// json.dumps(value, ensure_ascii=False): ", " and ": " separators, insertion order.
void AppendPythonJson(const OrderedJson& value, std::string* out) {
  switch (value.type()) {
    case OrderedJson::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!first) out->append(", ");
        first = false;
        out->append(OrderedJson(it.key()).dump(-1, ' ', false, OrderedJson::error_handler_t::replace));
        out->append(": ");
        AppendPythonJson(it.value(), out);
      }
      out->push_back('}');
      return;
    }
    case OrderedJson::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& element : value) {
        if (!first) out->append(", ");
        first = false;
        AppendPythonJson(element, out);
      }
      out->push_back(']');
      return;
    }
    default: out->append(value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace)); return;
  }
}

std::string PythonJson(const OrderedJson& value) {
  std::string out;
  AppendPythonJson(value, &out);
  return out;
}

// A Json value in ordered form; a string is read as JSON text (keeping its key order) when
// `text_allowed`.
Result<OrderedJson> ToOrdered(const OrderedJson& value, bool text_allowed, const std::string& what) {
  if (text_allowed && value.is_string()) {
    ENVFORGE_RETURN_IF_ERROR(CheckJsonTextDepth(value.get_ref<const std::string&>(), kMaxJsonDepth, what));
    OrderedJson parsed = OrderedJson::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return InvalidArgumentError(what + ": string is not valid JSON text");
    return parsed;
  }
  return value;
}

Result<OrderedJson> ToolCallArguments(const ChatToolCall& call, const std::string& what) {
  ENVFORGE_ASSIGN_OR_RETURN(OrderedJson arguments, ToOrdered(OrderedJson(call.arguments), true, what));
  if (!arguments.is_object()) return InvalidArgumentError(what + ": arguments must be a JSON object");
  return arguments;
}

void AppendInvoke(const std::string& name, const OrderedJson& arguments, std::string* out) {
  out->append(kInvokeOpen).append(name).append("\">\n");
  bool first = true;
  for (auto it = arguments.begin(); it != arguments.end(); ++it) {
    if (!first) out->push_back('\n');
    first = false;
    const bool is_string = it.value().is_string();
    out->append(kParameterOpen).append(it.key()).append("\" string=\"").append(is_string ? "true" : "false");
    out->append("\">");
    out->append(is_string ? it.value().get<std::string>() : PythonJson(it.value()));
    out->append(kParameterClose);
  }
  out->append("\n").append(kInvokeClose);
}

Result<std::string> RenderToolCallsChecked(const std::vector<ChatToolCall>& calls, const std::string& what) {
  std::string out = "\n\n";
  out.append(kFunctionCallsOpen).append("\n");
  for (size_t i = 0; i < calls.size(); ++i) {
    ENVFORGE_ASSIGN_OR_RETURN(OrderedJson arguments,
                              ToolCallArguments(calls[i], what + ".tool_calls[" + std::to_string(i) + "]"));
    if (i > 0) out.push_back('\n');
    AppendInvoke(calls[i].name, arguments, &out);
  }
  out.append("\n").append(kFunctionCallsClose);
  return out;
}

// A tool spec as the reference renders it: the "function" object of an OpenAI tool, MCP's
// {name, description, inputSchema} as {name, description, parameters}, or a function spec as is.
Result<OrderedJson> NormalizeTool(const OrderedJson& tool, const std::string& what) {
  ENVFORGE_ASSIGN_OR_RETURN(OrderedJson spec, ToOrdered(tool, true, what));
  if (!spec.is_object()) return InvalidArgumentError(what + ": expected a tool object");
  if (auto it = spec.find("function"); it != spec.end()) {
    if (!it->is_object()) return InvalidArgumentError(what + ".function: expected an object");
    return *it;
  }
  if (!spec.contains("name") || !spec["name"].is_string()) {
    return InvalidArgumentError(what + ": expected {type: function, function: {...}} or {name, ...}");
  }
  if (spec.contains("inputSchema")) {
    // MCP: name, description, then the schema as parameters, then anything else.
    OrderedJson function = OrderedJson::object();
    function["name"] = spec["name"];
    if (spec.contains("description")) function["description"] = spec["description"];
    function["parameters"] = spec["inputSchema"];
    for (auto it = spec.begin(); it != spec.end(); ++it) {
      if (!function.contains(it.key()) && it.key() != "inputSchema") function[it.key()] = it.value();
    }
    return function;
  }
  // The Responses API's flat function tool: the function itself, as Chat Completions nests it.
  if (spec.value("type", "") == "function") spec.erase("type");
  return spec;
}

Result<std::string> RenderToolsBlock(const OrderedJson& tools) {
  std::string out(kToolsBlockHead);
  for (size_t i = 0; i < tools.size(); ++i) {
    ENVFORGE_ASSIGN_OR_RETURN(OrderedJson spec, NormalizeTool(tools[i], "tools[" + std::to_string(i) + "]"));
    if (i > 0) out.push_back('\n');
    AppendPythonJson(spec, &out);
  }
  out.append(kToolsBlockTail);
  return out;
}

Status MessageError(size_t index, std::string_view what) {
  return InvalidArgumentError("messages[" + std::to_string(index) + "]: " + std::string(what));
}

}  // namespace

std::string RenderToolCalls(const std::vector<ChatToolCall>& calls) {
  // Calls whose arguments are not an object render without parameters.
  std::string out = "\n\n";
  out.append(kFunctionCallsOpen).append("\n");
  for (size_t i = 0; i < calls.size(); ++i) {
    auto arguments = ToolCallArguments(calls[i], "tool_calls");
    if (i > 0) out.push_back('\n');
    AppendInvoke(calls[i].name, arguments.ok() ? *arguments : OrderedJson::object(), &out);
  }
  out.append("\n").append(kFunctionCallsClose);
  return out;
}

Result<std::string> EncodeChat(const std::vector<ChatMessage>& messages, const ChatEncodeOptions& options) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role == "developer") return MessageError(i, "the developer role is not accepted");
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return MessageError(i, "unknown role '" + role + "'");
    }
  }
  if (!options.tools.is_null() && !options.tools.is_array()) {
    return InvalidArgumentError("tools: expected an array");
  }
  const bool has_tools = options.tools.is_array() && !options.tools.empty();
  const bool has_response_format = !options.response_format.is_null();

  // The tools and response-format blocks go into the first system message; one is created in
  // front when there is none.
  std::vector<const ChatMessage*> rendered;
  ChatMessage created_system;
  created_system.role = "system";
  size_t system_index = messages.size();
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == "system") {
      system_index = i;
      break;
    }
  }
  if ((has_tools || has_response_format) && system_index == messages.size()) {
    rendered.push_back(&created_system);
    system_index = 0;
  }
  for (const ChatMessage& message : messages) rendered.push_back(&message);
  // Error messages refer to the caller's indices.
  const size_t index_shift = rendered.size() - messages.size();
  auto caller_index = [&](size_t i) { return i >= index_shift ? i - index_shift : size_t{0}; };

  int last_user = -1;
  for (size_t i = 0; i < rendered.size(); ++i) {
    if (rendered[i]->role == "user") last_user = static_cast<int>(i);
  }
  const bool thinking = options.thinking;
  // The reference's drop_thinking removes reasoning only from assistant messages before the last
  // user message, and those never render reasoning anyway, so options.drop_thinking changes
  // nothing here either.

  std::string prompt;
  if (options.add_bos) prompt.append(kBosToken);
  for (size_t i = 0; i < rendered.size(); ++i) {
    const ChatMessage& message = *rendered[i];
    const std::string& role = message.role;
    if (role == "system") {
      prompt.append(message.content);
      if (i == system_index) {
        if (has_tools) {
          ENVFORGE_ASSIGN_OR_RETURN(std::string block, RenderToolsBlock(options.tools));
          prompt.append("\n\n").append(block);
        }
        if (has_response_format) {
          ENVFORGE_ASSIGN_OR_RETURN(OrderedJson format, ToOrdered(options.response_format, true, "response_format"));
          prompt.append("\n\n").append(kResponseFormatHead).append(PythonJson(format));
        }
      }
    } else if (role == "user") {
      prompt.append(kUserToken).append(message.content).append(kAssistantToken);
      prompt.append(static_cast<int>(i) == last_user && thinking ? kThinkStart : kThinkEnd);
    } else if (role == "tool") {
      size_t assistant = i;
      while (assistant > 0 && rendered[assistant - 1]->role == "tool") --assistant;
      if (assistant == 0 || rendered[assistant - 1]->role != "assistant") {
        return MessageError(caller_index(i), "tool message without a preceding assistant tool call");
      }
      const ChatMessage& caller = *rendered[assistant - 1];
      const size_t order = i - assistant + 1;  // 1-based position among the results
      if (caller.tool_calls.size() < order) {
        return MessageError(caller_index(i), "tool message without a matching tool call (the assistant made " +
                                                 std::to_string(caller.tool_calls.size()) + ")");
      }
      if (order == 1) prompt.append("\n\n<function_results>");
      prompt.append("\n<result>").append(message.content).append("</result>");
      if (order == caller.tool_calls.size()) {
        prompt.append("\n</function_results>");
        prompt.append("\n\n").append(static_cast<int>(i) >= last_user && thinking ? kThinkStart : kThinkEnd);
      }
    } else {  // assistant
      std::string tool_calls;
      if (!message.tool_calls.empty()) {
        ENVFORGE_ASSIGN_OR_RETURN(
            tool_calls,
            RenderToolCallsChecked(message.tool_calls, "messages[" + std::to_string(caller_index(i)) + "]"));
      }
      if (thinking && static_cast<int>(i) > last_user) {
        if (message.reasoning_content.empty() && message.tool_calls.empty()) {
          return MessageError(caller_index(i),
                              "in thinking mode an assistant message after the last user message needs "
                              "reasoning_content or tool_calls");
        }
        prompt.append(message.reasoning_content).append(kThinkEnd);
      }
      prompt.append(message.content).append(tool_calls).append(kEosToken);
    }
  }
  return prompt;
}

namespace {

// Reads a completion left to right. "Truncated" means the text ended where more was expected
// (every character so far fits the format); anything that cannot fit is an error.
class CompletionReader {
 public:
  explicit CompletionReader(std::string_view text) : text_(text) {}

  bool AtEnd() const { return pos_ >= text_.size(); }
  size_t pos() const { return pos_; }
  std::string_view Rest() const { return text_.substr(pos_); }

  bool StartsWith(std::string_view literal) const { return Rest().substr(0, literal.size()) == literal; }
  // The rest is a proper prefix of literal: the text was cut inside it.
  bool CutInside(std::string_view literal) const {
    return Rest().size() < literal.size() && literal.substr(0, Rest().size()) == Rest();
  }
  bool Consume(std::string_view literal) {
    if (!StartsWith(literal)) return false;
    pos_ += literal.size();
    return true;
  }
  void SkipWhitespace() {
    while (!AtEnd() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  // Text up to `delimiter` (consumed); nullopt when the delimiter never comes (pos unchanged).
  std::optional<std::string_view> Until(std::string_view delimiter) {
    const size_t end = text_.find(delimiter, pos_);
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view value = text_.substr(pos_, end - pos_);
    pos_ = end + delimiter.size();
    return value;
  }
  Status Expected(std::string_view what) const {
    std::string found(Rest().substr(0, 24));
    return InvalidArgumentError("completion: expected " + std::string(what) + " at offset " + std::to_string(pos_) +
                                ", found " + Json(found).dump(-1, ' ', false, Json::error_handler_t::replace));
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

Status CheckNoSpecialTokens(std::string_view text, size_t offset, std::string_view what, bool allow_think_end) {
  for (std::string_view token : {kBosToken, kEosToken, kUserToken, kAssistantToken, kThinkStart, kThinkEnd}) {
    if (allow_think_end && token == kThinkEnd) continue;
    if (size_t at = text.find(token); at != std::string_view::npos) {
      return InvalidArgumentError("completion: special token " + std::string(token) + " inside the " +
                                  std::string(what) + " at offset " + std::to_string(offset + at));
    }
  }
  return Status::Ok();
}

// Parses the function_calls block after its opening tag. Returns false when the text ran out.
Result<bool> ParseInvokes(CompletionReader* reader, std::vector<ChatToolCall>* calls) {
  while (true) {
    reader->SkipWhitespace();
    if (reader->AtEnd()) return false;
    if (reader->Consume(kFunctionCallsClose)) return true;
    if (!reader->StartsWith(kInvokeOpen)) {
      if (reader->CutInside(kInvokeOpen) || reader->CutInside(kFunctionCallsClose)) return false;
      return reader->Expected("\"<｜DSML｜invoke name=\\\"\" or \"</｜DSML｜function_calls>\"");
    }
    reader->Consume(kInvokeOpen);
    ChatToolCall call;
    auto name = reader->Until("\">");
    if (!name) return false;
    call.name = std::string(*name);
    if (call.name.empty() || call.name.find('\n') != std::string::npos) return reader->Expected("a tool name");
    while (true) {
      reader->SkipWhitespace();
      if (reader->AtEnd()) return false;
      if (reader->Consume(kInvokeClose)) break;
      if (!reader->StartsWith(kParameterOpen)) {
        if (reader->CutInside(kParameterOpen) || reader->CutInside(kInvokeClose)) return false;
        return reader->Expected("\"<｜DSML｜parameter name=\\\"\" or \"</｜DSML｜invoke>\"");
      }
      reader->Consume(kParameterOpen);
      auto key = reader->Until("\" string=\"");
      if (!key) {
        // Parameter names hold no newline: without one the text was cut inside this tag.
        if (reader->Rest().find('\n') == std::string_view::npos) return false;
        return reader->Expected("\" string=\\\"true|false\\\"\"");
      }
      bool is_string = false;
      if (reader->Consume("true\">")) {
        is_string = true;
      } else if (reader->Consume("false\">")) {
        is_string = false;
      } else {
        if (reader->CutInside("true\">") || reader->CutInside("false\">")) return false;
        return reader->Expected("string=\"true\"> or string=\"false\">");
      }
      const size_t value_offset = reader->pos();
      auto value = reader->Until(kParameterClose);
      if (!value) return false;
      if (is_string) {
        call.arguments[std::string(*key)] = std::string(*value);
      } else {
        auto parsed = ParseJson(*value, "parameter value");
        if (!parsed.ok()) {
          return InvalidArgumentError("completion: parameter " + std::string(*key) + " of " + call.name +
                                      " (string=\"false\") is not valid JSON at offset " +
                                      std::to_string(value_offset) + ": " + parsed.status().message());
        }
        call.arguments[std::string(*key)] = std::move(parsed).value();
      }
    }
    calls->push_back(std::move(call));
  }
}

}  // namespace

Result<ParsedCompletion> ParseCompletion(std::string_view text, bool thinking) {
  ParsedCompletion parsed;
  parsed.message.role = "assistant";
  CompletionReader reader(text);
  if (thinking) {
    const size_t start = reader.pos();
    auto reasoning = reader.Until(kThinkEnd);
    if (!reasoning) {
      // Cut inside the reasoning; a partial "</think>" at the end is not reasoning.
      std::string_view rest = reader.Rest();
      for (size_t keep = std::min(rest.size(), kThinkEnd.size() - 1); keep > 0; --keep) {
        if (rest.substr(rest.size() - keep) == kThinkEnd.substr(0, keep)) {
          rest.remove_suffix(keep);
          break;
        }
      }
      ENVFORGE_RETURN_IF_ERROR(CheckNoSpecialTokens(rest, start, "reasoning", false));
      parsed.message.reasoning_content = std::string(rest);
      parsed.truncated = true;
      return parsed;
    }
    ENVFORGE_RETURN_IF_ERROR(CheckNoSpecialTokens(*reasoning, start, "reasoning", false));
    parsed.message.reasoning_content = std::string(*reasoning);
  }

  // Content ends at EOS or at the function_calls block ("\n\n" before it, or none at the start).
  const size_t content_start = reader.pos();
  const std::string_view rest = reader.Rest();
  const size_t eos_at = rest.find(kEosToken);
  size_t calls_at = rest.find(std::string("\n\n").append(kFunctionCallsOpen));
  size_t calls_tag_at = calls_at == std::string_view::npos ? calls_at : calls_at + 2;
  if (rest.substr(0, kFunctionCallsOpen.size()) == kFunctionCallsOpen) calls_at = calls_tag_at = 0;
  const bool has_calls = calls_at != std::string_view::npos && (eos_at == std::string_view::npos || calls_at < eos_at);
  size_t content_end = has_calls ? calls_at : eos_at;
  if (content_end == std::string_view::npos) {
    // Truncated content: drop a partial EOS or block opening at the end.
    content_end = rest.size();
    const std::string block_start = std::string("\n\n").append(kFunctionCallsOpen);
    for (std::string_view marker : {std::string_view(kEosToken), std::string_view(block_start)}) {
      for (size_t keep = std::min(rest.size(), marker.size() - 1); keep > 0; --keep) {
        if (rest.substr(rest.size() - keep) == marker.substr(0, keep)) {
          content_end = std::min(content_end, rest.size() - keep);
          break;
        }
      }
    }
    ENVFORGE_RETURN_IF_ERROR(CheckNoSpecialTokens(rest.substr(0, content_end), content_start, "content", false));
    parsed.message.content = std::string(rest.substr(0, content_end));
    parsed.truncated = true;
    return parsed;
  }
  ENVFORGE_RETURN_IF_ERROR(CheckNoSpecialTokens(rest.substr(0, content_end), content_start, "content", false));
  parsed.message.content = std::string(rest.substr(0, content_end));

  if (has_calls) {
    reader.Consume(rest.substr(0, calls_tag_at + kFunctionCallsOpen.size()));
    ENVFORGE_ASSIGN_OR_RETURN(bool closed, ParseInvokes(&reader, &parsed.message.tool_calls));
    if (!closed) {
      parsed.truncated = true;
      return parsed;
    }
    reader.SkipWhitespace();
    if (reader.AtEnd() || reader.CutInside(kEosToken)) {
      parsed.truncated = true;
      return parsed;
    }
    if (!reader.Consume(kEosToken)) return reader.Expected("the end-of-sentence token after the function calls");
  } else {
    reader.Consume(rest.substr(0, eos_at + kEosToken.size()));
  }
  if (!reader.AtEnd()) return reader.Expected("nothing after the end-of-sentence token");
  parsed.finished = true;
  return parsed;
}

}  // namespace envforge::inference
