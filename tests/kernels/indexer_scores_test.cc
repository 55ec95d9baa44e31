// Lightning-indexer scores: fast == ref, causal masking, and the formula on a tiny case.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/indexer_scores.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct IndexerCase {
  std::vector<uint8_t> q, keys;
  std::vector<float> weights, key_scales;
  std::vector<int64_t> key_end;
  IndexerScoresArgs args;
};

IndexerCase MakeCase(int64_t queries, int64_t heads, int64_t dim, int64_t keys, bool causal, uint32_t seed) {
  IndexerCase c;
  c.q = testing::RandomFp8Codes(static_cast<size_t>(queries * heads * dim), seed);
  c.keys = testing::RandomFp8Codes(static_cast<size_t>(keys * dim), seed + 1);
  // Clearing bit 5 caps the exponent field at 11 (|v| <= 30): sums stay far from fp32 limits.
  for (uint8_t& v : c.q) v &= 0xdf;
  for (uint8_t& v : c.keys) v &= 0xdf;
  c.weights = testing::RandomFloats(static_cast<size_t>(queries * heads), seed + 2, 0.1f);
  c.key_scales = testing::RandomFloats(static_cast<size_t>(keys), seed + 3);
  for (float& s : c.key_scales) s = std::fabs(s) + 0.1f;
  if (causal) {
    for (int64_t t = 0; t < queries; ++t) c.key_end.push_back(keys - queries + t + 1);
  }
  c.args.q = c.q.data();
  c.args.head_weight = c.weights.data();
  c.args.keys = c.keys.data();
  c.args.key_scale = c.key_scales.data();
  c.args.key_end = causal ? c.key_end.data() : nullptr;
  c.args.queries = queries;
  c.args.heads = heads;
  c.args.dim = dim;
  c.args.keys_count = keys;
  return c;
}

void CheckFastMatchesRef(int64_t queries, int64_t heads, int64_t dim, int64_t keys, bool causal) {
  CAPTURE(queries);
  CAPTURE(heads);
  CAPTURE(dim);
  CAPTURE(keys);
  CAPTURE(causal);
  IndexerCase c = MakeCase(queries, heads, dim, keys, causal, static_cast<uint32_t>(queries * 7 + keys));
  std::vector<float> expected(static_cast<size_t>(queries * keys)), actual(expected.size());
  ref::IndexerScores(c.args, expected.data());
  testing::OnEveryPath([&] {
    std::fill(actual.begin(), actual.end(), 1.0f);
    IndexerScores(c.args, actual.data());
    std::vector<float> finite_expected, finite_actual;
    bool masks_agree = true;
    for (size_t i = 0; i < expected.size(); ++i) {
      if (expected[i] == kNegInf || actual[i] == kNegInf) {
        masks_agree = masks_agree && expected[i] == actual[i];
      } else {
        finite_expected.push_back(expected[i]);
        finite_actual.push_back(actual[i]);
      }
    }
    CHECK(masks_agree);
    // fp32 sums in another order; the ReLU can flip only for dot products at rounding level.
    CHECK(testing::RelativeError(finite_actual, finite_expected) < 1e-5);
  });
}

