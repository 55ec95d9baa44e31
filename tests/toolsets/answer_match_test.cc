// Normalised exact match of search answers (toolsets/search/answer_match.h): the normal form, the
// verdicts, and the answer keys' checks.
#include "toolsets/search/answer_match.h"

#include <doctest/doctest.h>

#include <string>

namespace envforge::search {
namespace {

TEST_SUITE("toolsets.search.answer_match") {
  TEST_CASE("normalisation folds case, punctuation, articles, spaces and Latin diacritics") {
    CHECK(NormalizeAnswer("  The  Eiffel   Tower. ") == "eiffel tower");
    CHECK(NormalizeAnswer("An apple a day") == "apple day");
    CHECK(NormalizeAnswer("theatre") == "theatre");  // articles only as whole words
    CHECK(NormalizeAnswer("O'Brien") == "obrien");
    CHECK(NormalizeAnswer("well-known") == "well known");
    CHECK(NormalizeAnswer("well\xe2\x80\x94known") == "well known");       // an em dash separates
    CHECK(NormalizeAnswer("\xe2\x80\x9cquoted\xe2\x80\x9d") == "quoted");  // curly quotes go
    CHECK(NormalizeAnswer("\xc3\x85ngstr\xc3\xb6m") == "angstrom");        // precomposed
    CHECK(NormalizeAnswer("A\xcc\x8angstro\xcc\x88m") == "angstrom");      // decomposed (combining marks)
    CHECK(NormalizeAnswer("\xc3\x86sir") == "aesir");
    CHECK(NormalizeAnswer("Stra\xc3\x9f"
                          "e") == "strasse");
    CHECK(NormalizeAnswer("\xc5\x81\xc3\xb3"
                          "d\xc5\xba") == "lodz");
    CHECK(NormalizeAnswer("\xce\x91\xce\xb8\xce\xae\xce\xbd\xce\xb1") ==
          NormalizeAnswer("\xce\xb1\xce\xb8\xce\xae\xce\xbd\xce\xb1"));
    CHECK(NormalizeAnswer("non\xc2\xa0"
                          "breaking") == "non breaking");
    CHECK(NormalizeAnswer("C++") == "c++");
    CHECK(NormalizeAnswer("C#") != NormalizeAnswer("C"));
    CHECK(NormalizeAnswer("\xff\xfe broken") == "broken");
    CHECK(NormalizeAnswer("") == "");
  }

  TEST_CASE("numbers keep their decimal point and sign and lose thousands separators") {
    CHECK(NormalizeAnswer("3.5") == "3.5");
    CHECK(NormalizeAnswer("3.5") != NormalizeAnswer("35"));
    CHECK(NormalizeAnswer("1,000") == "1000");
    CHECK(NormalizeAnswer("1,000,000") == "1000000");
    CHECK(NormalizeAnswer("1,5") == "15");  // not three digits: a plain comma, removed
    CHECK(NormalizeAnswer("-40") == "-40");
    CHECK(NormalizeAnswer("-40") != NormalizeAnswer("40"));
    CHECK(NormalizeAnswer("Dec. 25") == "dec 25");
  }

  TEST_CASE("a verdict passes on the answer or an alias and fails on near misses") {
    const AnswerKey key{"Helium", {"He", "element 2"}};
    CHECK(MatchAnswer("helium", key).passed);
    CHECK(MatchAnswer("The Helium.", key).passed);
    CHECK(MatchAnswer("\"helium\"", key).passed);
    CHECK(MatchAnswer("HE", key).passed);
    CHECK(MatchAnswer("Element-2", key).passed);
    AnswerVerdict near = MatchAnswer("helium gas", key);
    CHECK_FALSE(near.passed);
    CHECK(near.score == 0.0);
    REQUIRE(near.reasons.size() == 1);
    CHECK(near.reasons[0].find("element") == std::string::npos);  // no alias revealed
    CHECK_FALSE(MatchAnswer("heliu", key).passed);
    CHECK_FALSE(MatchAnswer("", key).passed);
    CHECK_FALSE(MatchAnswer("the", key).passed);
    CHECK_FALSE(MatchAnswer(std::string(kMaxAnswerBytes + 1, 'h'), key).passed);
    CHECK(MatchAnswer("helium", key).score == 1.0);
    CHECK_FALSE(MatchAnswer("[\"helium\"]", key).passed);  // a JSON array, not the text
    CHECK_FALSE(MatchAnswer(" {\"answer\": \"helium\"}", key).passed);
    CHECK(MatchAnswer("[helium]", key).passed);  // not JSON: brackets are punctuation
  }

  TEST_CASE("answer keys are checked when read") {
    Result<AnswerKey> key = AnswerKeyFromJson(Json{{"answer", "Pb"}, {"aliases", {"plumbum"}}});
    REQUIRE(key.ok());
    CHECK(key->answer == "Pb");
    CHECK(ToJson(*key) == Json{{"answer", "Pb"}, {"aliases", {"plumbum"}}});
    CHECK(AnswerKeyFromJson(Json{{"answer", "x"}})->aliases.empty());
    CHECK(AnswerKeyFromJson(Json::array()).status().code() == StatusCode::kInvalidArgument);
    CHECK(AnswerKeyFromJson(Json{{"aliases", Json::array()}}).status().message().find("missing 'answer'") !=
          std::string::npos);
    CHECK(AnswerKeyFromJson(Json{{"answer", 3}}).status().code() == StatusCode::kInvalidArgument);
    CHECK(AnswerKeyFromJson(Json{{"answer", "..."}}).status().message().find("normalises to nothing") !=
          std::string::npos);
    CHECK(AnswerKeyFromJson(Json{{"answer", "x"}, {"aliases", {1}}}).status().message().find("aliases[0]") !=
          std::string::npos);
    CHECK(AnswerKeyFromJson(Json{{"answer", "x"}, {"alias", "y"}}).status().message().find("unknown key 'alias'") !=
          std::string::npos);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::search
