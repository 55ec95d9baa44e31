// The DeepSeek-V3.2 (DSA) / DeepSeek-V3 model forward pass on the CPU kernels
// (dsa-engine.md 4.1-4.8).
//
// Model::Load(dir) reads dir/config.json (ModelConfig), binds the safetensors weights
// (ModelWeights) and, when dir holds a tokenizer.json, the tokenizer. Forward runs a batch of
// sequences, each with its own KvCache:
//   * every token of every sequence is stacked into one activation matrix, so each linear layer
//     streams its weights once per call (decode of B sequences = GEMMs with m = B; a prefill of one
//     sequence = GEMMs with m = its length);
//   * MLA in MQA mode: W_UK is absorbed into the query (q~ = W_UK,h^T q^N_h), attention runs over
//     the FP8 latent rows [c^KV ; k^R] of the cache (the latent is stored FP8, k^R bf16, and only
//     the stored values are attended), W_UV is applied after;
//   * DSA (kDeepseekV32 unless ModelOptions::dense_attention): the lightning indexer of 4.4-4.5
//     (RoPE on the first rope_dim dims of each head, non-interleaved unless
//     config.indexer_rope_interleave; Hadamard rotation; act_quant of q per head and k per token,
//     UE8M0 when config.ue8m0_scales; fp32 head weights times index_n_heads^-0.5 times the q scale
//     times index_head_dim^-0.5), causal scores against the sequence's indexer-key cache, top
//     index_topk keys per query (every causal candidate when there are at most index_topk), and
//     sparse attention over the selection;
//   * dense attention (DeepseekV3, or dense_attention): every query attends to all rows up to its
//     own position; the indexer is not run and the caches hold no indexer keys;
//   * MoE layers route with RouteExperts (grouped sigmoid, bias for selection only), run each chosen
//     expert once over the tokens routed to it, add the shared expert; dense SwiGLU for the first
//     first_k_dense_replace layers;
//   * final RMSNorm and the head give fp32 logits for the last token of each sequence (or every
//     token with ForwardOptions::all_logits).
// Long prefills score the indexer in chunks of queries so the score matrix stays bounded. A decode
// batch (one token per sequence, several sequences) runs selection and attention split across
// sequences (the kernels inline on the thread that takes a sequence) and its routed experts side
// by side; a forked cache's prefix and own rows are read in place (no row copies per step).
//
// Device (ModelOptions::device, "cpu" | "cuda" | "auto"): Load asks kernels::SelectDevice, the one
// dispatch point; when it answers kCuda, Load creates a CudaForward (inference/cuda_forward.h:
// weights uploaded, device page pool, a warm-up step) and Forward runs there after validating the
// batch. When the GPU cannot be used (no CUDA build, no device, or CudaForward::Create fails: out
// of memory, a shape the kernels refuse) the model runs on the CPU and device_note() says why in
// one line. Caches of a GPU model (NewCache) keep their rows in the device pool; they cannot be
// fed to a CPU model and vice versa (InvalidArgument).
//
// Thread safety: Forward is not reentrant (it reuses scratch buffers and the profile); call it from
// one thread at a time. It parallelises internally on the kernels' pool. The weights are immutable
// and memory-mapped for the Model's lifetime.
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
#include "inference/tokenizer.h"
#include "kernels/device.h"

namespace envforge::inference {

struct ModelOptions {
  // Ignore the indexer: every query attends to all previous rows (the DeepseekV3 path). Fixed per
  // Model because it decides whether caches hold indexer keys.
  bool dense_attention = false;
  bool load_tokenizer = true;  // load dir/tokenizer.json when present
  // Where the forward runs: "cpu", "cuda" (the GPU when usable, else the CPU with device_note()),
  // "auto" (the same as "cuda"). Other names: InvalidArgument from Load.
  std::string device = "cpu";
  // GPU only: bytes of the KV page pool; 0: half of the device memory free after the weights.
  int64_t cuda_kv_cache_bytes = 0;
};

class CudaForward;

// Accumulated over Forward calls until Reset(). Seconds of wall time per part of the layers, and
// the bytes the calls had to read from memory (what a decode step's memory-bandwidth figure is
// judged on):
//   * weight_bytes: every weight matrix a call used, once per call whatever the batch (the kernels
//     stream each matrix once for all token rows), in its stored dtype: attention and indexer
//     projections with kv_b_proj, dense FFNs, the router, the routed experts chosen by at least one
//     token and the shared expert, the head, plus the embedding rows looked up. 1-D weights (norms,
//     biases) are left out (negligible);
//   * cache_bytes: per query token, the latent rows attended (index_topk or every causal row) and,
//     when a selection ran, the indexer keys scored (all causal keys).
struct ForwardProfile {
  double indexer_s = 0;    // indexer projections, scores and top-k
  double attention_s = 0;  // query absorption, attention over the cache, W_UV
  double rest_s = 0;       // everything else (norms, projections, FFN/MoE, head)
  int64_t forward_calls = 0;
  int64_t prefill_tokens = 0;  // tokens of sequences that fed more than one token in a call
  int64_t decode_tokens = 0;   // tokens of sequences that fed exactly one
  int64_t weight_bytes = 0;
  int64_t cache_bytes = 0;
  void Reset() { *this = ForwardProfile(); }
};

struct SequenceInput {
  KvCache* cache = nullptr;         // appended to: positions cache->length() onwards
  std::span<const int32_t> tokens;  // at least one
};

// [layer][token row of the batch][selected key positions, ascending]: what attention read (test
// hook; with dense attention every position up to the token's own).
using SelectionRecord = std::vector<std::vector<std::vector<int32_t>>>;

struct ForwardOptions {
  bool all_logits = false;                      // logits for every token, not the last of each sequence
  SelectionRecord* record_selection = nullptr;  // tests: filled when set
  // Keep routing (DeepSeek-V3.2 paper, 3.1): when set, resized to [token rows of the batch, in
  // batch order][MoE layer][num_experts_per_tok] (config.routing_width() ids per row) and filled
  // with the routed experts each token row's MoE layers chose, per layer in RouteExperts' order
  // (descending biased score). Dense layers (first_k_dense_replace) have none. Costs one int16
  // store per id; nothing when null. Expert ids must fit int16 (n_routed_experts <= 32767,
  // else InvalidArgument).
  std::vector<int16_t>* record_routing = nullptr;
};

// Writes MoE layer `layer`'s expert ids ([tokens, num_experts_per_tok], RouteExperts' output)
// into a ForwardOptions::record_routing buffer of `tokens` rows. The CPU and GPU forwards share it.
void StoreLayerRouting(const ModelConfig& config, int64_t layer, const int32_t* expert_ids, int64_t tokens,
                       std::vector<int16_t>& routing);

class Model {
 public:
  // Errors: config.json problems (InvalidArgument/NotFound naming the file or field), weight
  // binding errors naming the tensor (see model_weights.h), tokenizer.json errors.
  static Result<std::unique_ptr<Model>> Load(const std::string& dir, const ModelOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return *weights_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }  // nullptr without tokenizer.json
  bool dense_attention() const { return dense_; }
  const std::string& dir() const { return dir_; }
  // Where Forward runs, the fallback line ("" when the requested device is used) and the GPU's
  // name and compute capability (when device() is kCuda).
  kernels::Device device() const { return device_; }
  const std::string& device_note() const { return device_note_; }
  const std::string& device_detail() const { return device_detail_; }
  // The GPU engine when device() is kCuda, else nullptr (tests read its page-pool counters).
  const CudaForward* cuda_forward() const { return cuda_.get(); }

