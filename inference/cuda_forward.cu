// CudaForward: weight upload, scratch management and the layer loop of the GPU engine. Host code
// only (every kernel comes from kernels/cuda/); see cuda_forward.h for the design.
#include "kernels/cuda/internal/cuda_compat.cuh"
#include "base/int_math.h"

#include "inference/cuda_forward.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "inference/device_page_pool.h"
#include "inference/model.h"
#include "kernels/cpu/float_formats.h"
#include "kernels/cuda/act_quant.h"
#include "kernels/cuda/device_runtime.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/engine_rows.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/hadamard_quant.h"
#include "kernels/cuda/indexer_logits.h"
#include "kernels/cuda/moe_routing.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/page_table.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/sparse_mla.h"
#include "kernels/cuda/topk.h"

namespace envforge::inference {
namespace cu = kernels::cuda;

// Named, not anonymous: CudaForward::Impl (declared in the header) holds these types, and a class
// with external linkage must not have members of internal-linkage types (-Wsubobject-linkage when
// this file is compiled through the emulator's wrapper .cc).
namespace cuda_forward_detail {

using Clock = std::chrono::steady_clock;

size_t Sz(int64_t v) { return static_cast<size_t>(v); }
int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// The same bounds as the CPU forward: indexer scores of one prefill chunk, and (dense attention)
// the slot table of one attention chunk, stay under 64 Mi entries (256 MiB).
constexpr int64_t kMaxScoreFloats = int64_t{64} << 20;
constexpr int64_t kMaxIndexEntries = int64_t{64} << 20;
constexpr float kIndexerNormEps = 1e-6f;
// Expert row blocks start at multiples of this many rows, so every per-expert GEMM operand (bf16
// rows, e4m3 rows and their scale rows) is 16-byte aligned.
constexpr int64_t kExpertRowAlign = 8;

int64_t MatrixBytes(const kernels::WeightMatrix& w) { return w.rows * w.cols * kernels::DTypeSize(w.dtype); }
int64_t MlpBytes(const MlpWeights& mlp) { return MatrixBytes(mlp.w1) + MatrixBytes(mlp.w2) + MatrixBytes(mlp.w3); }

// ---------------------------------------------------------------------------------------------
// Weights on the device.

// Bump allocation of weight memory in large chunks (one cudaMalloc per 256 MiB instead of one per
// matrix); 256-byte aligned pieces.
class Arena {
 public:
  Result<void*> Put(const void* host, size_t bytes) {
    ENVFORGE_ASSIGN_OR_RETURN(void* device, Allocate(bytes));
    if (bytes > 0)
      ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "weight upload"));
    return device;
  }
  Result<void*> Allocate(size_t bytes) {
    bytes = std::max<size_t>(256, (bytes + 255) / 256 * 256);
    if (chunks_.empty() || used_ + bytes > chunks_.back().bytes()) {
      ENVFORGE_ASSIGN_OR_RETURN(cu::DeviceBuffer chunk, cu::DeviceBuffer::Allocate(std::max(bytes, kChunkBytes)));
      chunks_.push_back(std::move(chunk));
      used_ = 0;
    }
    void* out = chunks_.back().as<uint8_t>() + used_;
    used_ += bytes;
    total_ += bytes;
    return out;
  }
  int64_t bytes() const { return static_cast<int64_t>(total_); }

 private:
#if ENVFORGE_CUDA_EMULATION
  // The emulator fills every allocation with its garbage pattern: a 256 MiB chunk for a tiny
  // model's few MiB of weights was most of an emulated test's model load.
  static constexpr size_t kChunkBytes = size_t{16} << 20;
#else
  static constexpr size_t kChunkBytes = size_t{256} << 20;
#endif
  std::vector<cu::DeviceBuffer> chunks_;
  size_t used_ = 0, total_ = 0;
};

struct DevLinear {  // y = x W^T through cu::Gemm
  cu::GemmKind kind = cu::GemmKind::kBF16;
  const void* w = nullptr;        // [n, k] bf16 or e4m3
  const float* scales = nullptr;  // kFP8Block: [ceil(n/128), ceil(k/128)]
  int64_t n = 0, k = 0;
  bool pow2 = true;  // kFP8Block: UE8M0 activation scales
};

struct DevF32Linear {  // fp32 weights, fp32 GEMM (router, indexer head weights)
  const float* w = nullptr;
  int64_t n = 0, k = 0;
};

struct DevMlp {
  DevLinear w1, w3, w2;
};

struct DevLayer {
  const float* attn_norm = nullptr;
  const float* ffn_norm = nullptr;
  DevLinear wq_a, wq_b, wkv_a, wo;
  const float* q_norm = nullptr;
  const float* kv_norm = nullptr;
  const uint16_t* kvb = nullptr;  // bf16 [heads * (nope + v), kv_rank]
  DevLinear iwq_b, iwk;
  DevF32Linear iw_proj;
  const float* k_norm_weight = nullptr;
  const float* k_norm_bias = nullptr;
  bool is_moe = false;
  DevMlp dense;
  DevF32Linear gate;
  const float* gate_bias = nullptr;
  std::vector<DevMlp> experts;
  bool has_shared = false;
  DevMlp shared;
};

// Rows of a host matrix widened to fp32 (DequantizeRow), in blocks of rows, handed to `sink`
// (begin row, rows, values).
template <typename Sink>
Status ForRowBlocks(const kernels::WeightMatrix& w, Sink&& sink) {
  constexpr int64_t kBlockRows = 256;
  std::vector<float> rows;
  for (int64_t begin = 0; begin < w.rows; begin += kBlockRows) {
    const int64_t count = std::min(kBlockRows, w.rows - begin);
    rows.resize(Sz(count * w.cols));
    for (int64_t r = 0; r < count; ++r) kernels::DequantizeRow(w, begin + r, &rows[Sz(r * w.cols)]);
    ENVFORGE_RETURN_IF_ERROR(sink(begin, count, rows));
  }
  return Status::Ok();
}

Result<const uint16_t*> UploadBf16(Arena& arena, const kernels::WeightMatrix& w) {
  const size_t bytes = Sz(w.rows * w.cols) * 2;
  if (w.dtype == kernels::DType::kBF16) {
    ENVFORGE_ASSIGN_OR_RETURN(void* device, arena.Put(w.data, bytes));
    return static_cast<const uint16_t*>(device);
  }
  ENVFORGE_ASSIGN_OR_RETURN(void* device, arena.Allocate(bytes));
  auto* out = static_cast<uint16_t*>(device);
  std::vector<uint16_t> staged;
  ENVFORGE_RETURN_IF_ERROR(ForRowBlocks(w, [&](int64_t begin, int64_t count, const std::vector<float>& rows) {
    staged.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) staged[i] = kernels::FloatToBf16(rows[i]);
    return cu::CheckCuda(
        cudaMemcpy(out + begin * w.cols, staged.data(), Sz(count * w.cols) * 2, cudaMemcpyHostToDevice),
        "weight upload");
  }));
  return static_cast<const uint16_t*>(out);
}

Result<DevF32Linear> UploadF32(Arena& arena, const kernels::WeightMatrix& w) {
  ENVFORGE_ASSIGN_OR_RETURN(void* device, arena.Allocate(Sz(w.rows * w.cols) * 4));
  auto* out = static_cast<float*>(device);
  ENVFORGE_RETURN_IF_ERROR(ForRowBlocks(w, [&](int64_t begin, int64_t count, const std::vector<float>& rows) {
    return cu::CheckCuda(cudaMemcpy(out + begin * w.cols, rows.data(), Sz(count * w.cols) * 4, cudaMemcpyHostToDevice),
                         "weight upload");
  }));
  DevF32Linear linear;
  linear.w = out;
  linear.n = w.rows;
  linear.k = w.cols;
  return linear;
}

Result<DevLinear> UploadLinear(Arena& arena, const kernels::WeightMatrix& w, bool fp8_gemm) {
  DevLinear linear;
  linear.n = w.rows;
  linear.k = w.cols;
  if (fp8_gemm && w.dtype == kernels::DType::kF8E4M3) {
    linear.kind = cu::GemmKind::kFP8Block;
    linear.pow2 = w.pow2_activation_scales;
    ENVFORGE_ASSIGN_OR_RETURN(linear.w, arena.Put(w.data, Sz(w.rows * w.cols)));
    ENVFORGE_ASSIGN_OR_RETURN(void* scales,
                              arena.Put(w.block_scale_inv, Sz(CeilDiv(w.rows, 128) * CeilDiv(w.cols, 128)) * 4));
    linear.scales = static_cast<const float*>(scales);
    return linear;
  }
  ENVFORGE_ASSIGN_OR_RETURN(const uint16_t* bf16, UploadBf16(arena, w));
  linear.w = bf16;
  return linear;
}

Result<const float*> UploadVector(Arena& arena, const float* v, int64_t n) {
  if (v == nullptr) return static_cast<const float*>(nullptr);
  ENVFORGE_ASSIGN_OR_RETURN(void* device, arena.Put(v, Sz(n) * 4));
  return static_cast<const float*>(device);
}

