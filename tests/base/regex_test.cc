#include "base/regex.h"

#include <doctest/doctest.h>

#include <string>

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

}  // namespace
}  // namespace envforge
