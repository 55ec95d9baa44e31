// `find`: the places in one document where a pattern occurs, each with a little context. It is
// backend-independent (it works on any Document, from the offline corpus or a web page), so a
// session's `find(doc_id, pattern)` tool is Open() followed by FindInDocument().
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "toolsets/search/search_backend.h"

namespace envforge::search {

// Bounds on what a caller (an agent) may ask for; larger requests are InvalidArgument.
inline constexpr size_t kMaxFindPatternBytes = 256;
inline constexpr size_t kMaxFindContextChars = 1000;
inline constexpr size_t kMaxFindMatches = 1000;
// A regex is run over one line at a time, and a line longer than this over consecutive pieces of
// this many bytes. A regex match that would straddle two pieces of one very long line is not
// found.
inline constexpr size_t kRegexPieceBytes = 4096;

struct FindOptions {
  // false: `pattern` is a literal, compared case-insensitively (ASCII letters fold; other bytes,
  // UTF-8 included, compare exactly). true: an ECMAScript regular expression (std::regex,
  // case-insensitive), matched in one pass per line with libstdc++'s breadth-first executor, so
  // the time is linear in the text for a given pattern; back-references are refused (they would
  // need backtracking).
  bool regex = false;
  size_t context_chars = 80;  // bytes of context kept on each side, cut at UTF-8 boundaries
  size_t max_matches = 20;    // the first this many matches, in document order (1..kMaxFindMatches)
};

struct FindMatch {
  size_t offset = 0;   // byte offset of the match in Document::text
  size_t line = 0;     // 1-based line number of the match's first byte
  std::string before;  // up to context_chars bytes before the match
  std::string match;   // the matched text, as it appears in the document
  std::string after;   // up to context_chars bytes after it
};

// The matches of `pattern` in document.text (never in its title or links), non-overlapping, in
// order; empty when there are none. Errors, all InvalidArgument naming the problem: an empty
// pattern, a pattern longer than kMaxFindPatternBytes, context_chars above kMaxFindContextChars,
// max_matches 0 or above kMaxFindMatches, an invalid or too complex regex. A regex that matches
// the empty string yields only its non-empty matches.
Result<std::vector<FindMatch>> FindInDocument(const Document& document, std::string_view pattern,
                                              const FindOptions& options = {});

}  // namespace envforge::search