Result<DevMlp> UploadMlp(Arena& arena, const MlpWeights& mlp, bool fp8_gemm) {
  DevMlp out;
  ENVFORGE_ASSIGN_OR_RETURN(out.w1, UploadLinear(arena, mlp.w1, fp8_gemm));
  ENVFORGE_ASSIGN_OR_RETURN(out.w3, UploadLinear(arena, mlp.w3, fp8_gemm));
  ENVFORGE_ASSIGN_OR_RETURN(out.w2, UploadLinear(arena, mlp.w2, fp8_gemm));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Scratch: one growable device buffer per role. Growing synchronises the stream first, so a buffer
// still read by queued kernels is never freed under them; steady-state steps allocate nothing.

enum Buf : int {
  kInts,
  kMoeInts,
  kX,
  kH,
  kQa,
  kQ,
  kQBf16,
  kKva,
  kQAbs,
  kO,
  kU,
  kIq,
  kIq8,
  kIqScale,
  kIk,
  kIk8,
  kIkScale,
  kIw,
  kSelQ8,
  kSelW,
  kSelEnd,
  kKeys,
  kKeyScales,
  kLogits,
  kTopkOut,
  kTopkWs,
  kIndices,
  kMlaWs,
  kGu,
  kAct,
  kRouter,
  kRouteIds,
  kRouteW,
  kXs,
  kYs,
  kShared,
  kFinalX,
  kFinalH,
  kHeadOut,
  kFormFirst,  // per input role: bf16 form, e4m3 form, e4m3 scales (3 buffers each)
};
enum Role : int { kRoleH, kRoleQa, kRoleU, kRoleAct, kRoleXs, kRoleFinal, kRoleCount };
constexpr int kBufCount = kFormFirst + 3 * kRoleCount;

class Scratch {
 public:
  explicit Scratch(cudaStream_t stream) : stream_(stream) {}
  template <typename T>
  Result<T*> Get(int id, int64_t count) {
    cu::DeviceBuffer& buffer = buffers_[Sz(id)];
    const size_t bytes = std::max<size_t>(256, Sz(count) * sizeof(T));
    if (buffer.bytes() < bytes) {
      ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(cudaStreamSynchronize(stream_), "scratch growth"));
      buffer = cu::DeviceBuffer();
      // 25% headroom so slowly growing contexts do not reallocate every step.
      ENVFORGE_ASSIGN_OR_RETURN(buffer, cu::DeviceBuffer::Allocate(bytes + bytes / 4));
    }
    return buffer.as<T>();
  }

 private:
  cudaStream_t stream_;
  std::array<cu::DeviceBuffer, kBufCount> buffers_;
};

// A GEMM input: fp32 rows and, made on first use, the form a weight needs (bf16, or e4m3 with
// 1x128 scales).
struct Input {
  const float* f32 = nullptr;
  int64_t rows = 0, cols = 0;
  Role role = kRoleH;
  const uint16_t* bf16 = nullptr;
  const uint8_t* fp8 = nullptr;
  const float* fp8_scales = nullptr;
  bool fp8_pow2 = false;
};

Input MakeInput(const float* f32, int64_t rows, int64_t cols, Role role) {
  Input in;
  in.f32 = f32;
  in.rows = rows;
  in.cols = cols;
  in.role = role;
  return in;
}

// Per-forward int32 arrays, packed into one upload; each array starts 16-byte aligned (kernels
// require aligned pointers).
class IntPack {
 public:
  int64_t Add(const std::vector<int32_t>& values) {
    while (data_.size() % 4 != 0) data_.push_back(0);
    const auto offset = static_cast<int64_t>(data_.size());
    data_.insert(data_.end(), values.begin(), values.end());
    return offset;
  }
  const std::vector<int32_t>& data() const { return data_; }

 private:
  std::vector<int32_t> data_;
};

// out = RMSNorm(x) * weight over `rows` contiguous rows of `dim` (out may alias x).
Status RmsNormRows(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out,
                   cudaStream_t stream) {
  cu::NormArgs n;
  n.x = x;
  n.rows = rows;
  n.dim = dim;
  n.weight = weight;
  n.eps = eps;
  n.out_f32 = out;
  return cu::RmsNorm(n, stream);
}

// One Forward call's state, handed from stage to stage of CudaForward::Impl::Forward: the host
// plan, its int arrays on the device, the test hook, and the activations (scratch buffers, valid
// for this call only).
struct Step {
  // --- Plan (ReservePages, PlanStep).
  int64_t tokens = 0, sequences = 0, max_pages = 1;
  std::vector<DevicePagePool::Sequence*> seqs;  // [B] page lists
  std::vector<int64_t> lengths, adds;           // [B] cached tokens before the step, tokens fed
  std::vector<int64_t> seq_first;               // [B + 1]
  std::vector<int64_t> positions;               // [T]
  std::vector<int32_t> seq_of_row;              // [T]
  // Decode group: sequences feeding one token whose selection runs (sparse, position + 1 > topk).
  std::vector<int32_t> decode_rows, decode_seqs, decode_len;
  std::vector<std::vector<int32_t>> pages;  // per sequence, after Reserve
  // Device pointers into the packed int upload.
  const int32_t* d_tokens = nullptr;
  const int32_t* d_positions = nullptr;
  const int32_t* d_slots = nullptr;
  const int32_t* d_seq_of_row = nullptr;
  const int32_t* d_identity = nullptr;
  const int32_t* d_key_end = nullptr;
  const int32_t* d_block_table = nullptr;  // [B, max_pages]
  const int32_t* d_decode_rows = nullptr;
  const int32_t* d_decode_seqs = nullptr;
  const int32_t* d_decode_len = nullptr;
  const int32_t* d_decode_table = nullptr;  // [decode seqs, max_pages]
  const int32_t* d_logit_rows = nullptr;
  int64_t logit_rows = 0;
  int64_t max_key_end = 0;
  // --- Test hook: ForwardOptions::record_selection, and slot page -> page index per sequence.
  SelectionRecord* record = nullptr;
  std::vector<std::unordered_map<int32_t, int32_t>> page_index;
  std::vector<int16_t>* routing = nullptr;  // ForwardOptions::record_routing (sized by Model::Forward)
  // --- Activations (GetActivations), and the GEMM inputs h and c^Q of the current layer, which
  // keep their bf16 / e4m3 forms from the attention projections for the indexer's.
  float* x = nullptr;          // [T, D] residual stream
  float* h = nullptr;          // [T, D] normed
  float* qa = nullptr;         // [T, q_lora] c^Q
  float* q = nullptr;          // [T, H * (nope + rope)]
  uint16_t* q_bf16 = nullptr;  // the same in bf16
  float* kva = nullptr;        // [T, kv_rank + rope]
  uint16_t* q_abs = nullptr;   // [T, H, kv_rank + rope] absorbed queries, bf16
  uint16_t* o = nullptr;       // [T, H, kv_rank] attention output, bf16
  float* u = nullptr;          // [T, H * v]
  Input h_in, qa_in;
  // --- The current layer's indexer outputs and selection (sparse only).
  const uint8_t* iq8 = nullptr;  // [T, index_heads, index_dim] e4m3 queries
  const float* iw = nullptr;     // [T, index_heads] folded head weights
  int32_t* indices = nullptr;    // [T, index_topk] selected slots, -1 padded
};

}  // namespace cuda_forward_detail
using namespace cuda_forward_detail;

// ---------------------------------------------------------------------------------------------

struct CudaForward::Impl {
  const ModelConfig& config;
  const ModelWeights& weights;
  CudaForwardOptions options;
  cu::DeviceInfo device;
  bool sparse = true;
  bool fp8_gemm = false;
  cu::Stream stream;
  std::unique_ptr<cu::BlasHandle> blas;
  Arena arena;
  std::vector<DevLayer> layers;
  const void* embed = nullptr;
  const float* embed_scales = nullptr;
  const float* final_norm = nullptr;
  DevLinear head;
  const float* freqs = nullptr;
  std::shared_ptr<DevicePagePool> pool;
  Scratch scratch;
  std::vector<cudaEvent_t> events;  // 4 per layer: indexer begin/end, attention begin/end

  Impl(const ModelConfig& c, const ModelWeights& w, cu::Stream s)
      : config(c), weights(w), stream(std::move(s)), scratch(stream.get()) {}
  ~Impl() {
    for (cudaEvent_t event : events) cudaEventDestroy(event);
  }

  cudaStream_t st() const { return stream.get(); }

  Status Upload(const std::vector<float>& rope_freqs);
  Status Prepare(Input& in, const DevLinear& w);
  // c[rows, ldc] (= beta * c +) rows [row0, row0 + rows) of `in` times w^T.
  Status Linear(Input& in, int64_t row0, int64_t rows, const DevLinear& w, float* c, int64_t ldc, float beta);
  Status Linear(Input& in, const DevLinear& w, float* c, float beta = 0.0f) {
    return Linear(in, 0, in.rows, w, c, w.n, beta);
  }
  Status LinearF32(const Input& in, const DevF32Linear& w, float* c);
  Status SwiGlu(Input& in, int64_t row0, int64_t rows, const DevMlp& mlp, float* y, float beta);

  Status Forward(std::span<const SequenceInput> batch, std::vector<float>* logits, const ForwardOptions& options,
                 ForwardProfile& profile);

  // The stages of Forward, in order; each enqueues its kernels on the stream and fills its part of
  // `step`. They mirror Model's (inference/model.h): ReservePages and PlanStep (pages of the new
  // tokens, all or nothing; the host plan and its device upload), Embed, GetActivations, then per
  // layer RunLayer = attention norm, RunAttention (x += W_o attention), FFN norm, RunFfn (x += FFN),
  // and RunHead (final norm and head, logits to the host: the step's closing synchronisation; MoE
  // routing, scratch growth and the record hook synchronise too), AddPartTimes.
  Status ReservePages(std::span<const SequenceInput> batch, Step& step);
  Status PlanStep(std::span<const SequenceInput> batch, const ForwardOptions& options, Step& step);
  Status Embed(Step& step, ForwardProfile& profile);
  Status GetActivations(Step& step);
  Status RunLayer(int64_t l, Step& step, ForwardProfile& profile);
  // RunAttentionProjections (q, and the latent rows into the pages); sparse: RunIndexer (indexer
  // queries, keys into the pages, head weights) and SelectKeys (step.indices); Attend; W_o.
  Status RunAttention(int64_t l, Step& step, ForwardProfile& profile);
  Status RunAttentionProjections(int64_t l, Step& step, ForwardProfile& profile);
  Status RunIndexer(int64_t l, Step& step, ForwardProfile& profile);
  // Every row's causal slots, then the top-k of the decode group (SelectDecodeRows) and of each
  // sequence feeding several tokens past index_topk keys (SelectSequenceKeys) over them.
  Status SelectKeys(int64_t l, Step& step);
  Status SelectDecodeRows(int64_t l, Step& step, const cu::SlotTableArgs& table);
  Status SelectSequenceKeys(int64_t l, int64_t b, Step& step, const cu::SlotTableArgs& table);
  // Absorbed queries, sparse MQA over the selected (or, dense, every causal) slots in row chunks,
  // W_UV into step.u.
  Status Attend(int64_t l, Step& step, ForwardProfile& profile);
  Status AttendChunk(int64_t l, Step& step, int64_t r0, int64_t count, int64_t width);
  // ForwardOptions::record_selection for rows [r0, r0 + count) from their slot lists (synchronises).
  Status RecordSelection(int64_t l, Step& step, const int32_t* chunk_indices, int64_t r0, int64_t count, int64_t width);
  Status RunFfn(int64_t l, Step& step, ForwardProfile& profile);
  Status RunMoe(int64_t l, Input& f_in, Step& step, ForwardProfile& profile);
  Status RunHead(Step& step, std::vector<float>* logits, ForwardProfile& profile);
  void AddPartTimes(Clock::time_point wall_start, ForwardProfile& profile);
};

