// The pre-tokenizer: the Oniguruma semantics its Split patterns rely on, the DeepSeek-V3 Split
// sequence, Split behaviors, invalid UTF-8 and the batched search. Expected splits are derived by
// hand from the pattern semantics (leftmost match, alternatives in order, greedy backtracking).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "base/regex.h"
#include "inference/internal/pre_tokenizer.h"

namespace envforge::inference::internal {
namespace {

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// All non-overlapping non-empty matches of an Oniguruma pattern in text, as a Split step finds them.
std::vector<std::string> FindAll(const std::string& pattern, const std::string& text) {
  auto regex = Regex::Compile(pattern, RegexSyntax::kOniguruma, RegexBound::kEachMatch);
  REQUIRE_MESSAGE(regex.ok(), regex.status().ToString());
  std::vector<std::string> matches;
  size_t from = 0;
  while (from <= text.size()) {
    auto match = regex->Find(text, from);
    REQUIRE(match.ok());
    if (!match->has_value()) break;
    const auto [begin, end] = **match;
    if (end > begin) matches.push_back(text.substr(begin, end - begin));
    from = end > begin ? end : begin + 1;  // ASCII subjects only when matches may be empty
  }
  return matches;
}

using Pieces = std::vector<std::string>;

// The pre_tokenizer of the committed tiny tokenizer, which carries DeepSeek-V3's three patterns.
const PreTokenizer& DeepSeekPreTokenizer() {
  static const PreTokenizer pre_tokenizer = [] {
    auto text =
        ReadFileToString(std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/fixtures/tokenizer/tiny/tokenizer.json");
    REQUIRE(text.ok());
    auto json = ParseJson(*text);
    REQUIRE(json.ok());
    auto pre = PreTokenizer::FromJson((*json)["pre_tokenizer"]);
    REQUIRE_MESSAGE(pre.ok(), pre.status().ToString());
    return std::move(pre).value();
  }();
  return pre_tokenizer;
}

Pieces Split(const std::string& text) {
  Pieces pieces;
  DeepSeekPreTokenizer().Split(text, &pieces);
  return pieces;
}

// The pieces of one Split step with pattern `regex`.
Pieces SplitWith(const std::string& regex, const std::string& text, const char* behavior = "Isolated") {
  Json json = {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", behavior}};
  auto pre = PreTokenizer::FromJson(json);
  REQUIRE_MESSAGE(pre.ok(), pre.status().ToString());
  Pieces pieces;
  pre->Split(text, &pieces);
  return pieces;
}

TEST_SUITE("inference.tokenizer.pre_tokenizer") {
  TEST_CASE("alternatives are tried in order, not longest first") {
    CHECK(FindAll("a|ab", "ab") == Pieces{"a"});
    CHECK(FindAll("ab|a", "ab") == Pieces{"ab"});
    CHECK(FindAll("x(?:a|ab)c", "xabc") == Pieces{"xabc"});  // backtracks into the second branch
  }

  TEST_CASE("quantifiers: greedy, lazy and counted") {
    CHECK(FindAll("\\p{N}{1,3}", "1234567") == Pieces{"123", "456", "7"});
    CHECK(FindAll("a{2}", "aaaaa") == Pieces{"aa", "aa"});
    CHECK(FindAll("a{2,}", "aaaaa b aa") == Pieces{"aaaaa", "aa"});
    CHECK(FindAll("a{,2}b", "aaab") == Pieces{"aab"});
    CHECK(FindAll("<.+>", "<a><b>") == Pieces{"<a><b>"});
    CHECK(FindAll("<.+?>", "<a><b>") == Pieces{"<a>", "<b>"});
    CHECK(FindAll("colou?r", "color colour") == Pieces{"color", "colour"});
    CHECK(FindAll("x*y", "xxy y") == Pieces{"xxy", "y"});
    CHECK(FindAll("a{x", "a{x") == Pieces{"a{x"});  // not an interval: a literal brace
  }

  TEST_CASE("lookahead") {
    // \s+(?!\S): white space not followed by a non-space; the last space is left for the word.
    CHECK(FindAll("\\s+(?!\\S)", "a   b") == Pieces{"  "});
    CHECK(FindAll("\\s+(?!\\S)", "a   ") == Pieces{"   "});
    CHECK(FindAll("a(?=b)", "ac ab") == Pieces{"a"});
    CHECK(FindAll("\\d+(?!px)", "12px 34") == Pieces{"1", "34"});
  }

  TEST_CASE("classes: ranges, negation, categories and escapes") {
    CHECK(FindAll("[a-c]+", "abcdcba") == Pieces{"abc", "cba"});
    CHECK(FindAll("[^a-c]+", "abcdcba") == Pieces{"d"});
    CHECK(FindAll("\\p{L}+", "héllo wörld 42 日本") == Pieces{"héllo", "wörld", "日本"});
    CHECK(FindAll("\\p{Lu}", "aBcD") == Pieces{"B", "D"});
    CHECK(FindAll("\\P{L}+", "ab12cd") == Pieces{"12"});
    CHECK(FindAll("[\\p{P}\\p{S}]+", "a+b!?c") == Pieces{"+", "!?"});
    CHECK(FindAll("[^\\r\\n\\p{L}]+", "ab 1\n2") == Pieces{" 1", "2"});
    CHECK(FindAll("[\\-\\]]+", "a-]b") == Pieces{"-]"});
    CHECK(FindAll("[一-龥]+", "abc中文def") == Pieces{"中文"});
    CHECK(FindAll("\\x41\\u0042\\x{43}", "ABC") == Pieces{"ABC"});
    CHECK(FindAll("\\s", "a\u00a0b\u3000c\x1f") == Pieces{"\u00a0", "\u3000"});  // U+001F is not \s
    CHECK(FindAll("\\w+", "foo_bar-baz") == Pieces{"foo_bar", "baz"});
  }

  TEST_CASE("case-insensitive groups") {
    CHECK(FindAll("(?i:'s|'re)", "IT'S THEY'RE it's") == Pieces{"'S", "'RE", "'s"});
  }

  TEST_CASE("anchors") {
    CHECK(FindAll("\\s+$", "a  \nb  ") == Pieces{"  ", "  "});
    CHECK(FindAll("^\\w", "ab\ncd") == Pieces{"a", "c"});
    CHECK(FindAll("\\Aa", "aa") == Pieces{"a"});
    CHECK(FindAll("a\\z", "aa") == Pieces{"a"});
  }

  TEST_CASE("constructs beyond the common subset: lookbehind, atomic groups, word boundaries, scripts") {
    CHECK(FindAll("(?<=a)b", "ab cb") == Pieces{"b"});
    CHECK(FindAll("(?>a+)b", "aab") == Pieces{"aab"});
    CHECK(FindAll("a++a", "aaa").empty());  // possessive: gives nothing back
    CHECK(FindAll("\\bis\\b", "this is") == Pieces{"is"});
    CHECK(FindAll("\\p{Han}+", "abc中文def") == Pieces{"中文"});
  }

  TEST_CASE("a bad pattern is InvalidArgument naming it") {
    auto unbalanced = Regex::Compile("(ab", RegexSyntax::kOniguruma);
    REQUIRE_FALSE(unbalanced.ok());
    CHECK(unbalanced.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(unbalanced.status().message(), "(ab"));
  }

  TEST_CASE("DeepSeek-V3 pre-tokenizer: digits in groups of three") {
    CHECK(Split("1234567") == Pieces{"123", "456", "7"});
    CHECK(Split("abc123def") == Pieces{"abc", "123", "def"});
    CHECK(Split("$100.50") == Pieces{"$", "100", ".", "50"});
    CHECK(Split("Numbers: 1234567 and 3.14159") ==
          Pieces{"Numbers", ":", " ", "123", "456", "7", " and", " ", "3", ".", "141", "59"});
  }

  TEST_CASE("DeepSeek-V3 pre-tokenizer: contractions and punctuation") {
    // A punctuation character directly before letters joins them ("'re", ".bar").
    CHECK(Split("We're") == Pieces{"We", "'re"});
    CHECK(Split("foo.bar") == Pieces{"foo", ".bar"});
    CHECK(Split("(x)") == Pieces{"(x", ")"});
    CHECK(Split("Hello!!! world") == Pieces{"Hello", "!!!", " world"});
    CHECK(Split("a, b") == Pieces{"a", ",", " b"});
    CHECK(Split("x = y;\n") == Pieces{"x", " =", " y", ";\n"});
    CHECK(Split("🙂🙂 ok") == Pieces{"🙂🙂", " ok"});
  }

  TEST_CASE("DeepSeek-V3 pre-tokenizer: white space and newlines") {
    CHECK(Split("a\n\nb") == Pieces{"a", "\n\n", "b"});
    CHECK(Split("x  \n y") == Pieces{"x", "  \n", " y"});
    CHECK(Split("   end") == Pieces{"  ", " end"});
    CHECK(Split("end   ") == Pieces{"end", "   "});
    CHECK(Split("\tTab") == Pieces{"\tTab"});  // one non-letter, non-newline character joins the word
    CHECK(Split("line one\n\n  indented") == Pieces{"line", " one", "\n\n", " ", " indented"});
  }

  TEST_CASE("DeepSeek-V3 pre-tokenizer: CJK and combining marks") {
    CHECK(Split("中文abc日本") == Pieces{"中文", "abc", "日本"});
    CHECK(Split("中文分词 and 日本語のテキスト") == Pieces{"中文分词", " and", " ", "日本語のテキスト"});
    CHECK(Split("한국어 text") == Pieces{"한국어", " text"});      // Hangul is outside the CJK pattern
    CHECK(Split("e\u0301te\u0301") == Pieces{"e\u0301te\u0301"});  // marks stay with their letters
  }

  TEST_CASE("invalid UTF-8 passes through as its own bytes") {
    const std::string text =
        "ab\xff\xfe"
        "cd";
    Pieces pieces = Split(text);
    std::string joined;
    for (const auto& piece : pieces) joined += piece;
    CHECK(joined == text);
  }

  TEST_CASE("an invalid byte is no letter, digit, punctuation or space, and only negations match it") {
    // [^\r\n\p{L}\p{P}\p{S}]? takes the byte in front of the letters.
    CHECK(Split("ab \xff"
                "cd") == Pieces{"ab", " ",
                                "\xff"
                                "cd"});
    CHECK(SplitWith("\\p{L}+",
                    "ab\xff"
                    "cd") == Pieces{"ab", "\xff", "cd"});
    CHECK(SplitWith("\\s+", "a\xff \xfe") == Pieces{"a\xff", " ", "\xfe"});
    CHECK(SplitWith("\\S+", "a\xff \xfe") == Pieces{"a\xff", " ", "\xfe"});
    CHECK(SplitWith("[^a]", "a\xc3(a") == Pieces{"a", "\xc3", "(", "a"});
    CHECK(SplitWith(".", "\xed\xa0\x80") == Pieces{"\xed", "\xa0", "\x80"});  // a surrogate: three bytes
    // Truncated and overlong sequences, and a valid character beside them.
    CHECK(SplitWith("\\p{L}",
                    "\xe4\xb8"
                    "é\xc0\xaf") == Pieces{"\xe4\xb8", "é", "\xc0\xaf"});
  }

  TEST_CASE("empty matches split nothing, also between multi-byte characters") {
    CHECK(SplitWith("x*", "éxxé") == Pieces{"é", "xx", "é"});
    CHECK(SplitWith("(?=é)", "aéb") == Pieces{"aéb"});
  }

  TEST_CASE("batched searches split as single searches do") {
    // A pattern with a capture group is searched one match at a time; without one, up to eight
    // matches come from one search. Both must give the same pieces.
    const std::vector<std::string> patterns = {
        "\\p{N}{1,3}",
        "a|ab",
        "ab|a",
        "x*",
        "\\s+(?!\\S)|\\s+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
        "(?i:'s|'re)|\\w+",
        "(?<=a)b|c",
        "^\\w|\\w$",
        "[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+",
    };
    const std::vector<std::string> texts = {
        "1234567890123 45 6",
        "abababaab aaa",
        "x xx xxx é x",
        "a   b \n\n  c   ",
        "We're here, aren't we? IT'S 12345 o'clock\t\tand   THEY'RE  gone\n",
        "abcab cb ccc",
        "line one\nline two\n",
        "中文 text, 日本語! \xff\xfe ok 🙂🙂 e\u0301",
    };
    for (const std::string& pattern : patterns) {
      for (const std::string& text : texts) {
        for (const char* behavior : {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"}) {
          CHECK_MESSAGE(SplitWith(pattern, text, behavior) == SplitWith("(" + pattern + ")", text, behavior), pattern,
                        " on ", text, " ", behavior);
        }
      }
    }
  }

  TEST_CASE("a long text that no alternative matches is one piece, not a failed search") {
    // A retry limit on the whole search would give up here; the pre-tokenizer bounds each attempt.
    const std::string text(1 << 20, '\x01');
    CHECK(Split(text) == Pieces{text});
  }

  TEST_CASE("String patterns are literal, escaped as Hugging Face escapes them") {
    auto split = [](const std::string& literal, const std::string& text) {
      Json json = {{"type", "Split"}, {"pattern", {{"String", literal}}}, {"behavior", "Isolated"}};
      auto pre = PreTokenizer::FromJson(json);
      REQUIRE_MESSAGE(pre.ok(), pre.status().ToString());
      Pieces pieces;
      pre->Split(text, &pieces);
      return pieces;
    };
    CHECK(split("a.b", "axb a.b") == Pieces{"axb ", "a.b"});
    CHECK(split("(#)", "x(#)y") == Pieces{"x", "(#)", "y"});
    CHECK(split("\\d", "1\\d") == Pieces{"1", "\\d"});
    CHECK(split("<|>", "a<|>b") == Pieces{"a", "<|>", "b"});
    CHECK(split(" ", "a b") == Pieces{"a", " ", "b"});
  }

  TEST_CASE("pre_tokenizer JSON errors name the step") {
    auto bad_type = PreTokenizer::FromJson(Json::parse(R"({"type": "Whitespace"})"));
    REQUIRE_FALSE(bad_type.ok());
    CHECK(Contains(bad_type.status().message(), "pre_tokenizer.type"));
    auto bad_regex = PreTokenizer::FromJson(Json::parse(
        R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(x"}, "behavior": "Isolated"}]})"));
    REQUIRE_FALSE(bad_regex.ok());
    CHECK(Contains(bad_regex.status().message(), "pre_tokenizer.pretokenizers[0].pattern"));
    CHECK(Contains(bad_regex.status().message(), "'(x'"));
    auto bad_behavior =
        PreTokenizer::FromJson(Json::parse(R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"})"));
    REQUIRE_FALSE(bad_behavior.ok());
    CHECK(Contains(bad_behavior.status().message(), "Sideways"));
  }

  TEST_CASE("Split behaviors and String patterns") {
    auto split = [](const char* behavior, const std::string& text) {
      Json json = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}};
      auto pre = PreTokenizer::FromJson(json);
      REQUIRE(pre.ok());
      Pieces pieces;
      pre->Split(text, &pieces);
      return pieces;
    };
    CHECK(split("Isolated", "a-b--c") == Pieces{"a", "-", "b", "-", "-", "c"});
    CHECK(split("Removed", "a-b--c") == Pieces{"a", "b", "c"});
    CHECK(split("MergedWithPrevious", "a-b-c") == Pieces{"a-", "b-", "c"});
    CHECK(split("MergedWithNext", "a-b-c") == Pieces{"a", "-b", "-c"});
    CHECK(split("Contiguous", "a--b") == Pieces{"a", "--", "b"});
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference::internal
