#include <doctest/doctest.h>

#include "base/sha256.h"

namespace envforge {
namespace {

TEST_CASE("SHA-256 matches the FIPS 180-2 test vectors") {
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("UpdateField separates fields so that boundaries matter") {
  Sha256 a, b;
  a.UpdateField("ab");
  a.UpdateField("c");
  b.UpdateField("a");
  b.UpdateField("bc");
  CHECK(a.FinishHex() != b.FinishHex());
}

}  // namespace
}  // namespace envforge
