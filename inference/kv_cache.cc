// KvCache: per-layer append-only arrays in a shared prefix segment and a private own segment.
#include "inference/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/fp8_quant.h"

namespace envforge::inference {

KvCacheShape KvCacheShape::FromConfig(const ModelConfig& config, bool with_indexer) {
  KvCacheShape shape;
  shape.layers = config.num_hidden_layers;
  shape.kv_rank = config.kv_lora_rank;
  shape.rope_dim = config.qk_rope_head_dim;
  shape.index_head_dim = with_indexer && config.has_indexer() ? config.index_head_dim : 0;
  shape.pow2_scales = config.ue8m0_scales;
  return shape;
}

// Rows [0, rows) are valid; capacity rows are allocated. Arrays are sized to capacity so rows can
// be written by index before they are counted.
struct KvCache::Store {
  struct Layer {
    std::vector<uint8_t> nope;
    std::vector<float> scales;
    std::vector<uint16_t> rope;
    std::vector<uint8_t> index_keys;
    std::vector<float> index_scales;
  };
  std::vector<Layer> layers;
  int64_t rows = 0;
  int64_t capacity = 0;

  Store(const KvCacheShape& shape) : layers(static_cast<size_t>(shape.layers)) {}

  void Grow(const KvCacheShape& shape, int64_t wanted) {
    if (wanted <= capacity) return;
    // Doubling keeps appends amortised O(1) per token even for token-by-token decode.
    int64_t new_capacity = std::max<int64_t>({wanted, capacity * 2, 16});
    auto n = static_cast<size_t>(new_capacity);
    int64_t groups = shape.kv_rank / 128;
    for (Layer& layer : layers) {
      layer.nope.resize(n * static_cast<size_t>(shape.kv_rank));
      layer.scales.resize(n * static_cast<size_t>(groups));
      layer.rope.resize(n * static_cast<size_t>(shape.rope_dim));
      if (shape.index_head_dim > 0) {
        layer.index_keys.resize(n * static_cast<size_t>(shape.index_head_dim));
        layer.index_scales.resize(n);
      }
    }
    capacity = new_capacity;
  }

