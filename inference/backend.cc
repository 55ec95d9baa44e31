// The backend factory: a spec's scheme picks the implementation.
#include "inference/backend.h"

#include "inference/embedded_backend.h"
#include "inference/openai_backend.h"
#include "inference/scripted_backend.h"

namespace envforge::inference {

Result<std::unique_ptr<Backend>> OpenBackend(std::string_view spec, const BackendOptions& options) {
  size_t colon = spec.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == spec.size()) {
    return InvalidArgumentError("backend '" + std::string(spec) +
                                "' is not SCHEME:TARGET (embedded:MODEL_DIR, openai:URL or scripted:FILE.jsonl)");
  }
  std::string scheme(spec.substr(0, colon));
  std::string target(spec.substr(colon + 1));
  if (scheme == "embedded") return OpenEmbeddedBackend(target, options);
  if (scheme == "scripted") return OpenScriptedBackend(target, options);
  if (scheme == "openai") return OpenOpenAiBackend(target, options);
  return InvalidArgumentError("unknown backend scheme '" + scheme + "' in '" + std::string(spec) +
                              "' (known: embedded, openai, scripted)");
}

OrderedJson ToOpenAiTools(const OrderedJson& tools) {
  OrderedJson out = OrderedJson::array();
  if (!tools.is_array()) return out;
  for (const OrderedJson& tool : tools) {
    if (tool.is_object() && tool.contains("function")) {
      out.push_back(tool);
      continue;
    }
    if (!tool.is_object()) continue;
    OrderedJson function = {{"name", tool.value("name", "")}, {"description", tool.value("description", "")}};
    // MCP names the schema inputSchema; the Responses API's flat function tool, parameters.
    function["parameters"] =
        tool.contains("inputSchema") ? tool["inputSchema"] : tool.value("parameters", OrderedJson::object());
    if (tool.value("strict", false) == true) function["strict"] = true;
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

Result<OrderedJson> ParseToolSpecs(const OrderedJson& tools, std::string_view what) {
  OrderedJson out = OrderedJson::array();
  if (!tools.is_array()) return out;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (!tools[i].is_string()) {
      out.push_back(tools[i]);
      continue;
    }
    ENVFORGE_ASSIGN_OR_RETURN(OrderedJson parsed,
                              ParseOrderedJson(tools[i].get_ref<const std::string&>(),
                                               std::string(what) + "[" + std::to_string(i) + "]", kMaxJsonValueDepth));
    out.push_back(std::move(parsed));
  }
  return out;
}

Result<Json> ReplyJsonObject(std::string_view content) {
  const size_t open = content.find('{');
  const size_t close = content.rfind('}');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return InvalidArgumentError("the reply holds no JSON object");
  ENVFORGE_ASSIGN_OR_RETURN(Json parsed, ParseJson(content.substr(open, close - open + 1), "the reply's JSON object"));
  if (!parsed.is_object()) return InvalidArgumentError("the reply's JSON is not an object");
  return parsed;
}

Result<ObjectReply> CompleteForObject(Backend& backend, CompletionRequest request, int64_t retries,
                                      const std::function<std::string(const Json&)>& check,
                                      const std::function<std::string(const std::string&)>& retry_message,
                                      int64_t* requests) {
  ObjectReply reply;
  for (int64_t attempt = 0; attempt <= retries; ++attempt) {
    if (requests != nullptr) ++*requests;
    ENVFORGE_ASSIGN_OR_RETURN(CompletionResult completion, backend.Complete(request));
    if (completion.choices.empty()) return DataLossError("the model's answer has no choice");
    const std::string content = completion.choices[0].message.content;
    auto object = ReplyJsonObject(content);
    reply.problem = object.ok() ? check(*object) : object.status().message();
    if (reply.problem.empty()) {
      reply.object = std::move(*object);
      return reply;
    }
    request.messages.push_back({"assistant", content});
    request.messages.push_back({"user", retry_message(reply.problem)});
    request.sampling.seed += 1;
  }
  return reply;
}

}  // namespace envforge::inference
