// Model: the layer loop of dsa-engine.md 4.1-4.8 over stacked token rows of a batch of sequences.
#include "inference/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/indexer_scores.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/sparse_attention.h"
#include "kernels/cpu/topk.h"

#if ENVFORGE_HAVE_CUDA
#include "inference/cuda_forward.h"
#else
namespace envforge::inference {
// Never created without the CUDA build; complete so Model's unique_ptr member can be destroyed.
class CudaForward {};
}  // namespace envforge::inference
#endif

namespace envforge::inference {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The indexer's score matrix of one prefill chunk is bounded to this many floats (16 MiB): at
// 256 MiB a 9k-token prompt's prefill spent 22% of its perf samples zero-filling score rows and 19%
// in page faults; chunks of 4M / context queries still decode each key block for many queries.
constexpr int64_t kMaxScoreFloats = int64_t{4} << 20;
// The indexer's LayerNorm epsilon (dsa-engine.md 1.1: k_norm is a LayerNorm with eps 1e-6).
constexpr float kIndexerNormEps = 1e-6f;

size_t Sz(int64_t v) { return static_cast<size_t>(v); }

// Bytes of a weight matrix in its stored dtype (what streaming it reads).
int64_t MatrixBytes(const kernels::WeightMatrix& w) { return w.rows * w.cols * kernels::DTypeSize(w.dtype); }
int64_t MlpBytes(const MlpWeights& mlp) { return MatrixBytes(mlp.w1) + MatrixBytes(mlp.w2) + MatrixBytes(mlp.w3); }

// The latent cache of one sequence and layer as the attention kernel reads it: one segment, or
// the shared prefix plus the sequence's own rows (no copies).
void SetLatentViews(const KvCache& cache, int64_t layer, kernels::SparseAttentionArgs& args) {
  if (cache.segment_count() == 1) {
    args.cache = cache.Segment(0, layer).latent;
    return;
  }
  const KvSegmentView prefix = cache.Segment(0, layer), own = cache.Segment(1, layer);
  args.cache = prefix.latent;
  args.suffix = own.latent;
  args.suffix_begin = own.begin;
}

// y = SwiGLU(x) = w2(silu(w1 x) * (w3 x)) for m rows. Its buffers are per thread (experts may
// run on pool threads side by side).
void SwiGlu(const MlpWeights& mlp, const float* x, int64_t m, float* y) {
  thread_local std::vector<float> gate, up;
  const int64_t inter = mlp.w1.rows;
  gate.resize(Sz(m * inter));
  up.resize(Sz(m * inter));
  kernels::Linear(x, m, mlp.w1, gate.data());
  kernels::Linear(x, m, mlp.w3, up.data());
  kernels::SiluMul(gate.data(), up.data(), m * inter, gate.data());
  kernels::Linear(gate.data(), m, mlp.w2, y);
}

}  // namespace

struct Model::Scratch {
  int64_t tokens = 0;
  std::vector<int64_t> positions;  // [T] absolute position of each token row
  std::vector<int64_t> seq_first;  // [B + 1] first token row of each sequence
  std::vector<float> x;            // [T, D] residual stream
  std::vector<float> h;            // [T, D] normed
  std::vector<float> qa;           // [T, q_lora] c^Q
  std::vector<float> q;            // [T, H * (nope + rope)]
  std::vector<float> kva;          // [T, kv_rank + rope]
  std::vector<float> latent;       // [kv_rank] one normed c^KV
  std::vector<float> q_absorbed;   // [T, H, kv_rank + rope]
  std::vector<float> attn_latent;  // [T, H, kv_rank]
  std::vector<float> u;            // [T, H * v]
  std::vector<float> out;          // [T, D]
  // Indexer.
  std::vector<float> iq;  // [T, index_heads * index_dim]
  std::vector<uint8_t> iq8;
  std::vector<float> iq_scale;  // [T * index_heads]
  std::vector<float> ik;        // [T, index_dim]
  std::vector<uint8_t> ik8;
  std::vector<float> ik_scale;    // [T]
  std::vector<float> iw;          // [T, index_heads] folded head weights
  std::vector<int32_t> selected;  // [chunk or batch, index_topk]
  std::vector<uint8_t> selects;   // [batch] decode in parallel: whether sequence b has a selection
  // FFN.
  std::vector<float> ffn_out, router_logits, shared_out;
  std::vector<float> slot_out;  // [T * top_k, D] routed expert outputs per (token, slot)
  std::vector<int32_t> expert_ids;
  std::vector<float> expert_weights;
  std::vector<std::vector<int64_t>> expert_slots;  // per expert: the (token * top_k + slot) routed to it
  std::vector<int64_t> active_experts;
  std::vector<int64_t> logit_rows;
  // Test hook target (ForwardOptions::record_selection).
  SelectionRecord* record = nullptr;
  std::vector<int16_t>* routing = nullptr;  // ForwardOptions::record_routing
};

Model::~Model() = default;

void StoreLayerRouting(const ModelConfig& config, int64_t layer, const int32_t* expert_ids, int64_t tokens,
                       std::vector<int16_t>& routing) {
  const int64_t k = config.num_experts_per_tok, width = config.routing_width();
  const int64_t offset = (layer - config.first_k_dense_replace) * k;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) routing[Sz(t * width + offset + j)] = static_cast<int16_t>(expert_ids[t * k + j]);
  }
}

