// `envforge bench kernels` (kernel_bench.h): every CUDA kernel of the DSA engine timed at the real
// model's shapes (dsa-engine.md 10) and at the tiny model's (scripts/make_tiny_model.py "tiny"),
// each rated against the device's roofline.
//
// Inputs are synthetic but valid: FP8 codes of magnitude < 2 (never the NaN code), bf16/fp32
// values in small ranges, positive scales, indices inside their ranges, paged indexer caches and
// latent rows in the layouts the kernels read. They are generated on the device by the fill
// kernels below (hashes of the element index), so even the 1 GB inputs of the long shapes cost no
// host time. Timing is TimeOnStream's (CUDA events around `iterations` calls after a warm-up).
//
// Work and traffic per call (the figures the fractions use):
//   indexer prefill   FLOPs 2*H*D * L(L+1)/2 (causal pairs only); bytes: q, weights, keys, scales,
//                     key ranges and the logits written. Compute-bound: FP8 peak.
//   indexer decode    bytes (D + 4) per cached key (132 B at D = 128) + q + head weights, as the
//                     public DeepGEMM figure counts them (the 4 B/key of logits written are left
//                     out so the fraction compares with dsa-engine.md 8.2). HBM-bound.
//   top-k             bytes 4 per score read. HBM-bound.
//   sparse MLA prefill FLOPs 2*tokens*heads*topk*(576 + 512) (d_qk + d_v); bytes: q, out, indices
//                     and each cache row once. Compute-bound: BF16 peak.
//   sparse MLA decode bytes LatentRowBytes (656) per selected row per token (heads share rows) +
//                     q + out; HBM-bound, except the b >= 128 shape, judged on BF16 compute as the
//                     goal states. TFLOPS are reported for every shape.
//   Hadamard + quant  bytes: fp32 in, codes + scales out. HBM-bound.
//   GEMM bf16 / fp8   FLOPs 2*m*n*k; bytes: weights (+ scales), activations (+ scales), bf16 out.
//                     m <= 16 (decode) is judged on HBM (weights streamed), larger m on compute.
#include "kernels/cuda/internal/cuda_compat.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/hadamard_quant.h"
#include "kernels/cuda/indexer_logits.h"
#include "kernels/cuda/kernel_bench.h"
#include "kernels/cuda/sparse_mla.h"
#include "kernels/cuda/topk.h"

namespace envforge::kernels::cuda {

// ---- Roofline table (dsa-engine.md 9.1: dense, not 2:4-sparse, peaks)

Roofline RooflineFor(const DeviceInfo& info) {
  std::string name = info.name;
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto has = [&name](const char* word) { return name.find(word) != std::string::npos; };
  Roofline row;
  if (has("H200")) {
    row = {"H200 SXM", 989, 1979, 4800};
  } else if (has("H800")) {
    row = {"H800 SXM5", 989, 1979, 3350};
  } else if (has("H100") && has("PCIE")) {
    row = {"H100 PCIe", 756, 1513, 2000};
  } else if (has("H100") && (has("HBM3") || has("SXM"))) {
    row = {"H100 SXM5", 989, 1979, 3350};
  } else {
    row = {"unknown", 0, 0, info.theoretical_bandwidth_gbs()};
  }
  return row;
}

namespace {

// ---- Synthetic inputs, generated on the device

__device__ __forceinline__ uint32_t HashIndex(uint64_t index, uint32_t seed) {
  // splitmix64 finaliser of (index, seed): well mixed, stateless.
  uint64_t z = index + 0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(seed) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<uint32_t>((z ^ (z >> 31)) >> 16);
}

__device__ __forceinline__ float UniformAt(uint64_t index, uint32_t seed, float lo, float hi) {
  return lo + (hi - lo) * static_cast<float>(HashIndex(index, seed) & 0xffffff) * (1.0f / 16777216.0f);
}

// e4m3 codes with exponent field <= 7, i.e. |value| < 2: sign bit, 3 exponent bits, 3 mantissa.
__global__ void fill_fp8_kernel(uint8_t* out, int64_t count, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t h = HashIndex(static_cast<uint64_t>(i), seed);
    out[i] = static_cast<uint8_t>((h & 0x80u) | (h & 0x3fu));
  }
}

__global__ void fill_bf16_kernel(uint16_t* out, int64_t count, uint32_t seed, float magnitude) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] =
        __bfloat16_as_ushort(__float2bfloat16_rn(UniformAt(static_cast<uint64_t>(i), seed, -magnitude, magnitude)));
  }
}

