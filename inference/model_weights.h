// The model's weights, bound to a Checkpoint by the HF tensor names of dsa-engine.md 2.1, with
// every shape, dtype and FP8 scale grid checked against the ModelConfig.
//
// Matrices stay memory-mapped in their checkpoint dtype (kernels::WeightMatrix views into the
// Checkpoint); 1-D tensors (norm weights, biases, the router's e_score_correction_bias) are
// widened to fp32 copies owned here. wkv_b is also dequantized to an fp32 copy (the absorbed
// MQA-mode attention reads it per head, dsa-engine.md 4.7).
//
// Accepted dtypes: matrices F32, BF16, F16, or F8_E4M3 with "<name>_scale_inv" F32
// [ceil(rows/128), ceil(cols/128)] (required exactly when the matrix is FP8); 1-D tensors F32,
// BF16 or F16. The router gate and the indexer's weights_proj are never FP8. Errors name the
// tensor: NotFound "tensor 'model.layers.3.mlp.experts.7.up_proj.weight' is missing",
// InvalidArgument for shape/dtype/scale-grid mismatches, DataLoss from the checkpoint.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "inference/model_config.h"
#include "inference/safetensors.h"
#include "kernels/cpu/linear.h"

namespace envforge::inference {

struct IndexerWeights {
  kernels::WeightMatrix wq_b;            // [index_n_heads * index_head_dim, q_lora_rank]
  kernels::WeightMatrix wk;              // [index_head_dim, hidden]
  kernels::WeightMatrix weights_proj;    // [index_n_heads, hidden]
  const float* k_norm_weight = nullptr;  // [index_head_dim]
  const float* k_norm_bias = nullptr;    // [index_head_dim]
};

struct AttentionWeights {
  kernels::WeightMatrix wq_a;        // q_a_proj [q_lora_rank, hidden]
  const float* q_norm = nullptr;     // q_a_layernorm [q_lora_rank]
  kernels::WeightMatrix wq_b;        // q_b_proj [heads * qk_head_dim, q_lora_rank]
  kernels::WeightMatrix wkv_a;       // kv_a_proj_with_mqa [kv_lora_rank + rope_dim, hidden]
  const float* kv_norm = nullptr;    // kv_a_layernorm [kv_lora_rank]
  kernels::WeightMatrix wkv_b;       // kv_b_proj [heads * (nope + v), kv_lora_rank]
  const float* wkv_b_f32 = nullptr;  // the same, dequantized, row-major
  kernels::WeightMatrix wo;          // o_proj [hidden, heads * v]
  bool has_indexer = false;
  IndexerWeights indexer;
};

struct MlpWeights {          // SwiGLU: w2(silu(w1 x) * (w3 x))
  kernels::WeightMatrix w1;  // gate_proj [inter, hidden]
  kernels::WeightMatrix w3;  // up_proj   [inter, hidden]
  kernels::WeightMatrix w2;  // down_proj [hidden, inter]
};

struct MoeWeights {
  kernels::WeightMatrix gate;        // mlp.gate.weight [n_routed_experts, hidden]
  const float* gate_bias = nullptr;  // mlp.gate.e_score_correction_bias [n_routed_experts]
  std::vector<MlpWeights> experts;   // mlp.experts.E.*
  bool has_shared = false;
  MlpWeights shared;  // mlp.shared_experts.* (inter = n_shared * moe_inter)
};

struct LayerWeights {
  const float* attn_norm = nullptr;  // input_layernorm [hidden]
  const float* ffn_norm = nullptr;   // post_attention_layernorm [hidden]
  AttentionWeights attn;
  bool is_moe = false;
  MlpWeights dense;  // layers < first_k_dense_replace
  MoeWeights moe;    // the others
};

class ModelWeights {
 public:
  // Opens dir's checkpoint and binds every tensor; see the file comment for errors.
  static Result<std::unique_ptr<ModelWeights>> Load(const std::string& dir, const ModelConfig& config);

  kernels::WeightMatrix embed;  // model.embed_tokens.weight [vocab, hidden]
  std::vector<LayerWeights> layers;
  const float* final_norm = nullptr;  // model.norm.weight
  kernels::WeightMatrix head;         // lm_head.weight [vocab, hidden]
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  size_t parameter_count() const { return parameter_count_; }  // elements of bound tensors
  size_t weight_bytes() const { return weight_bytes_; }

 private:
  std::unique_ptr<Checkpoint> checkpoint_;
  std::vector<std::vector<float>> owned_;  // widened 1-D tensors and wkv_b_f32
  size_t parameter_count_ = 0;
  size_t weight_bytes_ = 0;
};

}  // namespace envforge::inference