Result<std::unique_ptr<Model>> Model::Load(const std::string& dir, const ModelOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFoundError("model directory '" + dir + "' does not exist");
  std::string config_path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(config_path, ec)) return NotFoundError("model directory '" + dir + "' has no config.json");
  // The device first: an unknown name fails before any file is read.
  ENVFORGE_ASSIGN_OR_RETURN(kernels::DeviceSelection selection, kernels::SelectDevice(options.device));
  std::unique_ptr<Model> model(new Model());
  model->dir_ = dir;
  ENVFORGE_ASSIGN_OR_RETURN(model->config_, LoadModelConfig(config_path));
  ENVFORGE_ASSIGN_OR_RETURN(model->weights_, ModelWeights::Load(dir, model->config_));
  if (options.load_tokenizer && fs::exists(fs::path(dir) / "tokenizer.json", ec)) {
    auto tokenizer = Tokenizer::Load(dir);
    if (!tokenizer.ok()) return tokenizer.status().WithContext(dir + "/tokenizer.json");
    model->tokenizer_ = std::move(*tokenizer);
  }
  const ModelConfig& config = model->config_;
  model->dense_ = options.dense_attention || !config.has_indexer();
  kernels::YarnParams yarn;
  yarn.rotary_dim = static_cast<int>(config.qk_rope_head_dim);
  yarn.theta = config.rope_theta;
  yarn.factor = config.rope_factor;
  yarn.original_len = config.rope_original_max_position;
  yarn.beta_fast = config.rope_beta_fast;
  yarn.beta_slow = config.rope_beta_slow;
  model->rope_freqs_ = kernels::YarnFrequencies(yarn);
  model->scratch_ = std::make_unique<Scratch>();
  model->device_note_ = selection.note;
#if ENVFORGE_HAVE_CUDA
  if (selection.device == kernels::Device::kCuda) {
    CudaForwardOptions cuda_options;
    cuda_options.dense_attention = model->dense_;
    cuda_options.kv_cache_bytes = options.cuda_kv_cache_bytes;
    Result<std::unique_ptr<CudaForward>> forward =
        CudaForward::Create(model->config_, *model->weights_, model->rope_freqs_, cuda_options);
    if (forward.ok()) {
      model->cuda_ = std::move(*forward);
      model->device_ = kernels::Device::kCuda;
      model->device_detail_ = selection.detail;
    } else {
      model->device_note_ = "--device " + options.device + ": the GPU engine could not start on " + selection.detail +
                            " (" + forward.status().ToString() + "); running on the CPU";
    }
  }
#endif
  return model;
}

KvCacheShape Model::cache_shape() const { return KvCacheShape::FromConfig(config_, !dense_); }

std::unique_ptr<KvCache> Model::NewCache() const {
  auto cache = std::make_unique<KvCache>(cache_shape());
#if ENVFORGE_HAVE_CUDA
  if (cuda_ != nullptr) cuda_->AttachCache(*cache);
#endif
  return cache;
}

Status Model::Forward(std::span<const SequenceInput> batch, std::vector<float>* logits, const ForwardOptions& options) {
  const KvCacheShape shape = cache_shape();
  Scratch& s = *scratch_;
  s.seq_first.assign(1, 0);
  for (size_t b = 0; b < batch.size(); ++b) {
    const SequenceInput& input = batch[b];
    std::string where = "sequence " + std::to_string(b);
    if (input.cache == nullptr) return InvalidArgumentError(where + ": no KV cache");
    const KvCacheShape& cache_shape = input.cache->shape();
    if (cache_shape.layers != shape.layers || cache_shape.kv_rank != shape.kv_rank ||
        cache_shape.rope_dim != shape.rope_dim || cache_shape.index_head_dim != shape.index_head_dim) {
      return InvalidArgumentError(where + ": KV cache of another model shape");
    }
    if (input.tokens.empty()) return InvalidArgumentError(where + ": no tokens");
#if ENVFORGE_HAVE_CUDA
    if (cuda_ != nullptr) {
      Status usable = cuda_->CheckCache(*input.cache);
      if (!usable.ok()) return usable.WithContext(where);
    }
#endif
    if (cuda_ == nullptr && input.cache->attachment() != nullptr) {
      return InvalidArgumentError(where + ": KV cache holds its rows on the GPU (made by a model running on cuda)");
    }
    for (int32_t token : input.tokens) {
      if (token < 0 || token >= config_.vocab_size) {
        return InvalidArgumentError(where + ": token id " + std::to_string(token) + " outside [0, " +
                                    std::to_string(config_.vocab_size) + ")");
      }
    }
    for (size_t other = 0; other < b; ++other) {
      if (batch[other].cache == input.cache) return InvalidArgumentError(where + ": KV cache used twice in one batch");
    }
    s.seq_first.push_back(s.seq_first.back() + static_cast<int64_t>(input.tokens.size()));
  }
  if (options.record_routing != nullptr && config_.n_routed_experts > INT16_MAX) {
    return InvalidArgumentError("routing cannot be recorded: " + std::to_string(config_.n_routed_experts) +
                                " routed experts do not fit 16-bit ids");
  }
  if (options.record_routing != nullptr)
    options.record_routing->resize(Sz(s.seq_first.back() * config_.routing_width()));
#if ENVFORGE_HAVE_CUDA
  if (cuda_ != nullptr) return cuda_->Forward(batch, logits, options, profile_);
#endif
  const int64_t total = s.seq_first.back();
  s.tokens = total;
  s.record = options.record_selection;
  s.routing = options.record_routing;
  if (s.record != nullptr)
    s.record->assign(Sz(config_.num_hidden_layers), std::vector<std::vector<int32_t>>(Sz(total)));
  const int64_t dim = config_.hidden_size;

  auto start = Clock::now();
  double indexer_before = profile_.indexer_s, attention_before = profile_.attention_s;
  s.positions.resize(Sz(total));
  s.x.resize(Sz(total * dim));
  for (size_t b = 0; b < batch.size(); ++b) {
    int64_t first = s.seq_first[b];
    int64_t base = batch[b].cache->length();
    batch[b].cache->BeginAppend(static_cast<int64_t>(batch[b].tokens.size()));
    for (size_t i = 0; i < batch[b].tokens.size(); ++i) {
      int64_t row = first + static_cast<int64_t>(i);
      s.positions[Sz(row)] = base + static_cast<int64_t>(i);
      kernels::DequantizeRow(weights_->embed, batch[b].tokens[i], &s.x[Sz(row * dim)]);
    }
    if (batch[b].tokens.size() > 1) {
      profile_.prefill_tokens += static_cast<int64_t>(batch[b].tokens.size());
    } else {
      profile_.decode_tokens += 1;
    }
  }

  for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) RunLayer(layer, batch);
  for (const SequenceInput& input : batch) input.cache->CommitAppend();

  // Final norm and head on the rows that need logits.
  std::vector<int64_t>& rows = s.logit_rows;
  rows.clear();
  if (options.all_logits) {
    for (int64_t r = 0; r < total; ++r) rows.push_back(r);
  } else {
    for (size_t b = 0; b < batch.size(); ++b) rows.push_back(s.seq_first[b + 1] - 1);
  }
  const auto n_rows = static_cast<int64_t>(rows.size());
  s.h.resize(Sz(n_rows * dim));
  for (int64_t i = 0; i < n_rows; ++i) {
    kernels::RmsNorm(&s.x[Sz(rows[Sz(i)] * dim)], 1, dim, weights_->final_norm,
                     static_cast<float>(config_.rms_norm_eps), &s.h[Sz(i * dim)]);
  }
  logits->resize(Sz(n_rows * config_.vocab_size));
  kernels::Linear(s.h.data(), n_rows, weights_->head, logits->data());
  profile_.weight_bytes += MatrixBytes(weights_->head) + total * dim * kernels::DTypeSize(weights_->embed.dtype);

  double elapsed = SecondsSince(start);
  double indexer = profile_.indexer_s - indexer_before, attention = profile_.attention_s - attention_before;
  profile_.rest_s += std::max(0.0, elapsed - indexer - attention);
  profile_.forward_calls += 1;
  s.record = nullptr;
  s.routing = nullptr;
  return Status::Ok();
}

