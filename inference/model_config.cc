// ModelConfig from a Hugging Face config.json (see model_config.h).
#include "inference/model_config.h"

#include <cmath>
#include <string_view>
#include <utility>

#include "base/fd.h"

namespace envforge::inference {
namespace {

constexpr std::string_view kArchV32 = "DeepseekV32ForCausalLM";
constexpr std::string_view kArchV3 = "DeepseekV3ForCausalLM";

// Reads fields of one JSON object, remembering the first error so the parser reads as a list of
// fields; every message is "<origin>: <field>: <problem>".
class FieldReader {
 public:
  FieldReader(const Json& object, std::string origin, std::string prefix = "")
      : object_(object), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

  bool Has(const char* field) const { return object_.contains(field) && !object_.at(field).is_null(); }

  void Int(const char* field, int64_t* out, bool required, int64_t min_value = 0) {
    if (!Has(field)) {
      if (required) Fail(field, "missing");
      return;
    }
    const Json& value = object_.at(field);
    if (!value.is_number_integer()) return Fail(field, "expected an integer, got " + DumpJson(value));
    int64_t parsed = value.get<int64_t>();
    if (parsed < min_value) {
      return Fail(field, "must be >= " + std::to_string(min_value) + ", got " + std::to_string(parsed));
    }
    *out = parsed;
  }

  void Double(const char* field, double* out, bool required = false) {
    if (!Has(field)) {
      if (required) Fail(field, "missing");
      return;
    }
    const Json& value = object_.at(field);
    if (!value.is_number()) return Fail(field, "expected a number, got " + DumpJson(value));
    *out = value.get<double>();
    if (!std::isfinite(*out)) Fail(field, "must be finite");
  }

  void Bool(const char* field, bool* out) {
    if (!Has(field)) return;
    const Json& value = object_.at(field);
    if (!value.is_boolean()) return Fail(field, "expected true or false, got " + DumpJson(value));
    *out = value.get<bool>();
  }

  // The string value, or "" when absent; a non-string is an error.
  std::string String(const char* field, bool required = false) {
    if (!Has(field)) {
      if (required) Fail(field, "missing");
      return "";
    }
    const Json& value = object_.at(field);
    if (!value.is_string()) {
      Fail(field, "expected a string, got " + DumpJson(value));
      return "";
    }
    return value.get<std::string>();
  }

  void Fail(std::string_view field, const std::string& problem) {
    if (status_.ok()) status_ = InvalidArgumentError(origin_ + ": " + prefix_ + std::string(field) + ": " + problem);
  }
  const Status& status() const { return status_; }

