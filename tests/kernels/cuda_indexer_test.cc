// Lightning-indexer logits on the GPU (kernels/cuda/indexer_logits.h) against the CPU twin
// ref::IndexerScores (kernels/cpu/indexer_scores.h), for prefill (contiguous keys, per-query
// windows) and decode (paged key cache), plus the host-side argument checks and page packing.
//
// Tolerance: the GPU forms the same exact FP8 products but sums them in tensor-core order (and
// FP8 MMAs may keep fewer than fp32's accumulator bits), then sums heads in another order. Each
// logit is therefore checked against a bound proportional to its own magnitude of terms,
//   |gpu - ref| <= 2^-10 * key_scale * sum_h |w_h| * sum_d |q_hd * k_d|,
// which holds even for a 13-bit accumulator over 4 MMA steps and ReLU (1-Lipschitz) but is about
// 100x below what a wrong head, key, weight or scale produces on random data (~0.1 of that sum).
// The largest error relative to its row's max |logit| is reported. -inf positions must match
// exactly, and entries outside the documented output range must stay untouched.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/indexer_scores.h"
#include "kernels/cuda/indexer_logits.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels::cuda {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kTolerance = 1.0 / 1024;  // times the sum of |terms|, see the file comment
constexpr float kSentinel = 12345.0f;      // marks output entries the kernels must not write

// ---- shared by both kernels: inputs, the CPU expectation and the comparison

// One query row's scores over `keys` contiguous keys, with the error bound of each entry.
struct ExpectedRow {
  std::vector<float> value;   // ref::IndexerScores
  std::vector<double> bound;  // kTolerance * key_scale * sum_h |w_h| * sum_d |q_hd k_d|
};

ExpectedRow ScoreOnCpu(const uint8_t* q, const float* weights, int64_t heads, int64_t dim, const uint8_t* keys,
                       const float* key_scale, int64_t keys_count) {
  ExpectedRow row;
  row.value.resize(static_cast<size_t>(keys_count));
  row.bound.resize(static_cast<size_t>(keys_count));
  IndexerScoresArgs args;
  args.q = q;
  args.head_weight = weights;
  args.keys = keys;
  args.key_scale = key_scale;
  args.queries = 1;
  args.heads = heads;
  args.dim = dim;
  args.keys_count = keys_count;
  if (keys_count > 0) ref::IndexerScores(args, row.value.data());
  const float* table = Fp8E4M3Table();
  for (int64_t s = 0; s < keys_count; ++s) {
    double magnitude = 0.0;
    for (int64_t h = 0; h < heads; ++h) {
      double terms = 0.0;
      for (int64_t d = 0; d < dim; ++d) terms += std::fabs(double{table[q[h * dim + d]]} * table[keys[s * dim + d]]);
      magnitude += std::fabs(double{weights[h]}) * terms;
    }
    row.bound[static_cast<size_t>(s)] = kTolerance * std::fabs(double{key_scale[s]}) * magnitude;
  }
  return row;
}

// Counts mismatches of one output row against the expectation: entries [0, visible_begin) and
// [visible_end, written_end) must be -inf, [visible_begin, visible_end) within the bound
// (expected values are indexed by column; an expected -inf there must be matched exactly), and
// [written_end, row_length) the sentinel.
struct RowReport {
  int failures = 0;
  double worst_relative_to_row_max = 0.0;
};
void CompareRow(const float* actual, int64_t row_length, const ExpectedRow& expected, int64_t visible_begin,
                int64_t visible_end, int64_t written_end, const char* what, int64_t row_index, RowReport& report) {
  double row_max = 0.0;
  for (int64_t s = visible_begin; s < visible_end; ++s) {
    const double e = expected.value[static_cast<size_t>(s)];
    if (std::isfinite(e)) row_max = std::max(row_max, std::fabs(e));
  }
  for (int64_t s = 0; s < row_length; ++s) {
    const float a = actual[s];
    bool ok;
    if (s >= written_end) {
      ok = a == kSentinel;
    } else if (s < visible_begin || s >= visible_end) {
      ok = a == kNegInf;
    } else if (expected.value[static_cast<size_t>(s)] == kNegInf) {  // a token of an unreadable page
      ok = a == kNegInf;
    } else {
      const double e = expected.value[static_cast<size_t>(s)];
      const double error = std::fabs(double{a} - e);
      ok = std::isfinite(a) && error <= expected.bound[static_cast<size_t>(s)];
      if (row_max > 0 && std::isfinite(a))
        report.worst_relative_to_row_max = std::max(report.worst_relative_to_row_max, error / row_max);
    }
    if (!ok && ++report.failures <= 8) {
      MESSAGE(what << " row " << row_index << " column " << s << ": got " << a << ", window [" << visible_begin << ", "
                   << visible_end << "), written to " << written_end << ", expected "
                   << (s < visible_begin || s >= visible_end || s >= written_end
                           ? std::nan("")
                           : expected.value[static_cast<size_t>(s)]));
    }
  }
}