void Model::RunLayer(int64_t layer_idx, std::span<const SequenceInput> batch) {
  Scratch& s = *scratch_;
  const LayerWeights& layer = weights_->layers[Sz(layer_idx)];
  const int64_t total = s.tokens, dim = config_.hidden_size;
  const auto eps = static_cast<float>(config_.rms_norm_eps);

  s.h.resize(Sz(total * dim));
  kernels::RmsNorm(s.x.data(), total, dim, layer.attn_norm, eps, s.h.data());
  RunAttention(layer_idx, batch);
  for (size_t i = 0; i < Sz(total * dim); ++i) s.x[i] += s.out[i];

  kernels::RmsNorm(s.x.data(), total, dim, layer.ffn_norm, eps, s.h.data());
  RunFfn(layer_idx);
  for (size_t i = 0; i < Sz(total * dim); ++i) s.x[i] += s.ffn_out[i];
}

void Model::RunIndexer(int64_t layer_idx, std::span<const SequenceInput> batch) {
  Scratch& s = *scratch_;
  const IndexerWeights& idx = weights_->layers[Sz(layer_idx)].attn.indexer;
  const int64_t total = s.tokens;
  const int64_t heads = config_.index_n_heads, head_dim = config_.index_head_dim, rope_dim = config_.qk_rope_head_dim;
  const bool pow2 = config_.ue8m0_scales;
  const kernels::RopeLayout layout =
      config_.indexer_rope_interleave ? kernels::RopeLayout::kInterleaved : kernels::RopeLayout::kHalf;
  const float hadamard_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));

  profile_.weight_bytes += MatrixBytes(idx.wq_b) + MatrixBytes(idx.wk) + MatrixBytes(idx.weights_proj);
  // Queries: [RoPE | NoPE] per head, rotated, quantized per (token, head).
  s.iq.resize(Sz(total * heads * head_dim));
  kernels::Linear(s.qa.data(), total, idx.wq_b, s.iq.data());
  for (int64_t t = 0; t < total; ++t) {
    kernels::ApplyRope(&s.iq[Sz(t * heads * head_dim)], heads, head_dim, static_cast<int>(rope_dim), s.positions[Sz(t)],
                       rope_freqs_.data(), layout);
  }
  kernels::HadamardTransform(s.iq.data(), total * heads, head_dim, hadamard_scale);
  s.iq8.resize(Sz(total * heads * head_dim));
  s.iq_scale.resize(Sz(total * heads));
  kernels::ActQuantFp8(s.iq.data(), total * heads, head_dim, head_dim, pow2, s.iq8.data(), s.iq_scale.data());

  // Keys: one head, LayerNorm, the same rotation, quantized per token, appended to the caches.
  s.ik.resize(Sz(total * head_dim));
  kernels::Linear(s.h.data(), total, idx.wk, s.ik.data());
  kernels::LayerNorm(s.ik.data(), total, head_dim, idx.k_norm_weight, idx.k_norm_bias, kIndexerNormEps, s.ik.data());
  for (int64_t t = 0; t < total; ++t) {
    kernels::ApplyRope(&s.ik[Sz(t * head_dim)], 1, head_dim, static_cast<int>(rope_dim), s.positions[Sz(t)],
                       rope_freqs_.data(), layout);
  }
  kernels::HadamardTransform(s.ik.data(), total, head_dim, hadamard_scale);
  s.ik8.resize(Sz(total * head_dim));
  s.ik_scale.resize(Sz(total));
  kernels::ActQuantFp8(s.ik.data(), total, head_dim, head_dim, pow2, s.ik8.data(), s.ik_scale.data());
  for (size_t b = 0; b < batch.size(); ++b) {
    for (int64_t row = s.seq_first[b]; row < s.seq_first[b + 1]; ++row) {
      batch[b].cache->WriteIndexKey(layer_idx, row - s.seq_first[b], &s.ik8[Sz(row * head_dim)], s.ik_scale[Sz(row)]);
    }
  }

  // Head weights in fp32 with the q scale and the constant factors folded in (4.4 step 7).
  s.iw.resize(Sz(total * heads));
  kernels::Linear(s.h.data(), total, idx.weights_proj, s.iw.data());
  const float constant =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(heads)) / std::sqrt(static_cast<double>(head_dim)));
  for (size_t i = 0; i < Sz(total * heads); ++i) s.iw[i] *= constant * s.iq_scale[i];
}