__global__ void fill_f32_kernel(float* out, int64_t count, uint32_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = UniformAt(static_cast<uint64_t>(i), seed, lo, hi);
  }
}

// out[i] = hash % bound (bound >= 1).
__global__ void fill_index_kernel(int32_t* out, int64_t count, uint32_t seed, int64_t bound) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<int32_t>(HashIndex(static_cast<uint64_t>(i), seed) % static_cast<uint64_t>(bound));
  }
}

// out[i] = first + i * step  (step 0: a constant).
__global__ void fill_affine_kernel(int32_t* out, int64_t count, int32_t first, int32_t step) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<int32_t>(first + i * step);
  }
}

// The fp32 scale slots of indexer pages ([64 x dim codes][64 fp32 scales] per page), after the
// whole page array was filled with codes.
__global__ void fill_page_scales_kernel(uint8_t* pages, int64_t num_pages, int64_t dim, uint32_t seed) {
  const int64_t count = num_pages * kIndexerPageTokens;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t page = i / kIndexerPageTokens, slot = i % kIndexerPageTokens;
    auto* scales = reinterpret_cast<float*>(pages + page * IndexerPageBytes(dim) + kIndexerPageTokens * dim);
    scales[slot] = UniformAt(static_cast<uint64_t>(i), seed, 0.03125f, 0.0625f);
  }
}

// The scales and RoPE parts of latent rows ([kv_rank codes][kv_rank/128 fp32][rope_dim bf16]),
// after the whole cache was filled with codes.
__global__ void fill_latent_tails_kernel(uint8_t* cache, int64_t slots, int64_t kv_rank, int64_t rope_dim,
                                         uint32_t seed) {
  const int64_t groups = kv_rank / 128, per_row = groups + rope_dim, row_bytes = LatentRowBytes(kv_rank, rope_dim);
  const int64_t count = slots * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / per_row, j = i % per_row;
    uint8_t* base = cache + row * row_bytes + kv_rank;
    if (j < groups) {
      reinterpret_cast<float*>(base)[j] = UniformAt(static_cast<uint64_t>(i), seed, 0.03125f, 0.0625f);
    } else {
      reinterpret_cast<uint16_t*>(base + groups * 4)[j - groups] =
          __bfloat16_as_ushort(__float2bfloat16_rn(UniformAt(static_cast<uint64_t>(i), seed, -1.0f, 1.0f)));
    }
  }
}

int FillBlocks(int64_t count) { return static_cast<int>(std::clamp<int64_t>((count + 255) / 256, 1, 8192)); }

// ---- The bench state

struct Bench {
  DeviceInfo device;
  Roofline roofline;
  const KernelBenchOptions* options = nullptr;
  cudaStream_t stream = nullptr;
  BlasHandle* blas = nullptr;
  std::vector<KernelFigure>* figures = nullptr;
  uint32_t seed = 1;
};

Result<DeviceBuffer> Allocate(size_t bytes) { return DeviceBuffer::Allocate(std::max<size_t>(bytes, 16)); }

Status LaunchCheck(const char* what) { return CheckCuda(cudaGetLastError(), what); }

Status FillFp8(Bench& bench, DeviceBuffer& buffer, int64_t count) {
  ENVFORGE_LAUNCH(FillBlocks(count), 256, 0, bench.stream, fill_fp8_kernel)(buffer.as<uint8_t>(), count, bench.seed++);
  return LaunchCheck("fill_fp8_kernel");
}
Status FillBf16(Bench& bench, DeviceBuffer& buffer, int64_t count, float magnitude) {
  ENVFORGE_LAUNCH(FillBlocks(count), 256, 0, bench.stream, fill_bf16_kernel)
  (buffer.as<uint16_t>(), count, bench.seed++, magnitude);
  return LaunchCheck("fill_bf16_kernel");
}
Status FillF32(Bench& bench, DeviceBuffer& buffer, int64_t count, float lo, float hi) {
  ENVFORGE_LAUNCH(FillBlocks(count), 256, 0, bench.stream, fill_f32_kernel)
  (buffer.as<float>(), count, bench.seed++, lo, hi);
  return LaunchCheck("fill_f32_kernel");
}
Status FillIndices(Bench& bench, DeviceBuffer& buffer, int64_t count, int64_t bound) {
  ENVFORGE_LAUNCH(FillBlocks(count), 256, 0, bench.stream, fill_index_kernel)
  (buffer.as<int32_t>(), count, bench.seed++, bound);
  return LaunchCheck("fill_index_kernel");
}
Status FillAffine(Bench& bench, DeviceBuffer& buffer, int64_t count, int32_t first, int32_t step) {
  ENVFORGE_LAUNCH(FillBlocks(count), 256, 0, bench.stream, fill_affine_kernel)
  (buffer.as<int32_t>(), count, first, step);
  return LaunchCheck("fill_affine_kernel");
}

