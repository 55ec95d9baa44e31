// Regular expressions through Oniguruma (Debian libonig), the engine Hugging Face tokenizers use.
// One wrapper for every caller: the tokenizer's pre-tokenizer Split patterns and JSON Schema's
// `pattern` / `patternProperties`.
//
// Subjects and offsets are UTF-8 bytes. A subject that is not valid UTF-8 is the caller's to
// reject first (Oniguruma's behaviour on broken UTF-8 is unspecified).
//
// Patterns may come from users (a tool schema's `pattern`), so every search runs under a retry
// limit: a pattern that backtracks catastrophically gives ResourceExhausted, never a hung thread.
//
// Thread safety: a compiled Regex is immutable; Find and Search may run concurrently on one
// Regex (each call has its own region and match parameters).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace envforge {

enum class RegexSyntax {
  // Oniguruma's own syntax (Ruby-like): what Hugging Face tokenizer.json Split patterns are
  // written in.
  kOniguruma,
  // Perl_NG: Perl syntax with named groups; the closest Oniguruma has to ECMA-262, used for
  // JSON Schema patterns (\d \w \s classes, lookaround, lazy quantifiers, (?<name>...)).
  kPerl,
};

class Regex {
 public:
  struct Match {
    size_t begin = 0;  // byte offsets into the subject
    size_t end = 0;
  };

  // Errors: InvalidArgument "regex '<pattern>': <Oniguruma's message>".
  static Result<Regex> Compile(std::string_view pattern, RegexSyntax syntax);

  // The leftmost match that starts at or after byte `from`; nullopt when there is none.
  // ResourceExhausted when the retry limit is hit.
  Result<std::optional<Match>> Find(std::string_view subject, size_t from = 0) const;

  // Whether the pattern matches anywhere in subject (JSON Schema's unanchored `pattern`).
  Result<bool> Search(std::string_view subject) const;

  const std::string& pattern() const;

  struct Compiled;

 private:
  explicit Regex(std::shared_ptr<const Compiled> compiled);
  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace envforge
