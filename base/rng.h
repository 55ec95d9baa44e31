// A small seeded random generator: SplitMix64, with range draws that do not depend on the
// standard library's distributions, so one seed gives the same draws on every platform (the
// audit's probes, the search synthesizer's walks).
#pragma once

#include <cstdint>
#include <string_view>

namespace envforge {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n must be > 0. Rejection sampling: no modulo bias.
  uint64_t Below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
      x = Next();
    } while (x >= limit);
    return x % n;
  }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return Unit() < p; }

 private:
  uint64_t state_;
};

// A seed derived from `seed` and a label (FNV-1a of the label mixed in), so that each task and
// each probe family draws from its own stream.
inline uint64_t DeriveSeed(uint64_t seed, std::string_view label) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : label) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  Rng mix(seed ^ h);
  return mix.Next();
}

}  // namespace envforge
