// The verdict of a search task: normalised exact match of a submitted answer against the task's
// answer and its alias set (real-envs.md 4.4, "normalised EM + alias list"). Deterministic and
// offline; a rubric judge (answer_judge.h) may decide near misses beside it, never instead of it.
//
// Normalisation (NormalizeAnswer), in order:
//   1. A submitted text that is a JSON string ("\"Paris\"") is unwrapped first (MatchAnswer only).
//   2. UTF-8 is decoded; bytes that are not UTF-8 count as separators.
//   3. Letters fold to lower case without diacritics: ASCII, Latin-1 and Latin Extended-A
//      ("Ångström" -> "angstrom", "Æ" -> "ae", "ß" -> "ss"), Greek and Cyrillic capitals to their
//      small letters; combining marks (U+0300-U+036F) are dropped, so a decomposed "e\u0301" and
//      a precomposed "é" agree. That is the cheap part of Unicode normalisation; other scripts
//      compare code point by code point.
//   4. Separators: white space (Unicode spaces included), hyphens and dashes, '/', '_' and '&'
//      become one space. Other punctuation (ASCII and the General Punctuation block: quotes,
//      ellipses, ...) is removed, with two exceptions that keep numbers apart: '.' between two
//      digits stays ("3.5" is not "35"), and ',' between digits followed by exactly three digits
//      is a thousands separator, removed ("1,000" is "1000").
//   5. The English articles "a", "an" and "the" are dropped as whole words; spaces collapse.
// A near miss ("helium gas" for "helium", "Pari" for "Paris") fails unless it is an alias.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::search {

// Longer submissions fail without being normalised (no accepted answer is that long).
inline constexpr size_t kMaxAnswerBytes = 4096;

struct AnswerKey {
  std::string answer;                // the ground truth, as a person writes it
  std::vector<std::string> aliases;  // other accepted forms ("Au" for "gold"); may be empty
};

// {"answer": string, "aliases": [string...]} ("aliases" optional when parsing).
Json ToJson(const AnswerKey& key);
// InvalidArgument naming the problem: not an object, an unknown key, "answer" missing or not a
// string, "aliases" not an array of strings, an answer or alias that normalises to nothing or is
// longer than kMaxAnswerBytes.
Result<AnswerKey> AnswerKeyFromJson(const Json& json);

// The normal form above. Pure; any input (invalid UTF-8 included).
std::string NormalizeAnswer(std::string_view text);

struct AnswerVerdict {
  bool passed = false;
  double score = 0;                  // 1 when passed, else 0
  std::vector<std::string> reasons;  // for the model: never reveal the answer or an alias
};

// The verdict for `submitted` (submit_result's answer_text). Passes when its normal form is
// non-empty and equals the normal form of the answer or of one alias; a JSON array or object
// ("[\"x\"]", {"answer": "x"}) fails whatever it holds (the answer schema is a string).
AnswerVerdict MatchAnswer(std::string_view submitted, const AnswerKey& key);

}  // namespace envforge::search