std::vector<uint8_t> Codes(size_t count, uint32_t seed) { return kernels::testing::RandomFp8Codes(count, seed); }

std::vector<float> PositiveScales(size_t count, uint32_t seed) {
  std::vector<float> scales = kernels::testing::RandomFloats(count, seed, 0.01f);
  for (float& s : scales) s = std::fabs(s) + 1e-3f;
  return scales;
}

// ---- prefill

struct PrefillCase {
  int64_t queries = 1, heads = 64, dim = 128, keys_count = 64;
  std::optional<std::vector<int32_t>> key_begin, key_end;
  int64_t logits_stride = -1;  // -1: keys_count rounded up to 4
  std::vector<uint8_t> q, keys;
  std::vector<float> weights, key_scale;
};

// Random codes, weights and positive key scales for the shape of c.
void FillRandom(PrefillCase& c, uint32_t seed) {
  c.q = Codes(static_cast<size_t>(c.queries * c.heads * c.dim), seed);
  c.keys = Codes(static_cast<size_t>(c.keys_count * c.dim), seed + 1);
  c.weights = kernels::testing::RandomFloats(static_cast<size_t>(c.queries * c.heads), seed + 2, 0.1f);
  c.key_scale = PositiveScales(static_cast<size_t>(c.keys_count), seed + 3);
}

std::vector<int32_t> CausalEnds(int64_t queries, int64_t keys_count) {
  std::vector<int32_t> ends(static_cast<size_t>(queries));
  for (int64_t t = 0; t < queries; ++t)
    ends[static_cast<size_t>(t)] = static_cast<int32_t>(keys_count - queries + t + 1);
  return ends;
}

void CheckPrefill(const PrefillCase& c) {
  CAPTURE(c.queries);
  CAPTURE(c.heads);
  CAPTURE(c.dim);
  CAPTURE(c.keys_count);
  const int64_t stride = c.logits_stride >= 0 ? c.logits_stride : (c.keys_count + 3) / 4 * 4;
  std::vector<float> initial(static_cast<size_t>(c.queries * stride), kSentinel);
  DeviceBuffer q = testing::ToDevice(c.q), weights = testing::ToDevice(c.weights), keys = testing::ToDevice(c.keys),
               key_scale = testing::ToDevice(c.key_scale), logits = testing::ToDevice(initial);
  std::optional<DeviceBuffer> begin, end;
  if (c.key_begin) begin = testing::ToDevice(*c.key_begin);
  if (c.key_end) end = testing::ToDevice(*c.key_end);
  Result<Stream> stream = Stream::Create();
  REQUIRE(stream.ok());
  IndexerLogitsArgs args;
  args.q = q.as<uint8_t>();
  args.head_weight = weights.as<float>();
  args.keys = keys.as<uint8_t>();
  args.key_scale = key_scale.as<float>();
  args.key_begin = begin ? begin->as<int32_t>() : nullptr;
  args.key_end = end ? end->as<int32_t>() : nullptr;
  args.queries = c.queries;
  args.heads = c.heads;
  args.dim = c.dim;
  args.keys_count = c.keys_count;
  args.logits = logits.as<float>();
  args.logits_stride = stride;
  Status launched = IndexerLogitsPrefill(args, stream->get());
  REQUIRE_MESSAGE(launched.ok(), launched.message());
  Status synced = stream->Synchronize();
  REQUIRE_MESSAGE(synced.ok(), synced.message());
  const std::vector<float> actual = testing::FromDevice<float>(logits, initial.size());

  RowReport report;
  for (int64_t t = 0; t < c.queries; ++t) {
    // The documented window: [clamp(begin, 0, end), clamp(end, 0, keys_count)).
    int64_t hi = c.key_end ? std::clamp<int64_t>((*c.key_end)[static_cast<size_t>(t)], 0, c.keys_count) : c.keys_count;
    int64_t lo = c.key_begin ? std::clamp<int64_t>((*c.key_begin)[static_cast<size_t>(t)], 0, hi) : 0;
    ExpectedRow expected = ScoreOnCpu(c.q.data() + t * c.heads * c.dim, c.weights.data() + t * c.heads, c.heads, c.dim,
                                      c.keys.data(), c.key_scale.data(), hi);
    expected.value.resize(static_cast<size_t>(c.keys_count), kNegInf);
    expected.bound.resize(static_cast<size_t>(c.keys_count), 0.0);
    CompareRow(actual.data() + t * stride, stride, expected, lo, hi, c.keys_count, "prefill", t, report);
  }
  MESSAGE("prefill: largest |gpu - ref| / row max |logit| = " << report.worst_relative_to_row_max);
  CHECK(report.failures == 0);
}

