#include "base/regex.h"

#include <doctest/doctest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace envforge {
namespace {

TEST_CASE("Regex finds the leftmost match in UTF-8 byte offsets") {
  auto regex = Regex::Compile(R"(\p{L}+)", RegexSyntax::kOniguruma);
  REQUIRE(regex.ok());
  const std::string subject = "12 héllo wörld";
  auto first = regex->Find(subject);
  REQUIRE(first.ok());
  REQUIRE(first->has_value());
  CHECK(subject.substr((*first)->begin, (*first)->end - (*first)->begin) == "héllo");
  auto second = regex->Find(subject, (*first)->end);
  REQUIRE(second.ok());
  REQUIRE(second->has_value());
  CHECK(subject.substr((*second)->begin, (*second)->end - (*second)->begin) == "wörld");
  auto none = regex->Find(subject, subject.size());
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
}

TEST_CASE("Regex Search is unanchored, as JSON Schema's pattern is") {
  auto regex = Regex::Compile(R"(^\d{3}-\d{4}$)", RegexSyntax::kPerl);
  REQUIRE(regex.ok());
  CHECK(regex->Search("555-1234").value());
  CHECK_FALSE(regex->Search("x555-1234").value());
  auto contains = Regex::Compile("es", RegexSyntax::kPerl);
  REQUIRE(contains.ok());
  CHECK(contains->Search("test").value());
}

TEST_CASE("Regex names a bad pattern") {
  auto regex = Regex::Compile("(unclosed", RegexSyntax::kPerl);
  REQUIRE_FALSE(regex.ok());
  CHECK(regex.status().code() == StatusCode::kInvalidArgument);
  CHECK(regex.status().message().find("(unclosed") != std::string::npos);
}

TEST_CASE("Regex stops a catastrophic backtrack with ResourceExhausted") {
  auto regex = Regex::Compile("^(a+)+$", RegexSyntax::kPerl);
  REQUIRE(regex.ok());
  const std::string subject = std::string(40, 'a') + "!";
  auto result = regex->Search(subject);
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("Regex Find gives the spans of capture groups") {
  auto regex = Regex::Compile(R"((\p{L}+)(?:(\d+)|(!)))", RegexSyntax::kOniguruma);
  REQUIRE(regex.ok());
  CHECK(regex->group_count() == 3);
  std::vector<std::optional<Regex::Match>> groups;
  const std::string subject = "-- héllo42 x!";
  auto first = regex->Find(subject, 0, &groups);
  REQUIRE(first.ok());
  REQUIRE(first->has_value());
  REQUIRE(groups.size() == 3);
  REQUIRE(groups[0].has_value());
  CHECK(subject.substr(groups[0]->begin, groups[0]->end - groups[0]->begin) == "héllo");
  REQUIRE(groups[1].has_value());
  CHECK(subject.substr(groups[1]->begin, groups[1]->end - groups[1]->begin) == "42");
  CHECK_FALSE(groups[2].has_value());  // the alternative not taken
  auto second = regex->Find(subject, (*first)->end, &groups);
  REQUIRE(second.ok());
  REQUIRE(second->has_value());
  REQUIRE(groups.size() == 3);
  CHECK_FALSE(groups[1].has_value());
  REQUIRE(groups[2].has_value());
  CHECK(groups[2]->begin == subject.size() - 1);
  auto none = regex->Find(subject, subject.size(), &groups);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  CHECK(groups.empty());
  CHECK(Regex::Compile("a(?:b)", RegexSyntax::kOniguruma)->group_count() == 0);
}

TEST_CASE("RegexBound::kEachMatch lets a long search that finds nothing run to its end") {
  // Every position fails after a few backtracks; over 4 MB they exceed the whole-search bound.
  const std::string subject(4 << 20, '=');
  const std::string pattern = R"([^a-z]?[a-z]+|\s+(?!\S)|\s+)";
  auto whole = Regex::Compile(pattern, RegexSyntax::kOniguruma, RegexBound::kSearch);
  auto each = Regex::Compile(pattern, RegexSyntax::kOniguruma, RegexBound::kEachMatch);
  REQUIRE(whole.ok());
  REQUIRE(each.ok());
  auto bounded = whole->Find(subject);
  REQUIRE_FALSE(bounded.ok());
  CHECK(bounded.status().code() == StatusCode::kResourceExhausted);
  auto unbounded = each->Find(subject);
  REQUIRE(unbounded.ok());
  CHECK_FALSE(unbounded->has_value());
  // A catastrophic backtrack at one position still fails under kEachMatch.
  auto catastrophic = Regex::Compile("(a+)+$", RegexSyntax::kOniguruma, RegexBound::kEachMatch);
  REQUIRE(catastrophic.ok());
  auto result = catastrophic->Find(std::string(40, 'a') + "!");
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("Regex Find runs concurrently on one Regex") {
  auto regex = Regex::Compile(R"(\p{N}+)", RegexSyntax::kOniguruma);
  REQUIRE(regex.ok());
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string subject = "x" + std::to_string(t * 1000 + 7) + "y";
      for (int i = 0; i < 2000; ++i) {
        auto match = regex->Find(subject);
        if (!match.ok() || !match->has_value() ||
            subject.substr((*match)->begin, (*match)->end - (*match)->begin) != std::to_string(t * 1000 + 7)) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(wrong.load() == 0);
}

}  // namespace
}  // namespace envforge
