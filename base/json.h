// JSON for envforge: nlohmann::json, plus parsing that returns Result instead of throwing.
// Include this only where JSON values are built or read; headers that merely pass JSON around
// may include <nlohmann/json_fwd.hpp>.
//
// Nesting depth. nlohmann's parser is iterative, but copying, dumping, comparing and converting
// a value recurse once per level: 100,000 levels (200 KB of "[") overflow any thread's stack. So
// every parse of text envforge did not write itself is bounded: ParseJson refuses a document that
// nests deeper than kMaxJsonDepth before building anything, and values that travel inside a
// protocol envelope (tool arguments and results, answers, verdicts) are held to
// kMaxJsonValueDepth, so that the envelope around them still parses everywhere.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/status.h"

namespace envforge {

using Json = nlohmann::json;
// Keeps object keys in insertion order. Used only where the order is part of the meaning: tool
// specs rendered into a prompt or sent to a model server, whose bytes must match what the client
// gave (the reference chat encoder prints dicts in insertion order). Converts to and from Json.
using OrderedJson = nlohmann::ordered_json;

// The deepest document (arrays and objects nested in one another) any parse of untrusted input
// accepts: RPC payloads, session and zygote frames, bundle contents, trajectory files.
inline constexpr int kMaxJsonDepth = 128;
// The deepest value carried inside an envelope: tool arguments, tool results, answers, verdicts.
// kMaxJsonDepth - kMaxJsonValueDepth levels are left for the envelopes around them.
inline constexpr int kMaxJsonValueDepth = 100;

// OK when no array or object in `text` nests deeper than max_depth (a scalar is depth 0, `[]`
// depth 1). Otherwise InvalidArgument: "<what> nests deeper than N levels of arrays and objects
// (byte B); the limit is N". Linear, no allocation; `text` need not be valid JSON (brackets
// inside strings, escapes included, are not counted).
Status CheckJsonTextDepth(std::string_view text, int max_depth, std::string_view what = "JSON");

// True when `value` nests at most max_depth levels. Recurses at most max_depth + 1 levels, so it
// is safe on any value.
bool JsonDepthWithin(const Json& value, int max_depth);

// Parses text as JSON nested at most max_depth levels. On failure the Status (InvalidArgument)
// names `what` and the byte offset of the error, or the depth bound that was passed.
Result<Json> ParseJson(std::string_view text, std::string_view what = "JSON", int max_depth = kMaxJsonDepth);
// ParseJson keeping every object's keys in the order of the text.
Result<OrderedJson> ParseOrderedJson(std::string_view text, std::string_view what = "JSON",
                                     int max_depth = kMaxJsonDepth);

// Compact dump that never throws: invalid UTF-8 in strings is replaced, not an error.
std::string DumpJson(const Json& value);
// DumpJson keeping the keys in their order (a different name: a value that converts to both
// kinds would make one overloaded name ambiguous).
std::string DumpOrderedJson(const OrderedJson& value);

}  // namespace envforge
