// Storage formats: fp8 e4m3fn codes, bf16 and fp16 rounding (ties to even), and the kernels'
// table-free fp8 decoding and fast fp8 rounding against the scalar conversions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/internal/fp8_round.h"
#include "kernels/cpu/internal/simd.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST_SUITE("kernels.float_formats") {
  TEST_CASE("every finite fp8 code round-trips through fp32 and the two NaN codes decode to NaN") {
    for (int code = 0; code < 256; ++code) {
      CAPTURE(code);
      const float value = Fp8E4M3ToFloat(static_cast<uint8_t>(code));
      if ((code & 0x7f) == 0x7f) {
        CHECK(std::isnan(value));
        continue;
      }
      const uint8_t back = FloatToFp8E4M3(value);
      if (code == 0x80) {
        CHECK(back == 0x80);  // -0 keeps its sign
      } else {
        CHECK(back == code);
      }
      CHECK(internal::Fp8BitsToFloat(static_cast<uint8_t>(code)) == value);
      CHECK(Fp8E4M3Table()[code] == value);
    }
    CHECK(Fp8E4M3ToFloat(0x7e) == 448.0f);
    CHECK(Fp8E4M3ToFloat(0x01) == std::ldexp(1.0f, -9));
    CHECK(Fp8E4M3ToFloat(0x08) == std::ldexp(1.0f, -6));
    CHECK(FloatToFp8E4M3(1000.0f) == 0x7e);
    CHECK(FloatToFp8E4M3(-1000.0f) == 0xfe);
    CHECK(FloatToFp8E4M3(std::nanf("")) == 0x7f);
  }

  TEST_CASE("fp8 rounding is to nearest with ties to even") {
    // 1.0625 lies halfway between 1.0 (mantissa 000) and 1.125 (001): ties go to 1.0.
    CHECK(RoundToFp8E4M3(1.0625f) == 1.0f);
    // 1.1875 lies halfway between 1.125 (001) and 1.25 (010): ties go to 1.25.
    CHECK(RoundToFp8E4M3(1.1875f) == 1.25f);
    // Subnormals: 1.5 * 2^-9 lies between 2^-9 and 2^-8: ties to 2^-8 (even mantissa 2).
    CHECK(RoundToFp8E4M3(1.5f * std::ldexp(1.0f, -9)) == std::ldexp(1.0f, -8));
    CHECK(RoundToFp8E4M3(0.5f * std::ldexp(1.0f, -9)) == 0.0f);
  }

  TEST_CASE("bf16 rounding is to nearest with ties to even") {
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to 1 (even).
    CHECK(FloatToBf16(FromBits(0x3f808000u)) == 0x3f80);
    // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to the even 0x3f82.
    CHECK(FloatToBf16(FromBits(0x3f818000u)) == 0x3f82);
    CHECK(FloatToBf16(FromBits(0x3f808001u)) == 0x3f81);  // just above halfway rounds up
    CHECK(Bf16ToFloat(FloatToBf16(3.140625f)) == 3.140625f);
    CHECK(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
    CHECK(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::infinity())) == std::numeric_limits<float>::infinity());
  }

  TEST_CASE("half rounding is to nearest with ties to even, with subnormals and overflow") {
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to 1.
    CHECK(FloatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
    // 1 + 3 * 2^-11 ties to 1 + 2^-9 (mantissa 2, even).
    CHECK(FloatToHalf(1.0f + 3.0f * std::ldexp(1.0f, -11)) == 0x3c02);
    CHECK(FloatToHalf(65504.0f) == 0x7bff);
    CHECK(FloatToHalf(70000.0f) == 0x7c00);
    CHECK(HalfToFloat(0x0001) == std::ldexp(1.0f, -24));
    CHECK(FloatToHalf(std::ldexp(1.0f, -25)) == 0x0000);  // halfway to the smallest subnormal: even
    CHECK(FloatToHalf(std::ldexp(3.0f, -25)) == 0x0002);
    for (int bits = 0; bits < 0x7c00; ++bits) {
      CAPTURE(bits);
      REQUIRE(FloatToHalf(HalfToFloat(static_cast<uint16_t>(bits))) == bits);
    }
  }

  TEST_CASE("the fast fp8 rounding equals FloatToFp8E4M3 on every clamped input pattern tried") {
    // All fp32 values between 2^-12 and 448 with 12 low mantissa bits varied coarsely, plus
    // midpoints between consecutive fp8 values (the tie cases), both signs.
    int mismatches = 0;
    for (uint32_t bits = 0x39800000u; bits <= 0x43e00000u; bits += 0x731u) {
      for (float sign : {1.0f, -1.0f}) {
        const float v = sign * FromBits(bits);
        const float expected = Fp8E4M3ToFloat(FloatToFp8E4M3(v));
        const float fast = internal::RoundClampedToFp8(v);
        if (fast != expected || internal::EncodeExactFp8(fast) != FloatToFp8E4M3(v)) ++mismatches;
      }
    }
    for (int code = 0; code < 0x7e; ++code) {
      const float mid =
          0.5f * (Fp8E4M3ToFloat(static_cast<uint8_t>(code)) + Fp8E4M3ToFloat(static_cast<uint8_t>(code + 1)));
      if (internal::RoundClampedToFp8(mid) != RoundToFp8E4M3(mid)) ++mismatches;
      if (internal::RoundClampedToFp8(-mid) != RoundToFp8E4M3(-mid)) ++mismatches;
    }
    CHECK(mismatches == 0);
    CHECK(internal::RoundClampedToFp8(0.0f) == 0.0f);
    CHECK(internal::RoundClampedToFp8(448.0f) == 448.0f);
    CHECK(std::isnan(internal::RoundClampedToFp8(std::nanf(""))));
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
