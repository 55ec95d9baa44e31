// The runtime tools of a search environment's sessions (kind "search"): search, open and find
// over the environment's search backend (the offline FTS5 corpus stored in the bundle, or a live
// web API; toolsets/search/). Like submit_result they are builtin: packing a search environment
// writes them into the bundle's _tools and the session manager answers them on the session's
// search thread (toolsets/search/search_toolbox.h), never a Python worker. submit_result of a
// search task is judged by normalised exact match against the task's answer and its aliases
// (toolsets/search/answer_match.h).
#pragma once

#include <string_view>
#include <vector>

#include "base/json.h"
#include "toolsets/tool_protocol.h"

namespace envforge::toolsets {

inline constexpr std::string_view kSearchTool = "search";
inline constexpr std::string_view kOpenTool = "open";
inline constexpr std::string_view kFindTool = "find";

// Bounds of the arguments, enforced by the schemas (invalid_call) before a tool runs.
inline constexpr int kSearchMaxTopK = 20;  // search: top_k 1..20, default kSearchDefaultTopK
inline constexpr int kSearchDefaultTopK = 5;
inline constexpr int kSearchMaxQueryChars = 512;  // search: query length
inline constexpr int kOpenMaxChars = 20'000;      // open: max_chars 1..20000, default kOpenDefaultChars
inline constexpr int kOpenDefaultChars = 6'000;
inline constexpr int kFindMaxPatternChars = 256;  // find: pattern length
inline constexpr int kFindMaxMatches = 50;        // find: max_matches 1..50, default kFindDefaultMatches
inline constexpr int kFindDefaultMatches = 10;

// The three specs, in the order sessions list them (submit_result follows them).
std::vector<ToolSpec> SearchToolSpecs();
bool IsSearchTool(std::string_view name);
// The answer schema of every search task: a short text (submit_result's answer_text).
Json SearchAnswerSchema();

}  // namespace envforge::toolsets