 private:
  const Json& object_;
  std::string origin_;
  std::string prefix_;
  Status status_;
};

Status ParseArchitecture(const Json& json, const std::string& origin, ModelConfig* config) {
  std::string where = origin + ": architectures: ";
  if (!json.contains("architectures")) return InvalidArgumentError(where + "missing");
  const Json& list = json.at("architectures");
  if (!list.is_array() || list.size() != 1 || !list[0].is_string()) {
    return InvalidArgumentError(where + "expected a list of one name, got " + DumpJson(list));
  }
  std::string name = list[0].get<std::string>();
  if (name == kArchV32) {
    config->architecture = Architecture::kDeepseekV32;
  } else if (name == kArchV3) {
    config->architecture = Architecture::kDeepseekV3;
  } else {
    return InvalidArgumentError(where + "unsupported architecture '" + name + "' (expected " + std::string(kArchV32) +
                                " or " + std::string(kArchV3) + ")");
  }
  return Status::Ok();
}

Status ParseRopeScaling(const Json& json, const std::string& origin, ModelConfig* config) {
  if (!json.contains("rope_scaling") || json.at("rope_scaling").is_null()) return Status::Ok();
  const Json& scaling = json.at("rope_scaling");
  if (!scaling.is_object()) return InvalidArgumentError(origin + ": rope_scaling: expected an object or null");
  FieldReader reader(scaling, origin, "rope_scaling.");
  std::string type = reader.String("type");
  if (type.empty()) type = reader.String("rope_type");
  if (type != "yarn") {
    return InvalidArgumentError(origin + ": rope_scaling.type: unsupported '" + type + "' (only yarn)");
  }
  reader.Double("factor", &config->rope_factor, /*required=*/true);
  reader.Double("original_max_position_embeddings", &config->rope_original_max_position);
  reader.Double("beta_fast", &config->rope_beta_fast);
  reader.Double("beta_slow", &config->rope_beta_slow);
  reader.Double("mscale", &config->rope_mscale);
  reader.Double("mscale_all_dim", &config->rope_mscale_all_dim);
  ENVFORGE_RETURN_IF_ERROR(reader.status());
  if (config->rope_original_max_position <= 0) {
    return InvalidArgumentError(origin + ": rope_scaling.original_max_position_embeddings: must be > 0");
  }
  return Status::Ok();
}

Status ParseQuantization(const Json& json, const std::string& origin, ModelConfig* config) {
  if (!json.contains("quantization_config") || json.at("quantization_config").is_null()) return Status::Ok();
  const Json& quant = json.at("quantization_config");
  std::string where = origin + ": quantization_config.";
  if (!quant.is_object()) return InvalidArgumentError(origin + ": quantization_config: expected an object");
  FieldReader reader(quant, origin, "quantization_config.");
  std::string method = reader.String("quant_method", /*required=*/true);
  std::string fmt = reader.String("fmt");
  std::string scale_fmt = reader.String("scale_fmt");
  std::string activation_scheme = reader.String("activation_scheme");
  ENVFORGE_RETURN_IF_ERROR(reader.status());
  if (method != "fp8") return InvalidArgumentError(where + "quant_method: unsupported '" + method + "' (only fp8)");
  if (!fmt.empty() && fmt != "e4m3") return InvalidArgumentError(where + "fmt: unsupported '" + fmt + "' (only e4m3)");
  if (!activation_scheme.empty() && activation_scheme != "dynamic") {
    return InvalidArgumentError(where + "activation_scheme: unsupported '" + activation_scheme + "' (only dynamic)");
  }
  if (!scale_fmt.empty() && scale_fmt != "ue8m0") {
    return InvalidArgumentError(where + "scale_fmt: unsupported '" + scale_fmt + "' (only ue8m0 or absent)");
  }
  const Json* block = quant.contains("weight_block_size") ? &quant.at("weight_block_size") : nullptr;
  if (block == nullptr || !block->is_array() || block->size() != 2 || !(*block)[0].is_number_integer() ||
      !(*block)[1].is_number_integer() || (*block)[0].get<int64_t>() != 128 || (*block)[1].get<int64_t>() != 128) {
    return InvalidArgumentError(where + "weight_block_size: expected [128, 128], got " +
                                (block ? DumpJson(*block) : std::string("nothing")));
  }
  config->fp8_weights = true;
  config->ue8m0_scales = scale_fmt == "ue8m0";
  return Status::Ok();
}

// Dimension relations the kernels rely on; checked after every field parsed.
Status CheckConsistency(const std::string& origin, const ModelConfig& c) {
  auto fail = [&](const char* field, const std::string& problem) {
    return InvalidArgumentError(origin + ": " + field + ": " + problem);
  };
  if (c.kv_lora_rank % 128 != 0) {
    return fail("kv_lora_rank",
                "must be a multiple of 128 (the FP8 latent cache groups), got " + std::to_string(c.kv_lora_rank));
  }
  if (c.qk_rope_head_dim % 2 != 0) return fail("qk_rope_head_dim", "must be even");
  if (c.first_k_dense_replace < c.num_hidden_layers) {  // there are MoE layers
    if (c.n_routed_experts < 1) return fail("n_routed_experts", "must be >= 1 when there are MoE layers");
    if (c.n_group < 1 || c.n_routed_experts % c.n_group != 0) {
      return fail("n_group", "must divide n_routed_experts (" + std::to_string(c.n_routed_experts) + ")");
    }
    if (c.topk_group < 1 || c.topk_group > c.n_group) return fail("topk_group", "must be in [1, n_group]");
    int64_t selectable = c.topk_group * (c.n_routed_experts / c.n_group);
    if (c.num_experts_per_tok < 1 || c.num_experts_per_tok > selectable) {
      return fail("num_experts_per_tok",
                  "must be in [1, topk_group * experts per group] = [1, " + std::to_string(selectable) + "]");
    }
  }
  if (c.has_indexer()) {
    if (c.index_head_dim != 128) {
      return fail("index_head_dim",
                  "must be 128 (the Hadamard size and FP8 block), got " + std::to_string(c.index_head_dim));
    }
    if (c.qk_rope_head_dim > c.index_head_dim) return fail("qk_rope_head_dim", "exceeds index_head_dim");
  }
  if (c.rms_norm_eps <= 0) return fail("rms_norm_eps", "must be > 0");
  if (c.rope_theta <= 0) return fail("rope_theta", "must be > 0");
  return Status::Ok();
}

}  // namespace

double ModelConfig::softmax_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  if (rope_factor > 1.0) {
    double mscale = 0.1 * rope_mscale_all_dim * std::log(rope_factor) + 1.0;
    scale *= mscale * mscale;
  }
  return scale;
}

