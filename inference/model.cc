// Model: the layer loop of dsa-engine.md 4.1-4.8 over stacked token rows of a batch of sequences.
#include "inference/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

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

namespace envforge::inference {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The indexer's score matrix of one prefill chunk is bounded to this many floats (256 MiB).
constexpr int64_t kMaxScoreFloats = int64_t{64} << 20;
// The indexer's LayerNorm epsilon (dsa-engine.md 1.1: k_norm is a LayerNorm with eps 1e-6).
constexpr float kIndexerNormEps = 1e-6f;

size_t Sz(int64_t v) { return static_cast<size_t>(v); }

// Latent rows copied out of a two-segment cache into one contiguous view.
struct GatherBuffer {
  std::vector<uint8_t> nope;
  std::vector<float> scales;
  std::vector<uint16_t> rope;
};

// Copies `count` rows into `buffer`: rows indices[0..count) (absolute positions; negative entries are
// skipped) or, with indices == nullptr, rows [0, count). Returns the view over the copies.
kernels::LatentCacheView GatherLatentRows(const KvCache& cache, int64_t layer, const int32_t* indices, int64_t count,
                                          GatherBuffer& buffer) {
  const KvCacheShape& shape = cache.shape();
  const int64_t groups = shape.kv_rank / 128;
  buffer.nope.resize(Sz(count * shape.kv_rank));
  buffer.scales.resize(Sz(count * groups));
  buffer.rope.resize(Sz(count * shape.rope_dim));
  KvSegmentView segments[2];
  int segment_count = cache.segment_count();
  for (int s = 0; s < segment_count; ++s) segments[s] = cache.Segment(s, layer);
  int64_t out_rows = 0;
  for (int64_t i = 0; i < count; ++i) {
    int64_t position = indices != nullptr ? indices[i] : i;
    if (position < 0) continue;
    const KvSegmentView* segment = &segments[0];
    if (segment_count == 2 && position >= segments[1].begin) segment = &segments[1];
    int64_t row = position - segment->begin;
    if (row < 0 || row >= segment->rows) continue;
    std::memcpy(&buffer.nope[Sz(out_rows * shape.kv_rank)], segment->latent.nope + row * shape.kv_rank, Sz(shape.kv_rank));
    std::memcpy(&buffer.scales[Sz(out_rows * groups)], segment->latent.scales + row * groups, Sz(groups) * sizeof(float));
    std::memcpy(&buffer.rope[Sz(out_rows * shape.rope_dim)], segment->latent.rope + row * shape.rope_dim,
                Sz(shape.rope_dim) * sizeof(uint16_t));
    ++out_rows;
  }
  kernels::LatentCacheView view;
  view.nope = buffer.nope.data();
  view.scales = buffer.scales.data();
  view.rope = buffer.rope.data();
  view.rows = out_rows;
  view.kv_rank = shape.kv_rank;
  view.rope_dim = shape.rope_dim;
  return view;
}

// y = SwiGLU(x) = w2(silu(w1 x) * (w3 x)) for m rows.
void SwiGlu(const MlpWeights& mlp, const float* x, int64_t m, std::vector<float>& gate, std::vector<float>& up,
            float* y) {
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
  std::vector<float> iq;           // [T, index_heads * index_dim]
  std::vector<uint8_t> iq8;
  std::vector<float> iq_scale;     // [T * index_heads]
  std::vector<float> ik;           // [T, index_dim]
  std::vector<uint8_t> ik8;
  std::vector<float> ik_scale;     // [T]
  std::vector<float> iw;           // [T, index_heads] folded head weights
  std::vector<float> scores;
  std::vector<float> segment_scores;
  std::vector<int32_t> selected;   // [chunk, index_topk]
  std::vector<int64_t> key_end;
  GatherBuffer gathered;           // all rows of one forked sequence (prefill with a prefix)
  // FFN.
  std::vector<float> gate, up, ffn_rows, ffn_out, router_logits;
  std::vector<int32_t> expert_ids;
  std::vector<float> expert_weights;
  // Test hook target (ForwardOptions::record_selection).
  SelectionRecord* record = nullptr;
};

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::Load(const std::string& dir, const ModelOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFoundError("model directory '" + dir + "' does not exist");
  std::string config_path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(config_path, ec)) return NotFoundError("model directory '" + dir + "' has no config.json");
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
  return model;
}

