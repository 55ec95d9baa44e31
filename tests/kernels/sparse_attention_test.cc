// Sparse MQA attention over the FP8 latent cache: fast == ref, dense equivalence, skipped
// entries, the empty selection, two-segment views; the kv_b products around it.
#include "kernels/cpu/sparse_attention.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/internal/fp8_round.h"
#include "kernels/cpu/parallel.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

std::vector<float> Run(bool fast, const SparseAttentionArgs& args) {
  std::vector<float> out(static_cast<size_t>(args.heads * args.cache.kv_rank), 123.0f);
  if (fast) {
    SparseMqaAttention(args, out.data());
  } else {
    ref::SparseMqaAttention(args, out.data());
  }
  return out;
}

SparseAttentionArgs Args(const std::vector<float>& q, int64_t heads, const testing::TestLatentCache& cache,
                         float scale) {
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
      testing::TestLatentCache cache = testing::MakeTestLatentCache(rows, kv_rank, rope_dim, 5);
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
    testing::TestLatentCache cache = testing::MakeTestLatentCache(rows, kv_rank, rope_dim, 9);
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
    testing::TestLatentCache cache = testing::MakeTestLatentCache(rows, kv_rank, rope_dim, 12);
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
    testing::TestLatentCache cache = testing::MakeTestLatentCache(rows, kv_rank, rope_dim, 14);
    std::vector<float> q = testing::RandomFloats(static_cast<size_t>(heads * (kv_rank + rope_dim)), 15);
    const int32_t only = 6;
    SparseAttentionArgs a = Args(q, heads, cache, 1.0f);
    a.indices = &only;
    a.count = 1;
    std::vector<float> row(static_cast<size_t>(kv_rank + rope_dim));
    DequantizeLatentRow(cache.view, only, row.data());
    CHECK(row[0] == Fp8E4M3ToFloat(cache.nope[static_cast<size_t>(only * kv_rank)]) *
                        cache.scales[static_cast<size_t>(only * 2)]);
    CHECK(row[static_cast<size_t>(kv_rank)] == Bf16ToFloat(cache.rope[static_cast<size_t>(only * rope_dim)]));
    testing::OnEveryPath([&] {
      const std::vector<float> out = Run(true, a);
      for (int64_t h = 0; h < heads; ++h) {
        CHECK(testing::RelativeError(out.data() + h * kv_rank, row.data(), static_cast<size_t>(kv_rank)) < 1e-6);
      }
    });
  }

  // The rows [begin, end) of a cache as a cache of their own (copies), for two-segment views.
  testing::TestLatentCache SliceCache(const testing::TestLatentCache& c, int64_t begin, int64_t end) {
    const int64_t kv_rank = c.view.kv_rank, rope_dim = c.view.rope_dim, groups = kv_rank / 128;
    testing::TestLatentCache s;
    s.nope.assign(c.nope.begin() + begin * kv_rank, c.nope.begin() + end * kv_rank);
    s.scales.assign(c.scales.begin() + begin * groups, c.scales.begin() + end * groups);
    s.rope.assign(c.rope.begin() + begin * rope_dim, c.rope.begin() + end * rope_dim);
    s.view = c.view;
    s.view.nope = s.nope.data();
    s.view.scales = s.scales.data();
    s.view.rope = s.rope.data();
    s.view.rows = end - begin;
    return s;
  }

  TEST_CASE("a prefix + suffix view reads the same rows as one contiguous cache") {
    const int64_t kv_rank = 512, rope_dim = 64, heads = 5, rows = 90, split = 57;
    testing::TestLatentCache whole = testing::MakeTestLatentCache(rows, kv_rank, rope_dim, 21);
    testing::TestLatentCache prefix = SliceCache(whole, 0, split);
    testing::TestLatentCache suffix = SliceCache(whole, split, rows);
    std::vector<float> q = testing::RandomFloats(static_cast<size_t>(heads * (kv_rank + rope_dim)), 22, 0.1f);
    std::vector<int32_t> indices;
    for (int32_t i = 0; i < 70; ++i) indices.push_back((i * 53) % static_cast<int32_t>(rows));
    indices.push_back(-1);
    indices.push_back(static_cast<int32_t>(rows) + 3);  // past the suffix: skipped
    SparseAttentionArgs contiguous = Args(q, heads, whole, 0.1352338f);
    contiguous.indices = indices.data();
    contiguous.count = static_cast<int64_t>(indices.size());
    SparseAttentionArgs segmented = contiguous;
    segmented.cache = prefix.view;
    segmented.suffix = suffix.view;
    segmented.suffix_begin = split;
    // Dense over the first 80 positions through both segments.
    SparseAttentionArgs dense_contiguous = Args(q, heads, whole, 0.1352338f);
    dense_contiguous.count = 80;
    SparseAttentionArgs dense_segmented = dense_contiguous;
    dense_segmented.cache = prefix.view;
    dense_segmented.suffix = suffix.view;
    dense_segmented.suffix_begin = split;
    const std::vector<float> expected = Run(false, contiguous);
    testing::OnEveryPath([&] {
      CHECK(Run(true, segmented) == Run(true, contiguous));
      CHECK(testing::RelativeError(Run(false, segmented), expected) < 1e-12);
      CHECK(testing::RelativeError(Run(true, segmented), expected) < 1e-5);
      CHECK(Run(true, dense_segmented) == Run(true, dense_contiguous));
    });
  }

  // kv_b_proj-shaped weights [heads * (nope + v_dim), kv_rank] in one dtype plus an fp32 copy.
  struct TestKvb {
    std::vector<uint8_t> u8;
    std::vector<uint16_t> u16;
    std::vector<float> f32, scales, dequantized;
    KvbProjection projection;
  };

  TestKvb MakeKvb(DType dtype, int64_t heads, int64_t nope, int64_t v_dim, int64_t kv_rank, uint32_t seed) {
    TestKvb t;
    const int64_t rows = heads * (nope + v_dim);
    const std::vector<float> values = testing::RandomFloats(static_cast<size_t>(rows * kv_rank), seed, 0.1f);
    WeightMatrix& w = t.projection.w;
    w.dtype = dtype;
    w.rows = rows;
    w.cols = kv_rank;
    if (dtype == DType::kF8E4M3) {
      t.u8 = testing::RandomFp8Codes(values.size(), seed);
      t.scales = testing::RandomFloats(static_cast<size_t>((rows + 127) / 128 * (kv_rank / 128)), seed + 1);
      for (float& s : t.scales) s = 1e-3f * (1.0f + std::fabs(s));
      w.data = t.u8.data();
      w.block_scale_inv = t.scales.data();
    } else if (dtype == DType::kBF16) {
      for (float v : values) t.u16.push_back(FloatToBf16(v));
      w.data = t.u16.data();
    } else {
      t.f32 = values;
      w.data = t.f32.data();
    }
    t.dequantized.resize(static_cast<size_t>(rows * kv_rank));
    for (int64_t r = 0; r < rows; ++r) DequantizeRow(w, r, t.dequantized.data() + r * kv_rank);
    t.projection.heads = heads;
    t.projection.nope = nope;
    t.projection.v_dim = v_dim;
    return t;
  }

  TEST_CASE("AbsorbQueries and ProjectValues match ref for every dtype, token count and path") {
    struct Shape {
      int64_t heads, nope, v_dim, kv_rank;
    };
    for (Shape shape : {Shape{3, 128, 128, 512}, Shape{4, 32, 32, 128}}) {
      for (DType dtype : {DType::kF8E4M3, DType::kBF16, DType::kF32}) {
        TestKvb kvb = MakeKvb(dtype, shape.heads, shape.nope, shape.v_dim, shape.kv_rank, 31);
        for (int64_t tokens : {1, 3, 20}) {
          for (bool with_copy : {true, false}) {
            CAPTURE(shape.kv_rank);
            CAPTURE(DTypeName(dtype));
            CAPTURE(tokens);
            CAPTURE(with_copy);
            KvbProjection p = kvb.projection;
            p.dequantized = with_copy ? kvb.dequantized.data() : nullptr;
            const int64_t q_stride = shape.nope + 64, out_stride = shape.kv_rank + 64;
            const std::vector<float> q =
                testing::RandomFloats(static_cast<size_t>(tokens * shape.heads * q_stride), 32);
            const std::vector<float> o =
                testing::RandomFloats(static_cast<size_t>(tokens * shape.heads * shape.kv_rank), 33);
            std::vector<float> absorbed_ref(static_cast<size_t>(tokens * shape.heads * out_stride), 7.0f);
            std::vector<float> u_ref(static_cast<size_t>(tokens * shape.heads * shape.v_dim));
            ref::AbsorbQueries(p, q.data(), tokens, q_stride, absorbed_ref.data(), out_stride);
            ref::ProjectValues(p, o.data(), tokens, u_ref.data());
            testing::OnEveryPath([&] {
              std::vector<float> absorbed(absorbed_ref.size(), 7.0f), u(u_ref.size(), -1.0f);
              AbsorbQueries(p, q.data(), tokens, q_stride, absorbed.data(), out_stride);
              ProjectValues(p, o.data(), tokens, u.data());
              CHECK(testing::RelativeError(absorbed, absorbed_ref) < 2e-6);
              CHECK(testing::RelativeError(u, u_ref) < 2e-6);
              // The values past kv_rank in each head's output row are left alone.
              CHECK(absorbed[static_cast<size_t>(out_stride - 1)] == 7.0f);
            });
          }
        }
      }
    }
  }

