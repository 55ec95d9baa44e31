// Solution paths of synthesized search questions and their replay (solution_path.h).
#include "toolsets/search/solution_path.h"

#include <algorithm>
#include <set>

#include "toolsets/search_tools.h"

namespace envforge::search {
namespace {

std::string Trimmed(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

std::vector<std::string> TitleParts(std::string_view title) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t comma = title.find(", ", start);
    std::string part =
        Trimmed(title.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (!part.empty()) parts.push_back(std::move(part));
    if (comma == std::string_view::npos) break;
    start = comma + 2;
  }
  return parts;
}

// The doc_ids a result lets an agent open next: a search's hits, an open's links.
std::set<std::string> Reachable(const toolsets::ToolCall& call, const toolsets::ToolResult& result) {
  std::set<std::string> ids;
  const char* list = call.name == toolsets::kSearchTool ? "hits" : "links";
  const char* key = call.name == toolsets::kSearchTool ? "doc_id" : "target";
  if (!result.content.is_object()) return ids;
  auto items = result.content.find(list);
  if (items == result.content.end() || !items->is_array()) return ids;
  for (const Json& item : *items) {
    if (item.is_object() && item.contains(key) && item[key].is_string()) ids.insert(item[key].get<std::string>());
  }
  return ids;
}

}  // namespace

Json ToJson(const SolutionPath& path) {
  Json calls = Json::array();
  for (const toolsets::ToolCall& call : path.calls)
    calls.push_back({{"name", call.name}, {"arguments", call.arguments}});
  return {{"calls", std::move(calls)}, {"answer_from", "title"}};
}

Result<SolutionPath> SolutionPathFromJson(const Json& json) {
  if (!json.is_object()) return InvalidArgumentError("solution path: not a JSON object");
  if (json.value("answer_from", std::string("title")) != "title") {
    return InvalidArgumentError("solution path: 'answer_from' must be \"title\"");
  }
  auto calls = json.find("calls");
  if (calls == json.end() || !calls->is_array() || calls->empty()) {
    return InvalidArgumentError("solution path: 'calls' must be a non-empty array");
  }
  SolutionPath path;
  for (size_t i = 0; i < calls->size(); ++i) {
    const Json& item = (*calls)[i];
    const std::string where = "solution path: call " + std::to_string(i + 1);
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string() || !item.contains("arguments") ||
        !item["arguments"].is_object()) {
      return InvalidArgumentError(where + ": needs a string 'name' and an object 'arguments'");
    }
    toolsets::ToolCall call;
    call.id = "step-" + std::to_string(i + 1);
    call.name = item["name"].get<std::string>();
    call.arguments = item["arguments"];
    if (call.name != toolsets::kSearchTool && call.name != toolsets::kOpenTool) {
      return InvalidArgumentError(where + ": '" + call.name + "' is neither search nor open");
    }
    if ((i == 0) != (call.name == toolsets::kSearchTool)) {
      return InvalidArgumentError(where + ": a path is one search followed by opens");
    }
    if (call.name == toolsets::kOpenTool && !call.arguments.contains("doc_id_or_url")) {
      return InvalidArgumentError(where + ": open needs 'doc_id_or_url'");
    }
    path.calls.push_back(std::move(call));
  }
  if (path.calls.size() < 2) return InvalidArgumentError("solution path: a search and at least one open are needed");
  return path;
}

std::string AnswerFromTitle(std::string_view title) {
  std::vector<std::string> parts = TitleParts(title);
  return parts.empty() ? Trimmed(title) : parts.front();
}

std::vector<std::string> AliasesFromTitle(std::string_view title) {
  std::vector<std::string> parts = TitleParts(title);
  if (!parts.empty()) parts.erase(parts.begin());
  return parts;
}

Result<SolutionReplay> ReplaySolutionPath(
    const SolutionPath& path, const std::function<toolsets::ToolResult(const toolsets::ToolCall&)>& call_tool) {
  if (path.calls.size() < 2 || path.calls.front().name != toolsets::kSearchTool) {
    return InvalidArgumentError("solution path: a search and at least one open are needed");
  }
  SolutionReplay replay;
  std::set<std::string> shown;
  for (size_t i = 0; i < path.calls.size(); ++i) {
    const toolsets::ToolCall& call = path.calls[i];
    const std::string step = "solution path step " + std::to_string(i + 1) + " (" + call.name + ")";
    if (call.name == toolsets::kOpenTool) {
      const std::string target = call.arguments.value("doc_id_or_url", std::string());
      if (!shown.count(target)) {
        return FailedPreconditionError(step + ": '" + target + "' was not among what the previous step showed");
      }
    }
    toolsets::ToolResult result = call_tool(call);
    if (!result.ok()) {
      return FailedPreconditionError(step + ": " + std::string(toolsets::OutcomeName(result.outcome)) + ": " +
                                     result.message);
    }
    shown = Reachable(call, result);
    if (call.name == toolsets::kOpenTool) {
      replay.final_doc_id = result.content.value("doc_id", std::string());
      replay.final_title = result.content.value("title", std::string());
    }
    replay.results.push_back(std::move(result));
  }
  replay.answer = AnswerFromTitle(replay.final_title);
  return replay;
}

}  // namespace envforge::search