KvCacheShape Model::cache_shape() const { return KvCacheShape::FromConfig(config_, !dense_); }

std::unique_ptr<KvCache> Model::NewCache() const { return std::make_unique<KvCache>(cache_shape()); }

Status Model::Forward(std::span<const SequenceInput> batch, std::vector<float>* logits, const ForwardOptions& options) {
  const KvCacheShape shape = cache_shape();
  Scratch& s = *scratch_;
  s.seq_first.assign(1, 0);
  for (size_t b = 0; b < batch.size(); ++b) {
    const SequenceInput& input = batch[b];
    std::string where = "sequence " + std::to_string(b);
    if (input.cache == nullptr) return InvalidArgumentError(where + ": no KV cache");
    const KvCacheShape& cache_shape = input.cache->shape();
    if (cache_shape.layers != shape.layers || cache_shape.kv_rank != shape.kv_rank || cache_shape.rope_dim != shape.rope_dim ||
        cache_shape.index_head_dim != shape.index_head_dim) {
      return InvalidArgumentError(where + ": KV cache of another model shape");
    }
    if (input.tokens.empty()) return InvalidArgumentError(where + ": no tokens");
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
  const int64_t total = s.seq_first.back();
  s.tokens = total;
  s.record = options.record_selection;
  if (s.record != nullptr) s.record->assign(Sz(config_.num_hidden_layers), std::vector<std::vector<int32_t>>(Sz(total)));
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
  std::vector<int64_t> rows;
  if (options.all_logits) {
    for (int64_t r = 0; r < total; ++r) rows.push_back(r);
  } else {
    for (size_t b = 0; b < batch.size(); ++b) rows.push_back(s.seq_first[b + 1] - 1);
  }
  const auto n_rows = static_cast<int64_t>(rows.size());
  s.h.resize(Sz(n_rows * dim));
  for (int64_t i = 0; i < n_rows; ++i) {
    kernels::RmsNorm(&s.x[Sz(rows[Sz(i)] * dim)], 1, dim, weights_->final_norm, static_cast<float>(config_.rms_norm_eps),
                     &s.h[Sz(i * dim)]);
  }
  logits->resize(Sz(n_rows * config_.vocab_size));
  kernels::Linear(s.h.data(), n_rows, weights_->head, logits->data());

  double elapsed = SecondsSince(start);
  double indexer = profile_.indexer_s - indexer_before, attention = profile_.attention_s - attention_before;
  profile_.rest_s += std::max(0.0, elapsed - indexer - attention);
  profile_.forward_calls += 1;
  s.record = nullptr;
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
  const float constant = static_cast<float>(1.0 / std::sqrt(static_cast<double>(heads)) / std::sqrt(static_cast<double>(head_dim)));
  for (size_t i = 0; i < Sz(total * heads); ++i) s.iw[i] *= constant * s.iq_scale[i];
}

namespace {

// Indexer scores of `queries` consecutive token rows of one sequence against all of its keys
// (committed + pending), then the top-k selection per query: selected [queries, topk] of absolute
// positions, -1 padded.
struct SelectArgs {
  const KvCache* cache;
  int64_t layer;
  const uint8_t* q8;        // [queries, heads, dim]
  const float* weights;     // [queries, heads]
  const int64_t* positions;  // [queries]
  int64_t queries, heads, dim, topk;
};

void SelectKeys(const SelectArgs& a, std::vector<float>& scores, std::vector<float>& segment_scores,
                std::vector<int64_t>& key_end, int32_t* selected) {
  const int64_t keys = a.positions[a.queries - 1] + 1;
  scores.resize(Sz(a.queries * keys));
  key_end.resize(Sz(a.queries));
  for (int64_t i = 0; i < a.queries; ++i) key_end[Sz(i)] = a.positions[i] + 1;
  const int segments = a.cache->segment_count();
  for (int seg = 0; seg < segments; ++seg) {
    KvSegmentView view = a.cache->Segment(seg, a.layer);
    if (view.rows == 0) continue;
    // Key range of this segment per query, relative to the segment.
    std::vector<int64_t> seg_end(Sz(a.queries));
    for (int64_t i = 0; i < a.queries; ++i) seg_end[Sz(i)] = std::clamp<int64_t>(key_end[Sz(i)] - view.begin, 0, view.rows);
    kernels::IndexerScoresArgs args;
    args.q = a.q8;
    args.head_weight = a.weights;
    args.keys = view.index_keys;
    args.key_scale = view.index_scales;
    args.key_end = seg_end.data();
    args.queries = a.queries;
    args.heads = a.heads;
    args.dim = a.dim;
    if (segments == 1 && view.begin == 0 && view.rows == keys) {
      args.keys_count = keys;
      kernels::IndexerScores(args, scores.data());
      continue;
    }
    int64_t count = std::min(view.rows, keys - view.begin);
    if (count <= 0) continue;
    args.keys_count = count;
    segment_scores.resize(Sz(a.queries * count));
    kernels::IndexerScores(args, segment_scores.data());
    for (int64_t i = 0; i < a.queries; ++i) {
      std::memcpy(&scores[Sz(i * keys + view.begin)], &segment_scores[Sz(i * count)], Sz(count) * sizeof(float));
    }
  }
  kernels::TopKRows(scores.data(), a.queries, keys, keys, key_end.data(), a.topk, selected);
}

}  // namespace

void Model::RunAttention(int64_t layer_idx, std::span<const SequenceInput> batch) {
  Scratch& s = *scratch_;
  const AttentionWeights& attn = weights_->layers[Sz(layer_idx)].attn;
  const int64_t total = s.tokens;
  const int64_t heads = config_.num_attention_heads, nope = config_.qk_nope_head_dim, rope = config_.qk_rope_head_dim;
  const int64_t v_dim = config_.v_head_dim, rank = config_.kv_lora_rank, q_width = nope + rope, qk = rank + rope;
  const auto eps = static_cast<float>(config_.rms_norm_eps);

  // Projections (counted as "rest").
  s.qa.resize(Sz(total * config_.q_lora_rank));
  kernels::Linear(s.h.data(), total, attn.wq_a, s.qa.data());
  kernels::RmsNorm(s.qa.data(), total, config_.q_lora_rank, attn.q_norm, eps, s.qa.data());
  s.q.resize(Sz(total * heads * q_width));
  kernels::Linear(s.qa.data(), total, attn.wq_b, s.q.data());
  s.kva.resize(Sz(total * qk));
  kernels::Linear(s.h.data(), total, attn.wkv_a, s.kva.data());
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

  const bool sparse = !dense_;
  if (sparse) {
    auto start = Clock::now();
    RunIndexer(layer_idx, batch);
    profile_.indexer_s += SecondsSince(start);
  }

  auto attention_start = Clock::now();
  double indexer_inside = 0;  // selection time spent inside the attention section
  // Absorb W_UK: q~[t,h,:] = sum_d q^N[t,h,d] * W_kvb[h*(nope+v) + d, :]; then append q^R.
  const float* wkv_b = attn.wkv_b_f32;
  s.q_absorbed.assign(Sz(total * heads * qk), 0.0f);
  kernels::ParallelFor(heads, 1, [&](int64_t head_begin, int64_t head_end) {
    for (int64_t head = head_begin; head < head_end; ++head) {
      const float* w_uk = wkv_b + head * (nope + v_dim) * rank;
      for (int64_t t = 0; t < total; ++t) {
        const float* qn = &s.q[Sz((t * heads + head) * q_width)];
        float* out = &s.q_absorbed[Sz((t * heads + head) * qk)];
        for (int64_t d = 0; d < nope; ++d) {
          const float coef = qn[d];
          const float* w_row = w_uk + d * rank;
          for (int64_t c = 0; c < rank; ++c) out[c] += coef * w_row[c];
        }
        std::memcpy(out + rank, qn + nope, Sz(rope) * sizeof(float));
      }
    }
  });

  const auto scale = static_cast<float>(config_.softmax_scale());
  const int64_t topk = config_.index_topk;
  s.attn_latent.resize(Sz(total * heads * rank));

  auto attend = [&](const kernels::LatentCacheView& view, int64_t row, const int32_t* indices, int64_t count) {
    kernels::SparseAttentionArgs args;
    args.q = &s.q_absorbed[Sz(row * heads * qk)];
    args.heads = heads;
    args.cache = view;
    args.indices = indices;
    args.count = count;
    args.scale = scale;
    kernels::SparseMqaAttention(args, &s.attn_latent[Sz(row * heads * rank)]);
  };
  auto record = [&](int64_t row, const int32_t* indices, int64_t count, int64_t pos) {
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
  };
  auto select_args = [&](const KvCache* cache, int64_t row, int64_t queries) {
    SelectArgs a;
    a.cache = cache;
    a.layer = layer_idx;
    a.q8 = &s.iq8[Sz(row * config_.index_n_heads * config_.index_head_dim)];
    a.weights = &s.iw[Sz(row * config_.index_n_heads)];
    a.positions = &s.positions[Sz(row)];
    a.queries = queries;
    a.heads = config_.index_n_heads;
    a.dim = config_.index_head_dim;
    a.topk = topk;
    return a;
  };

  // Queries run one after another: the attention kernel parallelises over heads, and selection
  // (IndexerScores over keys, TopKRows over rows) parallelises inside each call.
  for (size_t b = 0; b < batch.size(); ++b) {
    const KvCache& cache = *batch[b].cache;
    const int64_t first = s.seq_first[b], last = s.seq_first[b + 1];
    const int64_t keys = s.positions[Sz(last - 1)] + 1;
    // A forked cache's rows live in two segments; the kernels read one contiguous view. Decode with
    // a selection gathers only the selected rows (<= index_topk); otherwise all rows once per layer.
    const bool two_segments = cache.segment_count() == 2;
    const bool gather_selected = two_segments && sparse && last - first == 1 && keys > topk;
    kernels::LatentCacheView view;
    if (!two_segments) {
      view = cache.Segment(0, layer_idx).latent;
    } else if (!gather_selected) {
      view = GatherLatentRows(cache, layer_idx, nullptr, keys, s.gathered);
    }
    // Long prefills score the indexer in chunks of queries so the score matrix stays bounded.
    const int64_t chunk = std::max<int64_t>(1, kMaxScoreFloats / keys);
    for (int64_t chunk_begin = first; chunk_begin < last; chunk_begin += chunk) {
      const int64_t chunk_end = std::min(last, chunk_begin + chunk);
      const int64_t queries = chunk_end - chunk_begin;
      const bool select = sparse && s.positions[Sz(chunk_end - 1)] + 1 > topk;
      if (select) {
        auto select_start = Clock::now();
        s.selected.resize(Sz(queries * topk));
        SelectKeys(select_args(&cache, chunk_begin, queries), s.scores, s.segment_scores, s.key_end, s.selected.data());
        indexer_inside += SecondsSince(select_start);
      }
      for (int64_t i = 0; i < queries; ++i) {
        const int64_t row = chunk_begin + i;
        const int64_t pos = s.positions[Sz(row)];
        // Queries of the chunk at positions < index_topk keep every causal candidate (4.6).
        const bool use_selection = select && pos + 1 > topk;
        const int32_t* indices = use_selection ? &s.selected[Sz(i * topk)] : nullptr;
        const int64_t count = use_selection ? topk : pos + 1;
        record(row, indices, count, pos);
        if (gather_selected) {
          kernels::LatentCacheView gathered = GatherLatentRows(cache, layer_idx, indices, count, s.gathered);
          attend(gathered, row, nullptr, gathered.rows);
        } else {
          attend(view, row, indices, count);
        }
      }
    }
  }

  // u[t,h,:] = W_UV,h o[t,h,:] with W_UV,h = rows nope..nope+v of head h's slice of W_kvb.
  s.u.resize(Sz(total * heads * v_dim));
  kernels::ParallelFor(total * heads, 4, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t head = item % heads;
      const float* o = &s.attn_latent[Sz(item * rank)];
      const float* w_uv = wkv_b + (head * (nope + v_dim) + nope) * rank;
      float* u = &s.u[Sz(item * v_dim)];
      for (int64_t v = 0; v < v_dim; ++v) {
        const float* w_row = w_uv + v * rank;
        float sum = 0;
        for (int64_t c = 0; c < rank; ++c) sum += o[c] * w_row[c];
        u[v] = sum;
      }
    }
  });
  double attention_elapsed = SecondsSince(attention_start);
  profile_.indexer_s += indexer_inside;
  profile_.attention_s += std::max(0.0, attention_elapsed - indexer_inside);

  s.out.resize(Sz(total * config_.hidden_size));
  kernels::Linear(s.u.data(), total, attn.wo, s.out.data());
}