namespace {

// Indexer scores of `queries` consecutive token rows of one sequence against all of its keys
// (committed + pending), then the top-k selection per query: selected [queries, topk] of absolute
// positions, -1 padded.
struct SelectArgs {
  const KvCache* cache;
  int64_t layer;
  const uint8_t* q8;         // [queries, heads, dim]
  const float* weights;      // [queries, heads]
  const int64_t* positions;  // [queries]
  int64_t queries, heads, dim, topk;
  // Set (one query only): its scores against the cache's shared prefix (segment 0 of two), already
  // computed by ScoreSharedPrefixes; SelectKeys copies them instead of scoring the prefix again.
  const float* prefix_scores = nullptr;
};

// Score buffers of SelectKeys, one set per thread (selection runs on pool threads when a decode
// batch is split across sequences); they only grow, so steady decode allocates nothing.
struct SelectScratch {
  std::vector<float> scores, segment_scores;
  std::vector<int64_t> key_end, segment_end;
};

void SelectKeys(const SelectArgs& a, int32_t* selected) {
  thread_local SelectScratch scratch;
  std::vector<float>& scores = scratch.scores;
  std::vector<int64_t>& key_end = scratch.key_end;
  const int64_t keys = a.positions[a.queries - 1] + 1;
  scores.resize(Sz(a.queries * keys));
  key_end.resize(Sz(a.queries));
  for (int64_t i = 0; i < a.queries; ++i) key_end[Sz(i)] = a.positions[i] + 1;
  const int segments = a.cache->segment_count();
  for (int seg = 0; seg < segments; ++seg) {
    KvSegmentView view = a.cache->Segment(seg, a.layer);
    const int64_t count = std::min(view.rows, keys - view.begin);
    if (count <= 0) continue;
    if (seg == 0 && segments == 2 && a.prefix_scores != nullptr) {
      std::memcpy(scores.data() + view.begin, a.prefix_scores, Sz(count) * sizeof(float));
      continue;
    }
    // Key range of this segment per query, relative to the segment.
    scratch.segment_end.resize(Sz(a.queries));
    for (int64_t i = 0; i < a.queries; ++i) {
      scratch.segment_end[Sz(i)] = std::clamp<int64_t>(key_end[Sz(i)] - view.begin, 0, view.rows);
    }
    kernels::IndexerScoresArgs args;
    args.q = a.q8;
    args.head_weight = a.weights;
    args.keys = view.index_keys;
    args.key_scale = view.index_scales;
    args.key_end = scratch.segment_end.data();
    args.queries = a.queries;
    args.heads = a.heads;
    args.dim = a.dim;
    args.keys_count = count;
    // One query (decode), or one segment covering every key: the scores land in place.
    if (a.queries == 1 || (view.begin == 0 && count == keys)) {
      kernels::IndexerScores(args, scores.data() + view.begin);
      continue;
    }
    scratch.segment_scores.resize(Sz(a.queries * count));
    kernels::IndexerScores(args, scratch.segment_scores.data());
    for (int64_t i = 0; i < a.queries; ++i) {
      std::memcpy(&scores[Sz(i * keys + view.begin)], &scratch.segment_scores[Sz(i * count)],
                  Sz(count) * sizeof(float));
    }
  }
  kernels::TopKRows(scores.data(), a.queries, keys, keys, key_end.data(), a.topk, selected);
}

// The prefix key pointer of a one-query selection's cache, or null when it has no shared prefix.
const uint8_t* SharedPrefixKeys(const SelectArgs& a) {
  if (a.cache->segment_count() != 2) return nullptr;
  return a.cache->Segment(0, a.layer).index_keys;
}

// Buffers of ScoreSharedPrefixes; they only grow, so steady decode allocates nothing.
struct PrefixScratch {
  std::vector<std::pair<const uint8_t*, int64_t>> order;  // (prefix keys, row), grouped by prefix
  std::vector<uint8_t> q8;
  std::vector<float> weights, scores;
  std::vector<int64_t> key_end;
};

// Scores the group rows order[first, last) (one query each, same prefix) against their shared
// prefix in one IndexerScores call, so each block of prefix keys is decoded once per group rather
// than once per row. Row i's scores land at scores + i * prefix rows. The per-row arguments are the
// ones SelectKeys would pass (key_end relative to the prefix), so the scores are bitwise its own.
void ScorePrefixGroup(std::span<const SelectArgs> rows, PrefixScratch& p, size_t first, size_t last, float* scores) {
  const SelectArgs& lead = rows[Sz(p.order[first].second)];
  const KvSegmentView view = lead.cache->Segment(0, lead.layer);
  const auto queries = static_cast<int64_t>(last - first);
  const int64_t heads = lead.heads, dim = lead.dim;
  p.q8.resize(Sz(queries * heads * dim));
  p.weights.resize(Sz(queries * heads));
  p.key_end.resize(Sz(queries));
  for (int64_t i = 0; i < queries; ++i) {
    const SelectArgs& a = rows[Sz(p.order[first + Sz(i)].second)];
    std::memcpy(&p.q8[Sz(i * heads * dim)], a.q8, Sz(heads * dim));
    std::memcpy(&p.weights[Sz(i * heads)], a.weights, Sz(heads) * sizeof(float));
    p.key_end[Sz(i)] = std::clamp<int64_t>(a.positions[0] + 1 - view.begin, 0, view.rows);
  }
  kernels::IndexerScoresArgs args;
  args.q = p.q8.data();
  args.head_weight = p.weights.data();
  args.keys = view.index_keys;
  args.key_scale = view.index_scales;
  args.key_end = p.key_end.data();
  args.queries = queries;
  args.heads = heads;
  args.dim = dim;
  args.keys_count = view.rows;
  kernels::IndexerScores(args, scores);
}

// Decode rows (one query each; rows[b].queries == 0 skips b) whose caches read the same shared
// prefix store are scored against it together (ScorePrefixGroup); rows[b].prefix_scores is set for
// each row of a group of two or more, and left null for the others, which score their prefix alone.
void ScoreSharedPrefixes(std::span<SelectArgs> rows) {
  thread_local PrefixScratch p;
  p.order.clear();
  for (size_t b = 0; b < rows.size(); ++b) {
    const uint8_t* keys = rows[b].queries == 1 ? SharedPrefixKeys(rows[b]) : nullptr;
    if (keys != nullptr) p.order.emplace_back(keys, static_cast<int64_t>(b));
  }
  std::sort(p.order.begin(), p.order.end());
  // Score row offsets first: p.scores must not move once pointers into it are handed out.
  std::vector<size_t> group_begin;
  size_t score_floats = 0;
  for (size_t i = 0; i < p.order.size();) {
    size_t j = i + 1;
    while (j < p.order.size() && p.order[j].first == p.order[i].first) ++j;
    if (j - i >= 2) {
      group_begin.push_back(i);
      const SelectArgs& lead = rows[Sz(p.order[i].second)];
      score_floats += (j - i) * Sz(lead.cache->Segment(0, lead.layer).rows);
    }
    i = j;
  }
  p.scores.resize(score_floats);
  size_t offset = 0;
  for (size_t i : group_begin) {
    size_t j = i + 1;
    while (j < p.order.size() && p.order[j].first == p.order[i].first) ++j;
    const SelectArgs& lead = rows[Sz(p.order[i].second)];
    const auto prefix_rows = Sz(lead.cache->Segment(0, lead.layer).rows);
    ScorePrefixGroup(rows, p, i, j, p.scores.data() + offset);
    for (size_t k = i; k < j; ++k) {
      rows[Sz(p.order[k].second)].prefix_scores = p.scores.data() + offset + (k - i) * prefix_rows;
    }
    offset += (j - i) * prefix_rows;
  }
}

// The indexer's query rows of token rows [row, row + queries) of one sequence, as SelectKeys reads
// them.
SelectArgs MakeSelectArgs(const ModelConfig& config, const KvCache* cache, int64_t layer, const uint8_t* iq8,
                          const float* iw, const int64_t* positions, int64_t row, int64_t queries) {
  SelectArgs a;
  a.cache = cache;
  a.layer = layer;
  a.q8 = &iq8[Sz(row * config.index_n_heads * config.index_head_dim)];
  a.weights = &iw[Sz(row * config.index_n_heads)];
  a.positions = &positions[Sz(row)];
  a.queries = queries;
  a.heads = config.index_n_heads;
  a.dim = config.index_head_dim;
  a.topk = config.index_topk;
  return a;
}

}  // namespace