#if ENVFORGE_KERNELS_X86
  ENVFORGE_TARGET_AVX2 void FakeQuantLanes(const float* x, int64_t count, float scale, float* out) {
    for (int64_t i = 0; i < count; i += 8) {
      _mm256_storeu_ps(out + i, internal::FakeQuantFp8x8(_mm256_loadu_ps(x + i), _mm256_set1_ps(scale)));
    }
  }
#endif

  // The 8-lane W8A8 rounding the fast Linear uses (internal/fp8_round.h) must be the scalar
  // FakeQuantFp8 bit for bit, or fast and reference products would drift apart.
  TEST_CASE("the AVX2 fp8 fake quantization is bit-identical to FakeQuantFp8") {
#if ENVFORGE_KERNELS_X86
    if (!internal::CpuHasAvx2Fma()) return;
    for (bool pow2 : {true, false}) {
      for (uint32_t seed = 0; seed < 40; ++seed) {
        CAPTURE(pow2);
        CAPTURE(seed);
        // Magnitudes from far below the fp8 subnormal range to the clamp, exact fp8 ties, zeros.
        std::vector<float> x =
            testing::RandomFloats(128, seed + 100, std::ldexp(1.0f, static_cast<int>(seed % 24) - 12));
        x[0] = 0.0f;
        x[1] = -0.0f;
        x[2] = std::ldexp(1.0f, -12);
        for (size_t i = 3; i < 16; ++i) x[i] = Fp8E4M3ToFloat(static_cast<uint8_t>(seed * 7 + i)) * 1.0625f;
        float amax = 0.0f;
        for (float v : x) amax = std::max(amax, std::fabs(v));
        const float scale = Fp8GroupScale(amax, pow2);
        std::vector<float> expected = x, actual(x.size());
        FakeQuantFp8(expected.data(), 1, 128, 128, pow2);
        FakeQuantLanes(x.data(), 128, scale, actual.data());
        CHECK(std::memcmp(expected.data(), actual.data(), expected.size() * sizeof(float)) == 0);
      }
    }
#endif
  }

  TEST_CASE("long selections in chunks across threads match ref, also over two segments") {
    // 600+ valid rows: the fast kernel passes chunks of rows on several threads and merges their
    // softmax states in order.
    const int previous_threads = ThreadCount();
    SetThreadCount(3);
    const int64_t kv_rank = 512, rope_dim = 64, heads = 16, rows = 900, split = 700;
    testing::TestLatentCache whole = testing::MakeTestLatentCache(rows, kv_rank, rope_dim, 41);
    testing::TestLatentCache prefix = SliceCache(whole, 0, split);
    testing::TestLatentCache suffix = SliceCache(whole, split, rows);
    std::vector<float> q = testing::RandomFloats(static_cast<size_t>(heads * (kv_rank + rope_dim)), 42, 0.1f);
    std::vector<int32_t> indices;
    for (int32_t i = 0; i < 640; ++i) indices.push_back((i * 7) % static_cast<int32_t>(rows));
    indices[10] = -1;
    SparseAttentionArgs sparse = Args(q, heads, whole, 0.1352338f);
    sparse.indices = indices.data();
    sparse.count = static_cast<int64_t>(indices.size());
    SparseAttentionArgs dense = Args(q, heads, whole, 0.1352338f);
    dense.count = 850;
    SparseAttentionArgs dense_segmented = dense;
    dense_segmented.cache = prefix.view;
    dense_segmented.suffix = suffix.view;
    dense_segmented.suffix_begin = split;
    const std::vector<float> expected_sparse = Run(false, sparse), expected_dense = Run(false, dense);
    testing::OnEveryPath([&] {
      CHECK(testing::RelativeError(Run(true, sparse), expected_sparse) < 1e-5);
      CHECK(testing::RelativeError(Run(true, dense), expected_dense) < 1e-5);
      CHECK(Run(true, dense_segmented) == Run(true, dense));
    });
    SetThreadCount(previous_threads);
  }

  TEST_CASE("a dense query's output is the same bit for bit at any thread count") {
    // Chunks in parallel (several chunks) and heads in parallel (one chunk): the sums' order is
    // fixed by the rows, so the engine's tokens cannot depend on the machine's thread count.
    const int previous_threads = ThreadCount();
    const int64_t kv_rank = 512, rope_dim = 64, heads = 16, rows = 900;
    testing::TestLatentCache cache = testing::MakeTestLatentCache(rows, kv_rank, rope_dim, 51);
    std::vector<float> q = testing::RandomFloats(static_cast<size_t>(heads * (kv_rank + rope_dim)), 52, 0.1f);
    testing::OnEveryPath([&] {
      for (int64_t count : {200, 850}) {
        CAPTURE(count);
        SparseAttentionArgs dense = Args(q, heads, cache, 0.1352338f);
        dense.count = count;
        SetThreadCount(1);
        const std::vector<float> one_thread = Run(true, dense);
        for (int threads : {2, 3}) {
          SetThreadCount(threads);
          CHECK(Run(true, dense) == one_thread);
        }
      }
    });
    SetThreadCount(previous_threads);
  }

  TEST_CASE("DenseMqaAttentionGroup gives every query what SparseMqaAttention gives it, bit for bit") {
    // Episodes of one prompt: a shared 700-row prefix, each episode its own rows after it, and
    // queries at many positions (a prefill's rows and decode rows) -- 41 of them, more than a
    // thread takes at once. Five heads per query, so the 6-row tiles mix queries.
    const int previous_threads = ThreadCount();
    const int64_t kv_rank = 512, rope_dim = 64, heads = 5, prompt = 700;
    const float scale = 0.1352338f;
    testing::TestLatentCache prefix = testing::MakeTestLatentCache(prompt, kv_rank, rope_dim, 61);
    std::vector<testing::TestLatentCache> own;
    for (uint32_t e = 0; e < 3; ++e)
      own.push_back(testing::MakeTestLatentCache(90 + 40 * e, kv_rank, rope_dim, 62 + e));
    std::vector<std::vector<float>> q;
    std::vector<SparseAttentionArgs> queries;
    for (int64_t i = 0; i < 41; ++i) {
      q.push_back(testing::RandomFloats(static_cast<size_t>(heads * (kv_rank + rope_dim)), 70 + i, 0.1f));
    }
    for (int64_t i = 0; i < 41; ++i) {
      const testing::TestLatentCache& mine = own[static_cast<size_t>(i % 3)];
      SparseAttentionArgs a = Args(q[static_cast<size_t>(i)], heads, prefix, scale);
      a.suffix = mine.view;
      a.suffix_begin = prompt;
      a.count = prompt + 1 + (i * 7) % mine.view.rows;
      queries.push_back(a);
    }
    std::vector<std::vector<float>> expected;
    testing::OnEveryPath([&] {
      expected.clear();
      for (const SparseAttentionArgs& a : queries) expected.push_back(Run(true, a));
      for (int threads : {1, 3}) {
        CAPTURE(threads);
        SetThreadCount(threads);
        for (int64_t shared : {prompt, int64_t{300}, int64_t{100}}) {  // 2 whole chunks, 1, none
          CAPTURE(shared);
          std::vector<std::vector<float>> got(queries.size(), std::vector<float>(static_cast<size_t>(heads * kv_rank)));
          std::vector<float*> outs;
          for (auto& out : got) outs.push_back(out.data());
          DenseMqaAttentionGroup(queries, shared, outs);
          for (size_t i = 0; i < queries.size(); ++i) CHECK(got[i] == expected[i]);
        }
      }
    });
    SUBCASE("the rows of one prefill, one segment") {
      testing::TestLatentCache sequence = testing::MakeTestLatentCache(600, kv_rank, rope_dim, 90);
      std::vector<SparseAttentionArgs> rows;
      for (int64_t i = 0; i < 20; ++i) {
        SparseAttentionArgs a = Args(q[static_cast<size_t>(i)], heads, sequence, scale);
        a.count = 560 + 2 * i;  // positions 559.. of the prefill
        rows.push_back(a);
      }
      SetThreadCount(2);
      std::vector<std::vector<float>> got(rows.size(), std::vector<float>(static_cast<size_t>(heads * kv_rank)));
      std::vector<float*> outs;
      for (auto& out : got) outs.push_back(out.data());
      DenseMqaAttentionGroup(rows, 560, outs);
      for (size_t i = 0; i < rows.size(); ++i) {
        CHECK(got[i] == Run(true, rows[i]));
        CHECK(testing::RelativeError(got[i], Run(false, rows[i])) < 1e-5);
      }
    }
    SetThreadCount(previous_threads);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