Status CudaForward::Impl::Upload(const std::vector<float>& rope_freqs) {
  const bool fp8 = fp8_gemm;
  ENVFORGE_ASSIGN_OR_RETURN(void* freq_device, arena.Put(rope_freqs.data(), rope_freqs.size() * 4));
  freqs = static_cast<const float*>(freq_device);
  const kernels::WeightMatrix& e = weights.embed;
  ENVFORGE_ASSIGN_OR_RETURN(embed, arena.Put(e.data, Sz(e.rows * e.cols * kernels::DTypeSize(e.dtype))));
  if (e.dtype == kernels::DType::kF8E4M3) {
    ENVFORGE_ASSIGN_OR_RETURN(void* scales,
                              arena.Put(e.block_scale_inv, Sz(CeilDiv(e.rows, 128) * CeilDiv(e.cols, 128)) * 4));
    embed_scales = static_cast<const float*>(scales);
  }
  ENVFORGE_ASSIGN_OR_RETURN(final_norm, UploadVector(arena, weights.final_norm, config.hidden_size));
  // The head is the vocabulary GEMM; bf16 (or FP8 if the checkpoint stores it so) as other linears.
  ENVFORGE_ASSIGN_OR_RETURN(head, UploadLinear(arena, weights.head, fp8));
  const int64_t hidden = config.hidden_size;
  for (const LayerWeights& lw : weights.layers) {
    DevLayer layer;
    const AttentionWeights& a = lw.attn;
    ENVFORGE_ASSIGN_OR_RETURN(layer.attn_norm, UploadVector(arena, lw.attn_norm, hidden));
    ENVFORGE_ASSIGN_OR_RETURN(layer.ffn_norm, UploadVector(arena, lw.ffn_norm, hidden));
    ENVFORGE_ASSIGN_OR_RETURN(layer.wq_a, UploadLinear(arena, a.wq_a, fp8));
    ENVFORGE_ASSIGN_OR_RETURN(layer.q_norm, UploadVector(arena, a.q_norm, config.q_lora_rank));
    ENVFORGE_ASSIGN_OR_RETURN(layer.wq_b, UploadLinear(arena, a.wq_b, fp8));
    ENVFORGE_ASSIGN_OR_RETURN(layer.wkv_a, UploadLinear(arena, a.wkv_a, fp8));
    ENVFORGE_ASSIGN_OR_RETURN(layer.kv_norm, UploadVector(arena, a.kv_norm, config.kv_lora_rank));
    ENVFORGE_ASSIGN_OR_RETURN(layer.kvb, UploadBf16(arena, a.wkv_b));
    ENVFORGE_ASSIGN_OR_RETURN(layer.wo, UploadLinear(arena, a.wo, fp8));
    if (sparse) {
      const IndexerWeights& idx = a.indexer;
      ENVFORGE_ASSIGN_OR_RETURN(layer.iwq_b, UploadLinear(arena, idx.wq_b, fp8));
      ENVFORGE_ASSIGN_OR_RETURN(layer.iwk, UploadLinear(arena, idx.wk, fp8));
      ENVFORGE_ASSIGN_OR_RETURN(layer.iw_proj, UploadF32(arena, idx.weights_proj));
      ENVFORGE_ASSIGN_OR_RETURN(layer.k_norm_weight, UploadVector(arena, idx.k_norm_weight, config.index_head_dim));
      ENVFORGE_ASSIGN_OR_RETURN(layer.k_norm_bias, UploadVector(arena, idx.k_norm_bias, config.index_head_dim));
    }
    layer.is_moe = lw.is_moe;
    if (!lw.is_moe) {
      ENVFORGE_ASSIGN_OR_RETURN(layer.dense, UploadMlp(arena, lw.dense, fp8));
    } else {
      ENVFORGE_ASSIGN_OR_RETURN(layer.gate, UploadF32(arena, lw.moe.gate));
      ENVFORGE_ASSIGN_OR_RETURN(layer.gate_bias, UploadVector(arena, lw.moe.gate_bias, config.n_routed_experts));
      for (const MlpWeights& expert : lw.moe.experts) {
        ENVFORGE_ASSIGN_OR_RETURN(DevMlp uploaded, UploadMlp(arena, expert, fp8));
        layer.experts.push_back(uploaded);
      }
      layer.has_shared = lw.moe.has_shared;
      if (layer.has_shared) {
        ENVFORGE_ASSIGN_OR_RETURN(layer.shared, UploadMlp(arena, lw.moe.shared, fp8));
      }
    }
    layers.push_back(std::move(layer));
  }
  return Status::Ok();
}

Status CudaForward::Impl::Prepare(Input& in, const DevLinear& w) {
  const int base = kFormFirst + 3 * static_cast<int>(in.role);
  if (w.kind == cu::GemmKind::kBF16) {
    if (in.bf16 != nullptr) return Status::Ok();
    ENVFORGE_ASSIGN_OR_RETURN(uint16_t * out, scratch.Get<uint16_t>(base, in.rows * in.cols));
    ENVFORGE_RETURN_IF_ERROR(cu::ToBf16(in.f32, in.rows * in.cols, out, st()));
    in.bf16 = out;
    return Status::Ok();
  }
  if (in.fp8 != nullptr && in.fp8_pow2 == w.pow2) return Status::Ok();
  ENVFORGE_ASSIGN_OR_RETURN(uint8_t * codes, scratch.Get<uint8_t>(base + 1, in.rows * in.cols));
  ENVFORGE_ASSIGN_OR_RETURN(float* scales, scratch.Get<float>(base + 2, in.rows * CeilDiv(in.cols, 128)));
  cu::ActQuantArgs q;
  q.x = in.f32;
  q.rows = in.rows;
  q.cols = in.cols;
  q.group = 128;
  q.pow2_scales = w.pow2;
  q.q = codes;
  q.scales = scales;
  ENVFORGE_RETURN_IF_ERROR(cu::ActQuantFp8(q, st()));
  in.fp8 = codes;
  in.fp8_scales = scales;
  in.fp8_pow2 = w.pow2;
  return Status::Ok();
}

Status CudaForward::Impl::Linear(Input& in, int64_t row0, int64_t rows, const DevLinear& w, float* c, int64_t ldc,
                                 float beta) {
  if (rows == 0) return Status::Ok();
  if (in.cols != w.k) {
    return InternalError("GPU linear: input has " + std::to_string(in.cols) + " columns, the weight " +
                         std::to_string(w.k));
  }
  ENVFORGE_RETURN_IF_ERROR(Prepare(in, w));
  cu::GemmArgs g;
  g.kind = w.kind;
  g.m = rows;
  g.n = w.n;
  g.k = w.k;
  g.w = w.w;
  g.lda = in.cols;
  g.ldw = w.k;
  g.ldc = ldc;
  g.c = c;
  g.beta = beta;
  if (w.kind == cu::GemmKind::kBF16) {
    g.a = in.bf16 + row0 * in.cols;
  } else {
    g.a = in.fp8 + row0 * in.cols;
    g.a_scales = in.fp8_scales + row0 * CeilDiv(in.cols, 128);
    g.w_scales = w.scales;
  }
  return cu::Gemm(*blas, g);
}

Status CudaForward::Impl::LinearF32(const Input& in, const DevF32Linear& w, float* c) {
  if (in.rows == 0) return Status::Ok();
  // Plain fp32 products, never TF32 (routing and head weights stay fp32 as on the CPU).
  cu::GemmArgs g;
  g.kind = cu::GemmKind::kF32;
  g.m = in.rows;
  g.n = w.n;
  g.k = w.k;
  g.a = in.f32;
  g.lda = in.cols;
  g.w = w.w;
  g.ldw = w.k;
  g.c = c;
  g.ldc = w.n;
  return cu::Gemm(*blas, g);
}

// y rows [row0, row0 + rows) (= beta * y +) w2(silu(w1 x) * (w3 x)) for those rows of `in`; y has
// row stride hidden and points at row 0.
Status CudaForward::Impl::SwiGlu(Input& in, int64_t row0, int64_t rows, const DevMlp& mlp, float* y, float beta) {
  if (rows == 0) return Status::Ok();
  const int64_t inter = mlp.w1.n;
  // gate | up side by side per row: gu[r] = [w1 x (inter) | w3 x (inter)]. gu and act are reused
  // by the next call; the stream orders its writes after this call's reads.
  ENVFORGE_ASSIGN_OR_RETURN(float* gu, scratch.Get<float>(kGu, rows * 2 * inter));
  ENVFORGE_ASSIGN_OR_RETURN(float* act, scratch.Get<float>(kAct, rows * inter));
  ENVFORGE_RETURN_IF_ERROR(Linear(in, row0, rows, mlp.w1, gu, 2 * inter, 0.0f));
  ENVFORGE_RETURN_IF_ERROR(Linear(in, row0, rows, mlp.w3, gu + inter, 2 * inter, 0.0f));
  cu::SiluMulArgs s;
  s.gate = gu;
  s.up = gu + inter;
  s.rows = rows;
  s.cols = inter;
  s.in_stride = 2 * inter;
  s.out_f32 = act;
  ENVFORGE_RETURN_IF_ERROR(cu::SiluMul(s, st()));
  Input hidden = MakeInput(act, rows, inter, kRoleAct);
  return Linear(hidden, 0, rows, mlp.w2, y + row0 * mlp.w2.n, mlp.w2.n, beta);
}

