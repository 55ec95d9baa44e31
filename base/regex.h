// Regular expressions through Oniguruma (Debian libonig), the engine Hugging Face tokenizers use.
// One wrapper for every caller: the tokenizer's pre-tokenizer Split patterns and JSON Schema's
// `pattern` / `patternProperties`.
//
// Subjects and offsets are UTF-8 bytes. A subject that is not valid UTF-8 is the caller's to
// reject first (Oniguruma's behaviour on broken UTF-8 is unspecified).
//
// Patterns may come from users (a tool schema's `pattern`), so every search runs under a retry
// limit (RegexBound): a pattern that backtracks catastrophically gives ResourceExhausted, never a
// hung thread.
//
// Thread safety: a compiled Regex is immutable; Find and Search may run concurrently on one
// Regex (each thread reuses its own region and match parameters).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// What the retry limit bounds.
enum class RegexBound {
  // The whole search: every call returns quickly, whatever the subject. For patterns from users
  // (JSON Schema), on short subjects.
  kSearch,
  // Each match attempt at one start position, as Oniguruma's defaults (and so Hugging Face
  // tokenizers) do: a search over megabytes that finds nothing runs long but linear; only a
  // pattern that backtracks catastrophically at one position fails. For patterns from
  // configuration applied to long texts (a tokenizer's Split over a whole document).
  kEachMatch,
};

class Regex {
 public:
  struct Match {
    size_t begin = 0;  // byte offsets into the subject
    size_t end = 0;
  };

  // Errors: InvalidArgument "regex '<pattern>': <Oniguruma's message>".
  static Result<Regex> Compile(std::string_view pattern, RegexSyntax syntax, RegexBound bound = RegexBound::kSearch);

  // The leftmost match that starts at or after byte `from`; nullopt when there is none (also when
  // from > subject.size()). Look-ahead and `$` see the subject's end, nothing beyond; look-behind
  // and `^` see bytes before `from`. ResourceExhausted when the retry limit is hit.
  // The wrapper allocates nothing after a thread's first call (Oniguruma may, for a deep backtrack stack).
  Result<std::optional<Match>> Find(std::string_view subject, size_t from = 0) const;

  // Find, also giving the spans of capture groups 1..group_count() in (*groups)[0..]: nullopt for a
  // group that took no part in the match. *groups is empty when there is no match. groups may be
  // null (then this is the Find above).
  Result<std::optional<Match>> Find(std::string_view subject, size_t from,
                                    std::vector<std::optional<Match>>* groups) const;

  // Whether the pattern matches anywhere in subject (JSON Schema's unanchored `pattern`).
  Result<bool> Search(std::string_view subject) const;

  const std::string& pattern() const;
  int group_count() const;

  struct Compiled;

 private:
  explicit Regex(std::shared_ptr<const Compiled> compiled);
  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace envforge
