// A search session's tools: search, open and find (toolsets/search_tools.h) answered over one
// SearchBackend, with bounded outputs, and -- for replays -- from recorded responses.
//
// Results (content of an ok ToolResult; every text cut at a UTF-8 boundary):
//   search -> {"backend", "query", "hits": [{"doc_id", "title", "url", "snippet", "score"}]}
//             titles at most kMaxTitleBytes, urls kMaxUrlBytes, snippets kMaxSnippetBytes
//   open   -> {"backend", "doc_id", "title", "url", "source", "text", "offset", "next_offset"
//             (null at the end), "total_bytes", "links": [{"target", "anchor"}] (the first
//             kMaxOpenLinks), "links_total"}; text is the document's bytes from offset on, at
//             most max_chars of them
//   find   -> {"backend", "doc_id", "title", "pattern", "regex", "matches": [{"line", "offset",
//             "before", "match", "after"}], "truncated"} (truncated: more matches exist)
// "backend" names what answered ("offline", "brave", ...), so a recording says where its
// observations came from.
//
// Outcomes: tool_error (a message for the model) for arguments the tools or the backend reject
// (an empty query, an unknown document, an offset past the end, a bad regex); infra_error for a
// backend that fails (unreachable, timed out, a corrupt corpus): not the agent's fault. The
// manager validates the arguments against the specs' schemas first; the toolbox checks them
// again (a direct caller gets tool_error, never a crash).
//
// Recorded responses (replays). A toolbox given recorded responses answers a call whose tool and
// arguments equal those of a recorded response not used yet with that response (its outcome,
// content, message and limit, verbatim), taking them in recorded order; any other call goes to the
// backend. A replay thus observes what the episode observed, even after the corpus or the live
// API changed.
//
// Thread safety: one thread at a time (the backend's rule).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "toolsets/search/search_backend.h"
#include "toolsets/tool_protocol.h"

namespace envforge::search {

inline constexpr size_t kMaxTitleBytes = 300;
inline constexpr size_t kMaxUrlBytes = 2048;
inline constexpr size_t kMaxSnippetBytes = 1000;
inline constexpr size_t kMaxOpenLinks = 100;
inline constexpr size_t kFindContextBytes = 80;

// One response a session received, as a trajectory stores it.
struct RecordedResponse {
  std::string tool;
  Json arguments;
  toolsets::ToolResult result;
};

class SearchToolbox {
 public:
  // `backend` answers whatever the recording does not; it must not be null.
  explicit SearchToolbox(std::unique_ptr<SearchBackend> backend, std::vector<RecordedResponse> recorded = {});

  // Answers search, open or find; any other name is invalid_call. call_id is echoed.
  toolsets::ToolResult Call(const toolsets::ToolCall& call);

  const SearchBackend& backend() const { return *backend_; }
  size_t replayed_calls() const { return replayed_calls_; }

 private:
  toolsets::ToolResult Search(const Json& arguments);
  toolsets::ToolResult Open(const Json& arguments);
  toolsets::ToolResult Find(const Json& arguments);
  const RecordedResponse* TakeRecorded(const toolsets::ToolCall& call);

  std::unique_ptr<SearchBackend> backend_;
  std::vector<RecordedResponse> recorded_;
  std::vector<bool> recorded_used_;
  size_t replayed_calls_ = 0;
};

}  // namespace envforge::search