std::string Shape(std::initializer_list<std::pair<const char*, int64_t>> parts) {
  std::string out;
  for (const auto& [name, value] : parts) {
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += std::to_string(value);
  }
  return out;
}

enum class Bound { kComputeBf16, kComputeFp8, kMemory };

// Times fn and appends its figure; FailedPrecondition (a kernel or library that cannot run this
// configuration) and ResourceExhausted (too little device memory) skip the shape with a progress
// line, anything else stops the bench.
template <typename Fn>
Status Measure(Bench& bench, const char* kernel, const std::string& shape, const char* model, double flops,
               double bytes, Bound bound, const std::string& goal, Fn&& fn) {
  auto note = [&bench](const std::string& line) {
    if (bench.options->progress) bench.options->progress(line);
  };
  ENVFORGE_RETURN_IF_ERROR(CheckCuda(cudaStreamSynchronize(bench.stream), "cudaStreamSynchronize (inputs)"));
  Result<double> ms = TimeOnStream(bench.stream, bench.options->iterations, fn);
  // Errors of the kernels themselves surface at the synchronisation.
  const Status status = ms.ok() ? CheckCuda(cudaStreamSynchronize(bench.stream), "cudaStreamSynchronize") : ms.status();
  if (!status.ok()) {
    const StatusCode code = status.code();
    if (code == StatusCode::kFailedPrecondition || code == StatusCode::kResourceExhausted) {
      note(std::string(kernel) + " " + shape + " (" + model + "): skipped: " + status.message());
      return Status();
    }
    return status.WithContext(std::string(kernel) + " " + shape);
  }
  KernelFigure figure;
  figure.kernel = kernel;
  figure.shape = shape;
  figure.model = model;
  figure.time_us = *ms * 1e3;
  figure.flops = flops;
  figure.bytes = bytes;
  const double seconds = figure.time_us * 1e-6;
  figure.tflops = seconds > 0 ? flops / seconds / 1e12 : 0;
  figure.gbs = seconds > 0 ? bytes / seconds / 1e9 : 0;
  const Roofline& r = bench.roofline;
  switch (bound) {
    case Bound::kComputeBf16:
      figure.bound = "compute";
      figure.roofline_fraction = r.bf16_tflops > 0 ? figure.tflops / r.bf16_tflops : -1;
      break;
    case Bound::kComputeFp8:
      figure.bound = "compute";
      figure.roofline_fraction = r.fp8_tflops > 0 ? figure.tflops / r.fp8_tflops : -1;
      break;
    case Bound::kMemory:
      figure.bound = "memory";
      figure.roofline_fraction = r.hbm_gbs > 0 ? figure.gbs / r.hbm_gbs : -1;
      break;
  }
  figure.goal = goal;
  char line[320];
  std::snprintf(line, sizeof line, "%s %s (%s): %.1f us, %.1f TFLOPS, %.0f GB/s, %s %s", kernel, shape.c_str(), model,
                figure.time_us, figure.tflops, figure.gbs, figure.bound.c_str(),
                figure.roofline_fraction >= 0
                    ? (std::to_string(static_cast<int>(figure.roofline_fraction * 100 + 0.5)) + "% of peak").c_str()
                    : "(no peak known)");
  note(line);
  bench.figures->push_back(std::move(figure));
  return Status();
}

// ---- Model shapes

struct ModelShapes {
  const char* model;
  bool real;  // goals apply (dsa-engine.md 10 is about the real model)
  int64_t index_heads, index_dim;
  std::vector<int64_t> prefill_lengths;
  std::vector<std::pair<int64_t, int64_t>> decode_batch_context;
  int64_t topk;
  std::vector<std::pair<int64_t, int64_t>> topk_rows_n;
  int64_t mla_heads, kv_rank, rope_dim;
  int64_t prefill_tokens, prefill_slots;
  std::vector<int64_t> decode_batches;
  int64_t decode_slots;
  std::vector<int64_t> hadamard_rows;
  std::vector<std::pair<int64_t, int64_t>> gemm_n_k;
  std::vector<int64_t> gemm_m;
};

