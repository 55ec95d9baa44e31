#include "toolsets/search/find_in_document.h"

#include <algorithm>
#include <regex>

namespace envforge::search {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

std::string AsciiLower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return lower;
}

// Builds a match at [offset, offset + length) with at most `context` bytes each side, never
// cutting a UTF-8 sequence in two.
FindMatch MakeMatch(std::string_view text, size_t offset, size_t length, size_t context, size_t line) {
  size_t begin = offset > context ? offset - context : 0;
  while (begin < offset && IsContinuationByte(text[begin])) ++begin;
  size_t end = std::min(text.size(), offset + length + context);
  while (end > offset + length && end < text.size() && IsContinuationByte(text[end])) --end;
  return FindMatch{offset, line, std::string(text.substr(begin, offset - begin)),
                   std::string(text.substr(offset, length)),
                   std::string(text.substr(offset + length, end - offset - length))};
}

// Counts lines incrementally: matches arrive in increasing offset order.
class LineCounter {
 public:
  explicit LineCounter(std::string_view text) : text_(text) {}
  size_t LineAt(size_t offset) {
    line_ += static_cast<size_t>(
        std::count(text_.begin() + static_cast<long>(counted_), text_.begin() + static_cast<long>(offset), '\n'));
    counted_ = offset;
    return line_;
  }

 private:
  std::string_view text_;
  size_t counted_ = 0;
  size_t line_ = 1;
};

std::vector<FindMatch> FindLiteral(std::string_view text, std::string_view pattern, const FindOptions& options) {
  const std::string haystack = AsciiLower(text);
  const std::string needle = AsciiLower(pattern);
  std::vector<FindMatch> matches;
  LineCounter lines(text);
  for (size_t at = haystack.find(needle); at != std::string::npos && matches.size() < options.max_matches;
       at = haystack.find(needle, at + needle.size())) {
    matches.push_back(MakeMatch(text, at, needle.size(), options.context_chars, lines.LineAt(at)));
  }
  return matches;
}

std::regex::flag_type RegexFlags() {
  auto flags = std::regex::ECMAScript | std::regex::icase;
#if defined(__GLIBCXX__)
  // libstdc++'s extension: a breadth-first executor, polynomial in the input, instead of the
  // backtracking one that an agent's "(a*)*b" would make exponential. Back-references throw.
  flags |= std::regex_constants::__polynomial;
#endif
  return flags;
}

// The pattern wrapped as "[\s\S]*?(pattern)", run anchored at the search position: one pass
// over a piece finds the leftmost match in group 1, where regex_search would restart at every
// position (quadratic: ".*x.*q" took seconds on a 150 KB page). The pattern is compiled alone
// first, so it is balanced and wrapping it cannot change what it means.
Result<std::regex> CompileRegex(std::string_view pattern) {
  try {
    std::regex alone(pattern.begin(), pattern.end(), RegexFlags());
    (void)alone;
    return std::regex("[\\s\\S]*?(" + std::string(pattern) + ")", RegexFlags());
  } catch (const std::regex_error& error) {
    return InvalidArgumentError("find: invalid or too complex regular expression '" + std::string(pattern) +
                                "': " + error.what());
  }
}

// Searches one piece of the text (a line, or part of a long one) starting at `base`.
Status FindRegexInPiece(std::string_view text, size_t base, size_t size, const std::regex& regex,
                        const FindOptions& options, LineCounter& lines, std::vector<FindMatch>& matches) {
  const char* begin = text.data() + base;
  const char* end = begin + size;
  try {
    for (const char* at = begin; at < end && matches.size() < options.max_matches;) {
      auto flags = std::regex_constants::match_continuous;
      if (at != begin) flags |= std::regex_constants::match_prev_avail;
      std::cmatch found;
      if (!std::regex_search(at, end, found, regex, flags)) break;
      const size_t offset = base + static_cast<size_t>(found[1].first - begin);
      const auto length = static_cast<size_t>(found.length(1));
      if (length == 0) {  // an empty match finds nothing; look again one byte further
        at = found[1].first + 1;
        continue;
      }
      matches.push_back(MakeMatch(text, offset, length, options.context_chars, lines.LineAt(offset)));
      at = found[1].second;
    }
  } catch (const std::regex_error& error) {
    return InvalidArgumentError(std::string("find: the regular expression is too complex to run: ") + error.what());
  }
  return Status::Ok();
}

Result<std::vector<FindMatch>> FindRegex(std::string_view text, std::string_view pattern, const FindOptions& options) {
  ENVFORGE_ASSIGN_OR_RETURN(std::regex regex, CompileRegex(pattern));
  std::vector<FindMatch> matches;
  LineCounter lines(text);
  size_t line_start = 0;
  while (line_start < text.size() && matches.size() < options.max_matches) {
    size_t line_end = text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = text.size();
    for (size_t piece = line_start; piece < line_end && matches.size() < options.max_matches;
         piece += kRegexPieceBytes) {
      const size_t size = std::min(kRegexPieceBytes, line_end - piece);
      ENVFORGE_RETURN_IF_ERROR(FindRegexInPiece(text, piece, size, regex, options, lines, matches));
    }
    line_start = line_end + 1;
  }
  return matches;
}

}  // namespace

Result<std::vector<FindMatch>> FindInDocument(const Document& document, std::string_view pattern,
                                              const FindOptions& options) {
  if (pattern.empty()) return InvalidArgumentError("find: the pattern is empty");
  if (pattern.size() > kMaxFindPatternBytes) {
    return InvalidArgumentError("find: the pattern is " + std::to_string(pattern.size()) + " bytes; the limit is " +
                                std::to_string(kMaxFindPatternBytes));
  }
  if (options.context_chars > kMaxFindContextChars) {
    return InvalidArgumentError("find: context_chars must be at most " + std::to_string(kMaxFindContextChars));
  }
  if (options.max_matches == 0 || options.max_matches > kMaxFindMatches) {
    return InvalidArgumentError("find: max_matches must be between 1 and " + std::to_string(kMaxFindMatches));
  }
  if (options.regex) return FindRegex(document.text, pattern, options);
  return FindLiteral(document.text, pattern, options);
}

}  // namespace envforge::search
