// DevicePagePool: per-layer page arrays on the device, host-side reference counts and a free list.
#include "kernels/cuda/internal/cuda_compat.cuh"

#include "inference/device_page_pool.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cassert>
#include <limits>
#include <string>
#include <unordered_map>

#include "kernels/cuda/indexer_logits.h"
#include "kernels/cuda/page_table.h"

namespace envforge::inference {

static_assert(DevicePagePool::kPageTokensValue == kernels::cuda::kPageTokens);

namespace {

int64_t PagesFor(int64_t tokens) {
  return (tokens + DevicePagePool::kPageTokensValue - 1) / DevicePagePool::kPageTokensValue;
}

int64_t IndexPageBytes(const KvCacheShape& shape) {
  return shape.index_head_dim > 0 ? kernels::cuda::IndexerPageBytes(shape.index_head_dim) : 0;
}

}  // namespace

DevicePagePool::Sequence::~Sequence() {
  std::lock_guard<std::mutex> lock(pool_->mutex_);
  for (int32_t page : pages_) pool_->ReleaseLocked(page);
}

std::unique_ptr<KvCacheAttachment> DevicePagePool::Sequence::Fork() {
  std::unique_ptr<Sequence> fork(new Sequence(pool_));
  fork->pages_ = pages_;
  pool_->AddRefs(pages_);
  return fork;
}

int64_t DevicePagePool::PageBytes(const KvCacheShape& shape) {
  return shape.layers * (kPageTokensValue * shape.latent_row_bytes() + IndexPageBytes(shape));
}

Result<std::shared_ptr<DevicePagePool>> DevicePagePool::Create(const KvCacheShape& shape, int64_t pages,
                                                               cudaStream_t stream) {
  if (pages < 1) return InvalidArgumentError("KV page pool: pages must be >= 1, got " + std::to_string(pages));
  if (pages * kPageTokensValue > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("KV page pool: " + std::to_string(pages) + " pages exceed the int32 slot range");
  }
  std::shared_ptr<DevicePagePool> pool(new DevicePagePool());
  pool->shape_ = shape;
  pool->capacity_ = pages;
  pool->stream_ = stream;
  const auto latent_bytes = static_cast<size_t>(pages * kPageTokensValue * shape.latent_row_bytes());
  const auto index_bytes = static_cast<size_t>(pages * IndexPageBytes(shape));
  for (int64_t layer = 0; layer < shape.layers; ++layer) {
    auto latent = kernels::cuda::DeviceBuffer::Allocate(latent_bytes);
    if (!latent.ok())
      return latent.status().WithContext("KV page pool, layer " + std::to_string(layer) + " latent rows");
    pool->latent_.push_back(std::move(*latent));
    if (index_bytes > 0) {
      auto index = kernels::cuda::DeviceBuffer::Allocate(index_bytes);
      if (!index.ok())
        return index.status().WithContext("KV page pool, layer " + std::to_string(layer) + " indexer pages");
      pool->index_.push_back(std::move(*index));
    }
  }
  pool->refs_.assign(static_cast<size_t>(pages), 0);
  // Lowest ids first out of the free list (back of the vector).
  pool->free_list_.reserve(static_cast<size_t>(pages));
  for (int64_t p = pages - 1; p >= 0; --p) pool->free_list_.push_back(static_cast<int32_t>(p));
  return pool;
}

DevicePagePool::~DevicePagePool() = default;

int64_t DevicePagePool::pages_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_ - static_cast<int64_t>(free_list_.size());
}

uint8_t* DevicePagePool::latent(int64_t layer) const { return latent_[static_cast<size_t>(layer)].as<uint8_t>(); }

uint8_t* DevicePagePool::index_pages(int64_t layer) const {
  return index_.empty() ? nullptr : index_[static_cast<size_t>(layer)].as<uint8_t>();
}

std::unique_ptr<DevicePagePool::Sequence> DevicePagePool::NewSequence() {
  return std::unique_ptr<Sequence>(new Sequence(shared_from_this()));
}

DevicePagePool::Sequence* DevicePagePool::Owned(KvCacheAttachment* attachment) const {
  auto* seq = dynamic_cast<Sequence*>(attachment);
  return seq != nullptr && seq->pool_.get() == this ? seq : nullptr;
}

void DevicePagePool::AddRefs(const std::vector<int32_t>& pages) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int32_t page : pages) refs_[static_cast<size_t>(page)] += 1;
}

