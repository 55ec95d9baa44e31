#include <doctest/doctest.h>

#include "base/json.h"
#include "base/status.h"

namespace envforge {
namespace {

Result<int> ParsePositive(int value) {
  if (value <= 0) return InvalidArgumentError("not positive: " + std::to_string(value));
  return value;
}

Result<int> Doubled(int value) {
  ENVFORGE_ASSIGN_OR_RETURN(int checked, ParsePositive(value));
  return checked * 2;
}

TEST_CASE("Status carries a code and message; OK carries none") {
  Status ok;
  CHECK(ok.ok());
  CHECK(ok.ToString() == "OK");
  Status error = NotFoundError("no task 'x'");
  CHECK_FALSE(error.ok());
  CHECK(error.code() == StatusCode::kNotFound);
  CHECK(error.ToString() == "NotFound: no task 'x'");
  CHECK(error.WithContext("env check").message() == "env check: no task 'x'");
}

TEST_CASE("Result propagates errors through ENVFORGE_ASSIGN_OR_RETURN") {
  CHECK(Doubled(4).value() == 8);
  auto failed = Doubled(-1);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message() == "not positive: -1");
}

TEST_CASE("ParseJson reports where bad JSON breaks") {
  CHECK(ParseJson(R"({"a": [1, 2]})").value()["a"][1] == 2);
  auto bad = ParseJson("{\"a\": ", "task.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("task.json is not valid JSON") != std::string::npos);
}

}  // namespace
}  // namespace envforge