ModelShapes RealShapes() {
  ModelShapes s;
  s.model = "v3.2";
  s.real = true;
  s.index_heads = 64;
  s.index_dim = 128;
  s.prefill_lengths = {8192, 16384};
  s.decode_batch_context = {{1, 65536}, {16, 32768}, {16, 65536}, {64, 32768}, {64, 65536}};
  s.topk = 2048;
  s.topk_rows_n = {{64, 131072}, {1, 65536}};
  s.mla_heads = 128;
  s.kv_rank = 512;
  s.rope_dim = 64;
  s.prefill_tokens = 4096;
  s.prefill_slots = 8192;
  s.decode_batches = {1, 16, 64, 128};
  s.decode_slots = 65536;
  s.hadamard_rows = {64 * 64, 4096 * 64};                     // decode batch 64 and a 4096-token prefill, 64 heads each
  s.gemm_n_k = {{18432, 7168}, {7168, 18432}, {2048, 7168}};  // dense MLP up/gate, down; an expert
  s.gemm_m = {1, 16, 4096};
  return s;
}

ModelShapes TinyShapes() {
  ModelShapes s;
  s.model = "tiny";
  s.real = false;
  s.index_heads = 4;
  s.index_dim = 128;
  s.prefill_lengths = {256};
  s.decode_batch_context = {{1, 256}};
  s.topk = 16;
  s.topk_rows_n = {{256, 256}, {1, 256}};
  s.mla_heads = 4;
  s.kv_rank = 128;
  s.rope_dim = 64;
  s.prefill_tokens = 256;
  s.prefill_slots = 256;
  s.decode_batches = {1};
  s.decode_slots = 256;
  s.hadamard_rows = {4, 256 * 4};
  s.gemm_n_k = {{512, 256}, {256, 512}};  // dense MLP up, down (hidden 256, intermediate 512)
  s.gemm_m = {1, 256};
  return s;
}

// ---- One function per kernel family

Status BenchIndexerPrefill(Bench& bench, const ModelShapes& s) {
  const int64_t heads = s.index_heads, dim = s.index_dim;
  for (int64_t length : s.prefill_lengths) {
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer q, Allocate(static_cast<size_t>(length * heads * dim)));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer weights, Allocate(static_cast<size_t>(length * heads) * 4));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer keys, Allocate(static_cast<size_t>(length * dim)));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer key_scale, Allocate(static_cast<size_t>(length) * 4));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer key_end, Allocate(static_cast<size_t>(length) * 4));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer logits, Allocate(static_cast<size_t>(length * length) * 4));
    ENVFORGE_RETURN_IF_ERROR(FillFp8(bench, q, length * heads * dim));
    ENVFORGE_RETURN_IF_ERROR(FillF32(bench, weights, length * heads, -0.05f, 0.05f));
    ENVFORGE_RETURN_IF_ERROR(FillFp8(bench, keys, length * dim));
    ENVFORGE_RETURN_IF_ERROR(FillF32(bench, key_scale, length, 0.03125f, 0.0625f));
    ENVFORGE_RETURN_IF_ERROR(FillAffine(bench, key_end, length, 1, 1));  // causal: query t sees keys [0, t]
    IndexerLogitsArgs args;
    args.q = q.as<uint8_t>();
    args.head_weight = weights.as<float>();
    args.keys = keys.as<uint8_t>();
    args.key_scale = key_scale.as<float>();
    args.key_end = key_end.as<int32_t>();
    args.queries = length;
    args.heads = heads;
    args.dim = dim;
    args.keys_count = length;
    args.logits = logits.as<float>();
    args.logits_stride = length;
    const double flops =
        2.0 * static_cast<double>(heads * dim) * static_cast<double>(length) * static_cast<double>(length + 1) / 2;
    const double bytes = static_cast<double>(length * heads * dim + length * heads * 4 + length * dim + length * 8) +
                         4.0 * static_cast<double>(length) * static_cast<double>(length);
    ENVFORGE_RETURN_IF_ERROR(
        Measure(bench, "indexer_logits_prefill", Shape({{"L", length}, {"H", heads}, {"D", dim}}), s.model, flops,
                bytes, Bound::kComputeFp8,
                s.real ? ">= 40% of FP8 dense peak (>= 800 TFLOPS on H100 SXM) for L >= 8K; stretch >= 50%" : "",
                [&] { return IndexerLogitsPrefill(args, bench.stream); }));
  }
  return Status();
}