Status CudaForward::Impl::Forward(std::span<const SequenceInput> batch, std::vector<float>* logits,
                                  const ForwardOptions& forward_options, ForwardProfile& profile) {
  const auto wall_start = Clock::now();
  Step step;
  ENVFORGE_RETURN_IF_ERROR(ReservePages(batch, step));
  ENVFORGE_RETURN_IF_ERROR(PlanStep(batch, forward_options, step));
  ENVFORGE_RETURN_IF_ERROR(Embed(step, profile));
  ENVFORGE_RETURN_IF_ERROR(GetActivations(step));
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) ENVFORGE_RETURN_IF_ERROR(RunLayer(l, step, profile));
  ENVFORGE_RETURN_IF_ERROR(RunHead(step, logits, profile));
  AddPartTimes(wall_start, profile);
  return Status::Ok();
}

Status CudaForward::Impl::ReservePages(std::span<const SequenceInput> batch, Step& step) {
  const auto B = static_cast<int64_t>(batch.size());
  step.seqs.resize(Sz(B));
  step.lengths.resize(Sz(B));
  step.adds.resize(Sz(B));
  for (int64_t b = 0; b < B; ++b) {
    KvCache& cache = *batch[Sz(b)].cache;
    if (cache.attachment() == nullptr) cache.Attach(pool->NewSequence());
    step.seqs[Sz(b)] = pool->Owned(cache.attachment());
    if (step.seqs[Sz(b)] == nullptr)
      return InternalError("sequence " + std::to_string(b) + ": KV cache of another engine");
    step.lengths[Sz(b)] = cache.length();
    step.adds[Sz(b)] = static_cast<int64_t>(batch[Sz(b)].tokens.size());
  }
  ENVFORGE_RETURN_IF_ERROR(pool->Reserve(step.seqs, step.lengths, step.adds));
  for (int64_t b = 0; b < B; ++b) batch[Sz(b)].cache->BeginAppend(step.adds[Sz(b)]);
  return Status::Ok();
}

Status CudaForward::Impl::PlanStep(std::span<const SequenceInput> batch, const ForwardOptions& forward_options,
                                   Step& step) {
  const auto B = static_cast<int64_t>(batch.size());
  const int64_t topk = config.index_topk;
  const std::vector<int64_t>& lengths = step.lengths;
  const std::vector<int64_t>& adds = step.adds;
  step.sequences = B;
  step.seq_first.assign(1, 0);
  for (int64_t b = 0; b < B; ++b) step.seq_first.push_back(step.seq_first.back() + adds[Sz(b)]);
  const int64_t T = step.seq_first.back();
  step.tokens = T;
  std::vector<int32_t> tokens, slots, identity, key_end, block_table, decode_table, logit_rows;
  for (int64_t b = 0; b < B; ++b) {
    step.pages.push_back(step.seqs[Sz(b)]->pages());
    step.max_pages = std::max<int64_t>(step.max_pages, static_cast<int64_t>(step.pages.back().size()));
  }
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int32_t>& pages = step.pages[Sz(b)];
    for (int64_t i = 0; i < adds[Sz(b)]; ++i) {
      const int64_t pos = lengths[Sz(b)] + i;
      const auto row = static_cast<int32_t>(step.seq_first[Sz(b)] + i);
      tokens.push_back(batch[Sz(b)].tokens[Sz(i)]);
      step.positions.push_back(pos);
      step.seq_of_row.push_back(static_cast<int32_t>(b));
      slots.push_back(
          static_cast<int32_t>(int64_t{pages[Sz(pos / kernels::cuda::kPageTokens)]} * kernels::cuda::kPageTokens +
                               pos % kernels::cuda::kPageTokens));
      identity.push_back(row);
      key_end.push_back(static_cast<int32_t>(pos + 1));
      step.max_key_end = std::max(step.max_key_end, pos + 1);
    }
    for (int64_t p = 0; p < step.max_pages; ++p) {
      // Entries past the sequence's pages are never read for valid positions; 0 keeps them in range.
      block_table.push_back(p < static_cast<int64_t>(pages.size()) ? pages[Sz(p)] : 0);
    }
    const int64_t last_pos = lengths[Sz(b)] + adds[Sz(b)] - 1;
    if (sparse && adds[Sz(b)] == 1 && last_pos + 1 > topk) {
      step.decode_rows.push_back(static_cast<int32_t>(step.seq_first[Sz(b)]));
      step.decode_seqs.push_back(static_cast<int32_t>(b));
      step.decode_len.push_back(static_cast<int32_t>(last_pos + 1));
      decode_table.insert(decode_table.end(), block_table.end() - step.max_pages, block_table.end());
    }
  }
  if (forward_options.all_logits) {
    logit_rows = identity;
  } else {
    for (int64_t b = 0; b < B; ++b) logit_rows.push_back(static_cast<int32_t>(step.seq_first[Sz(b) + 1] - 1));
  }
  step.logit_rows = static_cast<int64_t>(logit_rows.size());
  IntPack pack;
  const int64_t o_tokens = pack.Add(tokens),
                o_positions = pack.Add(std::vector<int32_t>(step.positions.begin(), step.positions.end()));
  const int64_t o_slots = pack.Add(slots), o_seq = pack.Add(step.seq_of_row), o_identity = pack.Add(identity);
  const int64_t o_key_end = pack.Add(key_end), o_table = pack.Add(block_table), o_logit_rows = pack.Add(logit_rows);
  const int64_t o_drows = pack.Add(step.decode_rows), o_dseqs = pack.Add(step.decode_seqs);
  const int64_t o_dlen = pack.Add(step.decode_len), o_dtable = pack.Add(decode_table);
  ENVFORGE_ASSIGN_OR_RETURN(int32_t * ints, scratch.Get<int32_t>(kInts, static_cast<int64_t>(pack.data().size())));
  ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(
      cudaMemcpyAsync(ints, pack.data().data(), pack.data().size() * 4, cudaMemcpyHostToDevice, st()), "step upload"));
  step.d_tokens = ints + o_tokens;
  step.d_positions = ints + o_positions;
  step.d_slots = ints + o_slots;
  step.d_seq_of_row = ints + o_seq;
  step.d_identity = ints + o_identity;
  step.d_key_end = ints + o_key_end;
  step.d_block_table = ints + o_table;
  step.d_logit_rows = ints + o_logit_rows;
  step.d_decode_rows = ints + o_drows;
  step.d_decode_seqs = ints + o_dseqs;
  step.d_decode_len = ints + o_dlen;
  step.d_decode_table = ints + o_dtable;

  step.routing = forward_options.record_routing;
  step.record = forward_options.record_selection;
  if (step.record != nullptr) {
    step.record->assign(Sz(config.num_hidden_layers), std::vector<std::vector<int32_t>>(Sz(T)));
    step.page_index.resize(Sz(B));
    for (int64_t b = 0; b < B; ++b) {
      for (size_t p = 0; p < step.pages[Sz(b)].size(); ++p)
        step.page_index[Sz(b)][step.pages[Sz(b)][p]] = static_cast<int32_t>(p);
    }
  }
  return Status::Ok();
}

Status CudaForward::Impl::Embed(Step& step, ForwardProfile& profile) {
  const int64_t T = step.tokens, D = config.hidden_size;
  ENVFORGE_ASSIGN_OR_RETURN(step.x, scratch.Get<float>(kX, T * D));
  cu::GatherRowsArgs g;
  g.table = embed;
  g.dtype = weights.embed.dtype;
  g.block_scales = embed_scales;
  g.table_rows = weights.embed.rows;
  g.cols = D;
  g.ids = step.d_tokens;
  g.count = T;
  g.out = step.x;
  ENVFORGE_RETURN_IF_ERROR(cu::GatherRows(g, st()));
  for (int64_t b = 0; b < step.sequences; ++b) {
    if (step.adds[Sz(b)] > 1) {
      profile.prefill_tokens += step.adds[Sz(b)];
    } else {
      profile.decode_tokens += 1;
    }
  }
  return Status::Ok();
}

Status CudaForward::Impl::GetActivations(Step& step) {
  const ModelConfig& c = config;
  const int64_t T = step.tokens, D = c.hidden_size, H = c.num_attention_heads;
  const int64_t rank = c.kv_lora_rank, qw = c.qk_nope_head_dim + c.qk_rope_head_dim, qk = rank + c.qk_rope_head_dim;
  ENVFORGE_ASSIGN_OR_RETURN(step.h, scratch.Get<float>(kH, T * D));
  ENVFORGE_ASSIGN_OR_RETURN(step.qa, scratch.Get<float>(kQa, T * c.q_lora_rank));
  ENVFORGE_ASSIGN_OR_RETURN(step.q, scratch.Get<float>(kQ, T * H * qw));
  ENVFORGE_ASSIGN_OR_RETURN(step.q_bf16, scratch.Get<uint16_t>(kQBf16, T * H * qw));
  ENVFORGE_ASSIGN_OR_RETURN(step.kva, scratch.Get<float>(kKva, T * qk));
  ENVFORGE_ASSIGN_OR_RETURN(step.q_abs, scratch.Get<uint16_t>(kQAbs, T * H * qk));
  ENVFORGE_ASSIGN_OR_RETURN(step.o, scratch.Get<uint16_t>(kO, T * H * rank));
  ENVFORGE_ASSIGN_OR_RETURN(step.u, scratch.Get<float>(kU, T * H * c.v_head_dim));
  return Status::Ok();
}

