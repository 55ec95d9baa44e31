// Per-sequence KV caches of the DSA engine (dsa-engine.md 4.3, 4.4 step 6 and 5): for every layer
// the MLA latent in the FP8 format of kernels/cpu/sparse_attention.h and the lightning-indexer
// key cache, both append-only per position.
//
// Row layout per token and layer (KvCacheShape):
//   latent: kv_rank fp8 e4m3 (groups of 128) + kv_rank/128 fp32 scales + rope_dim bf16 values
//           (656 bytes for the 671B dims: 512 + 16 + 128)
//   indexer key: index_head_dim fp8 + 1 fp32 scale (132 bytes), absent without an indexer.
// Each array is contiguous per layer, so a segment's rows are directly a kernels::LatentCacheView
// and an IndexerScoresArgs key range.
//
// Sharing a prompt among n samples: a cache is a read-only shared *prefix* segment plus a private
// *own* segment. Fork() freezes the rows written so far into a shared prefix (moved, not copied,
// when the cache had no prefix yet) and returns a new cache over the same prefix; both continue
// appending into their own empty segments. So n samples of one prompt hold the prompt's rows once.
// The attention kernel reads both segments through one index space (SparseAttentionArgs::suffix),
// so no rows are copied per step; indexer scores are computed per segment into one row.
// Forking a cache that already has a prefix and own rows copies both into a new prefix (nested
// forks only; the generator forks once per prompt).
//
// Lifecycle of one step (Model::Forward): BeginAppend(n) reserves room for n more tokens (growth
// happens here only, so views taken after it stay valid until the next BeginAppend); each layer
// writes its n pending rows with WriteLatent / WriteIndexKey and reads segments that already
// include them (Segment(...) covers committed + pending rows); CommitAppend() makes them part of
// length(). A step that fails before CommitAppend leaves length() unchanged (AbortAppend).
//
// Rows on a device (the GPU engine, inference/cuda_forward.h): a cache may carry an attachment that
// holds its rows elsewhere (the device page pool). Such a cache is *length-only* on the host: it
// counts committed and pending tokens and shares its prefix length on Fork exactly as above, but
// stores no host rows (WriteLatent, WriteIndexKey and Segment must not be called); Fork asks the
// attachment for the fork's attachment, so forking on the host forks the device pages. A cache is
// attached while empty (Model::NewCache of a GPU model does it), never detached.
//
// Thread safety: a KvCache is used by one thread at a time (the forward may write distinct rows of
// distinct caches from pool threads); a shared prefix is immutable and may be read by any number
// of caches concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "inference/model_config.h"
#include "kernels/cpu/sparse_attention.h"

namespace envforge::inference {

struct KvCacheShape {
  int64_t layers = 0;
  int64_t kv_rank = 0;         // MLA latent width (multiple of 128)
  int64_t rope_dim = 0;        // decoupled RoPE key width (stored bf16)
  int64_t index_head_dim = 0;  // 0: no indexer key cache
  bool pow2_scales = true;     // UE8M0 scales for the FP8 rows (config.ue8m0_scales)

  // with_indexer false (dense attention, DeepseekV3) leaves out the indexer key cache.
  static KvCacheShape FromConfig(const ModelConfig& config, bool with_indexer);
  int64_t latent_row_bytes() const { return kv_rank + kv_rank / 128 * 4 + rope_dim * 2; }
  int64_t index_row_bytes() const { return index_head_dim > 0 ? index_head_dim + 4 : 0; }
  // Bytes one token occupies over all layers (latent + indexer key).
  int64_t bytes_per_token() const { return layers * (latent_row_bytes() + index_row_bytes()); }
};

// Where an attached cache's rows live (see the file comment). Implemented by the GPU engine.
class KvCacheAttachment {
 public:
  virtual ~KvCacheAttachment() = default;
  // The attachment of a fork of the owning cache: it reads the same rows as this one at the moment
  // of the fork, and the two grow independently from then on. Must not fail: anything that needs
  // memory (e.g. copying a partly filled page) is deferred to the next append.
  virtual std::unique_ptr<KvCacheAttachment> Fork() = 0;
};

// A contiguous run of cache rows of one layer, as the kernels read them.
struct KvSegmentView {
  kernels::LatentCacheView latent;      // rows = the segment's rows
  const uint8_t* index_keys = nullptr;  // [rows, index_head_dim] fp8; nullptr without indexer
  const float* index_scales = nullptr;  // [rows]
  int64_t begin = 0;                    // absolute position of row 0
  int64_t rows = 0;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheShape& shape() const { return shape_; }
  int64_t length() const;         // committed tokens, prefix included
  int64_t prefix_length() const;  // rows held in the shared prefix
  int64_t pending() const { return pending_; }
  // Bytes this cache holds privately (its own segment's rows) and the shared prefix's bytes.
  int64_t own_bytes() const;
  int64_t prefix_bytes() const;

  // Reserves room for n more tokens; they become pending rows 0..n-1 (positions length()..).
  void BeginAppend(int64_t n);
  // Quantizes and stores pending row `pending_index` of `layer`: c_kv [kv_rank] fp32 goes to FP8
  // (1x128 groups), k_rope [rope_dim] to bf16.
  void WriteLatent(int64_t layer, int64_t pending_index, const float* c_kv, const float* k_rope);
  // Stores an already quantized indexer key: fp8 codes [index_head_dim] and its scale.
  void WriteIndexKey(int64_t layer, int64_t pending_index, const uint8_t* key, float scale);
  void CommitAppend();
  void AbortAppend();

  // 1 or 2 segments (prefix first when there is one, then own, which may be empty of committed
  // rows but includes pending rows). Views cover committed + pending rows.
  int segment_count() const;
  KvSegmentView Segment(int segment, int64_t layer) const;

  // Freezes the rows so far into a shared prefix and returns a new cache reading the same prefix.
  // No pending rows allowed (called between steps). An attached cache's fork carries
  // attachment()->Fork().
  std::unique_ptr<KvCache> Fork();

  // Makes this (empty, nothing pending) cache length-only, its rows held by `attachment`.
  void Attach(std::unique_ptr<KvCacheAttachment> attachment);
  KvCacheAttachment* attachment() const { return attachment_.get(); }

 private:
  struct Store;  // one segment's arrays, per layer
  KvCacheShape shape_;
  std::shared_ptr<const Store> prefix_;
  std::unique_ptr<Store> own_;
  int64_t pending_ = 0;
  std::unique_ptr<KvCacheAttachment> attachment_;  // null: rows on the host
};

}  // namespace envforge::inference