Status BenchIndexerDecode(Bench& bench, const ModelShapes& s) {
  const int64_t heads = s.index_heads, dim = s.index_dim;
  for (const auto& [batch, context] : s.decode_batch_context) {
    const int64_t pages_per_seq = (context + kIndexerPageTokens - 1) / kIndexerPageTokens;
    const int64_t num_pages = batch * pages_per_seq;
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer q, Allocate(static_cast<size_t>(batch * heads * dim)));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer weights, Allocate(static_cast<size_t>(batch * heads) * 4));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer pages, Allocate(static_cast<size_t>(num_pages * IndexerPageBytes(dim))));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer block_table, Allocate(static_cast<size_t>(num_pages) * 4));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer context_len, Allocate(static_cast<size_t>(batch) * 4));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer logits, Allocate(static_cast<size_t>(batch * context) * 4));
    ENVFORGE_RETURN_IF_ERROR(FillFp8(bench, q, batch * heads * dim));
    ENVFORGE_RETURN_IF_ERROR(FillF32(bench, weights, batch * heads, -0.05f, 0.05f));
    ENVFORGE_RETURN_IF_ERROR(FillFp8(bench, pages, num_pages * IndexerPageBytes(dim)));
    ENVFORGE_LAUNCH(FillBlocks(num_pages * kIndexerPageTokens), 256, 0, bench.stream, fill_page_scales_kernel)
    (pages.as<uint8_t>(), num_pages, dim, bench.seed++);
    ENVFORGE_RETURN_IF_ERROR(LaunchCheck("fill_page_scales_kernel"));
    ENVFORGE_RETURN_IF_ERROR(
        FillAffine(bench, block_table, num_pages, 0, 1));  // sequence b owns pages [b*pps, (b+1)*pps)
    ENVFORGE_RETURN_IF_ERROR(FillAffine(bench, context_len, batch, static_cast<int32_t>(context), 0));
    PagedIndexerLogitsArgs args;
    args.q = q.as<uint8_t>();
    args.head_weight = weights.as<float>();
    args.pages = pages.as<uint8_t>();
    args.block_table = block_table.as<int32_t>();
    args.context_len = context_len.as<int32_t>();
    args.batch = batch;
    args.heads = heads;
    args.dim = dim;
    args.num_pages = num_pages;
    args.max_pages_per_seq = pages_per_seq;
    args.logits = logits.as<float>();
    args.logits_stride = context;
    const double flops = 2.0 * static_cast<double>(heads * dim) * static_cast<double>(batch * context);
    const double bytes = static_cast<double>(batch * context) * static_cast<double>(dim + 4) +
                         static_cast<double>(batch * heads * (dim + 4));
    std::string goal;
    if (s.real) {
      goal = batch >= 16 && context >= 32768 ? ">= 60% of HBM bandwidth at batch >= 16 and ctx >= 32K"
                                             : "batch 1 is latency-bound: ~10 us at 64K";
    }
    ENVFORGE_RETURN_IF_ERROR(
        Measure(bench, "indexer_logits_decode", Shape({{"batch", batch}, {"ctx", context}, {"H", heads}, {"D", dim}}),
                s.model, flops, bytes, Bound::kMemory, goal, [&] { return IndexerLogitsDecode(args, bench.stream); }));
  }
  return Status();
}