Status CudaForward::Impl::RunLayer(int64_t l, Step& step, ForwardProfile& profile) {
  const DevLayer& layer = layers[Sz(l)];
  const int64_t T = step.tokens, D = config.hidden_size;
  const auto eps = static_cast<float>(config.rms_norm_eps);
  ENVFORGE_RETURN_IF_ERROR(RmsNormRows(step.x, T, D, layer.attn_norm, eps, step.h, st()));
  ENVFORGE_RETURN_IF_ERROR(RunAttention(l, step, profile));
  ENVFORGE_RETURN_IF_ERROR(RmsNormRows(step.x, T, D, layer.ffn_norm, eps, step.h, st()));
  return RunFfn(l, step, profile);
}

Status CudaForward::Impl::RunAttention(int64_t l, Step& step, ForwardProfile& profile) {
  const int64_t T = step.tokens, H = config.num_attention_heads;
  ENVFORGE_RETURN_IF_ERROR(RunAttentionProjections(l, step, profile));
  if (sparse) {
    ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(cudaEventRecord(events[Sz(4 * l)], st()), "event"));
    ENVFORGE_RETURN_IF_ERROR(RunIndexer(l, step, profile));
    ENVFORGE_RETURN_IF_ERROR(SelectKeys(l, step));
    ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(cudaEventRecord(events[Sz(4 * l + 1)], st()), "event"));
  }
  ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(cudaEventRecord(events[Sz(4 * l + 2)], st()), "event"));
  ENVFORGE_RETURN_IF_ERROR(Attend(l, step, profile));
  ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(cudaEventRecord(events[Sz(4 * l + 3)], st()), "event"));
  // x += W_o u
  Input u_in = MakeInput(step.u, T, H * config.v_head_dim, kRoleU);
  return Linear(u_in, layers[Sz(l)].wo, step.x, 1.0f);
}

Status CudaForward::Impl::RunAttentionProjections(int64_t l, Step& step, ForwardProfile& profile) {
  const ModelConfig& c = config;
  const DevLayer& layer = layers[Sz(l)];
  const AttentionWeights& host_attn = weights.layers[Sz(l)].attn;
  const int64_t T = step.tokens, D = c.hidden_size, H = c.num_attention_heads, nope = c.qk_nope_head_dim;
  const int64_t rope = c.qk_rope_head_dim, rank = c.kv_lora_rank, qw = nope + rope, qk = rank + rope;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  profile.weight_bytes += MatrixBytes(host_attn.wq_a) + MatrixBytes(host_attn.wq_b) + MatrixBytes(host_attn.wkv_a) +
                          MatrixBytes(host_attn.wkv_b) + MatrixBytes(host_attn.wo);

  // c^Q = RMSNorm(W_qa h); q = W_qb c^Q with RoPE on each head's last rope dims.
  step.h_in = MakeInput(step.h, T, D, kRoleH);
  ENVFORGE_RETURN_IF_ERROR(Linear(step.h_in, layer.wq_a, step.qa));
  ENVFORGE_RETURN_IF_ERROR(RmsNormRows(step.qa, T, c.q_lora_rank, layer.q_norm, eps, step.qa, st()));
  step.qa_in = MakeInput(step.qa, T, c.q_lora_rank, kRoleQa);
  ENVFORGE_RETURN_IF_ERROR(Linear(step.qa_in, layer.wq_b, step.q));
  cu::RopeArgs r;
  r.x = step.q + nope;
  r.tokens = T;
  r.count = H;
  r.token_stride = H * qw;
  r.vector_stride = qw;
  r.rotary_dim = static_cast<int>(rope);
  r.positions = step.d_positions;
  r.freqs = freqs;
  r.layout = kernels::RopeLayout::kInterleaved;
  ENVFORGE_RETURN_IF_ERROR(cu::ApplyRope(r, st()));

  // [c^KV | k^R] = W_kva h; c^KV normed in place, k^R rotated; both into the tokens' latent rows.
  ENVFORGE_RETURN_IF_ERROR(Linear(step.h_in, layer.wkv_a, step.kva));
  cu::NormArgs n;
  n.x = step.kva;
  n.rows = T;
  n.dim = rank;
  n.x_stride = qk;
  n.weight = layer.kv_norm;
  n.eps = eps;
  n.out_f32 = step.kva;
  n.out_stride = qk;
  ENVFORGE_RETURN_IF_ERROR(cu::RmsNorm(n, st()));
  r.x = step.kva + rank;
  r.count = 1;
  r.token_stride = qk;
  r.vector_stride = qk;
  ENVFORGE_RETURN_IF_ERROR(cu::ApplyRope(r, st()));
  cu::WriteLatentRowsArgs w;
  w.c_kv = step.kva;
  w.k_rope = step.kva + rank;
  w.c_stride = qk;
  w.r_stride = qk;
  w.tokens = T;
  w.kv_rank = rank;
  w.rope_dim = rope;
  w.pow2_scales = c.ue8m0_scales;
  w.slots = step.d_slots;
  w.cache = pool->latent(l);
  return cu::WriteLatentRows(w, st());
}

Status CudaForward::Impl::RunIndexer(int64_t l, Step& step, ForwardProfile& profile) {
  const ModelConfig& c = config;
  const DevLayer& layer = layers[Sz(l)];
  const IndexerWeights& host_idx = weights.layers[Sz(l)].attn.indexer;
  const int64_t T = step.tokens, IH = c.index_n_heads, ID = c.index_head_dim;
  profile.weight_bytes += MatrixBytes(host_idx.wq_b) + MatrixBytes(host_idx.wk) + MatrixBytes(host_idx.weights_proj);
  ENVFORGE_ASSIGN_OR_RETURN(float* iq, scratch.Get<float>(kIq, T * IH * ID));
  ENVFORGE_ASSIGN_OR_RETURN(uint8_t * iq8, scratch.Get<uint8_t>(kIq8, T * IH * ID));
  ENVFORGE_ASSIGN_OR_RETURN(float* iq_scale, scratch.Get<float>(kIqScale, T * IH));
  ENVFORGE_ASSIGN_OR_RETURN(float* ik, scratch.Get<float>(kIk, T * ID));
  ENVFORGE_ASSIGN_OR_RETURN(uint8_t * ik8, scratch.Get<uint8_t>(kIk8, T * ID));
  ENVFORGE_ASSIGN_OR_RETURN(float* ik_scale, scratch.Get<float>(kIkScale, T));
  ENVFORGE_ASSIGN_OR_RETURN(float* iw, scratch.Get<float>(kIw, T * IH));
  // Queries: [RoPE | NoPE] per head, rotated, Hadamard, e4m3 per (token, head).
  ENVFORGE_RETURN_IF_ERROR(Linear(step.qa_in, layer.iwq_b, iq));
  cu::RopeArgs r;
  r.x = iq;
  r.tokens = T;
  r.count = IH;
  r.token_stride = IH * ID;
  r.vector_stride = ID;
  r.rotary_dim = static_cast<int>(c.qk_rope_head_dim);
  r.positions = step.d_positions;
  r.freqs = freqs;
  r.layout = c.indexer_rope_interleave ? kernels::RopeLayout::kInterleaved : kernels::RopeLayout::kHalf;
  ENVFORGE_RETURN_IF_ERROR(cu::ApplyRope(r, st()));
  cu::HadamardQuantArgs hq;
  hq.x = iq;
  hq.rows = T * IH;
  hq.dim = ID;
  hq.scale = 1.0f / std::sqrt(static_cast<float>(ID));
  hq.pow2_scales = c.ue8m0_scales;
  hq.q = iq8;
  hq.scales = iq_scale;
  ENVFORGE_RETURN_IF_ERROR(cu::HadamardQuantFp8(hq, st()));
  // Keys: LayerNorm, the same rotation, e4m3 per token, into the pages.
  ENVFORGE_RETURN_IF_ERROR(Linear(step.h_in, layer.iwk, ik));
  cu::NormArgs n;
  n.x = ik;
  n.rows = T;
  n.dim = ID;
  n.weight = layer.k_norm_weight;
  n.bias = layer.k_norm_bias;
  n.eps = kIndexerNormEps;
  n.out_f32 = ik;
  ENVFORGE_RETURN_IF_ERROR(cu::LayerNorm(n, st()));
  r.x = ik;
  r.count = 1;
  r.token_stride = ID;
  r.vector_stride = ID;
  ENVFORGE_RETURN_IF_ERROR(cu::ApplyRope(r, st()));
  hq.x = ik;
  hq.rows = T;
  hq.q = ik8;
  hq.scales = ik_scale;
  ENVFORGE_RETURN_IF_ERROR(cu::HadamardQuantFp8(hq, st()));
  cu::WriteIndexerKeysArgs wk;
  wk.keys = ik8;
  wk.scales = ik_scale;
  wk.slots = step.d_slots;
  wk.tokens = T;
  wk.dim = ID;
  wk.pages = pool->index_pages(l);
  ENVFORGE_RETURN_IF_ERROR(cu::WriteIndexerKeys(wk, st()));
  // Head weights in fp32 times index_heads^-0.5 * index_dim^-0.5 * the q scale (4.4 step 7).
  ENVFORGE_RETURN_IF_ERROR(LinearF32(step.h_in, layer.iw_proj, iw));
  const auto constant =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(IH)) / std::sqrt(static_cast<double>(ID)));
  ENVFORGE_RETURN_IF_ERROR(cu::ScaleByProduct(iw, iq_scale, constant, T * IH, st()));
  step.iq8 = iq8;
  step.iw = iw;
  return Status::Ok();
}