void DevicePagePool::ReleaseLocked(int32_t page) {
  int32_t& refs = refs_[static_cast<size_t>(page)];
  assert(refs > 0);
  if (--refs == 0) free_list_.push_back(page);
}

Status DevicePagePool::CopyPage(int32_t from, int32_t to, int64_t rows) {
  const int64_t row_bytes = shape_.latent_row_bytes();
  const int64_t index_bytes = IndexPageBytes(shape_);
  for (int64_t layer = 0; layer < shape_.layers; ++layer) {
    uint8_t* base = latent(layer);
    ENVFORGE_RETURN_IF_ERROR(kernels::cuda::CheckCuda(
        cudaMemcpyAsync(base + int64_t{to} * kPageTokensValue * row_bytes,
                        base + int64_t{from} * kPageTokensValue * row_bytes, static_cast<size_t>(rows * row_bytes),
                        cudaMemcpyDeviceToDevice, stream_),
        "KV page copy (latent rows)"));
    if (index_bytes > 0) {
      // The whole indexer page: codes and scales are two regions of it ([64 x dim][64 x 4]).
      uint8_t* pages = index_pages(layer);
      ENVFORGE_RETURN_IF_ERROR(kernels::cuda::CheckCuda(
          cudaMemcpyAsync(pages + int64_t{to} * index_bytes, pages + int64_t{from} * index_bytes,
                          static_cast<size_t>(index_bytes), cudaMemcpyDeviceToDevice, stream_),
          "KV page copy (indexer keys)"));
    }
  }
  return Status::Ok();
}

Status DevicePagePool::Reserve(std::span<Sequence* const> seqs, std::span<const int64_t> lengths,
                               std::span<const int64_t> adds) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Plan: count the pages needed, simulating the reference drops of the copies in batch order (two
  // sequences sharing a partial page: the first copies it, the second then holds it alone).
  std::unordered_map<int32_t, int32_t> refs_after;
  auto refs_of = [&](int32_t page) {
    auto it = refs_after.find(page);
    return it != refs_after.end() ? it->second : refs_[static_cast<size_t>(page)];
  };
  std::vector<uint8_t> copy(seqs.size(), 0);
  int64_t needed = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence& seq = *seqs[i];
    const int64_t length = lengths[i], add = adds[i];
    assert(static_cast<int64_t>(seq.pages_.size()) >= PagesFor(length));
    if (add > 0 && length % kPageTokensValue != 0) {
      const int32_t last = seq.pages_[static_cast<size_t>(length / kPageTokensValue)];
      if (refs_of(last) > 1) {
        copy[i] = 1;
        refs_after[last] = refs_of(last) - 1;
        needed += 1;
      }
    }
    needed += std::max<int64_t>(0, PagesFor(length + add) - static_cast<int64_t>(seq.pages_.size()));
  }
  if (needed > static_cast<int64_t>(free_list_.size())) {
    return ResourceExhaustedError("KV page pool exhausted: the step needs " + std::to_string(needed) + " pages of " +
                                  std::to_string(kPageTokensValue) + " tokens, " + std::to_string(free_list_.size()) +
                                  " of " + std::to_string(capacity_) + " are free");
  }
  // Execute.
  auto take = [&]() {
    const int32_t page = free_list_.back();
    free_list_.pop_back();
    refs_[static_cast<size_t>(page)] = 1;
    return page;
  };
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& seq = *seqs[i];
    const int64_t length = lengths[i], add = adds[i];
    if (copy[i] != 0) {
      const auto at = static_cast<size_t>(length / kPageTokensValue);
      const int32_t shared = seq.pages_[at];
      const int32_t own = take();
      Status copied = CopyPage(shared, own, length % kPageTokensValue);
      if (!copied.ok()) {
        ReleaseLocked(own);
        return copied;
      }
      ReleaseLocked(shared);
      seq.pages_[at] = own;
    }
    while (static_cast<int64_t>(seq.pages_.size()) < PagesFor(length + add)) seq.pages_.push_back(take());
  }
  return Status::Ok();
}

void DevicePagePool::Trim(Sequence* seq, int64_t length) {
  std::lock_guard<std::mutex> lock(mutex_);
  while (static_cast<int64_t>(seq->pages_.size()) > PagesFor(length)) {
    ReleaseLocked(seq->pages_.back());
    seq->pages_.pop_back();
  }
}

}  // namespace envforge::inference
