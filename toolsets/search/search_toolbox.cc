// A search session's tools over a backend (search_toolbox.h).
#include "toolsets/search/search_toolbox.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "toolsets/search/find_in_document.h"
#include "toolsets/search_tools.h"

namespace envforge::search {
namespace {

using toolsets::Outcome;
using toolsets::ToolResult;

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// At most max_bytes of text, cut before a UTF-8 sequence that would not fit whole.
std::string Capped(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && IsContinuationByte(text[end])) --end;
  return text.substr(0, end) + "…";
}

ToolResult Ok(Json content) {
  ToolResult result;
  result.content = std::move(content);
  return result;
}

// Whose fault a backend error is: the agent's arguments (tool_error) or the runtime's.
ToolResult FromStatus(const Status& status) {
  bool agents_fault = status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kNotFound;
  return ToolResult::Error(agents_fault ? Outcome::kToolError : Outcome::kInfraError, status.message());
}

Result<std::string> RequiredString(const Json& arguments, const char* tool, const char* name) {
  auto it = arguments.find(name);
  if (it == arguments.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return InvalidArgumentError(std::string(tool) + ": '" + name + "' must be a non-empty string");
  }
  return it->get<std::string>();
}

Result<int64_t> OptionalInteger(const Json& arguments, const char* tool, const char* name, int64_t minimum,
                                int64_t maximum, int64_t default_value) {
  auto it = arguments.find(name);
  if (it == arguments.end() || it->is_null()) return default_value;
  std::optional<int64_t> value;
  if (it->is_number_unsigned()) {
    value =
        it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(it->get<uint64_t>());
  } else if (it->is_number_integer()) {
    value = it->get<int64_t>();
  } else if (it->is_number_float()) {
    double number = it->get<double>();  // JSON Schema's integers include 3.0
    if (std::isfinite(number) && number == std::floor(number) && std::abs(number) < 9e15)
      value = static_cast<int64_t>(number);
  }
  if (!value || *value < minimum || *value > maximum) {
    return InvalidArgumentError(std::string(tool) + ": '" + name + "' must be an integer from " +
                                std::to_string(minimum) + " to " + std::to_string(maximum) + ", got " + DumpJson(*it));
  }
  return *value;
}

Result<bool> OptionalBool(const Json& arguments, const char* tool, const char* name) {
  auto it = arguments.find(name);
  if (it == arguments.end() || it->is_null()) return false;
  if (!it->is_boolean()) return InvalidArgumentError(std::string(tool) + ": '" + name + "' must be true or false");
  return it->get<bool>();
}

}  // namespace

SearchToolbox::SearchToolbox(std::unique_ptr<SearchBackend> backend, std::vector<RecordedResponse> recorded)
    : backend_(std::move(backend)), recorded_(std::move(recorded)), recorded_used_(recorded_.size(), false) {}

const RecordedResponse* SearchToolbox::TakeRecorded(const toolsets::ToolCall& call) {
  for (size_t i = 0; i < recorded_.size(); ++i) {
    if (recorded_used_[i] || recorded_[i].tool != call.name || recorded_[i].arguments != call.arguments) continue;
    recorded_used_[i] = true;
    return &recorded_[i];
  }
  return nullptr;
}

ToolResult SearchToolbox::Call(const toolsets::ToolCall& call) {
  ToolResult result;
  if (!toolsets::IsSearchTool(call.name)) {
    result =
        ToolResult::Error(Outcome::kInvalidCall, "unknown tool '" + call.name + "'; search tools: search, open, find");
  } else if (!call.arguments.is_object()) {
    result = ToolResult::Error(Outcome::kInvalidCall, call.name + ": the arguments must be a JSON object");
  } else if (const RecordedResponse* recorded = TakeRecorded(call)) {
    ++replayed_calls_;
    result.outcome = recorded->result.outcome;
    result.content = recorded->result.content;
    result.message = recorded->result.message;
    result.limit = recorded->result.limit;
  } else if (call.name == toolsets::kSearchTool) {
    result = Search(call.arguments);
  } else if (call.name == toolsets::kOpenTool) {
    result = Open(call.arguments);
  } else {
    result = Find(call.arguments);
  }
  result.call_id = call.id;
  return result;
}

ToolResult SearchToolbox::Search(const Json& arguments) {
  Result<std::string> query = RequiredString(arguments, "search", "query");
  if (!query.ok()) return FromStatus(query.status());
  Result<int64_t> top_k =
      OptionalInteger(arguments, "search", "top_k", 1, toolsets::kSearchMaxTopK, toolsets::kSearchDefaultTopK);
  if (!top_k.ok()) return FromStatus(top_k.status());
  Result<SearchPage> page = backend_->Search(SearchQuery{*query, static_cast<int>(*top_k)});
  if (!page.ok()) return FromStatus(page.status());
  Json hits = Json::array();
  for (const SearchHit& hit : page->hits) {
    hits.push_back(Json{{"doc_id", hit.doc_id},
                        {"title", Capped(hit.title, kMaxTitleBytes)},
                        {"url", Capped(hit.url, kMaxUrlBytes)},
                        {"snippet", Capped(hit.snippet, kMaxSnippetBytes)},
                        {"score", hit.score}});
  }
  return Ok(Json{{"backend", backend_->name()}, {"query", *query}, {"hits", std::move(hits)}});
}

