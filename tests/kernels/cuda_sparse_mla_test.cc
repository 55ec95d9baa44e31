// kernels/cuda/sparse_mla.h against its CPU twin ref::SparseMqaAttention: the packed cache row
// layout, argument validation and the decode workspace plan (host, run everywhere), then prefill
// and split-KV decode on random and adversarial selections (GPU).
//
// Tolerances of the GPU cases: both sides see the same bf16 query (rounded on the host first) and
// the same dequantized rows (fp8 * power-of-two scale is exact in bf16), so the differences come
// from P rounded to bf16 before the P V product and from the bf16 output: about 2^-9 relative per
// term. Per (token, head) we assert max |gpu - ref| <= 2e-2 * max |ref| and ||gpu - ref|| <=
// 1e-2 ||ref||; lse within 1e-3 * max(1, |lse|) (fp32 scores, exp2/log2 in fp32). A head without
// any valid slot must be exactly zero with lse = +inf.
#include "kernels/cuda/sparse_mla.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/sparse_attention.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels::cuda {
namespace {

using testing::DeviceZeros;
using testing::FromDevice;
using testing::ToDevice;

std::vector<uint8_t> Packed(const LatentCacheView& view) {
  std::vector<uint8_t> packed(static_cast<size_t>(view.rows * LatentRowBytes(view.kv_rank, view.rope_dim)));
  PackLatentRows(view, packed.data());
  return packed;
}

// One problem: queries (bf16, and the same values as fp32 for the CPU), selections and the cache.
struct Problem {
  int64_t tokens = 1, heads = 1, kv_rank = 512, rope_dim = 64, topk = 64, slots = 128;
  float scale = 0.1352338f;
  int64_t cache_offset = 0;  // bytes before the first cache row in its device buffer (alignment cases)
  std::vector<uint16_t> q_bf16;
  std::vector<float> q;
  std::vector<int32_t> indices;
  kernels::testing::TestLatentCache cache;