Status CudaForward::Impl::SelectKeys(int64_t l, Step& step) {
  const int64_t T = step.tokens, topk = config.index_topk;
  // Every row starts with its causal candidates (exact when position + 1 <= topk); rows of
  // sequences with more candidates are overwritten by their top-k below.
  ENVFORGE_ASSIGN_OR_RETURN(step.indices, scratch.Get<int32_t>(kIndices, T * topk));
  cu::SlotTableArgs table;
  table.rows = T;
  table.width = topk;
  table.table_row = step.d_seq_of_row;
  table.block_table = step.d_block_table;
  table.max_pages = step.max_pages;
  table.out = step.indices;
  ENVFORGE_RETURN_IF_ERROR(cu::CausalSlots(table, step.d_positions, st()));
  if (!step.decode_rows.empty()) ENVFORGE_RETURN_IF_ERROR(SelectDecodeRows(l, step, table));
  for (int64_t b = 0; b < step.sequences; ++b) {
    const int64_t keys = step.lengths[Sz(b)] + step.adds[Sz(b)];
    if (step.adds[Sz(b)] < 2 || keys <= topk) continue;  // the decode group, or all causal
    ENVFORGE_RETURN_IF_ERROR(SelectSequenceKeys(l, b, step, table));
  }
  return Status::Ok();
}

Status CudaForward::Impl::SelectDecodeRows(int64_t l, Step& step, const cu::SlotTableArgs& table) {
  // One query per sequence against its paged keys.
  const int64_t IH = config.index_n_heads, ID = config.index_head_dim, topk = config.index_topk;
  const auto decode_count = static_cast<int64_t>(step.decode_rows.size());
  int64_t max_len = 0;
  for (int32_t len : step.decode_len) max_len = std::max<int64_t>(max_len, len);
  const int64_t stride = RoundUp(max_len, 4);
  ENVFORGE_ASSIGN_OR_RETURN(uint8_t * sel_q8, scratch.Get<uint8_t>(kSelQ8, decode_count * IH * ID));
  ENVFORGE_ASSIGN_OR_RETURN(float* sel_w, scratch.Get<float>(kSelW, decode_count * IH));
  ENVFORGE_ASSIGN_OR_RETURN(float* scores, scratch.Get<float>(kLogits, decode_count * stride));
  ENVFORGE_ASSIGN_OR_RETURN(int32_t * picked, scratch.Get<int32_t>(kTopkOut, decode_count * topk));
  ENVFORGE_RETURN_IF_ERROR(cu::CopyRows(step.iq8, step.d_decode_rows, decode_count, IH * ID, sel_q8, st()));
  ENVFORGE_RETURN_IF_ERROR(cu::CopyRows(step.iw, step.d_decode_rows, decode_count, IH * 4, sel_w, st()));
  cu::PagedIndexerLogitsArgs p;
  p.q = sel_q8;
  p.head_weight = sel_w;
  p.pages = pool->index_pages(l);
  p.block_table = step.d_decode_table;
  p.context_len = step.d_decode_len;
  p.batch = decode_count;
  p.heads = IH;
  p.dim = ID;
  p.num_pages = pool->capacity();
  p.max_pages_per_seq = step.max_pages;
  p.logits = scores;
  p.logits_stride = stride;
  ENVFORGE_RETURN_IF_ERROR(cu::IndexerLogitsDecode(p, st()));
  cu::TopKArgs t;
  t.scores = scores;
  t.rows = decode_count;
  t.n = max_len;
  t.stride = stride;
  t.row_len = step.d_decode_len;
  t.k = topk;
  t.out = picked;
  const size_t ws_bytes = cu::TopKWorkspaceBytes(decode_count, max_len, topk, device.sm_count);
  ENVFORGE_ASSIGN_OR_RETURN(uint8_t * ws, scratch.Get<uint8_t>(kTopkWs, static_cast<int64_t>(ws_bytes)));
  ENVFORGE_RETURN_IF_ERROR(cu::TopK(t, ws, ws_bytes, device.sm_count, st()));
  cu::SlotTableArgs to_slots = table;
  to_slots.rows = decode_count;
  to_slots.dest_row = step.d_decode_rows;
  to_slots.table_row = step.d_decode_seqs;
  return cu::PositionsToSlots(to_slots, picked, st());
}

Status CudaForward::Impl::SelectSequenceKeys(int64_t l, int64_t b, Step& step, const cu::SlotTableArgs& table) {
  const int64_t IH = config.index_n_heads, ID = config.index_head_dim, topk = config.index_topk;
  const int64_t first = step.seq_first[Sz(b)], last = step.seq_first[Sz(b) + 1];
  const int64_t keys = step.lengths[Sz(b)] + step.adds[Sz(b)];
  // The sequence's keys contiguous, then its queries in chunks of bounded score matrices.
  ENVFORGE_ASSIGN_OR_RETURN(uint8_t * key_codes, scratch.Get<uint8_t>(kKeys, keys * ID));
  ENVFORGE_ASSIGN_OR_RETURN(float* key_scales, scratch.Get<float>(kKeyScales, keys));
  cu::GatherIndexerKeysArgs gk;
  gk.pages = pool->index_pages(l);
  gk.block_row = step.d_block_table + b * step.max_pages;
  gk.count = keys;
  gk.dim = ID;
  gk.keys = key_codes;
  gk.scales = key_scales;
  ENVFORGE_RETURN_IF_ERROR(cu::GatherIndexerKeys(gk, st()));
  const int64_t stride = RoundUp(keys, 4);
  const int64_t chunk = std::max<int64_t>(1, std::min(last - first, kMaxScoreFloats / stride));
  for (int64_t c0 = first; c0 < last; c0 += chunk) {
    const int64_t count = std::min(chunk, last - c0);
    // Aligned copies of the chunk's queries, head weights and key ends (the kernels take
    // 16-byte aligned pointers; a sequence's rows may start anywhere in the batch).
    ENVFORGE_ASSIGN_OR_RETURN(uint8_t * sel_q8, scratch.Get<uint8_t>(kSelQ8, count * IH * ID));
    ENVFORGE_ASSIGN_OR_RETURN(float* sel_w, scratch.Get<float>(kSelW, count * IH));
    ENVFORGE_ASSIGN_OR_RETURN(int32_t * sel_end, scratch.Get<int32_t>(kSelEnd, count));
    ENVFORGE_ASSIGN_OR_RETURN(float* scores, scratch.Get<float>(kLogits, count * stride));
    ENVFORGE_ASSIGN_OR_RETURN(int32_t * picked, scratch.Get<int32_t>(kTopkOut, count * topk));
    ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(
        cudaMemcpyAsync(sel_q8, step.iq8 + c0 * IH * ID, Sz(count * IH * ID), cudaMemcpyDeviceToDevice, st()), "copy"));
    ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(
        cudaMemcpyAsync(sel_w, step.iw + c0 * IH, Sz(count * IH) * 4, cudaMemcpyDeviceToDevice, st()), "copy"));
    ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(
        cudaMemcpyAsync(sel_end, step.d_key_end + c0, Sz(count) * 4, cudaMemcpyDeviceToDevice, st()), "copy"));
    cu::IndexerLogitsArgs a;
    a.q = sel_q8;
    a.head_weight = sel_w;
    a.keys = key_codes;
    a.key_scale = key_scales;
    a.key_end = sel_end;
    a.queries = count;
    a.heads = IH;
    a.dim = ID;
    a.keys_count = keys;
    a.logits = scores;
    a.logits_stride = stride;
    ENVFORGE_RETURN_IF_ERROR(cu::IndexerLogitsPrefill(a, st()));
    cu::TopKArgs t;
    t.scores = scores;
    t.rows = count;
    t.n = keys;
    t.stride = stride;
    t.row_len = sel_end;
    t.k = topk;
    t.out = picked;
    const size_t ws_bytes = cu::TopKWorkspaceBytes(count, keys, topk, device.sm_count);
    ENVFORGE_ASSIGN_OR_RETURN(uint8_t * ws, scratch.Get<uint8_t>(kTopkWs, static_cast<int64_t>(ws_bytes)));
    ENVFORGE_RETURN_IF_ERROR(cu::TopK(t, ws, ws_bytes, device.sm_count, st()));
    cu::SlotTableArgs to_slots = table;
    to_slots.rows = count;
    to_slots.dest_row = step.d_identity + c0;
    to_slots.table_row = step.d_seq_of_row + c0;
    ENVFORGE_RETURN_IF_ERROR(cu::PositionsToSlots(to_slots, picked, st()));
  }
  return Status::Ok();
}

Status CudaForward::Impl::Attend(int64_t l, Step& step, ForwardProfile& profile) {
  const ModelConfig& c = config;
  const DevLayer& layer = layers[Sz(l)];
  const int64_t T = step.tokens, H = c.num_attention_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim;
  const int64_t v_dim = c.v_head_dim, rank = c.kv_lora_rank, qw = nope + rope, qk = rank + rope, topk = c.index_topk;
  const int64_t latent_row_bytes = pool->shape().latent_row_bytes(), index_row_bytes = pool->shape().index_row_bytes();
  for (int64_t row = 0; row < T; ++row) {
    const int64_t pos = step.positions[Sz(row)];
    const bool selected = sparse && pos + 1 > topk;
    profile.cache_bytes += (selected ? topk : pos + 1) * latent_row_bytes;
    if (selected) profile.cache_bytes += (pos + 1) * index_row_bytes;
  }
  // q~[t, h, 0:rank] = sum_d q^N[t, h, d] * kv_b[h * (nope + v) + d, :], then q^R appended.
  ENVFORGE_RETURN_IF_ERROR(cu::ToBf16(step.q, T * H * qw, step.q_bf16, st()));
  cu::BatchedGemmArgs absorb;
  absorb.batch = H;
  absorb.m = T;
  absorb.n = rank;
  absorb.k = nope;
  absorb.a = step.q_bf16;
  absorb.lda = H * qw;
  absorb.stride_a = qw;
  absorb.w = layer.kvb;
  absorb.ldw = rank;
  absorb.stride_w = (nope + v_dim) * rank;
  absorb.w_transposed = true;
  absorb.c = step.q_abs;
  absorb.ldc = H * qk;
  absorb.stride_c = qk;
  absorb.c_bf16 = true;
  ENVFORGE_RETURN_IF_ERROR(cu::GemmStridedBatched(*blas, absorb));
  ENVFORGE_RETURN_IF_ERROR(cu::CopyColumnsToBf16(step.q + nope, qw, T * H, rope, step.q_abs + rank, qk, st()));

  // Row chunks: one for sparse (indices filled by SelectKeys); dense fills each chunk's causal
  // slots, bounded to kMaxIndexEntries.
  const int64_t width = sparse ? topk : step.max_key_end;
  const int64_t attention_chunk = sparse ? T : std::max<int64_t>(1, std::min(T, kMaxIndexEntries / width));
  for (int64_t r0 = 0; r0 < T; r0 += attention_chunk) {
    ENVFORGE_RETURN_IF_ERROR(AttendChunk(l, step, r0, std::min(attention_chunk, T - r0), width));
  }

  // u[t, h, :] = W_UV,h o[t, h, :], W_UV,h = rows nope..nope+v of head h's kv_b slice.
  cu::BatchedGemmArgs g;
  g.batch = H;
  g.m = T;
  g.n = v_dim;
  g.k = rank;
  g.a = step.o;
  g.lda = H * rank;
  g.stride_a = rank;
  g.w = layer.kvb + nope * rank;
  g.ldw = rank;
  g.stride_w = (nope + v_dim) * rank;
  g.w_transposed = false;
  g.c = step.u;
  g.ldc = H * v_dim;
  g.stride_c = v_dim;
  return cu::GemmStridedBatched(*blas, g);
}