Status BenchTopK(Bench& bench, const ModelShapes& s) {
  for (const auto& [rows, n] : s.topk_rows_n) {
    const int64_t k = s.topk;
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer scores, Allocate(static_cast<size_t>(rows * n) * 4));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer out, Allocate(static_cast<size_t>(rows * k) * 4));
    const size_t workspace_bytes = TopKWorkspaceBytes(rows, n, k, bench.device.sm_count);
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer workspace, Allocate(workspace_bytes));
    ENVFORGE_RETURN_IF_ERROR(FillF32(bench, scores, rows * n, -8.0f, 8.0f));
    TopKArgs args;
    args.scores = scores.as<float>();
    args.rows = rows;
    args.n = n;
    args.stride = n;
    args.k = k;
    args.out = out.as<int32_t>();
    std::string goal;
    if (s.real) goal = rows > 1 ? "<= 40 us for 64 rows x 128K" : "<= 20 us for a single row of 64K (multi-CTA)";
    const int sm_count = bench.device.sm_count;
    ENVFORGE_RETURN_IF_ERROR(Measure(
        bench, "topk", Shape({{"rows", rows}, {"n", n}, {"k", k}}), s.model, 0, 4.0 * static_cast<double>(rows * n),
        Bound::kMemory, goal, [&] { return TopK(args, workspace.data(), workspace_bytes, sm_count, bench.stream); }));
  }
  return Status();
}

struct MlaInputs {
  DeviceBuffer q, cache, indices, out;
};

Result<MlaInputs> MakeMlaInputs(Bench& bench, const ModelShapes& s, int64_t tokens, int64_t slots) {
  const int64_t qk_dim = s.kv_rank + s.rope_dim, row_bytes = LatentRowBytes(s.kv_rank, s.rope_dim);
  MlaInputs in;
  ENVFORGE_ASSIGN_OR_RETURN(in.q, Allocate(static_cast<size_t>(tokens * s.mla_heads * qk_dim) * 2));
  ENVFORGE_ASSIGN_OR_RETURN(in.cache, Allocate(static_cast<size_t>(slots * row_bytes)));
  ENVFORGE_ASSIGN_OR_RETURN(in.indices, Allocate(static_cast<size_t>(tokens * s.topk) * 4));
  ENVFORGE_ASSIGN_OR_RETURN(in.out, Allocate(static_cast<size_t>(tokens * s.mla_heads * s.kv_rank) * 2));
  ENVFORGE_RETURN_IF_ERROR(FillBf16(bench, in.q, tokens * s.mla_heads * qk_dim, 1.0f));
  ENVFORGE_RETURN_IF_ERROR(FillFp8(bench, in.cache, slots * row_bytes));
  ENVFORGE_LAUNCH(FillBlocks(slots * (s.kv_rank / 128 + s.rope_dim)), 256, 0, bench.stream, fill_latent_tails_kernel)
  (in.cache.as<uint8_t>(), slots, s.kv_rank, s.rope_dim, bench.seed++);
  ENVFORGE_RETURN_IF_ERROR(LaunchCheck("fill_latent_tails_kernel"));
  ENVFORGE_RETURN_IF_ERROR(FillIndices(bench, in.indices, tokens * s.topk, slots));
  return std::move(in);
}

SparseMlaArgs MlaArgs(const ModelShapes& s, MlaInputs& in, int64_t tokens, int64_t slots) {
  SparseMlaArgs args;
  args.q = in.q.as<uint16_t>();
  args.tokens = tokens;
  args.heads = s.mla_heads;
  args.cache = in.cache.as<uint8_t>();
  args.slots = slots;
  args.kv_rank = s.kv_rank;
  args.rope_dim = s.rope_dim;
  args.indices = in.indices.as<int32_t>();
  args.topk = s.topk;
  args.scale = 0.1352338f;  // dsa-engine.md 1.3 (any finite value times the same)
  args.out = in.out.as<uint16_t>();
  return args;
}

double MlaFlops(const ModelShapes& s, int64_t tokens) {
  return 2.0 * static_cast<double>(tokens * s.mla_heads) * static_cast<double>(s.topk) *
         static_cast<double>(s.kv_rank + s.rope_dim + s.kv_rank);
}