void Model::RunAttention(int64_t layer_idx, std::span<const SequenceInput> batch) {
  Scratch& s = *scratch_;
  const AttentionWeights& attn = weights_->layers[Sz(layer_idx)].attn;
  const int64_t total = s.tokens;
  const int64_t heads = config_.num_attention_heads, nope = config_.qk_nope_head_dim, rope = config_.qk_rope_head_dim;
  const int64_t v_dim = config_.v_head_dim, rank = config_.kv_lora_rank, q_width = nope + rope, qk = rank + rope;

  RunAttentionProjections(layer_idx, batch);  // counted as "rest"
  if (!dense_) {
    auto start = Clock::now();
    RunIndexer(layer_idx, batch);
    profile_.indexer_s += SecondsSince(start);
  }

  auto attention_start = Clock::now();
  // q~ = W_UK^T q^N per head (kv_b in its stored dtype for decode), then q^R appended.
  kernels::KvbProjection kvb;
  kvb.w = attn.wkv_b;
  kvb.dequantized = attn.wkv_b_f32;
  kvb.heads = heads;
  kvb.nope = nope;
  kvb.v_dim = v_dim;
  s.q_absorbed.resize(Sz(total * heads * qk));
  kernels::AbsorbQueries(kvb, s.q.data(), total, q_width, s.q_absorbed.data(), qk);
  for (int64_t item = 0; item < total * heads; ++item) {
    std::memcpy(&s.q_absorbed[Sz(item * qk + rank)], &s.q[Sz(item * q_width + nope)], Sz(rope) * sizeof(float));
  }

  s.attn_latent.resize(Sz(total * heads * rank));
  bool decode_batch = batch.size() > 1;
  for (size_t b = 0; b < batch.size(); ++b) decode_batch = decode_batch && s.seq_first[b + 1] - s.seq_first[b] == 1;
  // Selection time spent inside the attention section, moved to the indexer's account below.
  const double indexer_inside = decode_batch ? AttendDecodeBatch(layer_idx, batch) : AttendSequences(layer_idx, batch);

  // u[t,h,:] = W_UV,h o[t,h,:] with W_UV,h = rows nope..nope+v of head h's slice of W_kvb.
  s.u.resize(Sz(total * heads * v_dim));
  kernels::ProjectValues(kvb, s.attn_latent.data(), total, s.u.data());
  double attention_elapsed = SecondsSince(attention_start);
  profile_.indexer_s += indexer_inside;
  profile_.attention_s += std::max(0.0, attention_elapsed - indexer_inside);

  s.out.resize(Sz(total * config_.hidden_size));
  kernels::Linear(s.u.data(), total, attn.wo, s.out.data());
}

