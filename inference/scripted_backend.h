// The scripted backend ("scripted:FILE.jsonl"): replays recorded responses, for tests and for
// re-running a recorded rollout against changed tools. Deterministic whatever the concurrency.
//
// The file holds one JSON object per line (blank lines and lines starting with '#' are skipped).
// A line is one response (one choice):
//   {"content": "...", "reasoning_content": "...",
//    "tool_calls": [{"name": "search", "arguments": {...} | "<JSON text>", "id": "call_1"?}]}
//   {"text": "<raw DSV32 completion text>"}  parsed with ParseCompletion (thinking as requested);
//                                            malformed DSML becomes the choice's parse_error
//   {"error": "unavailable" | "data_loss" | "deadline_exceeded" | "invalid_argument",
//    "message": "..."}                       Complete fails with that Status
// Optional members of any line: "script": K (default 0; see below), "when": "TEXT",
// "finish_reason" (default "tool_calls" with tool calls, else "stop"), "completion_tokens"
// (default: CountTokens of the text), "sleep_ms" (the answer waits that long).
//
// Scripts and conversations. Lines with the same "script" number form one script, in file order.
// A request that does not continue an earlier choice (no continue_from, or an unknown handle)
// starts a conversation per choice; conversation c (numbered in order of creation) plays script
// c mod S (S scripts, in ascending script number). A request continuing a choice's handle plays
// that conversation's next line. So the n episodes of a rollout each walk a script from its
// first line, and a file with several scripts spreads them over the episodes.
// Lines with "when" belong to no script: they answer any request whose last message contains
// TEXT (the first line in file order whose TEXT matches), without advancing a conversation (e.g.
// the summary request of context management). Several lines with the same TEXT answer the
// requests matching it in turn (round robin), so n episodes of one task can be given a chosen mix
// of answers (envsynth's filter tests: k/2 right, k/2 wrong).
// A conversation past its script's last line fails with Unavailable naming the script and turn.
//
// CountTokens is one token per 4 bytes (rounded up); the context window is
// BackendOptions::context_window, and a prompt that fills it is refused as the embedded engine
// refuses it (ResourceExhausted, "context length exceeded ..."). Completions carry no token ids.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "inference/backend.h"

namespace envforge::inference {

// Errors: NotFound (no such file), InvalidArgument naming the file, line and member for a line
// that is not a JSON object of the shape above, or a file with no script lines.
Result<std::unique_ptr<Backend>> OpenScriptedBackend(const std::string& path, const BackendOptions& options);

}  // namespace envforge::inference