  // Appends rows [0, count) of `other` (same shape) after this store's rows.
  void AppendFrom(const KvCacheShape& shape, const Store& other) {
    Grow(shape, rows + other.rows);
    auto copy = [](auto& dst, const auto& src, int64_t at, int64_t count, int64_t width) {
      std::copy_n(src.begin(), count * width, dst.begin() + at * width);
    };
    for (size_t l = 0; l < layers.size(); ++l) {
      const Layer& from = other.layers[l];
      Layer& to = layers[l];
      copy(to.nope, from.nope, rows, other.rows, shape.kv_rank);
      copy(to.scales, from.scales, rows, other.rows, shape.kv_rank / 128);
      copy(to.rope, from.rope, rows, other.rows, shape.rope_dim);
      if (shape.index_head_dim > 0) {
        copy(to.index_keys, from.index_keys, rows, other.rows, shape.index_head_dim);
        copy(to.index_scales, from.index_scales, rows, other.rows, 1);
      }
    }
    rows += other.rows;
  }
};

KvCache::KvCache(const KvCacheShape& shape) : shape_(shape), own_(std::make_unique<Store>(shape)) {
  assert(shape.kv_rank % 128 == 0);
}

KvCache::~KvCache() = default;

int64_t KvCache::length() const { return prefix_length() + own_->rows; }
int64_t KvCache::prefix_length() const { return prefix_ ? prefix_->rows : 0; }
int64_t KvCache::own_bytes() const { return own_->rows * shape_.bytes_per_token(); }
int64_t KvCache::prefix_bytes() const { return prefix_length() * shape_.bytes_per_token(); }

void KvCache::BeginAppend(int64_t n) {
  assert(pending_ == 0 && n >= 0);
  if (attachment_ == nullptr) own_->Grow(shape_, own_->rows + n);
  pending_ = n;
}

void KvCache::WriteLatent(int64_t layer, int64_t pending_index, const float* c_kv, const float* k_rope) {
  assert(attachment_ == nullptr && pending_index >= 0 && pending_index < pending_);
  Store::Layer& store = own_->layers[static_cast<size_t>(layer)];
  size_t row = static_cast<size_t>(own_->rows + pending_index);
  auto kv_rank = static_cast<size_t>(shape_.kv_rank);
  auto rope_dim = static_cast<size_t>(shape_.rope_dim);
  kernels::ActQuantFp8(c_kv, 1, shape_.kv_rank, 128, shape_.pow2_scales, store.nope.data() + row * kv_rank,
                       store.scales.data() + row * (kv_rank / 128));
  uint16_t* rope = store.rope.data() + row * rope_dim;
  for (size_t i = 0; i < rope_dim; ++i) rope[i] = kernels::FloatToBf16(k_rope[i]);
}

void KvCache::WriteIndexKey(int64_t layer, int64_t pending_index, const uint8_t* key, float scale) {
  assert(attachment_ == nullptr && shape_.index_head_dim > 0 && pending_index >= 0 && pending_index < pending_);
  Store::Layer& store = own_->layers[static_cast<size_t>(layer)];
  size_t row = static_cast<size_t>(own_->rows + pending_index);
  auto dim = static_cast<size_t>(shape_.index_head_dim);
  std::memcpy(store.index_keys.data() + row * dim, key, dim);
  store.index_scales[row] = scale;
}

void KvCache::CommitAppend() {
  own_->rows += pending_;
  pending_ = 0;
}

void KvCache::AbortAppend() { pending_ = 0; }

int KvCache::segment_count() const { return prefix_ ? 2 : 1; }

KvSegmentView KvCache::Segment(int segment, int64_t layer) const {
  assert(attachment_ == nullptr);
  bool is_prefix = prefix_ && segment == 0;
  const Store& store = is_prefix ? *prefix_ : *own_;
  const Store::Layer& arrays = store.layers[static_cast<size_t>(layer)];
  KvSegmentView view;
  view.rows = is_prefix ? store.rows : store.rows + pending_;
  view.begin = is_prefix ? 0 : prefix_length();
  view.latent.nope = arrays.nope.data();
  view.latent.scales = arrays.scales.data();
  view.latent.rope = arrays.rope.data();
  view.latent.rows = view.rows;
  view.latent.kv_rank = shape_.kv_rank;
  view.latent.rope_dim = shape_.rope_dim;
  if (shape_.index_head_dim > 0) {
    view.index_keys = arrays.index_keys.data();
    view.index_scales = arrays.index_scales.data();
  }
  return view;
}

std::unique_ptr<KvCache> KvCache::Fork() {
  assert(pending_ == 0);
  if (own_->rows > 0) {
    if (prefix_) {
      auto merged = std::make_shared<Store>(shape_);
      if (attachment_ != nullptr) {
        merged->rows = prefix_->rows + own_->rows;  // the rows themselves live with the attachment
      } else {
        merged->AppendFrom(shape_, *prefix_);
        merged->AppendFrom(shape_, *own_);
      }
      prefix_ = std::move(merged);
    } else {
      // The own arrays become the prefix as they are: no copy.
      prefix_ = std::shared_ptr<const Store>(std::move(own_));
    }
    own_ = std::make_unique<Store>(shape_);
  }
  auto fork = std::make_unique<KvCache>(shape_);
  fork->prefix_ = prefix_;
  if (attachment_ != nullptr) fork->attachment_ = attachment_->Fork();
  return fork;
}

void KvCache::Attach(std::unique_ptr<KvCacheAttachment> attachment) {
  assert(length() == 0 && pending_ == 0 && attachment_ == nullptr);
  attachment_ = std::move(attachment);
}

}  // namespace envforge::inference