void Model::RunAttentionProjections(int64_t layer_idx, std::span<const SequenceInput> batch) {
  Scratch& s = *scratch_;
  const AttentionWeights& attn = weights_->layers[Sz(layer_idx)].attn;
  const int64_t total = s.tokens;
  const int64_t heads = config_.num_attention_heads, nope = config_.qk_nope_head_dim, rope = config_.qk_rope_head_dim;
  const int64_t rank = config_.kv_lora_rank, q_width = nope + rope, qk = rank + rope;
  const auto eps = static_cast<float>(config_.rms_norm_eps);

  s.qa.resize(Sz(total * config_.q_lora_rank));
  kernels::Linear(s.h.data(), total, attn.wq_a, s.qa.data());
  kernels::RmsNorm(s.qa.data(), total, config_.q_lora_rank, attn.q_norm, eps, s.qa.data());
  s.q.resize(Sz(total * heads * q_width));
  kernels::Linear(s.qa.data(), total, attn.wq_b, s.q.data());
  s.kva.resize(Sz(total * qk));
  kernels::Linear(s.h.data(), total, attn.wkv_a, s.kva.data());
  profile_.weight_bytes += MatrixBytes(attn.wq_a) + MatrixBytes(attn.wq_b) + MatrixBytes(attn.wkv_a) +
                           MatrixBytes(attn.wkv_b) + MatrixBytes(attn.wo);
  s.latent.resize(Sz(rank));
  for (size_t b = 0; b < batch.size(); ++b) {
    for (int64_t row = s.seq_first[b]; row < s.seq_first[b + 1]; ++row) {
      const int64_t pos = s.positions[Sz(row)];
      kernels::ApplyRope(&s.q[Sz(row * heads * q_width + nope)], heads, q_width, static_cast<int>(rope), pos,
                         rope_freqs_.data(), kernels::RopeLayout::kInterleaved);
      float* kv = &s.kva[Sz(row * qk)];
      kernels::RmsNorm(kv, 1, rank, attn.kv_norm, eps, s.latent.data());
      kernels::ApplyRope(kv + rank, 1, rope, static_cast<int>(rope), pos, rope_freqs_.data(),
                         kernels::RopeLayout::kInterleaved);
      batch[b].cache->WriteLatent(layer_idx, row - s.seq_first[b], s.latent.data(), kv + rank);
    }
  }
}

double Model::AttendDecodeBatch(int64_t layer_idx, std::span<const SequenceInput> batch) {
  // One token per sequence: selection, then attention, each split across sequences (ParallelFor
  // over b; the kernels run inline on the thread that takes b), so small per-sequence calls do
  // not pay one pool round trip each.
  Scratch& s = *scratch_;
  const bool sparse = !dense_;
  const int64_t topk = config_.index_topk;
  const auto n = static_cast<int64_t>(batch.size());
  double select_seconds = 0;
  s.selected.resize(Sz(n * topk));
  s.selects.assign(Sz(n), 0);
  for (int64_t b = 0; b < n; ++b) {
    const int64_t pos = s.positions[Sz(b)];
    s.selects[Sz(b)] = sparse && pos + 1 > topk ? 1 : 0;
    if (s.selects[Sz(b)] != 0) CountCacheReads(pos, true);  // AttendDenseRows counts the others
  }
  if (sparse) {
    auto select_start = Clock::now();
    // Rows sharing a prompt prefix score it together first; each row then scores its own keys.
    // (A reference, so pool threads read this thread's vector, not their own thread_local.)
    thread_local std::vector<SelectArgs> rows_storage;
    std::vector<SelectArgs>& rows = rows_storage;
    rows.resize(Sz(n));
    for (int64_t b = 0; b < n; ++b) {
      rows[Sz(b)] = MakeSelectArgs(config_, batch[Sz(b)].cache, layer_idx, s.iq8.data(), s.iw.data(),
                                   s.positions.data(), b, s.selects[Sz(b)] != 0 ? 1 : 0);
    }
    ScoreSharedPrefixes(rows);
    kernels::ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        if (s.selects[Sz(b)] != 0) SelectKeys(rows[Sz(b)], &s.selected[Sz(b * topk)]);
      }
    });
    select_seconds += SecondsSince(select_start);
  }
  // Rows without a selection attend every position; those of one shared prompt go as a group.
  thread_local std::vector<int64_t> dense_rows;
  dense_rows.clear();
  for (int64_t b = 0; b < n; ++b) {
    if (s.selects[Sz(b)] == 0) dense_rows.push_back(b);
  }
  if (!dense_rows.empty()) AttendDenseRows(layer_idx, batch, dense_rows, dense_rows);
  kernels::ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      if (s.selects[Sz(b)] == 0) continue;  // attended above
      const int32_t* indices = &s.selected[Sz(b * topk)];
      RecordSelection(layer_idx, b, indices, topk, s.positions[Sz(b)]);
      AttendRow(layer_idx, *batch[Sz(b)].cache, b, indices, topk);
    }
  });
  return select_seconds;
}