ToolResult SearchToolbox::Open(const Json& arguments) {
  Result<std::string> target = RequiredString(arguments, "open", "doc_id_or_url");
  if (!target.ok()) return FromStatus(target.status());
  Result<int64_t> offset = OptionalInteger(arguments, "open", "offset", 0, INT64_MAX, 0);
  if (!offset.ok()) return FromStatus(offset.status());
  Result<int64_t> max_chars =
      OptionalInteger(arguments, "open", "max_chars", 1, toolsets::kOpenMaxChars, toolsets::kOpenDefaultChars);
  if (!max_chars.ok()) return FromStatus(max_chars.status());
  Result<Document> document = backend_->Open(*target);
  if (!document.ok()) return FromStatus(document.status());
  const std::string& text = document->text;
  if (static_cast<uint64_t>(*offset) > text.size() || (*offset > 0 && static_cast<uint64_t>(*offset) == text.size())) {
    return ToolResult::Error(Outcome::kToolError, "open: offset " + std::to_string(*offset) + " is past the end of '" +
                                                      document->doc_id + "' (" + std::to_string(text.size()) +
                                                      " bytes)");
  }
  size_t begin = static_cast<size_t>(*offset);
  while (begin < text.size() && IsContinuationByte(text[begin])) ++begin;
  size_t end = std::min(text.size(), begin + static_cast<size_t>(*max_chars));
  while (end < text.size() && end > begin && IsContinuationByte(text[end])) --end;
  Json links = Json::array();
  for (size_t i = 0; i < document->links.size() && i < kMaxOpenLinks; ++i) {
    links.push_back(Json{{"target", Capped(document->links[i].target, kMaxUrlBytes)},
                         {"anchor", Capped(document->links[i].anchor, kMaxTitleBytes)}});
  }
  return Ok(Json{{"backend", backend_->name()},
                 {"doc_id", document->doc_id},
                 {"title", Capped(document->title, kMaxTitleBytes)},
                 {"url", Capped(document->url, kMaxUrlBytes)},
                 {"source", document->source},
                 {"text", text.substr(begin, end - begin)},
                 {"offset", begin},
                 {"next_offset", end < text.size() ? Json(end) : Json()},
                 {"total_bytes", text.size()},
                 {"links", std::move(links)},
                 {"links_total", document->links.size()}});
}

ToolResult SearchToolbox::Find(const Json& arguments) {
  Result<std::string> doc_id = RequiredString(arguments, "find", "doc_id");
  if (!doc_id.ok()) return FromStatus(doc_id.status());
  Result<std::string> pattern = RequiredString(arguments, "find", "pattern");
  if (!pattern.ok()) return FromStatus(pattern.status());
  Result<bool> regex = OptionalBool(arguments, "find", "regex");
  if (!regex.ok()) return FromStatus(regex.status());
  Result<int64_t> max_matches =
      OptionalInteger(arguments, "find", "max_matches", 1, toolsets::kFindMaxMatches, toolsets::kFindDefaultMatches);
  if (!max_matches.ok()) return FromStatus(max_matches.status());
  Result<Document> document = backend_->Open(*doc_id);
  if (!document.ok()) return FromStatus(document.status());
  FindOptions options;
  options.regex = *regex;
  options.context_chars = kFindContextBytes;
  options.max_matches = static_cast<size_t>(*max_matches) + 1;  // one more tells whether there are more
  Result<std::vector<FindMatch>> found = FindInDocument(*document, *pattern, options);
  if (!found.ok()) return FromStatus(found.status());
  const bool truncated = found->size() > static_cast<size_t>(*max_matches);
  if (truncated) found->pop_back();
  Json matches = Json::array();
  for (const FindMatch& match : *found) {
    matches.push_back(Json{{"line", match.line},
                           {"offset", match.offset},
                           {"before", match.before},
                           {"match", Capped(match.match, kMaxSnippetBytes)},
                           {"after", match.after}});
  }
  return Ok(Json{{"backend", backend_->name()},
                 {"doc_id", document->doc_id},
                 {"title", Capped(document->title, kMaxTitleBytes)},
                 {"pattern", *pattern},
                 {"regex", *regex},
                 {"matches", std::move(matches)},
                 {"truncated", truncated}});
}

}  // namespace envforge::search