Result<ModelConfig> ParseModelConfig(const Json& json, const std::string& origin) {
  if (!json.is_object()) return InvalidArgumentError(origin + ": expected a JSON object");
  ModelConfig config;
  ENVFORGE_RETURN_IF_ERROR(ParseArchitecture(json, origin, &config));

  FieldReader reader(json, origin);
  reader.Int("vocab_size", &config.vocab_size, true, 1);
  reader.Int("hidden_size", &config.hidden_size, true, 1);
  reader.Int("num_hidden_layers", &config.num_hidden_layers, true, 1);
  reader.Int("first_k_dense_replace", &config.first_k_dense_replace, false, 0);
  bool has_dense = config.first_k_dense_replace > 0;
  bool has_moe = config.first_k_dense_replace < config.num_hidden_layers;
  reader.Int("intermediate_size", &config.intermediate_size, has_dense, 1);
  reader.Int("moe_intermediate_size", &config.moe_intermediate_size, has_moe, 1);
  reader.Int("num_attention_heads", &config.num_attention_heads, true, 1);
  reader.Int("n_routed_experts", &config.n_routed_experts, has_moe, 1);
  reader.Int("n_shared_experts", &config.n_shared_experts, false, 0);
  reader.Int("num_experts_per_tok", &config.num_experts_per_tok, has_moe, 1);
  reader.Int("n_group", &config.n_group, false, 1);
  reader.Int("topk_group", &config.topk_group, false, 1);
  reader.Double("routed_scaling_factor", &config.routed_scaling_factor);
  reader.Bool("norm_topk_prob", &config.norm_topk_prob);
  reader.Int("q_lora_rank", &config.q_lora_rank, true, 1);
  reader.Int("kv_lora_rank", &config.kv_lora_rank, true, 1);
  reader.Int("qk_nope_head_dim", &config.qk_nope_head_dim, true, 1);
  reader.Int("qk_rope_head_dim", &config.qk_rope_head_dim, true, 2);
  reader.Int("v_head_dim", &config.v_head_dim, true, 1);
  if (config.has_indexer()) {
    reader.Int("index_n_heads", &config.index_n_heads, true, 1);
    reader.Int("index_head_dim", &config.index_head_dim, true, 1);
    reader.Int("index_topk", &config.index_topk, true, 1);
    reader.Bool("indexer_rope_interleave", &config.indexer_rope_interleave);
  }
  reader.Double("rms_norm_eps", &config.rms_norm_eps);
  reader.Double("rope_theta", &config.rope_theta);
  reader.Int("max_position_embeddings", &config.max_position_embeddings, false, 0);
  reader.Int("bos_token_id", &config.bos_token_id, false, 0);
  reader.Int("eos_token_id", &config.eos_token_id, false, 0);
  std::string scoring = reader.String("scoring_func");
  if (!scoring.empty() && scoring != "sigmoid")
    reader.Fail("scoring_func", "unsupported '" + scoring + "' (only sigmoid)");
  std::string topk_method = reader.String("topk_method");
  if (!topk_method.empty() && topk_method != "noaux_tc") {
    reader.Fail("topk_method", "unsupported '" + topk_method + "' (only noaux_tc)");
  }
  int64_t moe_layer_freq = 1;
  reader.Int("moe_layer_freq", &moe_layer_freq, false, 1);
  if (moe_layer_freq != 1) reader.Fail("moe_layer_freq", "only 1 is supported");
  bool tied = false;
  reader.Bool("tie_word_embeddings", &tied);
  if (tied) reader.Fail("tie_word_embeddings", "tied embeddings are not supported (lm_head.weight is separate)");
  ENVFORGE_RETURN_IF_ERROR(reader.status());

  ENVFORGE_RETURN_IF_ERROR(ParseRopeScaling(json, origin, &config));
  ENVFORGE_RETURN_IF_ERROR(ParseQuantization(json, origin, &config));
  ENVFORGE_RETURN_IF_ERROR(CheckConsistency(origin, config));
  return config;
}