void Model::AttendDenseRows(int64_t layer_idx, std::span<const SequenceInput> batch, std::span<const int64_t> rows,
                            std::span<const int64_t> sequence_of_row) {
  Scratch& s = *scratch_;
  // References: the pool threads of the ParallelFor below read this thread's vectors.
  thread_local std::vector<kernels::SparseAttentionArgs> args_storage;
  thread_local std::vector<float*> outs_storage;
  std::vector<kernels::SparseAttentionArgs>& args = args_storage;
  std::vector<float*>& outs = outs_storage;
  args.resize(rows.size());
  outs.resize(rows.size());
  // Grouped by the first segment's rows: a shared prefix, or a sequence's only segment.
  std::map<const uint8_t*, std::vector<size_t>> groups;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t row = rows[i], pos = s.positions[Sz(row)];
    args[i] = RowAttentionArgs(layer_idx, *batch[Sz(sequence_of_row[i])].cache, row, nullptr, pos + 1);
    outs[i] = RowAttentionOut(row);
    CountCacheReads(pos, false);
    RecordSelection(layer_idx, row, nullptr, pos + 1, pos);
    groups[args[i].cache.nope].push_back(i);
  }
  std::vector<kernels::SparseAttentionArgs> group_args;
  std::vector<float*> group_outs;
  std::vector<size_t> alone;  // queries that share no whole chunk with another
  for (const auto& [first_rows, members] : groups) {
    int64_t shared = std::numeric_limits<int64_t>::max();
    for (size_t i : members) shared = std::min({shared, args[i].cache.rows, args[i].count});
    if (members.size() < 2 || shared < kernels::kAttentionChunkRows) {
      alone.insert(alone.end(), members.begin(), members.end());
      continue;
    }
    group_args.clear();
    group_outs.clear();
    for (size_t i : members) {
      group_args.push_back(args[i]);
      group_outs.push_back(outs[i]);
    }
    kernels::DenseMqaAttentionGroup(group_args, shared, group_outs);
  }
  if (alone.size() == 1) {  // on this thread, so that the kernel parallelises over its chunks or heads
    kernels::SparseMqaAttention(args[alone[0]], outs[alone[0]]);
    return;
  }
  kernels::ParallelFor(static_cast<int64_t>(alone.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) kernels::SparseMqaAttention(args[alone[Sz(k)]], outs[alone[Sz(k)]]);
  });
}

double Model::AttendSequences(int64_t layer_idx, std::span<const SequenceInput> batch) {
  // Queries one after another: the attention kernel parallelises over heads, and selection
  // (IndexerScores over keys, TopKRows over rows) inside each call.
  Scratch& s = *scratch_;
  const bool sparse = !dense_;
  const int64_t topk = config_.index_topk;
  double select_seconds = 0;
  if (!sparse) {  // every row attends every position: the rows of one sequence or prefix as a group
    thread_local std::vector<int64_t> rows, sequence_of_row;
    rows.clear();
    sequence_of_row.clear();
    for (size_t b = 0; b < batch.size(); ++b) {
      for (int64_t row = s.seq_first[b]; row < s.seq_first[b + 1]; ++row) {
        rows.push_back(row);
        sequence_of_row.push_back(static_cast<int64_t>(b));
      }
    }
    AttendDenseRows(layer_idx, batch, rows, sequence_of_row);
    return 0;
  }
  for (size_t b = 0; b < batch.size(); ++b) {
    const KvCache& cache = *batch[b].cache;
    const int64_t first = s.seq_first[b], last = s.seq_first[b + 1];
    const int64_t keys = s.positions[Sz(last - 1)] + 1;
    // Long prefills score the indexer in chunks of queries so the score matrix stays bounded.
    const int64_t chunk = std::max<int64_t>(1, kMaxScoreFloats / keys);
    for (int64_t chunk_begin = first; chunk_begin < last; chunk_begin += chunk) {
      const int64_t chunk_end = std::min(last, chunk_begin + chunk);
      const int64_t queries = chunk_end - chunk_begin;
      const bool select = sparse && s.positions[Sz(chunk_end - 1)] + 1 > topk;
      if (select) {
        auto select_start = Clock::now();
        s.selected.resize(Sz(queries * topk));
        SelectKeys(MakeSelectArgs(config_, &cache, layer_idx, s.iq8.data(), s.iw.data(), s.positions.data(),
                                  chunk_begin, queries),
                   s.selected.data());
        select_seconds += SecondsSince(select_start);
      }
      for (int64_t i = 0; i < queries; ++i) {
        const int64_t row = chunk_begin + i;
        const int64_t pos = s.positions[Sz(row)];
        // Queries of the chunk at positions < index_topk keep every causal candidate (4.6).
        const bool use_selection = select && pos + 1 > topk;
        const int32_t* indices = use_selection ? &s.selected[Sz(i * topk)] : nullptr;
        const int64_t count = use_selection ? topk : pos + 1;
        CountCacheReads(pos, use_selection);
        RecordSelection(layer_idx, row, indices, count, pos);
        AttendRow(layer_idx, cache, row, indices, count);
      }
    }
  }
  return select_seconds;
}

kernels::SparseAttentionArgs Model::RowAttentionArgs(int64_t layer_idx, const KvCache& cache, int64_t row,
                                                     const int32_t* indices, int64_t count) {
  const int64_t qk = config_.kv_lora_rank + config_.qk_rope_head_dim;
  kernels::SparseAttentionArgs args;
  args.q = &scratch_->q_absorbed[Sz(row * config_.num_attention_heads * qk)];
  args.heads = config_.num_attention_heads;
  SetLatentViews(cache, layer_idx, args);
  args.indices = indices;
  args.count = count;
  args.scale = static_cast<float>(config_.softmax_scale());
  return args;
}

float* Model::RowAttentionOut(int64_t row) {
  return &scratch_->attn_latent[Sz(row * config_.num_attention_heads * config_.kv_lora_rank)];
}

void Model::AttendRow(int64_t layer_idx, const KvCache& cache, int64_t row, const int32_t* indices, int64_t count) {
  kernels::SparseMqaAttention(RowAttentionArgs(layer_idx, cache, row, indices, count), RowAttentionOut(row));
}