// ---- decode

struct DecodeCase {
  int64_t batch = 1, heads = 64, dim = 128, max_pages = 1;
  std::vector<int32_t> context_len;
  int64_t logits_stride = -1;           // -1: max_pages * 64
  int64_t spare_pages = 3;              // pages no sequence uses (filled with garbage)
  std::vector<int64_t> invalid_blocks;  // (sequence * max_pages + block) entries set to a bad page id
  uint32_t seed = 1;
};

void CheckDecode(const DecodeCase& c) {
  CAPTURE(c.batch);
  CAPTURE(c.heads);
  CAPTURE(c.dim);
  CAPTURE(c.max_pages);
  const int64_t stride = c.logits_stride >= 0 ? c.logits_stride : c.max_pages * kIndexerPageTokens;
  const int64_t page_bytes = IndexerPageBytes(c.dim);
  // Per sequence: contiguous keys and scales; pages handed out in a shuffled order.
  std::vector<int64_t> blocks(static_cast<size_t>(c.batch));
  int64_t used_pages = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    blocks[static_cast<size_t>(b)] =
        (c.context_len[static_cast<size_t>(b)] + kIndexerPageTokens - 1) / kIndexerPageTokens;
    used_pages += blocks[static_cast<size_t>(b)];
  }
  const int64_t num_pages = used_pages + c.spare_pages;
  std::vector<int32_t> order(static_cast<size_t>(num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(c.seed);
  std::shuffle(order.begin(), order.end(), rng);
  // Garbage everywhere first (NaN codes included): unused slots must never reach a logit.
  std::vector<uint8_t> pages(static_cast<size_t>(num_pages * page_bytes));
  for (uint8_t& byte : pages) byte = static_cast<uint8_t>(rng());
  std::vector<int32_t> table(static_cast<size_t>(c.batch * c.max_pages), -7);  // past a context: never read
  std::vector<std::vector<uint8_t>> keys(static_cast<size_t>(c.batch));
  std::vector<std::vector<float>> scales(static_cast<size_t>(c.batch));
  int64_t next_page = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t ctx = c.context_len[static_cast<size_t>(b)];
    keys[static_cast<size_t>(b)] = Codes(static_cast<size_t>(ctx * c.dim), c.seed * 100 + static_cast<uint32_t>(b));
    scales[static_cast<size_t>(b)] =
        PositiveScales(static_cast<size_t>(ctx), c.seed * 100 + 50 + static_cast<uint32_t>(b));
    int32_t* row = table.data() + b * c.max_pages;
    for (int64_t block = 0; block < blocks[static_cast<size_t>(b)]; ++block)
      row[block] = order[static_cast<size_t>(next_page++)];
    PackIndexerPages(keys[static_cast<size_t>(b)].data(), scales[static_cast<size_t>(b)].data(), ctx, c.dim, row,
                     pages.data());
  }
  for (int64_t entry : c.invalid_blocks) table[static_cast<size_t>(entry)] = static_cast<int32_t>(num_pages + 5);
  const std::vector<uint8_t> q = Codes(static_cast<size_t>(c.batch * c.heads * c.dim), c.seed + 7);
  const std::vector<float> weights =
      kernels::testing::RandomFloats(static_cast<size_t>(c.batch * c.heads), c.seed + 8, 0.1f);

  std::vector<float> initial(static_cast<size_t>(c.batch * stride), kSentinel);
  DeviceBuffer device_q = testing::ToDevice(q), device_weights = testing::ToDevice(weights),
               device_pages = testing::ToDevice(pages), device_table = testing::ToDevice(table),
               device_context = testing::ToDevice(c.context_len), logits = testing::ToDevice(initial);
  Result<Stream> stream = Stream::Create();
  REQUIRE(stream.ok());
  PagedIndexerLogitsArgs args;
  args.q = device_q.as<uint8_t>();
  args.head_weight = device_weights.as<float>();
  args.pages = device_pages.as<uint8_t>();
  args.block_table = device_table.as<int32_t>();
  args.context_len = device_context.as<int32_t>();
  args.batch = c.batch;
  args.heads = c.heads;
  args.dim = c.dim;
  args.num_pages = num_pages;
  args.max_pages_per_seq = c.max_pages;
  args.logits = logits.as<float>();
  args.logits_stride = stride;
  Status launched = IndexerLogitsDecode(args, stream->get());
  REQUIRE_MESSAGE(launched.ok(), launched.message());
  Status synced = stream->Synchronize();
  REQUIRE_MESSAGE(synced.ok(), synced.message());
  const std::vector<float> actual = testing::FromDevice<float>(logits, initial.size());

  RowReport report;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t ctx = c.context_len[static_cast<size_t>(b)];
    ExpectedRow expected = ScoreOnCpu(q.data() + b * c.heads * c.dim, weights.data() + b * c.heads, c.heads, c.dim,
                                      keys[static_cast<size_t>(b)].data(), scales[static_cast<size_t>(b)].data(), ctx);
    // Tokens of a block whose table entry is not a page score -inf.
    for (int64_t entry : c.invalid_blocks) {
      if (entry / c.max_pages != b) continue;
      const int64_t block = entry % c.max_pages;
      for (int64_t s = block * kIndexerPageTokens; s < std::min(ctx, (block + 1) * kIndexerPageTokens); ++s) {
        expected.value[static_cast<size_t>(s)] = kNegInf;
      }
    }
    expected.value.resize(static_cast<size_t>(stride), kNegInf);
    expected.bound.resize(static_cast<size_t>(stride), 0.0);
    RowReport row_report;
    CompareRow(actual.data() + b * stride, stride, expected, 0, ctx, stride, "decode", b, row_report);
    report.failures += row_report.failures;
    report.worst_relative_to_row_max = std::max(report.worst_relative_to_row_max, row_report.worst_relative_to_row_max);
  }
  MESSAGE("decode: largest |gpu - ref| / row max |logit| = " << report.worst_relative_to_row_max);
  CHECK(report.failures == 0);
}

