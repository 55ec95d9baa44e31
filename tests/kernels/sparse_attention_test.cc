// Sparse MQA attention over the FP8 latent cache: fast == ref, dense equivalence, skipped
// entries, the empty selection.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/sparse_attention.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

// A latent cache filled from random fp32 rows through the real quantizer (as the cache writer
// does): nope part act-quantized in groups of 128 with pow2 scales, rope part in bf16.
struct TestCache {
  std::vector<uint8_t> nope;
  std::vector<float> scales;
  std::vector<uint16_t> rope;
  LatentCacheView view;
};

TestCache MakeCache(int64_t rows, int64_t kv_rank, int64_t rope_dim, uint32_t seed) {
  TestCache c;
  const std::vector<float> latent = testing::RandomFloats(static_cast<size_t>(rows * kv_rank), seed);
  c.nope.resize(latent.size());
  c.scales.resize(static_cast<size_t>(rows * (kv_rank / 128)));
  ActQuantFp8(latent.data(), rows, kv_rank, 128, true, c.nope.data(), c.scales.data());
  for (float v : testing::RandomFloats(static_cast<size_t>(rows * rope_dim), seed + 1)) c.rope.push_back(FloatToBf16(v));
  c.view.nope = c.nope.data();
  c.view.scales = c.scales.data();
  c.view.rope = c.rope.data();
  c.view.rows = rows;
  c.view.kv_rank = kv_rank;
  c.view.rope_dim = rope_dim;
  return c;
}

std::vector<float> Run(bool fast, const SparseAttentionArgs& args) {
  std::vector<float> out(static_cast<size_t>(args.heads * args.cache.kv_rank), 123.0f);
  if (fast) {
    SparseMqaAttention(args, out.data());
  } else {
    ref::SparseMqaAttention(args, out.data());
  }
  return out;
}

SparseAttentionArgs Args(const std::vector<float>& q, int64_t heads, const TestCache& cache, float scale) {
  SparseAttentionArgs args;
  args.q = q.data();
  args.heads = heads;
  args.cache = cache.view;
  args.scale = scale;
  return args;
}

TEST_SUITE("kernels.sparse_attention") {

TEST_CASE("fast sparse attention matches ref with -1 and out-of-range entries in the selection") {
  for (int64_t kv_rank : {512, 256}) {
    const int64_t rope_dim = kv_rank == 512 ? 64 : 16, heads = 7, rows = 300;
    CAPTURE(kv_rank);
    TestCache cache = MakeCache(rows, kv_rank, rope_dim, 5);
    std::vector<float> q = testing::RandomFloats(static_cast<size_t>(heads * (kv_rank + rope_dim)), 6, 0.1f);
    std::vector<int32_t> indices;
    for (int32_t i = 0; i < 61; ++i) indices.push_back((i * 37) % static_cast<int32_t>(rows));
    indices.insert(indices.begin() + 5, -1);
    indices.push_back(-1);
    indices.push_back(static_cast<int32_t>(rows));  // past the cache: skipped
    SparseAttentionArgs args = Args(q, heads, cache, 0.1352338f);
    args.indices = indices.data();
    args.count = static_cast<int64_t>(indices.size());
    const std::vector<float> expected = Run(false, args);
    testing::OnEveryPath([&] { CHECK(testing::RelativeError(Run(true, args), expected) < 1e-5); });
  }
}

TEST_CASE("selecting every row equals dense attention over the prefix") {
  const int64_t kv_rank = 512, rope_dim = 64, heads = 4, rows = 45;
  TestCache cache = MakeCache(rows, kv_rank, rope_dim, 9);
  std::vector<float> q = testing::RandomFloats(static_cast<size_t>(heads * (kv_rank + rope_dim)), 10, 0.1f);
  std::vector<int32_t> all_rows;
  for (int32_t i = static_cast<int32_t>(rows) - 1; i >= 0; --i) all_rows.push_back(i);  // any order
  SparseAttentionArgs sparse = Args(q, heads, cache, 0.1352338f);
  sparse.indices = all_rows.data();
  sparse.count = rows;
  SparseAttentionArgs dense = sparse;
  dense.indices = nullptr;
  testing::OnEveryPath([&] {
    CHECK(testing::RelativeError(Run(true, sparse), Run(true, dense)) < 1e-6);
    CHECK(testing::RelativeError(Run(true, dense), Run(false, dense)) < 1e-5);
  });
  // A shorter prefix gives a different result (the selection matters).
  SparseAttentionArgs prefix = dense;
  prefix.count = 20;
  CHECK(testing::RelativeError(Run(true, prefix), Run(true, dense)) > 1e-3);
}

TEST_CASE("-1 entries are skipped and a selection without valid rows gives zeros") {
  const int64_t kv_rank = 256, rope_dim = 32, heads = 3, rows = 20;
  TestCache cache = MakeCache(rows, kv_rank, rope_dim, 12);
  std::vector<float> q = testing::RandomFloats(static_cast<size_t>(heads * (kv_rank + rope_dim)), 13, 0.1f);
  const std::vector<int32_t> padded = {3, -1, 7, -1, -1, 11};
  const std::vector<int32_t> compact = {3, 7, 11};
  const std::vector<int32_t> none = {-1, -1, 20, 25};
  SparseAttentionArgs a = Args(q, heads, cache, 0.5f);
  a.indices = padded.data();
  a.count = 6;
  SparseAttentionArgs b = a;
  b.indices = compact.data();
  b.count = 3;
  SparseAttentionArgs empty = a;
  empty.indices = none.data();
  empty.count = 4;
  testing::OnEveryPath([&] {
    CHECK(Run(true, a) == Run(true, b));
    const std::vector<float> zeros(static_cast<size_t>(heads * kv_rank), 0.0f);
    CHECK(Run(true, empty) == zeros);
    CHECK(Run(false, empty) == zeros);
  });
}

TEST_CASE("one selected row returns that row's dequantized latent for every head") {
  const int64_t kv_rank = 256, rope_dim = 32, heads = 2, rows = 10;
  TestCache cache = MakeCache(rows, kv_rank, rope_dim, 14);
  std::vector<float> q = testing::RandomFloats(static_cast<size_t>(heads * (kv_rank + rope_dim)), 15);
  const int32_t only = 6;
  SparseAttentionArgs a = Args(q, heads, cache, 1.0f);
  a.indices = &only;
  a.count = 1;
  std::vector<float> row(static_cast<size_t>(kv_rank + rope_dim));
  DequantizeLatentRow(cache.view, only, row.data());
  CHECK(row[0] == Fp8E4M3ToFloat(cache.nope[static_cast<size_t>(only * kv_rank)]) * cache.scales[static_cast<size_t>(only * 2)]);
  CHECK(row[static_cast<size_t>(kv_rank)] == Bf16ToFloat(cache.rope[static_cast<size_t>(only * rope_dim)]));
  testing::OnEveryPath([&] {
    const std::vector<float> out = Run(true, a);
    for (int64_t h = 0; h < heads; ++h) {
      CHECK(testing::RelativeError(out.data() + h * kv_rank, row.data(), static_cast<size_t>(kv_rank)) < 1e-6);
    }
  });
}

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