Status BenchSparseMla(Bench& bench, const ModelShapes& s) {
  const int64_t qk_dim = s.kv_rank + s.rope_dim, row_bytes = LatentRowBytes(s.kv_rank, s.rope_dim);
  {
    const int64_t tokens = s.prefill_tokens, slots = s.prefill_slots;
    ENVFORGE_ASSIGN_OR_RETURN(MlaInputs in, MakeMlaInputs(bench, s, tokens, slots));
    const SparseMlaArgs args = MlaArgs(s, in, tokens, slots);
    const double rows_read = static_cast<double>(std::min(slots, tokens * s.topk));
    const double bytes = static_cast<double>(tokens * s.mla_heads) * static_cast<double>(qk_dim + s.kv_rank) * 2 +
                         static_cast<double>(tokens * s.topk) * 4 + rows_read * static_cast<double>(row_bytes);
    ENVFORGE_RETURN_IF_ERROR(
        Measure(bench, "sparse_mla_prefill",
                Shape({{"tokens", tokens}, {"heads", s.mla_heads}, {"topk", s.topk}, {"slots", slots}}), s.model,
                MlaFlops(s, tokens), bytes, Bound::kComputeBf16,
                s.real ? ">= 45% of BF16 dense peak (>= 450 TFLOPS on H100 SXM); stretch 60%" : "",
                [&] { return SparseMlaPrefill(args, bench.stream); }));
  }
  for (int64_t batch : s.decode_batches) {
    const int64_t slots = s.decode_slots;
    ENVFORGE_ASSIGN_OR_RETURN(MlaInputs in, MakeMlaInputs(bench, s, batch, slots));
    const SparseMlaArgs args = MlaArgs(s, in, batch, slots);
    const int sm_count = bench.device.sm_count;
    const size_t workspace_bytes = SparseMlaDecodeWorkspaceBytes(batch, s.mla_heads, s.kv_rank, s.topk, sm_count);
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer workspace, Allocate(workspace_bytes));
    const double bytes = static_cast<double>(batch * s.topk) * static_cast<double>(row_bytes) +
                         static_cast<double>(batch * s.mla_heads) * static_cast<double>(qk_dim + s.kv_rank) * 2;
    const bool compute_config = batch >= 128;
    std::string goal;
    if (s.real) {
      goal = compute_config ? ">= 30% of BF16 dense peak (>= 300 TFLOPS) at b*s_q >= 128"
                            : "memory-bound small batch: >= 50% of HBM bandwidth";
    }
    ENVFORGE_RETURN_IF_ERROR(
        Measure(bench, "sparse_mla_decode",
                Shape({{"batch", batch}, {"heads", s.mla_heads}, {"topk", s.topk}, {"slots", slots}}), s.model,
                MlaFlops(s, batch), bytes, compute_config ? Bound::kComputeBf16 : Bound::kMemory, goal,
                [&] { return SparseMlaDecode(args, workspace.data(), workspace_bytes, sm_count, bench.stream); }));
  }
  return Status();
}

Status BenchHadamardQuant(Bench& bench, const ModelShapes& s) {
  const int64_t dim = s.index_dim;
  for (int64_t rows : s.hadamard_rows) {
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer x, Allocate(static_cast<size_t>(rows * dim) * 4));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer q, Allocate(static_cast<size_t>(rows * dim)));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer scales, Allocate(static_cast<size_t>(rows) * 4));
    ENVFORGE_RETURN_IF_ERROR(FillF32(bench, x, rows * dim, -4.0f, 4.0f));
    HadamardQuantArgs args;
    args.x = x.as<float>();
    args.rows = rows;
    args.dim = dim;
    args.scale = 1.0f / std::sqrt(static_cast<float>(dim));
    args.q = q.as<uint8_t>();
    args.scales = scales.as<float>();
    int log2_dim = 0;
    while ((int64_t{1} << log2_dim) < dim) ++log2_dim;
    const double flops = static_cast<double>(rows * dim) * log2_dim;  // butterfly adds
    const double bytes = static_cast<double>(rows * dim) * 5 + static_cast<double>(rows) * 4;
    ENVFORGE_RETURN_IF_ERROR(Measure(bench, "hadamard_quant", Shape({{"rows", rows}, {"dim", dim}}), s.model, flops,
                                     bytes, Bound::kMemory, "", [&] { return HadamardQuantFp8(args, bench.stream); }));
  }
  return Status();
}

