// The GPU engine's KV-cache memory: a fixed pool of 64-token pages on the device, shared by every
// KvCache of one CudaForward (inference/cuda_forward.h). A page id p names, in every layer, the
// latent rows [p * 64, p * 64 + 64) of that layer's latent array (kernels/cuda/sparse_mla.h
// format) and indexer page p of that layer's indexer array (kernels/cuda/indexer_logits.h
// layout); kernels/cuda/page_table.h maps token positions to these slots.
//
// A cache's pages are its DevicePagePool::Sequence (the cache's KvCacheAttachment): the page ids
// covering its tokens in order. Pages are reference counted:
//   * Fork shares every page of the source (no device work, cannot fail);
//   * a full page is never written again (append-only), so sharing it is safe for ever;
//   * a partly filled page that is shared is copied before the first append into it (copy on
//     write, in Reserve), so n samples forked from one prompt hold the prompt's full pages once and
//     the last partial page once per sample that writes to it.
// Reserve(...) takes every page a batch step needs (new pages and copies) or none: when the pool
// has too few free pages it returns ResourceExhausted and changes nothing. Capacity is fixed at
// creation (CudaForward sizes it from free device memory).
//
// Thread safety: the page bookkeeping is guarded by a mutex (a Sequence may be destroyed on any
// thread); page copies are queued on the pool's stream, the stream the forward runs on, so they
// are ordered with the kernels that read and write the pages.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "base/status.h"
#include "inference/kv_cache.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::inference {

class DevicePagePool : public std::enable_shared_from_this<DevicePagePool> {
 public:
  // The pages of one KvCache (its attachment). Destroying it releases its references.
  class Sequence final : public KvCacheAttachment {
   public:
    ~Sequence() override;
    std::unique_ptr<KvCacheAttachment> Fork() override;
    const std::vector<int32_t>& pages() const { return pages_; }

   private:
    friend class DevicePagePool;
    explicit Sequence(std::shared_ptr<DevicePagePool> pool) : pool_(std::move(pool)) {}
    std::shared_ptr<DevicePagePool> pool_;
    std::vector<int32_t> pages_;
  };

  // Allocates `pages` pages of every layer. ResourceExhausted when the device memory is not there;
  // InvalidArgument for pages < 1 or more than int32 slots can address.
  static Result<std::shared_ptr<DevicePagePool>> Create(const KvCacheShape& shape, int64_t pages, cudaStream_t stream);
  ~DevicePagePool();

  // Device bytes one page takes over all layers (latent rows + indexer page).
  static int64_t PageBytes(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  int64_t capacity() const { return capacity_; }
  int64_t slots() const { return capacity_ * kPageTokensValue; }
  int64_t pages_in_use() const;
  uint8_t* latent(int64_t layer) const;       // [capacity * 64, latent_row_bytes]
  uint8_t* index_pages(int64_t layer) const;  // [capacity, IndexerPageBytes]; nullptr without indexer

  // A new empty sequence of this pool.
  std::unique_ptr<Sequence> NewSequence();
  // `attachment` as a sequence of this pool, or nullptr when it belongs to something else.
  Sequence* Owned(KvCacheAttachment* attachment) const;

  // Makes every sequence seqs[i], holding lengths[i] tokens, able to take adds[i] more: copies a
  // shared partly filled last page before it is appended to, and adds pages up to
  // ceil((lengths[i] + adds[i]) / 64). All or nothing (ResourceExhausted naming the pages needed
  // and free). The sequences must be distinct.
  Status Reserve(std::span<Sequence* const> seqs, std::span<const int64_t> lengths, std::span<const int64_t> adds);
  // Releases the pages of `seq` past those covering `length` tokens (undoing a Reserve whose
  // step failed).
  void Trim(Sequence* seq, int64_t length);

  static constexpr int64_t kPageTokensValue = 64;

 private:
  DevicePagePool() = default;
  void AddRefs(const std::vector<int32_t>& pages);
  void ReleaseLocked(int32_t page);
  Status CopyPage(int32_t from, int32_t to, int64_t rows);

  KvCacheShape shape_;
  int64_t capacity_ = 0;
  cudaStream_t stream_ = nullptr;
  std::vector<kernels::cuda::DeviceBuffer> latent_;  // per layer
  std::vector<kernels::cuda::DeviceBuffer> index_;   // per layer (empty without indexer)
  mutable std::mutex mutex_;
  std::vector<int32_t> refs_;       // per page
  std::vector<int32_t> free_list_;  // pages with refs 0
};

}  // namespace envforge::inference