Result<ModelConfig> LoadModelConfig(const std::string& path) {
  Result<std::string> text = ReadFileToString(path);
  if (!text.ok()) return NotFoundError(path + ": cannot read: " + text.status().message());
  ENVFORGE_ASSIGN_OR_RETURN(Json json, ParseJson(*text, path));
  return ParseModelConfig(json, path);
}

Json ModelConfigToJson(const ModelConfig& c) {
  bool v32 = c.has_indexer();
  Json json = {
      {"architectures", Json::array({std::string(v32 ? kArchV32 : kArchV3)})},
      {"model_type", v32 ? "deepseek_v32" : "deepseek_v3"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"first_k_dense_replace", c.first_k_dense_replace},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_attention_heads},
      {"n_routed_experts", c.n_routed_experts},
      {"n_shared_experts", c.n_shared_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"n_group", c.n_group},
      {"topk_group", c.topk_group},
      {"routed_scaling_factor", c.routed_scaling_factor},
      {"norm_topk_prob", c.norm_topk_prob},
      {"scoring_func", "sigmoid"},
      {"topk_method", "noaux_tc"},
      {"moe_layer_freq", 1},
      {"q_lora_rank", c.q_lora_rank},
      {"kv_lora_rank", c.kv_lora_rank},
      {"qk_nope_head_dim", c.qk_nope_head_dim},
      {"qk_rope_head_dim", c.qk_rope_head_dim},
      {"v_head_dim", c.v_head_dim},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"max_position_embeddings", c.max_position_embeddings},
      {"bos_token_id", c.bos_token_id},
      {"eos_token_id", c.eos_token_id},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", false},
  };
  if (v32) {
    json["index_n_heads"] = c.index_n_heads;
    json["index_head_dim"] = c.index_head_dim;
    json["index_topk"] = c.index_topk;
    json["indexer_rope_interleave"] = c.indexer_rope_interleave;
  }
  if (c.rope_factor > 1.0) {
    json["rope_scaling"] = {{"type", "yarn"},
                            {"factor", c.rope_factor},
                            {"original_max_position_embeddings", c.rope_original_max_position},
                            {"beta_fast", c.rope_beta_fast},
                            {"beta_slow", c.rope_beta_slow},
                            {"mscale", c.rope_mscale},
                            {"mscale_all_dim", c.rope_mscale_all_dim}};
  }
  if (c.fp8_weights) {
    json["quantization_config"] = {
        {"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
    if (c.ue8m0_scales) json["quantization_config"]["scale_fmt"] = "ue8m0";
  }
  return json;
}

}  // namespace envforge::inference