Status BenchGemm(Bench& bench, const ModelShapes& s, GemmKind kind) {
  const bool fp8 = kind == GemmKind::kFP8Block;
  const char* name = fp8 ? "gemm_fp8" : "gemm_bf16";
  if (fp8 && !Fp8BlockGemmSupported(*bench.blas)) {
    if (bench.options->progress)
      bench.options->progress("gemm_fp8 (" + std::string(s.model) +
                              "): skipped: this cuBLASLt has no FP8 block-scaled GEMM on this device");
    return Status();
  }
  const int64_t elem = fp8 ? 1 : 2;
  for (const auto& [n, k] : s.gemm_n_k) {
    const int64_t kb = (k + 127) / 128, nb = (n + 127) / 128;
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer w, Allocate(static_cast<size_t>(n * k * elem)));
    ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer w_scales, Allocate(static_cast<size_t>(nb * kb) * 4));
    if (fp8) {
      ENVFORGE_RETURN_IF_ERROR(FillFp8(bench, w, n * k));
      ENVFORGE_RETURN_IF_ERROR(FillF32(bench, w_scales, nb * kb, 0.001f, 0.002f));
    } else {
      ENVFORGE_RETURN_IF_ERROR(FillBf16(bench, w, n * k, 0.05f));
    }
    for (int64_t m : s.gemm_m) {
      ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer a, Allocate(static_cast<size_t>(m * k * elem)));
      ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer a_scales, Allocate(static_cast<size_t>(m * kb) * 4));
      ENVFORGE_ASSIGN_OR_RETURN(DeviceBuffer c, Allocate(static_cast<size_t>(m * n) * 2));
      if (fp8) {
        ENVFORGE_RETURN_IF_ERROR(FillFp8(bench, a, m * k));
        ENVFORGE_RETURN_IF_ERROR(FillF32(bench, a_scales, m * kb, 0.01f, 0.02f));
      } else {
        ENVFORGE_RETURN_IF_ERROR(FillBf16(bench, a, m * k, 1.0f));
      }
      GemmArgs args;
      args.kind = kind;
      args.m = m;
      args.n = n;
      args.k = k;
      args.a = a.data();
      args.w = w.data();
      args.a_scales = fp8 ? a_scales.as<float>() : nullptr;
      args.w_scales = fp8 ? w_scales.as<float>() : nullptr;
      args.c = c.data();
      args.c_bf16 = true;
      const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
      double bytes = static_cast<double>((n * k + m * k) * elem) + static_cast<double>(m * n) * 2;
      if (fp8) bytes += static_cast<double>((nb + m) * kb) * 4;
      const bool decode = m <= 16;
      std::string goal;
      if (s.real && fp8)
        goal =
            decode ? ">= 60% of HBM bandwidth on weights at small M (decode)" : ">= 50% of FP8 dense peak at large M";
      const Bound bound = decode ? Bound::kMemory : (fp8 ? Bound::kComputeFp8 : Bound::kComputeBf16);
      BlasHandle& blas = *bench.blas;
      ENVFORGE_RETURN_IF_ERROR(Measure(bench, name, Shape({{"m", m}, {"n", n}, {"k", k}}), s.model, flops, bytes, bound,
                                       goal, [&] { return Gemm(blas, args); }));
    }
  }
  return Status();
}

Status BenchModel(Bench& bench, const ModelShapes& s) {
  ENVFORGE_RETURN_IF_ERROR(BenchIndexerPrefill(bench, s));
  ENVFORGE_RETURN_IF_ERROR(BenchIndexerDecode(bench, s));
  ENVFORGE_RETURN_IF_ERROR(BenchTopK(bench, s));
  ENVFORGE_RETURN_IF_ERROR(BenchSparseMla(bench, s));
  ENVFORGE_RETURN_IF_ERROR(BenchHadamardQuant(bench, s));
  ENVFORGE_RETURN_IF_ERROR(BenchGemm(bench, s, GemmKind::kBF16));
  return BenchGemm(bench, s, GemmKind::kFP8Block);
}

}  // namespace

Result<std::vector<KernelFigure>> RunKernelBench(const KernelBenchOptions& options, Roofline* roofline) {
  ENVFORGE_ASSIGN_OR_RETURN(DeviceInfo device, ProbeDevice());
  if (options.iterations < 1)
    return InvalidArgumentError("KernelBenchOptions.iterations must be >= 1, got " +
                                std::to_string(options.iterations));
  Bench bench;
  bench.device = device;
  bench.roofline = RooflineFor(device);
  if (roofline != nullptr) *roofline = bench.roofline;
  bench.options = &options;
  ENVFORGE_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  bench.stream = stream.get();
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<BlasHandle> blas, BlasHandle::Create(stream.get()));
  bench.blas = blas.get();
  std::vector<KernelFigure> figures;
  bench.figures = &figures;
  if (options.real_shapes) ENVFORGE_RETURN_IF_ERROR(BenchModel(bench, RealShapes()));
  if (options.tiny_shapes) ENVFORGE_RETURN_IF_ERROR(BenchModel(bench, TinyShapes()));
  return figures;
}

}  // namespace envforge::kernels::cuda
