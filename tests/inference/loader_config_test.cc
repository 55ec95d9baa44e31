// ModelConfig: parsing the HF config.json of both architectures, derived constants and the
// errors for missing, mistyped and unsupported fields.
#include <doctest/doctest.h>

#include <cmath>

#include "base/fd.h"
#include "base/json.h"
#include "inference/model_config.h"
#include "tests/inference/loader_test_util.h"

namespace envforge::inference {
namespace {

using testing::Contains;
using testing::TempDir;

// The config.json of the 671B model (dsa-engine.md 1.2).
Json FullSizeConfig() {
  return Json::parse(R"({
    "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
    "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 1,
    "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
    "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048, "initializer_range": 0.02,
    "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280, "rms_norm_eps": 1e-06,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                     "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
    "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16", "transformers_version": "4.44.2", "use_cache": true})");
}

void CheckRejected(const Json& json, const std::string& part) {
  Result<ModelConfig> config = ParseModelConfig(json);
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(Contains(config.status().message(), part), config.status().message());
}

TEST_SUITE("inference.model_config") {
  TEST_CASE("the 671B config parses with every field and the derived constants of 1.3") {
    Result<ModelConfig> parsed = ParseModelConfig(FullSizeConfig());
    REQUIRE(parsed.ok());
    const ModelConfig& c = *parsed;
    CHECK(c.architecture == Architecture::kDeepseekV32);
    CHECK(c.has_indexer());
    CHECK(c.vocab_size == 129280);
    CHECK(c.hidden_size == 7168);
    CHECK(c.intermediate_size == 18432);
    CHECK(c.moe_intermediate_size == 2048);
    CHECK(c.num_hidden_layers == 61);
    CHECK(c.first_k_dense_replace == 3);
    CHECK(c.num_attention_heads == 128);
    CHECK(c.n_routed_experts == 256);
    CHECK(c.n_shared_experts == 1);
    CHECK(c.num_experts_per_tok == 8);
    CHECK(c.n_group == 8);
    CHECK(c.topk_group == 4);
    CHECK(c.routed_scaling_factor == 2.5);
    CHECK(c.norm_topk_prob);
    CHECK(c.q_lora_rank == 1536);
    CHECK(c.kv_lora_rank == 512);
    CHECK(c.qk_head_dim() == 192);
    CHECK(c.v_head_dim == 128);
    CHECK(c.index_n_heads == 64);
    CHECK(c.index_head_dim == 128);
    CHECK(c.index_topk == 2048);
    CHECK_FALSE(c.indexer_rope_interleave);  // absent: false
    CHECK(c.rms_norm_eps == doctest::Approx(1e-6));
    CHECK(c.rope_theta == 10000);
    CHECK(c.rope_factor == 40);
    CHECK(c.rope_original_max_position == 4096);
    CHECK(c.rope_beta_fast == 32);
    CHECK(c.rope_beta_slow == 1);
    CHECK(c.max_position_embeddings == 163840);
    CHECK(c.bos_token_id == 0);
    CHECK(c.eos_token_id == 1);
    CHECK(c.fp8_weights);
    CHECK(c.ue8m0_scales);
    CHECK_FALSE(c.is_moe_layer(2));
    CHECK(c.is_moe_layer(3));
    CHECK(std::abs(c.softmax_scale() - 0.1352338) < 1e-7);
  }

  TEST_CASE("ModelConfigToJson writes HF names that parse back to the same config") {
    Result<ModelConfig> parsed = ParseModelConfig(FullSizeConfig());
    REQUIRE(parsed.ok());
    Json written = ModelConfigToJson(*parsed);
    CHECK(written["hidden_size"] == 7168);
    CHECK(written["quantization_config"]["scale_fmt"] == "ue8m0");
    Result<ModelConfig> again = ParseModelConfig(written);
    REQUIRE(again.ok());
    CHECK(DumpJson(ModelConfigToJson(*again)) == DumpJson(written));
  }

  TEST_CASE("DeepseekV3 needs no indexer fields and has no indexer") {
    Json json = FullSizeConfig();
    json["architectures"] = {"DeepseekV3ForCausalLM"};
    json.erase("index_head_dim");
    json.erase("index_n_heads");
    json.erase("index_topk");
    json.erase("quantization_config");
    json.erase("rope_scaling");
    Result<ModelConfig> parsed = ParseModelConfig(json);
    REQUIRE(parsed.ok());
    CHECK(parsed->architecture == Architecture::kDeepseekV3);
    CHECK_FALSE(parsed->has_indexer());
    CHECK_FALSE(parsed->fp8_weights);
    CHECK(parsed->rope_factor == 1.0);
    CHECK(parsed->softmax_scale() == doctest::Approx(1.0 / std::sqrt(192.0)));
  }

  TEST_CASE("indexer_rope_interleave is read when present") {
    Json json = FullSizeConfig();
    json["indexer_rope_interleave"] = true;
    Result<ModelConfig> parsed = ParseModelConfig(json);
    REQUIRE(parsed.ok());
    CHECK(parsed->indexer_rope_interleave);
  }

  TEST_CASE("bad fields are InvalidArgument naming the field") {
    Json json = FullSizeConfig();
    SUBCASE("missing hidden_size") {
      json.erase("hidden_size");
      CheckRejected(json, "config.json: hidden_size: missing");
    }
    SUBCASE("wrong architecture") {
      json["architectures"] = {"LlamaForCausalLM"};
      CheckRejected(json, "config.json: architectures: unsupported architecture 'LlamaForCausalLM'");
    }
    SUBCASE("missing architectures") {
      json.erase("architectures");
      CheckRejected(json, "config.json: architectures: missing");
    }
    SUBCASE("index_head_dim 64") {
      json["index_head_dim"] = 64;
      CheckRejected(json, "config.json: index_head_dim: must be 128");
    }
    SUBCASE("a V3.2 config without index_topk") {
      json.erase("index_topk");
      CheckRejected(json, "config.json: index_topk: missing");
    }
    SUBCASE("a string where an integer belongs") {
      json["num_attention_heads"] = "128";
      CheckRejected(json, "config.json: num_attention_heads: expected an integer");
    }
    SUBCASE("a negative size") {
      json["vocab_size"] = -5;
      CheckRejected(json, "config.json: vocab_size: must be >= 1");
    }
    SUBCASE("kv_lora_rank not a multiple of 128") {
      json["kv_lora_rank"] = 500;
      CheckRejected(json, "config.json: kv_lora_rank: must be a multiple of 128");
    }
    SUBCASE("softmax scoring") {
      json["scoring_func"] = "softmax";
      CheckRejected(json, "config.json: scoring_func: unsupported 'softmax'");
    }
    SUBCASE("groups that do not divide the experts") {
      json["n_group"] = 7;
      CheckRejected(json, "config.json: n_group: must divide n_routed_experts");
    }
    SUBCASE("more experts per token than the kept groups hold") {
      json["topk_group"] = 1;
      json["num_experts_per_tok"] = 40;
      CheckRejected(json, "config.json: num_experts_per_tok:");
    }
    SUBCASE("another weight block size") {
      json["quantization_config"]["weight_block_size"] = {64, 64};
      CheckRejected(json, "config.json: quantization_config.weight_block_size: expected [128, 128]");
    }
    SUBCASE("another quantization method") {
      json["quantization_config"]["quant_method"] = "gptq";
      CheckRejected(json, "config.json: quantization_config.quant_method: unsupported 'gptq'");
    }
    SUBCASE("another rope scaling") {
      json["rope_scaling"]["type"] = "linear";
      CheckRejected(json, "config.json: rope_scaling.type: unsupported 'linear'");
    }
    SUBCASE("yarn without a factor") {
      json["rope_scaling"].erase("factor");
      CheckRejected(json, "config.json: rope_scaling.factor: missing");
    }
    SUBCASE("tied embeddings") {
      json["tie_word_embeddings"] = true;
      CheckRejected(json, "config.json: tie_word_embeddings:");
    }
    SUBCASE("not an object") { CheckRejected(Json::array(), "config.json: expected a JSON object"); }
  }

  TEST_CASE("LoadModelConfig reads a generated config and names the file in errors") {
    TempDir dir;
    Json report = testing::MakeTinyModel(dir / "tiny");
    Result<ModelConfig> config = LoadModelConfig(dir / "tiny/config.json");
    REQUIRE(config.ok());
    CHECK(config->hidden_size == 256);
    CHECK(config->num_hidden_layers == 3);
    CHECK(config->index_topk == 16);
    CHECK(config->vocab_size == report["vocab_size"].get<int64_t>());
    CHECK(config->rope_factor == 40);
    CHECK_FALSE(config->fp8_weights);

    REQUIRE(WriteFileAtomically(dir / "broken.json", "{\"architectures\": [").ok());
    Result<ModelConfig> broken = LoadModelConfig(dir / "broken.json");
    REQUIRE_FALSE(broken.ok());
    CHECK(Contains(broken.status().message(), "broken.json"));
    Result<ModelConfig> missing = LoadModelConfig(dir / "absent.json");
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.status().code() == StatusCode::kNotFound);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