void Model::RunFfn(int64_t layer_idx) {
  Scratch& s = *scratch_;
  const LayerWeights& layer = weights_->layers[Sz(layer_idx)];
  const int64_t total = s.tokens, dim = config_.hidden_size;
  s.ffn_out.assign(Sz(total * dim), 0.0f);
  if (!layer.is_moe) {
    SwiGlu(layer.dense, s.h.data(), total, s.gate, s.up, s.ffn_out.data());
    return;
  }
  const MoeWeights& moe = layer.moe;
  const int64_t experts = config_.n_routed_experts, top_k = config_.num_experts_per_tok;
  s.router_logits.resize(Sz(total * experts));
  kernels::Linear(s.h.data(), total, moe.gate, s.router_logits.data());
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
  // Tokens per expert, so each chosen expert's weights stream once for all its tokens.
  std::vector<std::vector<std::pair<int64_t, float>>> routed(Sz(experts));
  for (int64_t i = 0; i < total * top_k; ++i) {
    int32_t expert = s.expert_ids[Sz(i)];
    if (expert >= 0 && expert < experts) routed[Sz(expert)].emplace_back(i / top_k, s.expert_weights[Sz(i)]);
  }
  std::vector<float> expert_out;
  for (int64_t e = 0; e < experts; ++e) {
    const auto& rows = routed[Sz(e)];
    if (rows.empty()) continue;
    const auto m = static_cast<int64_t>(rows.size());
    s.ffn_rows.resize(Sz(m * dim));
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(&s.ffn_rows[Sz(i * dim)], &s.h[Sz(rows[Sz(i)].first * dim)], Sz(dim) * sizeof(float));
    }
    expert_out.resize(Sz(m * dim));
    SwiGlu(moe.experts[Sz(e)], s.ffn_rows.data(), m, s.gate, s.up, expert_out.data());
    for (int64_t i = 0; i < m; ++i) {
      float* out = &s.ffn_out[Sz(rows[Sz(i)].first * dim)];
      const float weight = rows[Sz(i)].second;
      const float* y = &expert_out[Sz(i * dim)];
      for (int64_t d = 0; d < dim; ++d) out[d] += weight * y[d];
    }
  }
  if (moe.has_shared) {
    expert_out.resize(Sz(total * dim));
    SwiGlu(moe.shared, s.h.data(), total, s.gate, s.up, expert_out.data());
    for (size_t i = 0; i < Sz(total * dim); ++i) s.ffn_out[i] += expert_out[i];
  }
}

}  // namespace envforge::inference
