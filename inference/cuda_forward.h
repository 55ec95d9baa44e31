// The DSA engine's forward pass on the GPU: the same layer loop as Model::Forward on the CPU
// (inference/model.h, dsa-engine.md 4.1-4.8) run with the kernels of kernels/cuda/. Model owns one
// when its device is kCuda and delegates Forward to it after validating the batch.
//
// Weights are uploaded once by Create:
//   * linear weights as bf16 (fp32 / fp16 rounded, FP8 dequantized with its 128x128 scales on the
//     host), except FP8 checkpoint matrices when cuBLASLt has the block-scaled FP8 GEMM
//     (Fp8BlockGemmSupported): those stay e4m3 + scales and run W8A8 with ActQuantFp8 activations,
//     as the CPU does;
//   * kv_b_proj as bf16 [heads * (nope + v), kv_rank] for the per-head strided-batched products
//     (query absorption, W_UV);
//   * the router gate and the indexer's weights_proj in fp32 (fp32 GEMM, as the reference: routing
//     and head weights are not rounded to bf16); norm weights, biases fp32; the embedding in its
//     stored dtype (GatherRows widens it exactly as DequantizeRow).
// Activations: the residual stream is fp32 [tokens, hidden]; GEMM inputs are converted to the
// weight's input form (bf16, or e4m3 + 1x128 scales) once per producer; GEMM outputs are fp32.
//
// KV caches: a DevicePagePool (inference/device_page_pool.h) of 64-token pages holds every layer's
// FP8 latent rows (656-B format) and indexer keys; a KvCache of this model is length-only on the
// host and carries its pages as its attachment (Model::NewCache attaches them; an empty unattached
// cache is attached on first use). Forking shares full pages and copies a shared partial page on
// its next append. The pool's size is fixed at Create: CudaForwardOptions::kv_cache_bytes, or
// kv_cache_fraction of the device memory free after the weights (default 0.5, so a process can hold
// a second model or scratch growth). A step that needs more pages than are free fails with
// ResourceExhausted and leaves every cache unchanged.
//
// Per layer (per step, all sequences' tokens stacked as on the CPU): RMSNorm; q/kv projections;
// interleaved RoPE; WriteLatentRows at the tokens' slots; the indexer (projections, LayerNorm, RoPE
// in the config's layout, HadamardQuantFp8, keys into the pages, fp32 head weights times
// index_heads^-0.5 * index_dim^-0.5 * q scale); scores by IndexerLogitsDecode for sequences feeding
// one token and by IndexerLogitsPrefill over the sequence's keys gathered contiguous for the others
// (causal key_end = position + 1, query chunks bounded to 64 Mi scores); TopK with row_len =
// position + 1 and k = index_topk; positions -> slots; absorbed queries (strided-batched GEMM per
// head); SparseMlaDecode for small token counts, SparseMlaPrefill otherwise; W_UV; o_proj; FFN
// (dense SwiGLU, or MoE: RouteExperts on the device, expert ids to the host to group tokens per
// expert, one GEMM chain per active expert, CombineExperts in slot order plus the shared expert);
// final RMSNorm and head on the rows needing logits, copied to the host as fp32. Dense attention
// (DeepseekV3 or ModelOptions::dense_attention) attends every position 0..t through the same
// kernels.
//
// Numerics against the CPU engine: bf16 GEMM inputs (fp32 accumulation) and bf16 attention
// inputs, where the CPU computes in fp32 — logits agree to about 1e-2 of their scale; FP8 rounding
// boundaries may flip a few indexer picks (selections agree as sets up to such near-ties).
//
// ForwardProfile is filled as on the CPU: bytes by the same formulas; indexer and attention
// seconds from CUDA events around those parts (no extra synchronisation), rest = wall time minus
// both. ForwardOptions::record_selection is filled from the device selections (slots mapped back
// to positions; this synchronises once per layer, a test hook).
//
// Thread safety: as Model::Forward (one call at a time). The header includes no CUDA header.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "inference/kv_cache.h"
#include "inference/model_config.h"
#include "inference/model_weights.h"

namespace envforge::inference {

struct ForwardOptions;
struct ForwardProfile;
struct SequenceInput;

struct CudaForwardOptions {
  bool dense_attention = false;  // as ModelOptions (decides whether caches hold indexer keys)
  int64_t kv_cache_bytes = 0;    // page pool size; 0: kv_cache_fraction of free device memory
  double kv_cache_fraction = 0.5;
};

class CudaForward {
 public:
  // Uploads the weights, sizes the page pool and runs a prefill of index_topk + 1 tokens (two for
  // dense attention) plus a one-token decode on a scratch cache, so shapes the kernels refuse fail
  // here. Errors: Unavailable without a device, ResourceExhausted when the weights or the pool do
  // not fit, FailedPrecondition for model shapes the kernels do not support (naming the field),
  // InvalidArgument from a kernel's own checks during the warm-up, Internal for CUDA errors.
  // `weights` and `config` must outlive the CudaForward (Model owns all three).
  static Result<std::unique_ptr<CudaForward>> Create(const ModelConfig& config, const ModelWeights& weights,
                                                     const std::vector<float>& rope_freqs,
                                                     const CudaForwardOptions& options);
  ~CudaForward();
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;

  KvCacheShape cache_shape() const;
  // Attaches a fresh page list of this engine's pool to an empty cache.
  void AttachCache(KvCache& cache) const;
  // Whether `cache` may be run here: attached to this engine's pool, or empty and unattached.
  Status CheckCache(const KvCache& cache) const;

  // Model::Forward's contract for an already validated batch (distinct caches, tokens in the
  // vocabulary, shapes matching). Adds to `profile`.
  Status Forward(std::span<const SequenceInput> batch, std::vector<float>* logits, const ForwardOptions& options,
                 ForwardProfile& profile);

  // Page-pool counters (tests): pages in the pool, pages held by caches.
  int64_t pool_pages() const;
  int64_t pool_pages_in_use() const;
  bool fp8_gemm() const;  // FP8 checkpoint matrices run W8A8 on the device

 private:
  struct Impl;
  explicit CudaForward(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace envforge::inference