TEST_SUITE("kernels.indexer_scores") {
  TEST_CASE("fast indexer scores match ref for decode and prefill shapes") {
    CheckFastMatchesRef(1, 64, 128, 1037, false);  // decode: one query, many keys, odd count
    CheckFastMatchesRef(1, 5, 128, 3, false);      // odd heads, fewer keys than a step of 4
    CheckFastMatchesRef(9, 4, 128, 300, true);     // prefill with a causal key end per query
    CheckFastMatchesRef(2, 13, 72, 50, true);      // dim a multiple of 8 but not of 16
    CheckFastMatchesRef(3, 3, 20, 41, true);       // dim not a multiple of 8: portable loop
    CheckFastMatchesRef(2, 2, 64, 0, false);       // no keys
  }

  // Decode-like multi-query calls: many queries over the same keys with scattered key ends (some at
  // or before a block start, some mid-block, some 0). Each row must be bitwise the row that a
  // one-query call computes, and close to ref.
  void CheckMultiQueryMatchesSingleQuery(int64_t queries, int64_t heads, int64_t dim, int64_t keys, uint32_t seed) {
    CAPTURE(queries);
    CAPTURE(heads);
    CAPTURE(dim);
    CAPTURE(keys);
    IndexerCase c = MakeCase(queries, heads, dim, keys, false, seed);
    for (int64_t t = 0; t < queries; ++t) {
      const int64_t end = t % 5 == 0 ? keys : (t * 37 + static_cast<int64_t>(seed)) % (keys + 1);
      c.key_end.push_back(t % 7 == 3 ? 0 : end);
    }
    c.args.key_end = c.key_end.data();
    std::vector<float> expected(static_cast<size_t>(queries * keys));
    ref::IndexerScores(c.args, expected.data());
    testing::OnEveryPath([&] {
      std::vector<float> together(expected.size(), 1.0f), alone(expected.size(), 1.0f);
      IndexerScores(c.args, together.data());
      for (int64_t t = 0; t < queries; ++t) {
        IndexerScoresArgs one = c.args;
        one.q = c.args.q + t * heads * dim;
        one.head_weight = c.args.head_weight + t * heads;
        one.key_end = c.args.key_end + t;
        one.queries = 1;
        IndexerScores(one, alone.data() + t * keys);
      }
      CHECK(std::memcmp(together.data(), alone.data(), together.size() * sizeof(float)) == 0);
      std::vector<float> finite_expected, finite_actual;
      bool masks_agree = true;
      for (size_t i = 0; i < expected.size(); ++i) {
        if (expected[i] == kNegInf || together[i] == kNegInf) {
          masks_agree = masks_agree && expected[i] == together[i];
        } else {
          finite_expected.push_back(expected[i]);
          finite_actual.push_back(together[i]);
        }
      }
      CHECK(masks_agree);
      CHECK(testing::RelativeError(finite_actual, finite_expected) < 1e-5);
    });
  }

  TEST_CASE("multi-query indexer scores equal one-query scores bitwise (decode rows sharing keys)") {
    CheckMultiQueryMatchesSingleQuery(100, 4, 128, 1037, 11);  // the tiny model's decode batch shape
    CheckMultiQueryMatchesSingleQuery(7, 5, 64, 300, 12);      // heads not dividing the 6-row tile
    CheckMultiQueryMatchesSingleQuery(70, 3, 32, 45, 13);      // more queries than one tile of 64
    CheckMultiQueryMatchesSingleQuery(2, 64, 128, 17, 14);     // many heads, a partial last block
    CheckMultiQueryMatchesSingleQuery(3, 3, 20, 41, 15);       // dim not a multiple of 8: portable loop
  }

  // The AVX-512 micro-kernel runs the same fp32 FMA chains as the AVX2 one, so a machine's choice
  // of ISA never changes which keys a sequence selects.
  TEST_CASE("AVX-512 indexer scores equal AVX2 scores bitwise") {
    if (!internal::CpuHasAvx512F()) {
      MESSAGE("skipped: this CPU has no AVX-512F");
      return;
    }
    for (int64_t queries : {1, 7, 100}) {
      CAPTURE(queries);
      IndexerCase c = MakeCase(queries, 4, 128, 1037, queries > 1, 21);
      std::vector<float> wide(static_cast<size_t>(queries * 1037)), narrow(wide.size());
      IndexerScores(c.args, wide.data());
      internal::TEST_ForceAvx2(true);
      IndexerScores(c.args, narrow.data());
      internal::TEST_ForceAvx2(false);
      CHECK(std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)) == 0);
    }
  }

  // VDPBF16PS on swapped pairs runs the fp32 FMA chains exactly for FP8 operands, over the whole
  // E4M3 range (subnormals, 448, zeros of both signs; not NaN, which the quantiser never writes), so a CPU with
  // AVX512_BF16 selects the keys any other x86 CPU selects.
  TEST_CASE("AVX512_BF16 indexer scores equal AVX-512 fp32 scores bitwise, over the whole E4M3 range") {
    if (!internal::CpuHasAvx512Bf16()) {
      MESSAGE("skipped: this CPU has no AVX512_BF16");
      return;
    }
    for (int64_t queries : {1, 7, 100}) {
      for (int64_t heads : {4, 64}) {
        CAPTURE(queries);
        CAPTURE(heads);
        IndexerCase c = MakeCase(queries, heads, 128, 1037, queries > 1, 31);
        c.q = testing::RandomFp8Codes(c.q.size(), 41);  // every code but NaN, uncapped
        c.keys = testing::RandomFp8Codes(c.keys.size(), 42);
        c.args.q = c.q.data();
        c.args.keys = c.keys.data();
        std::vector<float> pairs(static_cast<size_t>(queries * 1037)), fp32(pairs.size());
        IndexerScores(c.args, pairs.data());
        internal::TEST_ForceNoBf16(true);
        IndexerScores(c.args, fp32.data());
        internal::TEST_ForceNoBf16(false);
        CHECK(std::memcmp(pairs.data(), fp32.data(), pairs.size() * sizeof(float)) == 0);
      }
    }
  }

  TEST_CASE("the score is key_scale * sum_j w_j * relu(q_j . k)") {
    // One query, two heads of dim 2, two keys; fp8 codes of small exact values.
    const uint8_t one = FloatToFp8E4M3(1.0f), two = FloatToFp8E4M3(2.0f), minus_one = FloatToFp8E4M3(-1.0f);
    const std::vector<uint8_t> q = {one, two, minus_one, one};     // head 0 = (1, 2), head 1 = (-1, 1)
    const std::vector<uint8_t> keys = {one, one, two, minus_one};  // key 0 = (1, 1), key 1 = (2, -1)
    const std::vector<float> weights = {0.5f, 3.0f};
    const std::vector<float> key_scales = {2.0f, 10.0f};
    IndexerScoresArgs args;
    args.q = q.data();
    args.head_weight = weights.data();
    args.keys = keys.data();
    args.key_scale = key_scales.data();
    args.queries = 1;
    args.heads = 2;
    args.dim = 2;
    args.keys_count = 2;
    std::vector<float> scores(2);
    testing::OnEveryPath([&] {
      IndexerScores(args, scores.data());
      // key 0: head 0 dot 3, head 1 dot 0 -> 2 * (0.5 * 3 + 3 * 0) = 3
      CHECK(scores[0] == 3.0f);
      // key 1: head 0 dot 0, head 1 dot -3 (ReLU -> 0) -> 0
      CHECK(scores[1] == 0.0f);
    });
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