  int64_t width() const { return kv_rank + rope_dim; }
};

// Random queries of the given spread and a cache of `slots` rows; indices are left to the case.
Problem MakeProblem(int64_t tokens, int64_t heads, int64_t kv_rank, int64_t rope_dim, int64_t topk, int64_t slots,
                    uint32_t seed, float q_stddev = 1.0f) {
  Problem p;
  p.tokens = tokens;
  p.heads = heads;
  p.kv_rank = kv_rank;
  p.rope_dim = rope_dim;
  p.topk = topk;
  p.slots = slots;
  for (float v : kernels::testing::RandomFloats(static_cast<size_t>(tokens * heads * p.width()), seed, q_stddev)) {
    p.q_bf16.push_back(FloatToBf16(v));
    p.q.push_back(Bf16ToFloat(p.q_bf16.back()));
  }
  p.indices.assign(static_cast<size_t>(tokens * topk), -1);
  p.cache = kernels::testing::MakeTestLatentCache(slots, kv_rank, rope_dim, seed + 100);
  return p;
}

// Random selections: mostly valid slots, with some -1 and some >= slots entries mixed in.
void RandomIndices(Problem& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> slot(0, std::max<int64_t>(p.slots - 1, 0));
  for (int32_t& index : p.indices) {
    const uint32_t kind = rng() % 16;
    if (kind == 0) {
      index = -1;
    } else if (kind == 1) {
      index = static_cast<int32_t>(p.slots + static_cast<int64_t>(rng() % 1000));
    } else {
      index = static_cast<int32_t>(slot(rng));
    }
  }
}

struct Outputs {
  std::vector<float> out;  // [tokens, heads, kv_rank]
  std::vector<float> lse;  // [tokens, heads]
};

Outputs RunRef(const Problem& p) {
  Outputs r;
  r.out.assign(static_cast<size_t>(p.tokens * p.heads * p.kv_rank), 0.0f);
  r.lse.assign(static_cast<size_t>(p.tokens * p.heads), 0.0f);
  std::vector<float> row(static_cast<size_t>(p.width()));
  for (int64_t t = 0; t < p.tokens; ++t) {
    SparseAttentionArgs args;
    args.q = p.q.data() + t * p.heads * p.width();
    args.heads = p.heads;
    args.cache = p.cache.view;
    args.indices = p.indices.data() + t * p.topk;
    args.count = p.topk;
    args.scale = p.scale;
    ref::SparseMqaAttention(args, r.out.data() + t * p.heads * p.kv_rank);
    // lse = log sum_s exp(z_s) over the valid selected rows, in double.
    std::vector<std::vector<double>> z(static_cast<size_t>(p.heads));
    for (int64_t k = 0; k < p.topk; ++k) {
      const int32_t index = p.indices[static_cast<size_t>(t * p.topk + k)];
      if (index < 0 || index >= p.slots) continue;
      DequantizeLatentRow(p.cache.view, index, row.data());
      for (int64_t h = 0; h < p.heads; ++h) {
        const float* q = args.q + h * p.width();
        double dot = 0.0;
        for (int64_t d = 0; d < p.width(); ++d) dot += static_cast<double>(q[d]) * row[static_cast<size_t>(d)];
        z[static_cast<size_t>(h)].push_back(dot * p.scale);
      }
    }
    for (int64_t h = 0; h < p.heads; ++h) {
      const std::vector<double>& zh = z[static_cast<size_t>(h)];
      double lse = std::numeric_limits<double>::infinity();
      if (!zh.empty()) {
        const double m = *std::max_element(zh.begin(), zh.end());
        double sum = 0.0;
        for (double v : zh) sum += std::exp(v - m);
        lse = m + std::log(sum);
      }
      r.lse[static_cast<size_t>(t * p.heads + h)] = static_cast<float>(lse);
    }
  }
  return r;
}

enum class Path { kPrefill, kDecode };

Outputs RunGpu(const Problem& p, Path path) {
  std::vector<uint8_t> packed(static_cast<size_t>(p.cache_offset), 0);
  const std::vector<uint8_t> rows = Packed(p.cache.view);
  packed.insert(packed.end(), rows.begin(), rows.end());
  DeviceBuffer q = ToDevice(p.q_bf16);
  DeviceBuffer cache = ToDevice(packed);
  DeviceBuffer indices = ToDevice(p.indices);
  const size_t out_count = static_cast<size_t>(p.tokens * p.heads * p.kv_rank);
  const size_t lse_count = static_cast<size_t>(p.tokens * p.heads);
  DeviceBuffer out = DeviceZeros<uint16_t>(out_count);
  DeviceBuffer lse = DeviceZeros<float>(lse_count);
  // Poison the outputs (bf16 / fp32 NaN) so an entry the kernels never write cannot pass.
  REQUIRE(out.Fill(0xff).ok());
  REQUIRE(lse.Fill(0xff).ok());

  SparseMlaArgs args;
  args.q = q.as<uint16_t>();
  args.tokens = p.tokens;
  args.heads = p.heads;
  args.cache = cache.as<uint8_t>() + p.cache_offset;
  args.slots = p.slots;
  args.kv_rank = p.kv_rank;
  args.rope_dim = p.rope_dim;
  args.indices = indices.as<int32_t>();
  args.topk = p.topk;
  args.scale = p.scale;
  args.out = out.as<uint16_t>();
  args.lse = lse.as<float>();

  Result<Stream> stream = Stream::Create();
  REQUIRE_MESSAGE(stream.ok(), stream.status().message());
  Status status;
  DeviceBuffer workspace;
  if (path == Path::kPrefill) {
    status = SparseMlaPrefill(args, stream->get());
  } else {
    const int sm_count = testing::GpuOrNull()->sm_count;
    const size_t bytes = SparseMlaDecodeWorkspaceBytes(p.tokens, p.heads, p.kv_rank, p.topk, sm_count);
    Result<DeviceBuffer> allocated = DeviceBuffer::Allocate(bytes);
    REQUIRE_MESSAGE(allocated.ok(), allocated.status().message());
    workspace = std::move(allocated).value();
    REQUIRE(workspace.Fill(0xff).ok());  // every partial must be written before the combine reads it
    status = SparseMlaDecode(args, workspace.data(), bytes, sm_count, stream->get());
  }
  REQUIRE_MESSAGE(status.ok(), status.message());
  Status synced = stream->Synchronize();
  REQUIRE_MESSAGE(synced.ok(), synced.message());

  Outputs r;
  for (uint16_t v : FromDevice<uint16_t>(out, out_count)) r.out.push_back(Bf16ToFloat(v));
  r.lse = FromDevice<float>(lse, lse_count);
  return r;
}

// The tolerances of the file comment, per (token, head).
void CheckClose(const Problem& p, const Outputs& gpu, const Outputs& ref, const char* what) {
  INFO(what);
  int failures = 0;
  for (int64_t t = 0; t < p.tokens; ++t) {
    for (int64_t h = 0; h < p.heads; ++h) {
      const size_t state = static_cast<size_t>(t * p.heads + h);
      const float* g = gpu.out.data() + state * static_cast<size_t>(p.kv_rank);
      const float* r = ref.out.data() + state * static_cast<size_t>(p.kv_rank);
      const float ref_lse = ref.lse[state], gpu_lse = gpu.lse[state];
      bool ok = true;
      if (std::isinf(ref_lse)) {
        ok = std::isinf(gpu_lse) && gpu_lse > 0;
        for (int64_t c = 0; c < p.kv_rank; ++c) ok = ok && g[c] == 0.0f;
      } else {
        float max_ref = 0.0f, max_diff = 0.0f;
        bool finite = true;
        for (int64_t c = 0; c < p.kv_rank; ++c) {
          finite = finite && std::isfinite(g[c]);
          max_ref = std::max(max_ref, std::fabs(r[c]));
          max_diff = std::max(max_diff, std::fabs(g[c] - r[c]));
        }
        const double relative = kernels::testing::RelativeError(g, r, static_cast<size_t>(p.kv_rank));
        ok = finite && std::isfinite(gpu_lse) && max_diff <= 2e-2f * max_ref && relative <= 1e-2 &&
             std::fabs(gpu_lse - ref_lse) <= 1e-3f * std::max(1.0f, std::fabs(ref_lse));
        if (!ok && failures < 5) {
          MESSAGE("token " << t << " head " << h << ": max diff " << max_diff << " (max |ref| " << max_ref
                           << "), relative L2 " << relative << ", lse " << gpu_lse << " vs " << ref_lse);
        }
      }
      if (!ok) ++failures;
    }
  }
  CHECK_MESSAGE(failures == 0, failures << " of " << p.tokens * p.heads << " (token, head) rows out of tolerance");
}

void CheckBothPaths(const Problem& p) {
  const Outputs ref = RunRef(p);
  CheckClose(p, RunGpu(p, Path::kPrefill), ref, "prefill");
  CheckClose(p, RunGpu(p, Path::kDecode), ref, "decode");
}

// Host-side buffers for the validation cases: aligned storage standing in for device pointers
// (validation rejects the arguments before any of them is touched).
struct FakeBuffers {
  alignas(16) uint16_t q[64] = {};
  alignas(16) uint8_t cache[64] = {};
  alignas(16) int32_t indices[16] = {};
  alignas(16) uint16_t out[64] = {};
  alignas(16) float lse[16] = {};
  alignas(16) uint8_t workspace[64] = {};

