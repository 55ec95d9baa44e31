// The pre-tokenizer regex engine and the DeepSeek-V3 Split sequence. Expected splits are derived by
// hand from the pattern semantics (leftmost match, alternatives in order, greedy backtracking).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "inference/internal/pre_tokenizer.h"
#include "inference/internal/regex.h"
#include "inference/internal/unicode.h"

namespace envforge::inference::internal {
namespace {

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// All non-overlapping matches of pattern in text, as UTF-8 strings.
std::vector<std::string> FindAll(const std::string& pattern, const std::string& text) {
  auto regex = Regex::Compile(pattern);
  REQUIRE_MESSAGE(regex.ok(), regex.status().ToString());
  DecodedUtf8 decoded;
  DecodeUtf8(text, &decoded);
  std::vector<std::string> matches;
  size_t from = 0;
  while (auto match = regex->Find(decoded.code_points, from)) {
    matches.push_back(text.substr(decoded.offsets[match->begin], decoded.offsets[match->end] - decoded.offsets[match->begin]));
    from = match->end > match->begin ? match->end : match->begin + 1;
    if (from > decoded.code_points.size()) break;
  }
  return matches;
}

using Pieces = std::vector<std::string>;

void CheckUnsupported(const std::string& pattern, const std::string& construct) {
  auto regex = Regex::Compile(pattern);
  REQUIRE_FALSE(regex.ok());
  CHECK(regex.status().code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(Contains(regex.status().message(), construct), regex.status().message());
}

// The pre_tokenizer of the committed tiny tokenizer, which carries DeepSeek-V3's three patterns.
const PreTokenizer& DeepSeekPreTokenizer() {
  static const PreTokenizer pre_tokenizer = [] {
    auto text = ReadFileToString(std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/fixtures/tokenizer/tiny/tokenizer.json");
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

TEST_SUITE("inference.tokenizer.regex") {

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

TEST_CASE("case-insensitive groups fold ASCII letters") {
  CHECK(FindAll("(?i:'s|'re)", "IT'S THEY'RE it's") == Pieces{"'S", "'RE", "'s"});
}

TEST_CASE("anchors") {
  CHECK(FindAll("\\s+$", "a  \nb  ") == Pieces{"  ", "  "});
  CHECK(FindAll("^\\w", "ab\ncd") == Pieces{"a", "c"});
  CHECK(FindAll("\\Aa", "aa") == Pieces{"a"});
  CHECK(FindAll("a\\z", "aa") == Pieces{"a"});
}

TEST_CASE("unsupported constructs are errors naming them") {
  CheckUnsupported("(?<=a)b", "lookbehind");
  CheckUnsupported("(?>a)", "atomic group");
  CheckUnsupported("a++", "possessive");
  CheckUnsupported("(a)\\1", "backreference");
  CheckUnsupported("\\bword", "word boundary");
  CheckUnsupported("[\\p{L}&&[^a]]", "class intersection");
  CheckUnsupported("\\p{Han}", "\\p{Han}");
  CheckUnsupported("(a*)*", "can match empty");
  CheckUnsupported("(?x)a", "group flag");
  auto unbalanced = Regex::Compile("(ab");
  REQUIRE_FALSE(unbalanced.ok());
  CHECK(Contains(unbalanced.status().message(), "missing ')'"));
  CHECK(Contains(unbalanced.status().message(), "offset 3"));
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
  CHECK(Split("한국어 text") == Pieces{"한국어", " text"});  // Hangul is outside the CJK pattern
  CHECK(Split("e\u0301te\u0301") == Pieces{"e\u0301te\u0301"});  // marks stay with their letters
}

TEST_CASE("invalid UTF-8 passes through as its own bytes") {
  const std::string text = "ab\xff\xfe" "cd";
  Pieces pieces = Split(text);
  std::string joined;
  for (const auto& piece : pieces) joined += piece;
  CHECK(joined == text);
}

TEST_CASE("pre_tokenizer JSON errors name the step") {
  auto bad_type = PreTokenizer::FromJson(Json::parse(R"({"type": "Whitespace"})"));
  REQUIRE_FALSE(bad_type.ok());
  CHECK(Contains(bad_type.status().message(), "pre_tokenizer.type"));
  auto bad_regex = PreTokenizer::FromJson(Json::parse(
      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?<=x)y"}, "behavior": "Isolated"}]})"));
  REQUIRE_FALSE(bad_regex.ok());
  CHECK(Contains(bad_regex.status().message(), "pre_tokenizer.pretokenizers[0].pattern"));
  CHECK(Contains(bad_regex.status().message(), "lookbehind"));
  auto bad_behavior = PreTokenizer::FromJson(Json::parse(
      R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"})"));
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