  KvCacheShape cache_shape() const;
  std::unique_ptr<KvCache> NewCache() const;

  // Runs the batch; on success *logits is [batch, vocab] (or [total tokens, vocab] with
  // all_logits, sequences in batch order) and every cache has grown by its tokens. Errors:
  // InvalidArgument for a token id outside [0, vocab), an empty token list, a null cache or one of
  // another shape, a cache of another device (the caches are then unchanged); on the GPU also
  // ResourceExhausted when the page pool is full (caches unchanged) and Internal for CUDA errors.
  Status Forward(std::span<const SequenceInput> batch, std::vector<float>* logits, const ForwardOptions& options = {});

  ForwardProfile& profile() { return profile_; }

 private:
  struct Scratch;
  Model() = default;
  // The stages of one layer over the scratch rows (CudaForward::Impl mirrors them on the GPU):
  // RunLayer = attention norm, RunAttention, residual, FFN norm, RunFfn, residual. RunAttention =
  // RunAttentionProjections (q, and the latent rows into the caches), RunIndexer (DSA only: indexer
  // queries, keys into the caches, head weights), query absorption, AttendDecodeBatch (one token
  // per sequence, several sequences) or AttendSequences (otherwise), W_UV and W_o. The Attend*
  // stages select keys (DSA) and attend each row with AttendRow, the rows without a selection
  // (dense attention) with AttendDenseRows; they return the seconds spent selecting, which the
  // profile counts as indexer time.
  void RunLayer(int64_t layer_idx, std::span<const SequenceInput> batch);
  void RunAttention(int64_t layer_idx, std::span<const SequenceInput> batch);
  void RunAttentionProjections(int64_t layer_idx, std::span<const SequenceInput> batch);
  void RunIndexer(int64_t layer_idx, std::span<const SequenceInput> batch);
  double AttendDecodeBatch(int64_t layer_idx, std::span<const SequenceInput> batch);
  double AttendSequences(int64_t layer_idx, std::span<const SequenceInput> batch);
  // Attention of token row `row` over `count` cache rows: `indices` (absolute positions, -1
  // padded), or every position 0..count-1 when null. Safe on pool threads for distinct rows.
  void AttendRow(int64_t layer_idx, const KvCache& cache, int64_t row, const int32_t* indices, int64_t count);
  // The kernel's arguments for AttendRow's attention, and where its output row goes.
  kernels::SparseAttentionArgs RowAttentionArgs(int64_t layer_idx, const KvCache& cache, int64_t row,
                                                const int32_t* indices, int64_t count);
  float* RowAttentionOut(int64_t row);
  // Dense attention (every position 0..pos) of the given token rows, rows of sequences whose
  // caches start with the same rows (a shared prompt prefix, or one sequence's own rows) attended
  // as one group (kernels::DenseMqaAttentionGroup: those rows dequantized once per group); the
  // same outputs as AttendRow, bit for bit. `sequence_of_row[i]` is the batch index of rows[i].
  void AttendDenseRows(int64_t layer_idx, std::span<const SequenceInput> batch, std::span<const int64_t> rows,
                       std::span<const int64_t> sequence_of_row);
  // ForwardOptions::record_selection for one row (no-op when not recording).
  void RecordSelection(int64_t layer_idx, int64_t row, const int32_t* indices, int64_t count, int64_t pos);
  // ForwardProfile::cache_bytes of one query at `pos`, with or without a selection.
  void CountCacheReads(int64_t pos, bool selected);
  void RunFfn(int64_t layer_idx);

  std::string dir_;
  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  bool dense_ = false;
  std::vector<float> rope_freqs_;
  ForwardProfile profile_;
  std::unique_ptr<Scratch> scratch_;
  kernels::Device device_ = kernels::Device::kCpu;
  std::string device_note_;
  std::string device_detail_;
  std::unique_ptr<CudaForward> cuda_;  // set when device_ is kCuda
};

}  // namespace envforge::inference