  SparseMlaArgs Args() {
    SparseMlaArgs a;
    a.q = q;
    a.tokens = 2;
    a.heads = 4;
    a.cache = cache;
    a.slots = 10;
    a.kv_rank = 128;
    a.rope_dim = 64;
    a.indices = indices;
    a.topk = 8;
    a.scale = 0.5f;
    a.out = out;
    a.lse = lse;
    return a;
  }
};

template <typename Mutate>
void CheckRejected(Mutate mutate, const std::string& names) {
  FakeBuffers buffers;
  SparseMlaArgs args = buffers.Args();
  mutate(args);
  const Status prefill = SparseMlaPrefill(args, nullptr);
  CHECK(prefill.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(prefill.message().find(names) != std::string::npos, prefill.message());
  const Status decode = SparseMlaDecode(args, buffers.workspace, sizeof(buffers.workspace), 132, nullptr);
  CHECK(decode.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(decode.message().find(names) != std::string::npos, decode.message());
}

TEST_SUITE("kernels.cuda.sparse_mla") {
  TEST_CASE("PackLatentRows writes [fp8 codes | fp32 scales | bf16 rope] rows that decode as DequantizeLatentRow") {
    CHECK(LatentRowBytes(512, 64) == 656);
    CHECK(LatentRowBytes(128, 64) == 260);
    struct Shape {
      int64_t kv_rank, rope_dim;
    };
    for (Shape shape : {Shape{512, 64}, Shape{128, 64}, Shape{384, 16}, Shape{256, 0}}) {
      INFO("kv_rank " << shape.kv_rank << " rope_dim " << shape.rope_dim);
      const auto cache = kernels::testing::MakeTestLatentCache(7, shape.kv_rank, shape.rope_dim, 3);
      const std::vector<uint8_t> packed = Packed(cache.view);
      const int64_t row_bytes = LatentRowBytes(shape.kv_rank, shape.rope_dim);
      REQUIRE(packed.size() == static_cast<size_t>(7 * row_bytes));
      std::vector<float> expected(static_cast<size_t>(shape.kv_rank + shape.rope_dim));
      int mismatches = 0;
      for (int64_t row = 0; row < 7; ++row) {
        DequantizeLatentRow(cache.view, row, expected.data());
        const uint8_t* bytes = packed.data() + row * row_bytes;
        for (int64_t d = 0; d < shape.kv_rank; ++d) {
          float scale;
          std::memcpy(&scale, bytes + shape.kv_rank + (d / 128) * 4, 4);
          if (Fp8E4M3ToFloat(bytes[d]) * scale != expected[static_cast<size_t>(d)]) ++mismatches;
        }
        for (int64_t d = 0; d < shape.rope_dim; ++d) {
          uint16_t bits;
          std::memcpy(&bits, bytes + shape.kv_rank + shape.kv_rank / 32 + 2 * d, 2);
          if (Bf16ToFloat(bits) != expected[static_cast<size_t>(shape.kv_rank + d)]) ++mismatches;
        }
      }
      CHECK(mismatches == 0);
    }
  }

  TEST_CASE("bad arguments are rejected with InvalidArgument naming them, before any CUDA call") {
    CheckRejected([](SparseMlaArgs& a) { a.tokens = -1; }, "tokens");
    CheckRejected([](SparseMlaArgs& a) { a.heads = 0; }, "heads");
    CheckRejected([](SparseMlaArgs& a) { a.kv_rank = 100; }, "kv_rank");
    CheckRejected([](SparseMlaArgs& a) { a.kv_rank = 640; }, "kv_rank");
    CheckRejected([](SparseMlaArgs& a) { a.rope_dim = 8; }, "rope_dim");
    CheckRejected([](SparseMlaArgs& a) { a.rope_dim = 80; }, "rope_dim");
    CheckRejected([](SparseMlaArgs& a) { a.topk = 0; }, "topk");
    CheckRejected([](SparseMlaArgs& a) { a.slots = -1; }, "slots");
    CheckRejected([](SparseMlaArgs& a) { a.scale = std::numeric_limits<float>::quiet_NaN(); }, "scale");
    CheckRejected([](SparseMlaArgs& a) { a.q = nullptr; }, "q is null");
    CheckRejected([](SparseMlaArgs& a) { a.indices = nullptr; }, "indices is null");
    CheckRejected([](SparseMlaArgs& a) { a.out = nullptr; }, "out is null");
    CheckRejected([](SparseMlaArgs& a) { a.cache = nullptr; }, "cache is null");
    CheckRejected([](SparseMlaArgs& a) { a.q += 1; }, "q must be 16-byte aligned");
    CheckRejected([](SparseMlaArgs& a) { a.out += 1; }, "out must be 4-byte aligned");
    CheckRejected([](SparseMlaArgs& a) { a.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(a.lse) + 2); },
                  "lse must be 4-byte aligned");
    CheckRejected([](SparseMlaArgs& a) { a.tokens = int64_t{1} << 40; }, "grid limit");

    FakeBuffers buffers;
    SparseMlaArgs args = buffers.Args();
    Status status = SparseMlaDecode(args, buffers.workspace, sizeof(buffers.workspace), 0, nullptr);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message().find("sm_count") != std::string::npos);
    // 2 tokens x 4 heads, topk 8: one chunk per token, so the plan needs no workspace; a long
    // selection does.
    args.topk = 1000;
    const size_t needed = SparseMlaDecodeWorkspaceBytes(2, 4, 128, 1000, 132);
    REQUIRE(needed > 0);
    status = SparseMlaDecode(args, buffers.workspace, needed - 1, 132, nullptr);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message().find("workspace_bytes") != std::string::npos);
    status = SparseMlaDecode(args, nullptr, needed, 132, nullptr);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message().find("workspace is null") != std::string::npos);
  }

  TEST_CASE("an empty batch is a no-op that touches nothing") {
    SparseMlaArgs args;
    args.tokens = 0;
    args.heads = 64;
    args.topk = 2048;
    CHECK(SparseMlaPrefill(args, nullptr).ok());
    CHECK(SparseMlaDecode(args, nullptr, 0, 132, nullptr).ok());
    CHECK(SparseMlaDecodeWorkspaceBytes(0, 64, 512, 2048, 132) == 0);
  }

  TEST_CASE("the decode workspace follows the split plan: one wave of blocks, 64-slot chunks, no empty split") {
    // 1 token x 2 head tiles, 32 chunks, 132 SMs: min(32, 132 / 2) = 32 splits of one chunk each.
    CHECK(SparseMlaDecodeWorkspaceBytes(1, 128, 512, 2048, 132) == size_t{32} * 1 * 128 * (512 + 2) * 4);
    CHECK(SparseMlaDecodeWorkspaceBytes(1, 64, 512, 2048, 132) == size_t{32} * 1 * 64 * (512 + 2) * 4);
    // 37 tokens x 1 head tile, 4 chunks: 132 / 37 = 3 splits -> 2 chunks each -> 2 splits.
    CHECK(SparseMlaDecodeWorkspaceBytes(37, 4, 128, 200, 132) == size_t{2} * 37 * 4 * (128 + 2) * 4);
    // 5 chunks over 8 SMs for one block: 5 splits.
    CHECK(SparseMlaDecodeWorkspaceBytes(1, 1, 256, 300, 8) == size_t{5} * 1 * 1 * (256 + 2) * 4);
    // Already a full wave, or a single chunk: no split, no workspace.
    CHECK(SparseMlaDecodeWorkspaceBytes(132, 64, 512, 2048, 132) == 0);
    CHECK(SparseMlaDecodeWorkspaceBytes(66, 128, 512, 2048, 132) == 0);
    CHECK(SparseMlaDecodeWorkspaceBytes(1, 128, 512, 64, 132) == 0);
    // Out-of-range arguments.
    CHECK(SparseMlaDecodeWorkspaceBytes(1, 0, 512, 2048, 132) == 0);
    CHECK(SparseMlaDecodeWorkspaceBytes(1, 64, 512, 0, 132) == 0);
    CHECK(SparseMlaDecodeWorkspaceBytes(1, 64, 512, 2048, 0) == 0);
  }

  TEST_CASE("prefill and decode match the CPU twin on random selections") {
    ENVFORGE_REQUIRE_GPU();
    struct Shape {
      int64_t tokens, heads, kv_rank, rope_dim, topk, slots;
    };
    // The real model (512 / 64, 64 and 128 heads, topk 2048), the tiny one (128 / 64, 4 heads), and
    // odd head counts, other ranks and rope widths, topk not a multiple of 64, a single selected slot.
    const Shape shapes[] = {
        {1, 128, 512, 64, 2048, 4096}, {2, 64, 512, 64, 2048, 3000}, {37, 4, 128, 64, 200, 500},
        {37, 16, 512, 64, 100, 300},   {5, 1, 256, 32, 130, 1000},   {3, 37, 384, 16, 64, 100},
        {4, 128, 512, 64, 300, 700},   {1, 65, 128, 0, 77, 90},      {2, 3, 128, 16, 1, 5},
    };
    uint32_t seed = 1;
    for (Shape s : shapes) {
      if (testing::Emulated()) {
        // The host emulator runs every CUDA thread on the CPU: the longest selections and batches
        // are cut (still several chunks, several head tiles and split-KV decode); topk 2048 itself
        // stays covered by the split-merging case below.
        s.topk = std::min<int64_t>(s.topk, 1024);
        s.tokens = std::min<int64_t>(s.tokens, 13);
      }
      INFO("tokens " << s.tokens << " heads " << s.heads << " kv_rank " << s.kv_rank << " rope " << s.rope_dim
                     << " topk " << s.topk << " slots " << s.slots);
      Problem p = MakeProblem(s.tokens, s.heads, s.kv_rank, s.rope_dim, s.topk, s.slots, seed);
      RandomIndices(p, seed + 7);
      CheckBothPaths(p);
      seed += 11;
    }
  }

  TEST_CASE("tokens without any valid slot give zeros and lse = +inf next to tokens with valid slots") {
    ENVFORGE_REQUIRE_GPU();
    Problem p = MakeProblem(37, 64, 512, 64, 150, 200, 21);
    RandomIndices(p, 22);
    for (int64_t t = 0; t < p.tokens; t += 3) {
      for (int64_t k = 0; k < p.topk; ++k) {
        // All -1, or all past the cache, alternately.
        p.indices[static_cast<size_t>(t * p.topk + k)] = (t / 3) % 2 == 0 ? -1 : static_cast<int32_t>(p.slots + k);
      }
    }
    CheckBothPaths(p);

    // An empty cache: every entry is skipped.
    Problem empty = MakeProblem(2, 4, 128, 64, 70, 0, 23);
    RandomIndices(empty, 24);
    CheckBothPaths(empty);
  }

  TEST_CASE("duplicate indices are each counted, as on the CPU") {
    ENVFORGE_REQUIRE_GPU();
    Problem p = MakeProblem(3, 16, 512, 64, 130, 50, 31);
    for (int64_t t = 0; t < p.tokens; ++t) {
      for (int64_t k = 0; k < p.topk; ++k) {
        // Slot 7 two thirds of the time, else a few others (also repeated).
        p.indices[static_cast<size_t>(t * p.topk + k)] = k % 3 != 0 ? 7 : static_cast<int32_t>((k + t) % 5);
      }
    }
    CheckBothPaths(p);
  }

  TEST_CASE("k larger than the cache: entries past the last slot are skipped") {
    ENVFORGE_REQUIRE_GPU();
    Problem p = MakeProblem(4, 128, 512, 64, 200, 10, 41);
    for (int64_t t = 0; t < p.tokens; ++t) {
      for (int64_t k = 0; k < p.topk; ++k) p.indices[static_cast<size_t>(t * p.topk + k)] = static_cast<int32_t>(k);
    }
    CheckBothPaths(p);
  }

  TEST_CASE("a cache only 4-byte aligned is gathered in 4-byte pieces with the same results") {
    ENVFORGE_REQUIRE_GPU();
    // kv_rank 512 rows are gathered in 16-byte pieces only from a 16-byte aligned cache.
    Problem p = MakeProblem(3, 64, 512, 64, 150, 120, 81);
    RandomIndices(p, 82);
    p.cache_offset = 4;
    CheckBothPaths(p);
  }

  TEST_CASE("tied scores: identical rows give that row for every head") {
    ENVFORGE_REQUIRE_GPU();
    Problem p = MakeProblem(2, 64, 512, 64, 128, 4, 51);
    // Make every cache row a copy of row 0.
    const int64_t groups = p.kv_rank / 128;
    for (int64_t row = 1; row < p.slots; ++row) {
      std::copy_n(p.cache.nope.begin(), p.kv_rank, p.cache.nope.begin() + row * p.kv_rank);
      std::copy_n(p.cache.scales.begin(), groups, p.cache.scales.begin() + row * groups);
      std::copy_n(p.cache.rope.begin(), p.rope_dim, p.cache.rope.begin() + row * p.rope_dim);
    }
    RandomIndices(p, 52);
    CheckBothPaths(p);
  }

  TEST_CASE("all-negative and large-magnitude scores keep the softmax exact") {
    ENVFORGE_REQUIRE_GPU();
    // q = -(row 0) * 4 for every head: z strongly negative for row 0, large spread elsewhere.
    Problem p = MakeProblem(2, 16, 512, 64, 256, 300, 61);
    std::vector<float> row(static_cast<size_t>(p.width()));
    DequantizeLatentRow(p.cache.view, 0, row.data());
    for (int64_t t = 0; t < p.tokens; ++t) {
      for (int64_t h = 0; h < p.heads; ++h) {
        for (int64_t d = 0; d < p.width(); ++d) {
          const size_t i = static_cast<size_t>((t * p.heads + h) * p.width() + d);
          p.q_bf16[i] = FloatToBf16(-4.0f * row[static_cast<size_t>(d)] + 0.25f * static_cast<float>(h % 3));
          p.q[i] = Bf16ToFloat(p.q_bf16[i]);
        }
      }
    }
    RandomIndices(p, 62);
    p.scale = 1.0f;  // |z| in the hundreds: the running maximum must rescale correctly
    CheckBothPaths(p);
    p.scale = -0.05f;  // flips the signs
    CheckBothPaths(p);
  }

  TEST_CASE("decode with more splits than valid slots merges empty partial states correctly") {
    ENVFORGE_REQUIRE_GPU();
    Problem p = MakeProblem(1, 64, 512, 64, 2048, 1000, 71);
    // Three valid entries in the whole selection, in different chunks.
    p.indices[5] = 17;
    p.indices[900] = 3;
    p.indices[2047] = 999;
    CheckBothPaths(p);
    Problem one = MakeProblem(1, 128, 512, 64, 2048, 1000, 72);
    one.indices[1500] = 42;
    CheckBothPaths(one);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels::cuda
