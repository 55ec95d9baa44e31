#include "base/percent_decode.h"

#include <doctest/doctest.h>

namespace envforge {
namespace {

TEST_CASE("PercentDecode turns each two-hex-digit escape into its byte, either case") {
  CHECK(PercentDecode("a%20b") == "a b");
  CHECK(PercentDecode("%7e%7E") == "~~");
  CHECK(PercentDecode("%2Fdefs%2fName") == "/defs/Name");
  CHECK(PercentDecode("%00x") == std::string("\0x", 2));
  CHECK(PercentDecode("%C3%A9") == "\xC3\xA9");
  CHECK(PercentDecode("") == "");
}

TEST_CASE("PercentDecode keeps a malformed escape as it is") {
  CHECK(PercentDecode("%") == "%");
  CHECK(PercentDecode("100%") == "100%");
  CHECK(PercentDecode("%4") == "%4");
  CHECK(PercentDecode("%G1x") == "%G1x");
  CHECK(PercentDecode("%%41") == "%A");
}

TEST_CASE("PercentDecode reads '+' as a space only in form-encoded text") {
  CHECK(PercentDecode("a+b") == "a+b");
  CHECK(PercentDecode("a+b", PlusSign::kSpace) == "a b");
  CHECK(PercentDecode("a%2Bb", PlusSign::kSpace) == "a+b");
}

TEST_CASE("PercentDecodeStrict refuses a malformed escape and decodes the rest alike") {
  CHECK(PercentDecodeStrict("a%20b") == std::optional<std::string>("a b"));
  CHECK(PercentDecodeStrict("a+b") == std::optional<std::string>("a+b"));
  CHECK_FALSE(PercentDecodeStrict("%").has_value());
  CHECK_FALSE(PercentDecodeStrict("ab%4").has_value());
  CHECK_FALSE(PercentDecodeStrict("%zz").has_value());
  CHECK_FALSE(PercentDecodeStrict("%41%").has_value());
}

}  // namespace
}  // namespace envforge
