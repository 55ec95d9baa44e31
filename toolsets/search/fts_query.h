// Turning what a user or an agent types into a well-formed FTS5 MATCH expression.
//
// Nothing the user types is FTS5 syntax except two things the offline backend supports on
// purpose: "double-quoted phrases" and prefix terms (`word*`, `"a phrase"*`). Every other
// character is data: each term is emitted as an FTS5 string ("term", with any '"' doubled), so
// operators (OR, AND, NOT, NEAR), column filters (title:), '^', '+', '-', parentheses, a stray
// quote or '*' can never produce an FTS5 syntax error, and since the expression is bound as a
// parameter, never SQL either.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace envforge::search {

inline constexpr size_t kMaxQueryBytes = 2048;
// Terms after the first kMaxQueryTerms are ignored (a search engine's usual cap): each term costs
// a doclist merge.
inline constexpr size_t kMaxQueryTerms = 32;
// A prefix term needs at least this many bytes before its '*'; a shorter one (`a*`) would merge
// the doclists of a large share of the vocabulary, so it is searched as a plain term.
inline constexpr size_t kMinPrefixBytes = 2;

struct QueryTerm {
  std::string text;     // the words of the term, without quotes or '*'
  bool phrase = false;  // came from a "quoted phrase"
  bool prefix = false;  // ended with '*'
};

struct FtsQuery {
  std::vector<QueryTerm> terms;
  std::string all_terms;  // every term required: "a" "b c" "d" *
  // Any term suffices: "a" OR "b c" OR "d" *. Single common words ("the", "of", "what") are
  // left out when another term remains, so that a question phrased in English still ranks by its
  // content words.
  std::string any_term;
  std::string plain_text;  // the terms' words joined by spaces: what an exact title would read
};

// Errors: InvalidArgument "search query is empty" when `text` holds no term (nothing but
// spaces, quotes, '*' or control characters), or naming the limit when it is longer than
// kMaxQueryBytes.
Result<FtsQuery> TranslateQuery(std::string_view text);

}  // namespace envforge::search
