// A small backtracking regex engine over code points, for the Split patterns of Hugging Face
// pre-tokenizers (Oniguruma semantics: leftmost match, alternatives tried in order, greedy
// quantifiers backtrack).
//
// Supported: literals and escapes (\r \n \t \f \v \e \a \xHH \x{H...} \uHHHH, escaped
// punctuation), '.', classes [...] with ranges and negation, \p{X} / \P{X} (general categories and
// their groups: L, Lu, ..., Letter, ...), \s \S \d \D \w \W (Unicode), groups (...) and (?:...),
// (?i:...) (ASCII case folding only), alternation, quantifiers * + ? {n} {n,} {n,m} {,m} and their
// lazy forms, lookahead (?=...) (?!...), anchors ^ $ \A \z \Z.
// Not supported (Compile fails naming the construct): lookbehind, atomic groups, possessive
// quantifiers, backreferences, \b \B, \p{Script} names, class set operations (&&, nested [...]),
// inline flags other than i, unbounded repetition of something that can match empty.
//
// Thread safety: a compiled Regex is immutable; Find may run concurrently.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace envforge::inference::internal {

class Regex {
 public:
  struct Match {
    size_t begin = 0;  // code point indices into the searched text
    size_t end = 0;
  };

  // pattern is UTF-8. Errors are InvalidArgument "regex <pattern>: <what> at offset <n>".
  static Result<Regex> Compile(std::string_view pattern);

  // The leftmost match starting at or after `from`. The text ends at text.size(): lookahead and $
  // see nothing beyond it.
  std::optional<Match> Find(std::span<const char32_t> text, size_t from = 0) const;

  const std::string& pattern() const;

  struct Program;

 private:
  explicit Regex(std::shared_ptr<const Program> program);
  std::shared_ptr<const Program> program_;
};

}  // namespace envforge::inference::internal