TEST_SUITE("kernels.cuda.indexer_logits") {
  // ---- host-side cases (no GPU needed)

  TEST_CASE("PackIndexerPages puts token i in slot i % 64 of page_of_block[i / 64] and leaves the rest") {
    const int64_t dim = 32, tokens = 130;  // three blocks, the last one with 2 tokens
    const std::vector<uint8_t> keys = Codes(static_cast<size_t>(tokens * dim), 3);
    std::vector<float> scales(static_cast<size_t>(tokens));
    for (int64_t i = 0; i < tokens; ++i) scales[static_cast<size_t>(i)] = 0.5f + static_cast<float>(i);
    const std::vector<int32_t> page_of_block = {3, 0, 2};  // shuffled; page 1 unused
    const int64_t page_bytes = IndexerPageBytes(dim);
    CHECK(page_bytes == 64 * 36);
    std::vector<uint8_t> pages(static_cast<size_t>(4 * page_bytes), 0xab);
    PackIndexerPages(keys.data(), scales.data(), tokens, dim, page_of_block.data(), pages.data());
    for (int64_t i = 0; i < tokens; ++i) {
      const uint8_t* page = pages.data() + page_of_block[static_cast<size_t>(i / 64)] * page_bytes;
      REQUIRE(std::equal(keys.begin() + i * dim, keys.begin() + (i + 1) * dim, page + (i % 64) * dim));
      float scale;
      std::memcpy(&scale, page + 64 * dim + (i % 64) * 4, 4);
      REQUIRE(scale == scales[static_cast<size_t>(i)]);
    }
    // Page 1 and the unused slots 2..63 of page 2 are untouched.
    CHECK(std::all_of(pages.begin() + page_bytes, pages.begin() + 2 * page_bytes, [](uint8_t b) { return b == 0xab; }));
    const uint8_t* last = pages.data() + 2 * page_bytes;
    CHECK(std::all_of(last + 2 * dim, last + 64 * dim, [](uint8_t b) { return b == 0xab; }));
    CHECK(std::all_of(last + 64 * dim + 8, last + page_bytes, [](uint8_t b) { return b == 0xab; }));
  }

  TEST_CASE("IndexerLogitsPrefill rejects bad arguments, naming them, before any CUDA call") {
    alignas(16) static uint8_t bytes[4096];
    alignas(16) static float floats[1024];
    IndexerLogitsArgs args;
    args.q = bytes;
    args.head_weight = floats;
    args.keys = bytes;
    args.key_scale = floats;
    args.queries = 2;
    args.heads = 4;
    args.dim = 64;
    args.keys_count = 10;
    args.logits = floats;
    args.logits_stride = 12;
    auto expect_error = [&](const char* needle) {
      Status status = IndexerLogitsPrefill(args, nullptr);
      CHECK(status.code() == StatusCode::kInvalidArgument);
      CHECK_MESSAGE(status.message().find(needle) != std::string::npos, status.message());
    };
    SUBCASE("dim") {
      args.dim = 48;
      expect_error("dim must be 32, 64 or 128, got 48");
    }
    SUBCASE("heads") {
      args.heads = 0;
      expect_error("heads");
      args.heads = 129;
      expect_error("got 129");
    }
    SUBCASE("queries and keys_count") {
      args.queries = -1;
      expect_error("queries");
      args.queries = 2;
      args.keys_count = -3;
      expect_error("keys_count");
    }
    SUBCASE("logits_stride below keys_count or not a multiple of 4") {
      args.logits_stride = 8;
      expect_error("logits_stride");
      args.logits_stride = 14;
      expect_error("logits_stride");
    }
    SUBCASE("null and misaligned pointers") {
      args.q = nullptr;
      expect_error("q is null");
      args.q = bytes;
      args.keys = bytes + 4;
      expect_error("keys is not 16-byte aligned");
      args.keys = bytes;
      args.key_end = reinterpret_cast<const int32_t*>(bytes + 8);
      expect_error("key_end is not 16-byte aligned");
      args.key_end = nullptr;
      args.logits = nullptr;
      expect_error("logits is null");
    }
    SUBCASE("nothing to compute is a no-op") {
      args.queries = 0;
      args.q = nullptr;
      CHECK(IndexerLogitsPrefill(args, nullptr).ok());
      args.queries = 2;
      args.keys_count = 0;
      CHECK(IndexerLogitsPrefill(args, nullptr).ok());
    }
  }

  TEST_CASE("IndexerLogitsDecode rejects bad arguments, naming them, before any CUDA call") {
    alignas(16) static uint8_t bytes[8192];
    alignas(16) static float floats[1024];
    alignas(16) static int32_t ints[64];
    PagedIndexerLogitsArgs args;
    args.q = bytes;
    args.head_weight = floats;
    args.pages = bytes;
    args.block_table = ints;
    args.context_len = ints;
    args.batch = 2;
    args.heads = 64;
    args.dim = 128;
    args.num_pages = 1;
    args.max_pages_per_seq = 2;
    args.logits = floats;
    args.logits_stride = 128;
    auto expect_error = [&](const char* needle) {
      Status status = IndexerLogitsDecode(args, nullptr);
      CHECK(status.code() == StatusCode::kInvalidArgument);
      CHECK_MESSAGE(status.message().find(needle) != std::string::npos, status.message());
    };
    SUBCASE("shapes") {
      args.dim = 16;
      expect_error("dim must be 32, 64 or 128, got 16");
      args.dim = 128;
      args.heads = 200;
      expect_error("heads must be in [1, 128], got 200");
      args.heads = 64;
      args.batch = -2;
      expect_error("batch");
      args.batch = 2;
      args.num_pages = -1;
      expect_error("num_pages");
      args.num_pages = 1;
      args.max_pages_per_seq = -1;
      expect_error("max_pages_per_seq");
      args.max_pages_per_seq = 2;
      args.logits_stride = 130;
      expect_error("logits_stride");
    }
    SUBCASE("null and misaligned pointers") {
      args.block_table = nullptr;
      expect_error("block_table is null");
      args.block_table = ints;
      args.pages = bytes + 1;
      expect_error("pages is not 16-byte aligned");
      args.pages = bytes;
      args.context_len = nullptr;
      expect_error("context_len is null");
    }
    SUBCASE("an empty batch is a no-op") {
      args.batch = 0;
      args.q = nullptr;
      CHECK(IndexerLogitsDecode(args, nullptr).ok());
    }
  }

  // ---- GPU consistency cases

  TEST_CASE("GPU prefill logits match the CPU: causal, the real model's shape") {
    ENVFORGE_REQUIRE_GPU();
    PrefillCase c;
    c.queries = 299;  // not a multiple of the 4 queries per CTA (64 heads of dim 128: 2 warps each)
    c.heads = 64;
    c.dim = 128;
    c.keys_count = 300;  // query t sees keys [0, t + 2): one key before the chunk
    c.key_end = CausalEnds(c.queries, c.keys_count);
    FillRandom(c, 1);
    CheckPrefill(c);
  }

  TEST_CASE("GPU prefill logits match the CPU for every dim and head count") {
    ENVFORGE_REQUIRE_GPU();
    uint32_t seed = 10;
    for (int64_t dim : {32, 64, 128}) {
      for (int64_t heads : {1, 4, 13, 64, 72, 128}) {
        PrefillCase c;
        c.queries = 11;
        c.heads = heads;
        c.dim = dim;
        c.keys_count = 141;  // two full tiles and a ragged one
        c.key_end = CausalEnds(c.queries, c.keys_count);
        FillRandom(c, seed++);
        CheckPrefill(c);
      }
    }
  }

  TEST_CASE("GPU prefill logits match the CPU: per-query windows of concatenated requests") {
    ENVFORGE_REQUIRE_GPU();
    // Three requests of 70, 63 and 67 tokens in one chunk: query t sees [request start, t + 1).
    PrefillCase c;
    c.queries = 200;
    c.heads = 64;
    c.dim = 128;
    c.keys_count = 200;
    c.key_begin.emplace();
    c.key_end.emplace();
    for (int32_t t = 0; t < 200; ++t) {
      c.key_begin->push_back(t < 70 ? 0 : (t < 133 ? 70 : 133));
      c.key_end->push_back(t + 1);
    }
    FillRandom(c, 21);
    CheckPrefill(c);
  }

  TEST_CASE("GPU prefill logits: empty, inverted and out-of-range windows give rows of -inf") {
    ENVFORGE_REQUIRE_GPU();
    PrefillCase c;
    c.queries = 9;
    c.heads = 4;
    c.dim = 64;
    c.keys_count = 100;
    // begin == end, begin > end, end <= 0, begin past the keys, a window clipped to keys_count, a
    // one-key window, a window inside one tile, one crossing a tile edge, and the full range.
    c.key_begin = std::vector<int32_t>{5, 50, -10, 150, 90, 63, 3, 60, 0};
    c.key_end = std::vector<int32_t>{5, 40, 0, 200, 1000, 64, 9, 70, 100};
    FillRandom(c, 31);
    CheckPrefill(c);
  }

  TEST_CASE("GPU prefill logits: one key, no windows, and a padded logits stride left untouched") {
    ENVFORGE_REQUIRE_GPU();
    PrefillCase one;
    one.queries = 3;
    one.heads = 64;
    one.dim = 128;
    one.keys_count = 1;
    one.logits_stride = 8;  // columns 1..7 keep the sentinel
    FillRandom(one, 41);
    CheckPrefill(one);

    PrefillCase all;
    all.queries = 17;
    all.heads = 5;
    all.dim = 32;
    all.keys_count = 777;
    all.logits_stride = 800;
    FillRandom(all, 42);
    CheckPrefill(all);
  }

  TEST_CASE("GPU prefill logits: few queries over many keys are split into key chunks") {
    ENVFORGE_REQUIRE_GPU();
    PrefillCase c;
    c.queries = 3;
    c.heads = 4;
    c.dim = 32;
    c.keys_count = 70001;
    // Windows crossing chunk boundaries, the whole range, and the very last key.
    c.key_begin = std::vector<int32_t>{1000, 0, 70000};
    c.key_end = std::vector<int32_t>{50001, 70001, 70001};
    FillRandom(c, 51);
    CheckPrefill(c);
  }

  TEST_CASE("GPU prefill logits: zero weights and all-negative dot products give zero logits") {
    ENVFORGE_REQUIRE_GPU();
    PrefillCase zero;
    zero.queries = 10;
    zero.heads = 64;
    zero.dim = 128;
    zero.keys_count = 90;
    zero.key_end = CausalEnds(zero.queries, zero.keys_count);
    FillRandom(zero, 61);
    std::fill(zero.weights.begin(), zero.weights.end(), 0.0f);
    CheckPrefill(zero);

    // Positive queries against negative keys: every q . k < 0, so ReLU zeroes every head.
    PrefillCase negative = zero;
    FillRandom(negative, 62);
    for (uint8_t& code : negative.q) code &= 0x7e;  // clear the sign, keep clear of NaN (0x7f)
    for (uint8_t& code : negative.keys) code = static_cast<uint8_t>((code & 0x7e) | 0x80);
    for (uint8_t& code : negative.q) code = code == 0 ? 0x38 : code;  // no zero queries: dots strictly < 0
    for (uint8_t& code : negative.keys) code = code == 0x80 ? 0xb8 : code;
    CheckPrefill(negative);
  }

  TEST_CASE("GPU decode logits match the CPU: shuffled pages, ragged contexts, batch 1 and 17") {
    ENVFORGE_REQUIRE_GPU();
    DecodeCase one;
    one.batch = 1;
    one.max_pages = 40;
    one.context_len = {2500};  // not a multiple of 64
    one.seed = 3;
    CheckDecode(one);

    DecodeCase many;
    many.batch = 17;
    many.max_pages = 20;
    // Empty, one token, page edges, ragged, and full contexts.
    many.context_len = {0, 1, 63, 64, 65, 127, 128, 129, 700, 1000, 1279, 1280, 333, 2, 640, 641, 999};
    many.seed = 4;
    CheckDecode(many);
  }

  TEST_CASE("GPU decode logits match the CPU for every dim and head count") {
    ENVFORGE_REQUIRE_GPU();
    uint32_t seed = 20;
    for (int64_t dim : {32, 64, 128}) {
      for (int64_t heads : {1, 4, 13, 64, 72, 128}) {
        DecodeCase c;
        c.batch = 3;
        c.heads = heads;
        c.dim = dim;
        c.max_pages = 5;
        c.context_len = {300, 17, 257};
        c.seed = seed++;
        CheckDecode(c);
      }
    }
  }

  TEST_CASE("GPU decode logits: strides past and below the table's capacity, and bad page ids") {
    ENVFORGE_REQUIRE_GPU();
    DecodeCase wide;
    wide.batch = 2;
    wide.max_pages = 3;
    wide.context_len = {150, 192};
    wide.logits_stride = 300;  // past max_pages * 64: -inf to the end of each row
    CheckDecode(wide);

    DecodeCase narrow;
    narrow.batch = 2;
    narrow.max_pages = 8;
    narrow.context_len = {200, 7};
    narrow.logits_stride = 204;  // below max_pages * 64 = 512, above every context
    CheckDecode(narrow);

    DecodeCase bad;
    bad.batch = 2;
    bad.max_pages = 4;
    bad.context_len = {256, 100};
    bad.invalid_blocks = {1, 4};  // sequence 0 block 1, sequence 1 block 0
    CheckDecode(bad);
  }

  TEST_CASE("GPU decode logits: a long context spread over many CTAs") {
    ENVFORGE_REQUIRE_GPU();
    DecodeCase c;
    c.batch = 2;
    c.heads = 64;
    c.dim = 128;
    c.max_pages = 300;
    c.context_len = {19150, 4097};
    c.seed = 9;
    CheckDecode(c);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels::cuda
