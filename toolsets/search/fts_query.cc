#include "toolsets/search/fts_query.h"

#include <algorithm>
#include <set>

namespace envforge::search {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// ASCII letters and digits, and every byte of a multi-byte UTF-8 sequence (letters of other
// scripts): what can make an FTS5 token. A term with none of these tokenizes to nothing.
bool IsTokenByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u >= 0x80;
}

// Words joined by single spaces; control characters count as spaces.
std::string CollapseSpaces(std::string_view text) {
  std::string out;
  bool pending_space = false;
  for (char c : text) {
    const bool space = IsSpace(c) || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    if (space) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

std::string AsciiLower(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

bool IsStopword(const QueryTerm& term) {
  static const std::set<std::string> kStopwords = {
      "a",   "an",   "and",  "are",  "as",   "at",    "be",    "by",  "did",  "do",    "does", "for",  "from",
      "has", "have", "how",  "in",   "is",   "it",    "its",   "of",  "on",   "or",    "that", "the",  "this",
      "to",  "was",  "were", "what", "when", "where", "which", "who", "whom", "whose", "why",  "will", "with"};
  return !term.phrase && !term.prefix && kStopwords.count(AsciiLower(term.text)) > 0;
}

void AddTerm(std::vector<QueryTerm>& terms, std::string_view raw, bool phrase, bool prefix) {
  std::string text = CollapseSpaces(raw);
  if (terms.size() >= kMaxQueryTerms || std::none_of(text.begin(), text.end(), IsTokenByte)) return;
  if (prefix && text.size() < kMinPrefixBytes) prefix = false;
  terms.push_back(QueryTerm{std::move(text), phrase, prefix});
}

// A bare word runs to the next space or quote; trailing '*'s make it a prefix term.
size_t AddBareWord(std::vector<QueryTerm>& terms, std::string_view text, size_t start) {
  size_t end = start;
  while (end < text.size() && !IsSpace(text[end]) && text[end] != '"') ++end;
  size_t stem_end = end;
  while (stem_end > start && text[stem_end - 1] == '*') --stem_end;
  AddTerm(terms, text.substr(start, stem_end - start), false, stem_end < end);
  return end;
}

std::vector<QueryTerm> SplitTerms(std::string_view text) {
  std::vector<QueryTerm> terms;
  size_t i = 0;
  while (i < text.size()) {
    if (IsSpace(text[i])) {
      ++i;
    } else if (text[i] == '"') {
      const size_t close = text.find('"', i + 1);
      if (close == std::string_view::npos) {
        ++i;  // an unbalanced quote is dropped; what follows is read as plain words
        continue;
      }
      const bool prefix = close + 1 < text.size() && text[close + 1] == '*';
      AddTerm(terms, text.substr(i + 1, close - i - 1), true, prefix);
      i = close + 1;
      while (i < text.size() && text[i] == '*') ++i;
    } else {
      i = AddBareWord(terms, text, i);
    }
  }
  return terms;
}

// An FTS5 string: the only character with a meaning inside one is '"', written twice.
std::string Quote(const QueryTerm& term) {
  std::string quoted = "\"";
  for (char c : term.text) {
    quoted += c;
    if (c == '"') quoted += '"';
  }
  quoted += '"';
  if (term.prefix) quoted += " *";
  return quoted;
}

std::string Join(const std::vector<const QueryTerm*>& terms, std::string_view separator) {
  std::string joined;
  for (const QueryTerm* term : terms) {
    if (!joined.empty()) joined += separator;
    joined += Quote(*term);
  }
  return joined;
}

}  // namespace

Result<FtsQuery> TranslateQuery(std::string_view text) {
  if (text.size() > kMaxQueryBytes) {
    return InvalidArgumentError("search query is " + std::to_string(text.size()) + " bytes; the limit is " +
                                std::to_string(kMaxQueryBytes));
  }
  FtsQuery query;
  query.terms = SplitTerms(text);
  if (query.terms.empty()) return InvalidArgumentError("search query is empty (it holds no word to search for)");
  std::vector<const QueryTerm*> all, content;
  for (const QueryTerm& term : query.terms) {
    all.push_back(&term);
    if (!IsStopword(term)) content.push_back(&term);
    query.plain_text += (query.plain_text.empty() ? "" : " ") + term.text;
  }
  query.all_terms = Join(all, " ");
  query.any_term = Join(content.empty() ? all : content, " OR ");
  return query;
}

}  // namespace envforge::search
