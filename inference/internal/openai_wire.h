// The OpenAI-compatible wire format as the openai backend speaks it (agents-and-rollouts.md 3):
// request bodies for /chat/completions and /completions, the parse of a response body into a
// CompletionResult, and the assembly of a server-sent-event stream into the body the
// non-streaming endpoint would have answered (so both paths share one parser).
//
// No I/O here: inference/openai_backend.cc moves the bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "base/json.h"
#include "base/status.h"
#include "inference/backend.h"

namespace envforge::inference::openai_wire {

// The JSON body of POST {base}/chat/completions (or {base}/completions when request.raw).
// `model` is the "model" field (omitted when empty); `stream` adds stream + stream_options.
// Assistant tool calls without an id get "call_<n>" (n counts the conversation's calls from 0),
// and tool messages without a tool_call_id answer the earliest unanswered call of the assistant
// message before them. reasoning_content is sent back only for assistant messages after the last
// user message and only in thinking mode (the DeepSeek-V3.2 rule). Tools keep the order of
// request.tools (keys included). Errors: InvalidArgument naming the message or field (unknown
// role, a tool message answering no call, out-of-range sampling).
Result<OrderedJson> BuildRequestBody(const CompletionRequest& request, const std::string& model, bool stream);

// Parses a response body of the endpoint the request went to. Anything not of the documented
// shape is DataLoss "openai response from <url>: <what is wrong>". A tool call whose arguments are
// not a JSON object keeps its choice: the raw text stays as the arguments (a Json string) and
// parse_error names the tool and the JSON error. tool_choice "required" (or a named function)
// answered without that call also sets parse_error.
Result<CompletionResult> ParseResponse(std::string_view body, const CompletionRequest& request, std::string_view url);

// Server-sent events of a streamed completion, fed as bytes arrive. Each `data: {chunk}` merges
// into a response object of the non-streaming shape (content, reasoning_content and tool-call
// pieces concatenated by index, the last finish_reason, logprobs appended, usage); content pieces
// go to on_text(choice, piece) as they arrive. `data: [DONE]` ends the stream.
class StreamAssembler {
 public:
  StreamAssembler(bool raw, std::function<void(int64_t, std::string_view)> on_text, std::string url);

  // Errors: DataLoss for a chunk that is not JSON of the chunk shape, InvalidArgument/Unavailable
  // for an error object sent inside the stream (its message).
  Status Feed(std::string_view bytes);
  // The assembled body after the stream ended. DataLoss when it ended without [DONE] and some
  // choice has no finish_reason (a cut stream), or no chunk arrived at all.
  Result<std::string> Finish();
  // True once any content piece was handed to on_text (a retry would repeat it).
  bool delivered_text() const { return delivered_text_; }

 private:
  Status Dispatch(std::string_view data);
  Status MergeChunk(const Json& chunk);
  Status MergeChoice(const Json& delta_choice);
  Status Malformed(std::string_view what) const;
  Json AssembledChoice(int64_t index) const;

  struct ToolCallPieces {
    std::string id, name, arguments;
  };
  struct ChoicePieces {
    std::string content;  // chat: delta.content; raw: text
    bool has_content = false;
    std::string reasoning;
    bool has_reasoning = false;
    std::map<int64_t, ToolCallPieces> tool_calls;  // by delta index
    Json finish_reason;                            // null until a chunk sets it
    Json logprobs;                                 // null, or the logprobs object being appended to
  };

  bool raw_;
  std::function<void(int64_t, std::string_view)> on_text_;
  std::string url_;
  std::string pending_;     // bytes after the last complete line
  std::string event_data_;  // data lines of the event being read
  bool done_ = false;
  bool any_chunk_ = false;
  bool delivered_text_ = false;
  std::string model_;
  Json usage_;
  std::map<int64_t, ChoicePieces> choices_;  // by choice index
};

}  // namespace envforge::inference::openai_wire
