// KvCache: row layout and sizes, FP8/bf16 storage, growth, and prefix sharing by Fork.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "inference/kv_cache.h"
#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/sparse_attention.h"

namespace envforge::inference {
namespace {

KvCacheShape SmallShape() {
  KvCacheShape shape;
  shape.layers = 2;
  shape.kv_rank = 256;
  shape.rope_dim = 64;
  shape.index_head_dim = 128;
  shape.pow2_scales = true;
  return shape;
}

// A deterministic latent row for (layer, position).
std::vector<float> LatentValues(const KvCacheShape& shape, int64_t layer, int64_t position) {
  std::vector<float> v(static_cast<size_t>(shape.kv_rank + shape.rope_dim));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(
        std::sin(0.37 * static_cast<double>(i) + 1.3 * static_cast<double>(position) + static_cast<double>(layer)));
  }
  return v;
}

void Append(KvCache& cache, int64_t count) {
  const KvCacheShape& shape = cache.shape();
  int64_t base = cache.length();
  cache.BeginAppend(count);
  for (int64_t layer = 0; layer < shape.layers; ++layer) {
    for (int64_t i = 0; i < count; ++i) {
      auto v = LatentValues(shape, layer, base + i);
      cache.WriteLatent(layer, i, v.data(), v.data() + shape.kv_rank);
      std::vector<uint8_t> key(static_cast<size_t>(shape.index_head_dim), static_cast<uint8_t>((base + i) & 0x3f));
      cache.WriteIndexKey(layer, i, key.data(), static_cast<float>(base + i));
    }
  }
  cache.CommitAppend();
}

// Checks the row at absolute `position` of `layer` decodes to the written values (FP8 / bf16 error).
void CheckRow(const KvCache& cache, int64_t layer, int64_t position) {
  const KvCacheShape& shape = cache.shape();
  for (int s = 0; s < cache.segment_count(); ++s) {
    KvSegmentView view = cache.Segment(s, layer);
    if (position < view.begin || position >= view.begin + view.rows) continue;
    int64_t row = position - view.begin;
    std::vector<float> decoded(static_cast<size_t>(shape.kv_rank + shape.rope_dim));
    kernels::DequantizeLatentRow(view.latent, row, decoded.data());
    auto expected = LatentValues(shape, layer, position);
    for (size_t i = 0; i < decoded.size(); ++i) {
      // e4m3 keeps 3 mantissa bits (relative error <= 1/16 of the group scale's range); bf16 8 bits.
      double tolerance = i < static_cast<size_t>(shape.kv_rank) ? 0.07 : 0.005;
      CHECK(std::fabs(decoded[i] - expected[i]) <= tolerance);
    }
    CHECK(view.index_keys[row * shape.index_head_dim] == static_cast<uint8_t>(position & 0x3f));
    CHECK(view.index_scales[row] == static_cast<float>(position));
    return;
  }
  FAIL("position " << position << " not in any segment");
}

TEST_SUITE("inference.kv_cache") {
  TEST_CASE("bytes per token: 656 latent + 132 indexer bytes per layer for the 671B dims") {
    KvCacheShape shape;
    shape.layers = 61;
    shape.kv_rank = 512;
    shape.rope_dim = 64;
    shape.index_head_dim = 128;
    CHECK(shape.latent_row_bytes() == 656);
    CHECK(shape.index_row_bytes() == 132);
    CHECK(shape.bytes_per_token() == 61 * (656 + 132));
    shape.index_head_dim = 0;  // dense attention keeps no indexer keys
    CHECK(shape.bytes_per_token() == 61 * 656);
  }

  TEST_CASE("rows round-trip through FP8 + bf16 storage and survive growth") {
    KvCache cache(SmallShape());
    Append(cache, 3);
    for (int i = 0; i < 40; ++i) Append(cache, 1);  // token-by-token growth reallocates several times
    Append(cache, 100);
    REQUIRE(cache.length() == 143);
    CHECK(cache.segment_count() == 1);
    for (int64_t layer = 0; layer < 2; ++layer) {
      for (int64_t position : {0, 1, 2, 3, 20, 42, 43, 142}) CheckRow(cache, layer, position);
    }
    CHECK(cache.own_bytes() == 143 * SmallShape().bytes_per_token());
  }

  TEST_CASE("FP8 latent scales are powers of two with UE8M0") {
    KvCache cache(SmallShape());
    Append(cache, 2);
    KvSegmentView view = cache.Segment(0, 1);
    for (int64_t g = 0; g < 2 * 2; ++g) {
      int exponent = 0;
      CHECK(std::frexp(view.latent.scales[g], &exponent) == 0.5);
    }
  }

  TEST_CASE("pending rows are visible to the step's views and dropped by AbortAppend") {
    KvCache cache(SmallShape());
    Append(cache, 5);
    cache.BeginAppend(2);
    CHECK(cache.Segment(0, 0).rows == 7);
    CHECK(cache.length() == 5);
    cache.AbortAppend();
    CHECK(cache.Segment(0, 0).rows == 5);
    CHECK(cache.length() == 5);
  }

  TEST_CASE("Fork shares the prompt rows: one copy for all forks, private suffixes") {
    auto prompt = std::make_unique<KvCache>(SmallShape());
    Append(*prompt, 10);
    const uint8_t* original_rows = prompt->Segment(0, 0).latent.nope;
    auto first = prompt->Fork();
    auto second = prompt->Fork();
    // The prompt's arrays became the shared prefix as they were: no copy.
    CHECK(first->Segment(0, 0).latent.nope == original_rows);
    CHECK(second->Segment(0, 0).latent.nope == original_rows);
    CHECK(first->prefix_length() == 10);
    CHECK(first->own_bytes() == 0);
    CHECK(first->prefix_bytes() == 10 * SmallShape().bytes_per_token());

    Append(*first, 3);
    Append(*second, 1);
    CHECK(first->length() == 13);
    CHECK(second->length() == 11);
    CHECK(first->segment_count() == 2);
    KvSegmentView own = first->Segment(1, 0);
    CHECK(own.begin == 10);
    CHECK(own.rows == 3);
    for (int64_t position : {0, 9, 10, 12}) CheckRow(*first, 0, position);
    for (int64_t position : {0, 9, 10}) CheckRow(*second, 1, position);

    // A fork of a fork copies prefix + own into a new prefix; the siblings are unaffected.
    auto nested = first->Fork();
    CHECK(nested->prefix_length() == 13);
    CHECK(first->prefix_length() == 13);
    CHECK(second->prefix_length() == 10);
    CHECK(second->Segment(0, 0).latent.nope == original_rows);
    for (int64_t position : {0, 11, 12}) CheckRow(*nested, 1, position);
    // The prefix outlives the cache it came from.
    prompt.reset();
    CheckRow(*second, 0, 5);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
