// The solution path of a synthesized search question: the chain of tool calls (a `search`, then
// one `open` per document of the clue chain) that the synthesizer recorded, and the replay that
// proves the answer is found by following it through a session's own tools.
//
// JSON form (tasks/<id>/solution.json of a search source; "search/solutions/<id>.json" in a bundle):
//   {"calls": [{"name": "search", "arguments": {"query", "top_k"}},
//              {"name": "open", "arguments": {"doc_id_or_url"}}, ...],
//    "answer_from": "title"}
//
// Replay rules (ReplaySolutionPath): the first call is a search; every open names a document that
// the previous result showed (a hit of the search for the first open, a link of the previously
// opened document for the others), so the path is discoverable by an agent that reads what the
// tools return, not a list of ids copied from the corpus. The answer is the last opened
// document's title as AnswerFromTitle reads it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "toolsets/tool_protocol.h"

namespace envforge::search {

struct SolutionPath {
  std::vector<toolsets::ToolCall> calls;  // search first, then opens; ids "step-1", "step-2", ...
};

Json ToJson(const SolutionPath& path);
// InvalidArgument naming the problem: not an object, no calls, a call that is not search or open,
// an open without "doc_id_or_url", a first call that is not a search, an unknown "answer_from".
Result<SolutionPath> SolutionPathFromJson(const Json& json);

// The answer a document title names: its first comma-separated part ("dog, domestic dog, Canis
// familiaris" -> "dog"), trimmed. WordNet titles list a synset's words that way; other titles
// have no ", " and are returned whole.
std::string AnswerFromTitle(std::string_view title);
// The other parts of such a title ("domestic dog", "Canis familiaris"): aliases of the answer.
std::vector<std::string> AliasesFromTitle(std::string_view title);

struct SolutionReplay {
  std::string final_doc_id;  // the last document opened
  std::string final_title;
  std::string answer;                         // AnswerFromTitle(final_title)
  std::vector<toolsets::ToolResult> results;  // one per call, in order
};

// Plays `path` through `call_tool` (a SearchToolbox, or a session's CallTool) and checks the
// replay rules. Errors: FailedPrecondition naming the step when a call does not return ok, or an
// open names a document the previous result did not show; InvalidArgument for a malformed path.
Result<SolutionReplay> ReplaySolutionPath(
    const SolutionPath& path, const std::function<toolsets::ToolResult(const toolsets::ToolCall&)>& call_tool);

}  // namespace envforge::search