void Model::RecordSelection(int64_t layer_idx, int64_t row, const int32_t* indices, int64_t count, int64_t pos) {
  Scratch& s = *scratch_;
  if (s.record == nullptr) return;
  std::vector<int32_t>& out = (*s.record)[Sz(layer_idx)][Sz(row)];
  out.clear();
  if (indices == nullptr) {
    for (int64_t i = 0; i <= pos; ++i) out.push_back(static_cast<int32_t>(i));
  } else {
    for (int64_t i = 0; i < count; ++i) {
      if (indices[i] >= 0) out.push_back(indices[i]);
    }
    std::sort(out.begin(), out.end());
  }
}

void Model::CountCacheReads(int64_t pos, bool selected) {
  const KvCacheShape shape = cache_shape();
  profile_.cache_bytes += (selected ? config_.index_topk : pos + 1) * shape.latent_row_bytes();
  if (selected) profile_.cache_bytes += (pos + 1) * shape.index_row_bytes();
}

void Model::RunFfn(int64_t layer_idx) {
  Scratch& s = *scratch_;
  const LayerWeights& layer = weights_->layers[Sz(layer_idx)];
  const int64_t total = s.tokens, dim = config_.hidden_size;
  s.ffn_out.resize(Sz(total * dim));
  if (!layer.is_moe) {
    profile_.weight_bytes += MlpBytes(layer.dense);
    SwiGlu(layer.dense, s.h.data(), total, s.ffn_out.data());
    return;
  }
  const MoeWeights& moe = layer.moe;
  const int64_t experts = config_.n_routed_experts, top_k = config_.num_experts_per_tok;
  s.router_logits.resize(Sz(total * experts));
  kernels::Linear(s.h.data(), total, moe.gate, s.router_logits.data());
  profile_.weight_bytes += MatrixBytes(moe.gate);
  kernels::MoeRouting routing;
  routing.n_experts = experts;
  routing.n_groups = config_.n_group;
  routing.topk_groups = config_.topk_group;
  routing.top_k = top_k;
  routing.route_scale = static_cast<float>(config_.routed_scaling_factor);
  routing.normalize = config_.norm_topk_prob;
  s.expert_ids.resize(Sz(total * top_k));
  s.expert_weights.resize(Sz(total * top_k));
  for (int64_t t = 0; t < total; ++t) {
    kernels::RouteExperts(&s.router_logits[Sz(t * experts)], moe.gate_bias, routing, &s.expert_ids[Sz(t * top_k)],
                          &s.expert_weights[Sz(t * top_k)]);
  }
  if (s.routing != nullptr) StoreLayerRouting(config_, layer_idx, s.expert_ids.data(), total, *s.routing);
  // Slots (token * top_k + k) per expert, so each chosen expert's weights stream once for all of
  // its tokens; its outputs land in the slots' rows, summed per token in slot order below (the same
  // sum whatever thread ran which expert).
  s.expert_slots.resize(Sz(experts));
  for (auto& slots : s.expert_slots) slots.clear();
  for (int64_t i = 0; i < total * top_k; ++i) {
    const int32_t expert = s.expert_ids[Sz(i)];
    if (expert >= 0 && expert < experts) s.expert_slots[Sz(expert)].push_back(i);
  }
  s.active_experts.clear();
  for (int64_t e = 0; e < experts; ++e) {
    if (s.expert_slots[Sz(e)].empty()) continue;
    s.active_experts.push_back(e);
    profile_.weight_bytes += MlpBytes(moe.experts[Sz(e)]);
  }
  s.slot_out.assign(Sz(total * top_k * dim), 0.0f);
  if (moe.has_shared) {
    s.shared_out.resize(Sz(total * dim));
    profile_.weight_bytes += MlpBytes(moe.shared);
  }
  const auto active = static_cast<int64_t>(s.active_experts.size());
  // Work item i < active: routed expert active_experts[i]; item `active`: the shared expert.
  auto run_item = [&](int64_t item) {
    if (item == active) {
      SwiGlu(moe.shared, s.h.data(), total, s.shared_out.data());
      return;
    }
    const int64_t e = s.active_experts[Sz(item)];
    const std::vector<int64_t>& slots = s.expert_slots[Sz(e)];
    const auto m = static_cast<int64_t>(slots.size());
    thread_local std::vector<float> rows, out;
    rows.resize(Sz(m * dim));
    out.resize(Sz(m * dim));
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(&rows[Sz(i * dim)], &s.h[Sz(slots[Sz(i)] / top_k * dim)], Sz(dim) * sizeof(float));
    }
    SwiGlu(moe.experts[Sz(e)], rows.data(), m, out.data());
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(&s.slot_out[Sz(slots[Sz(i)] * dim)], &out[Sz(i * dim)], Sz(dim) * sizeof(float));
    }
  };
  const int64_t items = active + (moe.has_shared ? 1 : 0);
  if (total == 1) {
    // One token: every expert is a GEMV; each parallelises over its own rows.
    for (int64_t item = 0; item < items; ++item) run_item(item);
  } else {
    // A batch: experts run side by side, one per thread at a time (their GEMMs inline).
    kernels::ParallelFor(items, 1, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) run_item(item);
    });
  }
  kernels::ParallelFor(total, 8, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* y = &s.ffn_out[Sz(t * dim)];
      if (moe.has_shared) {
        std::memcpy(y, &s.shared_out[Sz(t * dim)], Sz(dim) * sizeof(float));
      } else {
        std::fill_n(y, dim, 0.0f);
      }
      for (int64_t k = 0; k < top_k; ++k) {
        const float weight = s.expert_weights[Sz(t * top_k + k)];
        const float* routed = &s.slot_out[Sz((t * top_k + k) * dim)];
        for (int64_t d = 0; d < dim; ++d) y[d] += weight * routed[d];
      }
    }
  });
}

}  // namespace envforge::inference