Status CudaForward::Impl::AttendChunk(int64_t l, Step& step, int64_t r0, int64_t count, int64_t width) {
  const int64_t H = config.num_attention_heads, rank = config.kv_lora_rank, rope = config.qk_rope_head_dim;
  const int64_t qk = rank + rope;
  int32_t* chunk_indices = nullptr;
  if (sparse) {
    chunk_indices = step.indices + r0 * width;
  } else {
    ENVFORGE_ASSIGN_OR_RETURN(chunk_indices, scratch.Get<int32_t>(kIndices, count * width));
    cu::SlotTableArgs table;
    table.rows = count;
    table.width = width;
    table.table_row = step.d_seq_of_row + r0;
    table.block_table = step.d_block_table;
    table.max_pages = step.max_pages;
    table.out = chunk_indices;
    ENVFORGE_RETURN_IF_ERROR(cu::CausalSlots(table, step.d_positions + r0, st()));
  }
  if (step.record != nullptr) ENVFORGE_RETURN_IF_ERROR(RecordSelection(l, step, chunk_indices, r0, count, width));
  cu::SparseMlaArgs a;
  a.q = step.q_abs + r0 * H * qk;
  a.tokens = count;
  a.heads = H;
  a.cache = pool->latent(l);
  a.slots = pool->slots();
  a.kv_rank = rank;
  a.rope_dim = rope;
  a.indices = chunk_indices;
  a.topk = width;
  a.scale = static_cast<float>(config.softmax_scale());
  a.out = step.o + r0 * H * rank;
  // Split-KV decode when the (token, 64-head group) blocks alone cannot fill the SMs.
  if (count * CeilDiv(H, 64) < device.sm_count) {
    const size_t ws_bytes = cu::SparseMlaDecodeWorkspaceBytes(count, H, rank, width, device.sm_count);
    ENVFORGE_ASSIGN_OR_RETURN(uint8_t * ws, scratch.Get<uint8_t>(kMlaWs, static_cast<int64_t>(ws_bytes)));
    return cu::SparseMlaDecode(a, ws, ws_bytes, device.sm_count, st());
  }
  return cu::SparseMlaPrefill(a, st());
}

Status CudaForward::Impl::RecordSelection(int64_t l, Step& step, const int32_t* chunk_indices, int64_t r0,
                                          int64_t count, int64_t width) {
  std::vector<int32_t> host(Sz(count * width));
  ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(
      cudaMemcpyAsync(host.data(), chunk_indices, host.size() * 4, cudaMemcpyDeviceToHost, st()), "record download"));
  ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(cudaStreamSynchronize(st()), "record download"));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = r0 + i;
    const auto& pages = step.page_index[Sz(step.seq_of_row[Sz(row)])];
    std::vector<int32_t>& out = (*step.record)[Sz(l)][Sz(row)];
    out.clear();
    for (int64_t j = 0; j < width; ++j) {
      const int32_t slot = host[Sz(i * width + j)];
      if (slot < 0) continue;
      auto it = pages.find(slot / static_cast<int32_t>(kernels::cuda::kPageTokens));
      if (it != pages.end()) out.push_back(it->second * static_cast<int32_t>(kernels::cuda::kPageTokens) + slot % 64);
    }
    std::sort(out.begin(), out.end());
  }
  return Status::Ok();
}

Status CudaForward::Impl::RunFfn(int64_t l, Step& step, ForwardProfile& profile) {
  // FFN on h = RMSNorm(x) (RunLayer), added to x.
  const DevLayer& layer = layers[Sz(l)];
  Input f_in = MakeInput(step.h, step.tokens, config.hidden_size, kRoleH);
  if (layer.is_moe) return RunMoe(l, f_in, step, profile);
  profile.weight_bytes += MlpBytes(weights.layers[Sz(l)].dense);
  return SwiGlu(f_in, 0, step.tokens, layer.dense, step.x, 1.0f);
}

Status CudaForward::Impl::RunMoe(int64_t l, Input& f_in, Step& step, ForwardProfile& profile) {
  const ModelConfig& c = config;
  const DevLayer& layer = layers[Sz(l)];
  const MoeWeights& host_moe = weights.layers[Sz(l)].moe;
  const int64_t T = step.tokens, D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
  ENVFORGE_ASSIGN_OR_RETURN(float* router, scratch.Get<float>(kRouter, T * E));
  ENVFORGE_ASSIGN_OR_RETURN(int32_t * route_ids, scratch.Get<int32_t>(kRouteIds, T * K));
  ENVFORGE_ASSIGN_OR_RETURN(float* route_w, scratch.Get<float>(kRouteW, T * K));
  ENVFORGE_RETURN_IF_ERROR(LinearF32(f_in, layer.gate, router));
  profile.weight_bytes += MatrixBytes(host_moe.gate);
  cu::RouteExpertsArgs r;
  r.logits = router;
  r.bias = layer.gate_bias;
  r.tokens = T;
  r.routing.n_experts = E;
  r.routing.n_groups = c.n_group;
  r.routing.topk_groups = c.topk_group;
  r.routing.top_k = K;
  r.routing.route_scale = static_cast<float>(c.routed_scaling_factor);
  r.routing.normalize = c.norm_topk_prob;
  r.expert_ids = route_ids;
  r.weights = route_w;
  ENVFORGE_RETURN_IF_ERROR(cu::RouteExperts(r, st()));
  // Expert ids to the host: group the (token, slot) pairs per expert, each expert's rows padded to
  // kExpertRowAlign (pad rows repeat token 0 and are never read back).
  std::vector<int32_t> ids(Sz(T * K));
  ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(
      cudaMemcpyAsync(ids.data(), route_ids, ids.size() * 4, cudaMemcpyDeviceToHost, st()), "expert ids"));
  ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(cudaStreamSynchronize(st()), "expert ids"));
  if (step.routing != nullptr) StoreLayerRouting(c, l, ids.data(), T, *step.routing);
  std::vector<std::vector<int32_t>> slots_of(Sz(E));
  for (int64_t i = 0; i < T * K; ++i) {
    if (ids[Sz(i)] >= 0 && ids[Sz(i)] < E) slots_of[Sz(ids[Sz(i)])].push_back(static_cast<int32_t>(i));
  }
  std::vector<int32_t> gather_tokens, slot_row(Sz(T * K), -1);
  std::vector<std::array<int64_t, 3>> active;  // expert, first row, padded rows
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<int32_t>& list = slots_of[Sz(e)];
    if (list.empty()) continue;
    const auto first = static_cast<int64_t>(gather_tokens.size());
    for (size_t i = 0; i < list.size(); ++i) {
      slot_row[Sz(list[i])] = static_cast<int32_t>(first + static_cast<int64_t>(i));
      gather_tokens.push_back(list[i] / static_cast<int32_t>(K));
    }
    const int64_t padded = RoundUp(static_cast<int64_t>(list.size()), kExpertRowAlign);
    while (static_cast<int64_t>(gather_tokens.size()) < first + padded) gather_tokens.push_back(0);
    active.push_back({e, first, padded});
    profile.weight_bytes += MlpBytes(host_moe.experts[Sz(e)]);
  }
  const auto S = static_cast<int64_t>(gather_tokens.size());
  IntPack moe_pack;
  const int64_t o_gather = moe_pack.Add(gather_tokens), o_slot_row = moe_pack.Add(slot_row);
  ENVFORGE_ASSIGN_OR_RETURN(int32_t * moe_ints,
                            scratch.Get<int32_t>(kMoeInts, static_cast<int64_t>(moe_pack.data().size())));
  ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(
      cudaMemcpyAsync(moe_ints, moe_pack.data().data(), moe_pack.data().size() * 4, cudaMemcpyHostToDevice, st()),
      "expert rows upload"));
  ENVFORGE_ASSIGN_OR_RETURN(float* xs, scratch.Get<float>(kXs, S * D));
  ENVFORGE_ASSIGN_OR_RETURN(float* ys, scratch.Get<float>(kYs, S * D));
  ENVFORGE_RETURN_IF_ERROR(cu::CopyRows(step.h, moe_ints + o_gather, S, D * 4, xs, st()));
  Input xs_in = MakeInput(xs, S, D, kRoleXs);
  for (const auto& [e, first, rows] : active) {
    ENVFORGE_RETURN_IF_ERROR(SwiGlu(xs_in, first, rows, layer.experts[Sz(e)], ys, 0.0f));
  }
  float* shared = nullptr;
  if (layer.has_shared) {
    profile.weight_bytes += MlpBytes(host_moe.shared);
    ENVFORGE_ASSIGN_OR_RETURN(shared, scratch.Get<float>(kShared, T * D));
    ENVFORGE_RETURN_IF_ERROR(SwiGlu(f_in, 0, T, layer.shared, shared, 0.0f));
  }
  cu::CombineExpertsArgs combine;
  combine.x = step.x;
  combine.shared = shared;
  combine.ys = ys;
  combine.row = moe_ints + o_slot_row;
  combine.weight = route_w;
  combine.tokens = T;
  combine.dim = D;
  combine.top_k = K;
  return cu::CombineExperts(combine, st());
}

