// The model configuration, read from a Hugging Face config.json (dsa-engine.md 1.2).
//
// Architectures: "DeepseekV32ForCausalLM" (MLA + lightning indexer + sparse attention) and
// "DeepseekV3ForCausalLM" (the same without the indexer: dense MLA). Field names are HF's; the
// comments give the reference (inference/model.py) names. Missing required fields, wrong types
// and unsupported values (another architecture, scoring_func other than "sigmoid", a
// quantization_config other than fp8 e4m3 with 128x128 blocks, dims that break the kernels'
// assumptions such as index_head_dim != 128 or kv_lora_rank % 128 != 0) are InvalidArgument with
// "config.json: <field>: <what is wrong>".
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/json.h"
#include "base/status.h"

namespace envforge::inference {

enum class Architecture { kDeepseekV32, kDeepseekV3 };

struct ModelConfig {
  Architecture architecture = Architecture::kDeepseekV32;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;            // dim
  int64_t intermediate_size = 0;      // inter_dim (dense layers)
  int64_t moe_intermediate_size = 0;  // moe_inter_dim
  int64_t num_hidden_layers = 0;      // n_layers (the MTP layers beyond it are ignored)
  int64_t first_k_dense_replace = 0;  // n_dense_layers
  int64_t num_attention_heads = 0;    // n_heads
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;     // n_activated_experts
  int64_t n_group = 1;                 // n_expert_groups
  int64_t topk_group = 1;              // n_limited_groups
  double routed_scaling_factor = 1.0;  // route_scale
  bool norm_topk_prob = true;
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  // Indexer (kDeepseekV32 only).
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  bool indexer_rope_interleave = false;  // absent in the official config: false (dsa-engine.md 1.2)
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  // rope_scaling (type "yarn"); factor <= 1 or absent: no scaling.
  double rope_factor = 1.0;
  double rope_original_max_position = 4096;
  double rope_beta_fast = 32;
  double rope_beta_slow = 1;
  double rope_mscale = 1.0;
  double rope_mscale_all_dim = 1.0;
  int64_t max_position_embeddings = 0;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  // quantization_config: FP8 e4m3 weights with 128x128 block scales; scale_fmt "ue8m0" means
  // power-of-two scales, also used for the dynamic activation quantization.
  bool fp8_weights = false;
  bool ue8m0_scales = false;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool has_indexer() const { return architecture == Architecture::kDeepseekV32; }
  bool is_moe_layer(int64_t layer) const { return layer >= first_k_dense_replace; }
  // MoE layers (the layers from first_k_dense_replace on) and the routed expert ids one token
  // position has over all of them (ForwardOptions::record_routing).
  int64_t moe_layer_count() const { return std::max<int64_t>(0, num_hidden_layers - first_k_dense_replace); }
  int64_t routing_width() const { return moe_layer_count() * num_experts_per_tok; }
  // qk_head_dim^-0.5 * m^2 with m = 0.1 * rope_mscale_all_dim * ln(rope_factor) + 1 when
  // rope_factor > 1 (dsa-engine.md 1.3: 0.1352338 for the 671B config).
  double softmax_scale() const;
};

// Parses config.json text; `origin` names the file in messages.
Result<ModelConfig> ParseModelConfig(const Json& json, const std::string& origin = "config.json");
Result<ModelConfig> LoadModelConfig(const std::string& path);
Json ModelConfigToJson(const ModelConfig& config);  // the HF field names

}  // namespace envforge::inference
