// Integer helpers for sizes and tilings, one definition for every module (host code).
#pragma once

#include <cstdint>

namespace envforge {

// ceil(a / b) for a >= 0, b > 0: tiles of b that cover a.
constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
// The smallest multiple of b that is >= a (a >= 0, b > 0).
constexpr int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

}  // namespace envforge