Status CudaForward::Impl::RunHead(Step& step, std::vector<float>* logits, ForwardProfile& profile) {
  // Final norm and head on the rows that need logits.
  const int64_t R = step.logit_rows, D = config.hidden_size, V = config.vocab_size;
  ENVFORGE_ASSIGN_OR_RETURN(float* fx, scratch.Get<float>(kFinalX, R * D));
  ENVFORGE_ASSIGN_OR_RETURN(float* fh, scratch.Get<float>(kFinalH, R * D));
  ENVFORGE_ASSIGN_OR_RETURN(float* out, scratch.Get<float>(kHeadOut, R * V));
  ENVFORGE_RETURN_IF_ERROR(cu::CopyRows(step.x, step.d_logit_rows, R, D * 4, fx, st()));
  ENVFORGE_RETURN_IF_ERROR(RmsNormRows(fx, R, D, final_norm, static_cast<float>(config.rms_norm_eps), fh, st()));
  Input final_in = MakeInput(fh, R, D, kRoleFinal);
  ENVFORGE_RETURN_IF_ERROR(Linear(final_in, head, out));
  logits->resize(Sz(R * V));
  ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(
      cudaMemcpyAsync(logits->data(), out, Sz(R * V) * 4, cudaMemcpyDeviceToHost, st()), "logits download"));
  ENVFORGE_RETURN_IF_ERROR(stream.Synchronize());
  profile.weight_bytes += MatrixBytes(weights.head) + step.tokens * D * kernels::DTypeSize(weights.embed.dtype);
  return Status::Ok();
}

void CudaForward::Impl::AddPartTimes(Clock::time_point wall_start, ForwardProfile& profile) {
  // Part times from the events (all complete after RunHead's synchronisation).
  double indexer_s = 0, attention_s = 0;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    float ms = 0;
    if (sparse && cudaEventElapsedTime(&ms, events[Sz(4 * l)], events[Sz(4 * l + 1)]) == cudaSuccess)
      indexer_s += ms / 1e3;
    if (cudaEventElapsedTime(&ms, events[Sz(4 * l + 2)], events[Sz(4 * l + 3)]) == cudaSuccess) attention_s += ms / 1e3;
  }
  const double wall = std::chrono::duration<double>(Clock::now() - wall_start).count();
  profile.indexer_s += indexer_s;
  profile.attention_s += attention_s;
  profile.rest_s += std::max(0.0, wall - indexer_s - attention_s);
  profile.forward_calls += 1;
}

// ---------------------------------------------------------------------------------------------

CudaForward::CudaForward(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaForward::~CudaForward() = default;

namespace {

Status CheckShapes(const ModelConfig& c, bool sparse) {
  auto refuse = [](const std::string& what) {
    return FailedPreconditionError("the GPU kernels do not support " + what);
  };
  if (c.kv_lora_rank % 128 != 0 || c.kv_lora_rank > 512) {
    return refuse("kv_lora_rank " + std::to_string(c.kv_lora_rank) + " (a multiple of 128, at most 512)");
  }
  if (c.qk_rope_head_dim % 16 != 0 || c.qk_rope_head_dim > 64 || c.qk_rope_head_dim < 2) {
    return refuse("qk_rope_head_dim " + std::to_string(c.qk_rope_head_dim) + " (a multiple of 16, at most 64)");
  }
  if (c.hidden_size % 8 != 0) return refuse("hidden_size " + std::to_string(c.hidden_size) + " (a multiple of 8)");
  if (!sparse) return Status::Ok();
  if (c.index_head_dim != 32 && c.index_head_dim != 64 && c.index_head_dim != 128) {
    return refuse("index_head_dim " + std::to_string(c.index_head_dim) + " (32, 64 or 128)");
  }
  if (c.index_n_heads < 1 || c.index_n_heads > 128) {
    return refuse("index_n_heads " + std::to_string(c.index_n_heads) + " (1 to 128)");
  }
  if (c.index_topk < 1 || c.index_topk > 4096)
    return refuse("index_topk " + std::to_string(c.index_topk) + " (1 to 4096)");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<CudaForward>> CudaForward::Create(const ModelConfig& config, const ModelWeights& weights,
                                                         const std::vector<float>& rope_freqs,
                                                         const CudaForwardOptions& options) {
  ENVFORGE_ASSIGN_OR_RETURN(cu::DeviceInfo device, cu::ProbeDevice());
  const bool sparse = !options.dense_attention && config.has_indexer();
  ENVFORGE_RETURN_IF_ERROR(CheckShapes(config, sparse));
  ENVFORGE_ASSIGN_OR_RETURN(cu::Stream stream, cu::Stream::Create());
  auto impl = std::make_unique<Impl>(config, weights, std::move(stream));
  impl->options = options;
  impl->device = device;
  impl->sparse = sparse;
  ENVFORGE_ASSIGN_OR_RETURN(impl->blas, cu::BlasHandle::Create(impl->st()));
  impl->fp8_gemm = config.fp8_weights && cu::Fp8BlockGemmSupported(*impl->blas);
  ENVFORGE_RETURN_IF_ERROR(impl->Upload(rope_freqs).WithContext("uploading the weights"));
  impl->events.resize(Sz(4 * config.num_hidden_layers), nullptr);
  for (cudaEvent_t& event : impl->events)
    ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(cudaEventCreate(&event), "cudaEventCreate"));

  // The page pool: an explicit size, or a fraction of what is free after the weights.
  const KvCacheShape shape = KvCacheShape::FromConfig(config, sparse);
  int64_t budget = options.kv_cache_bytes;
  if (budget <= 0) {
    size_t free_bytes = 0, total_bytes = 0;
    ENVFORGE_RETURN_IF_ERROR(cu::CheckCuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
    budget = static_cast<int64_t>(static_cast<double>(free_bytes) * std::clamp(options.kv_cache_fraction, 0.0, 0.95));
  }
  const int64_t page_bytes = DevicePagePool::PageBytes(shape);
  const int64_t pages =
      std::min<int64_t>(budget / page_bytes, (int64_t{1} << 31) / DevicePagePool::kPageTokensValue - 1);
  if (pages < 1) {
    return ResourceExhaustedError("no device memory left for the KV page pool (a page of 64 tokens takes " +
                                  std::to_string(page_bytes) + " bytes, the budget is " + std::to_string(budget) + ")");
  }
  ENVFORGE_ASSIGN_OR_RETURN(impl->pool, DevicePagePool::Create(shape, pages, impl->st()));

  std::unique_ptr<CudaForward> forward(new CudaForward(std::move(impl)));
  // Warm-up: a prefill long enough to run the top-k selection, then one decode step, so shapes the
  // kernels refuse (and broken launches) fail here and Model::Load falls back to the CPU.
  {
    KvCache cache(shape);
    forward->AttachCache(cache);
    const int64_t prompt = sparse ? std::min<int64_t>(config.index_topk + 1, 4096) : 2;
    std::vector<int32_t> tokens(Sz(prompt));
    for (int64_t i = 0; i < prompt; ++i) tokens[Sz(i)] = static_cast<int32_t>(i % config.vocab_size);
    ForwardProfile scratch_profile;
    std::vector<float> logits;
    SequenceInput input{&cache, tokens};
    ENVFORGE_RETURN_IF_ERROR(
        forward->Forward(std::span<const SequenceInput>(&input, 1), &logits, ForwardOptions{}, scratch_profile)
            .WithContext("GPU warm-up prefill"));
    input.tokens = std::span<const int32_t>(tokens.data(), 1);
    ENVFORGE_RETURN_IF_ERROR(
        forward->Forward(std::span<const SequenceInput>(&input, 1), &logits, ForwardOptions{}, scratch_profile)
            .WithContext("GPU warm-up decode"));
  }
  return Result<std::unique_ptr<CudaForward>>(std::move(forward));
}

KvCacheShape CudaForward::cache_shape() const { return impl_->pool->shape(); }

void CudaForward::AttachCache(KvCache& cache) const { cache.Attach(impl_->pool->NewSequence()); }

Status CudaForward::CheckCache(const KvCache& cache) const {
  if (cache.attachment() == nullptr) {
    if (cache.length() == 0 && cache.pending() == 0) return Status::Ok();
    return InvalidArgumentError(
        "KV cache holds rows on the host; caches of a model running on cuda come from its NewCache()");
  }
  if (impl_->pool->Owned(cache.attachment()) == nullptr) {
    return InvalidArgumentError("KV cache belongs to another model's GPU page pool");
  }
  return Status::Ok();
}

Status CudaForward::Forward(std::span<const SequenceInput> batch, std::vector<float>* logits,
                            const ForwardOptions& options, ForwardProfile& profile) {
  if (batch.empty()) {
    logits->clear();
    profile.forward_calls += 1;
    return Status::Ok();
  }
  std::vector<int64_t> lengths;
  for (const SequenceInput& input : batch) lengths.push_back(input.cache->length());
  Status status = impl_->Forward(batch, logits, options, profile);
  if (status.ok()) {
    for (const SequenceInput& input : batch) input.cache->CommitAppend();
    return status;
  }
  // Leave every cache as it was: nothing pending, no pages beyond its tokens.
  for (size_t b = 0; b < batch.size(); ++b) {
    KvCache& cache = *batch[b].cache;
    cache.AbortAppend();
    if (auto* seq = impl_->pool->Owned(cache.attachment())) impl_->pool->Trim(seq, lengths[b]);
  }
  return status;
}

int64_t CudaForward::pool_pages() const { return impl_->pool->capacity(); }
int64_t CudaForward::pool_pages_in_use() const { return impl_->pool->pages_in_use(); }
bool CudaForward::fp8_gemm() const { return impl_->fp8_gemm; }

}  // namespace envforge::inference
