// Normalised exact match of search answers (answer_match.h).
#include "toolsets/search/answer_match.h"

#include <algorithm>
#include <cstdint>
#include <set>

namespace envforge::search {
namespace {

// One letter per code point of U+00C0..U+00FF and U+0100..U+017F without its diacritic; the
// digits stand for two-letter folds and ' ' for the two signs of the block (x and ÷).
constexpr std::string_view kLatin1Letters = "aaaaaa1ceeeeiiiidnooooo ouuuuy23aaaaaa1ceeeeiiiidnooooo ouuuuy2y";
constexpr std::string_view kLatinExtendedALetters =
    "aaaaaaccccccccddddeeeeeeeeeegggggggghhhhiiiiiiiiii44jjkkkllllllllllnnnnnnnnnoooooo55rrrrrrssssssssttttttuuuuuuuuuu"
    "uu"
    "wwyyyzzzzzzs";
static_assert(kLatin1Letters.size() == 64);
static_assert(kLatinExtendedALetters.size() == 128);

std::string_view ExpandFold(char letter) {
  switch (letter) {
    case '1': return "ae";
    case '2': return "th";
    case '3': return "ss";
    case '4': return "ij";
    case '5': return "oe";
    default: return {};
  }
}

// Decodes UTF-8; an invalid byte becomes U+FFFD (a separator below).
std::vector<char32_t> DecodeUtf8(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    size_t extra = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 0;
    char32_t code = c & (0x3F >> extra);
    bool valid = extra != 0;
    for (size_t k = 1; valid && k <= extra; ++k) {
      valid = i + k < text.size() && (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
      if (valid) code = (code << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    if (!valid) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(code);
    i += extra + 1;
  }
  return out;
}

void AppendUtf8(char32_t code, std::string* out) {
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else if (code < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

bool IsDigit(char32_t c) { return c >= '0' && c <= '9'; }

bool IsSeparator(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '-' || c == '/' ||
         c == '_' || c == '&' || c == 0xA0 || c == 0xD7 || c == 0xF7 || c == 0x3000 || c == 0x2212 || c == 0xFFFD ||
         (c >= 0x2000 && c <= 0x200A) || (c >= 0x2010 && c <= 0x2015) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F;
}

// Punctuation and invisible characters that are removed (not separators).
bool IsRemoved(char32_t c) {
  if (c < 0x80) {
    bool alphanumeric = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    return !alphanumeric && c != '+' && c != '#';  // "C++" and "C#" stay apart from "C"
  }
  if (c >= 0x300 && c <= 0x36F) return true;    // combining marks
  if (c >= 0x2000 && c <= 0x206F) return true;  // general punctuation (separators were taken first)
  if (c == 0xFEFF) return true;
  static const std::set<char32_t> kLatin1Punctuation = {0xA1, 0xA6, 0xA7, 0xA8, 0xAB, 0xAC, 0xAD,
                                                        0xAF, 0xB4, 0xB6, 0xB7, 0xB8, 0xBB, 0xBF};
  return kLatin1Punctuation.contains(c);
}

// Lower case without diacritics, as UTF-8 appended to out.
void AppendFolded(char32_t c, std::string* out) {
  if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
  if (c >= 0xC0 && c <= 0x17F) {
    char letter = c <= 0xFF ? kLatin1Letters[c - 0xC0] : kLatinExtendedALetters[c - 0x100];
    std::string_view expanded = ExpandFold(letter);
    if (expanded.empty()) {
      out->push_back(letter);
    } else {
      out->append(expanded);
    }
    return;
  }
  if ((c >= 0x391 && c <= 0x3A9 && c != 0x3A2) || (c >= 0x410 && c <= 0x42F)) c += 0x20;  // Greek, Cyrillic
  if (c >= 0x400 && c <= 0x40F) c += 0x50;
  AppendUtf8(c, out);
}

// A decimal point: '.' between two digits.
bool IsDecimalPoint(const std::vector<char32_t>& codes, size_t at, const std::string& out) {
  bool digit_before = !out.empty() && out.back() >= '0' && out.back() <= '9';
  bool digit_after = at + 1 < codes.size() && IsDigit(codes[at + 1]);
  return digit_before && digit_after && codes[at] == '.';
}

// ',' after a digit and before exactly three digits ("1,000").
bool IsThousandsSeparator(const std::vector<char32_t>& codes, size_t at, const std::string& out) {
  if (codes[at] != ',' || out.empty() || out.back() < '0' || out.back() > '9') return false;
  size_t digits = 0;
  while (at + 1 + digits < codes.size() && IsDigit(codes[at + 1 + digits])) ++digits;
  return digits == 3;
}

std::string DropArticlesAndCollapse(const std::string& spaced) {
  std::string out;
  size_t i = 0;
  while (i < spaced.size()) {
    size_t end = spaced.find(' ', i);
    if (end == std::string::npos) end = spaced.size();
    std::string_view word(spaced.data() + i, end - i);
    if (!word.empty() && word != "a" && word != "an" && word != "the") {
      if (!out.empty()) out.push_back(' ');
      out.append(word);
    }
    i = end + 1;
  }
  return out;
}

// A submission that is a JSON array or object: the answer schema of search tasks is a string, and
// normalisation would otherwise strip the brackets and quotes (["x"] would pass for x).
bool IsJsonContainer(std::string_view submitted) {
  size_t first = submitted.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || (submitted[first] != '[' && submitted[first] != '{')) return false;
  Result<Json> parsed = ParseJson(submitted, "answer_text");
  return parsed.ok() && (parsed->is_array() || parsed->is_object());
}

std::string Unwrapped(std::string_view submitted) {
  if (submitted.size() < 2 || submitted.front() != '"') return std::string(submitted);
  Result<Json> parsed = ParseJson(submitted, "answer_text");
  if (parsed.ok() && parsed->is_string()) return parsed->get<std::string>();
  return std::string(submitted);
}

}  // namespace

std::string NormalizeAnswer(std::string_view text) {
  const std::vector<char32_t> codes = DecodeUtf8(text);
  std::string spaced;
  spaced.reserve(text.size());
  for (size_t at = 0; at < codes.size(); ++at) {
    char32_t c = codes[at];
    if (c == '.' && IsDecimalPoint(codes, at, spaced)) {
      spaced.push_back('.');
    } else if (IsThousandsSeparator(codes, at, spaced)) {
      continue;
    } else if ((c == '-' || c == 0x2212) && at + 1 < codes.size() && IsDigit(codes[at + 1]) &&
               (spaced.empty() || spaced.back() == ' ')) {
      spaced.push_back('-');  // a negative number keeps its sign
    } else if (IsSeparator(c)) {
      if (!spaced.empty() && spaced.back() != ' ') spaced.push_back(' ');
    } else if (!IsRemoved(c)) {
      AppendFolded(c, &spaced);
    }
  }
  return DropArticlesAndCollapse(spaced);
}

Json ToJson(const AnswerKey& key) { return Json{{"answer", key.answer}, {"aliases", key.aliases}}; }

Result<AnswerKey> AnswerKeyFromJson(const Json& json) {
  if (!json.is_object()) return InvalidArgumentError("answer key: must be a JSON object {\"answer\", \"aliases\"}");
  for (const auto& [name, value] : json.items()) {
    if (name != "answer" && name != "aliases") {
      return InvalidArgumentError("answer key: unknown key '" + name + "' (allowed: answer, aliases)");
    }
  }
  auto check = [](const Json& value, const std::string& what) -> Status {
    if (!value.is_string()) return InvalidArgumentError("answer key: " + what + " must be a string");
    const std::string& text = value.get_ref<const std::string&>();
    if (text.size() > kMaxAnswerBytes) {
      return InvalidArgumentError("answer key: " + what + " is longer than " + std::to_string(kMaxAnswerBytes) +
                                  " bytes");
    }
    if (NormalizeAnswer(text).empty()) {
      return InvalidArgumentError("answer key: " + what + " '" + text +
                                  "' normalises to nothing (only punctuation or articles)");
    }
    return Status::Ok();
  };
  auto answer = json.find("answer");
  if (answer == json.end()) return InvalidArgumentError("answer key: missing 'answer'");
  ENVFORGE_RETURN_IF_ERROR(check(*answer, "'answer'"));
  AnswerKey key;
  key.answer = answer->get<std::string>();
  if (auto aliases = json.find("aliases"); aliases != json.end()) {
    if (!aliases->is_array()) return InvalidArgumentError("answer key: 'aliases' must be an array of strings");
    for (size_t i = 0; i < aliases->size(); ++i) {
      ENVFORGE_RETURN_IF_ERROR(check((*aliases)[i], "aliases[" + std::to_string(i) + "]"));
      key.aliases.push_back((*aliases)[i].get<std::string>());
    }
  }
  return key;
}

AnswerVerdict MatchAnswer(std::string_view submitted, const AnswerKey& key) {
  AnswerVerdict verdict;
  if (submitted.size() > kMaxAnswerBytes) {
    verdict.reasons.push_back("the answer is longer than " + std::to_string(kMaxAnswerBytes) +
                              " bytes: submit the short answer alone");
    return verdict;
  }
  if (IsJsonContainer(submitted)) {
    verdict.reasons.push_back("the answer is a JSON array or object: submit the answer alone, as text");
    return verdict;
  }
  const std::string normal = NormalizeAnswer(Unwrapped(submitted));
  if (normal.empty()) {
    verdict.reasons.push_back("the answer is empty once normalised (case, punctuation and articles removed)");
    return verdict;
  }
  if (normal == NormalizeAnswer(key.answer)) {
    verdict.passed = true;
    verdict.reasons.push_back("matches the answer (normalised exact match)");
  } else {
    for (const std::string& alias : key.aliases) {
      if (normal == NormalizeAnswer(alias)) {
        verdict.passed = true;
        verdict.reasons.push_back("matches an accepted alias of the answer (normalised exact match)");
        break;
      }
    }
  }
  if (!verdict.passed) {
    verdict.reasons.push_back("'" + normal + "' (normalised) matches neither the answer nor any of its " +
                              std::to_string(key.aliases.size()) + " aliases");
  }
  verdict.score = verdict.passed ? 1.0 : 0.0;
  return verdict;
}

}  // namespace envforge::search
