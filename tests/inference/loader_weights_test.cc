// ModelWeights::Load on checkpoints written by scripts/make_tiny_model.py: every tensor bound
// with its shape, the parameter count, sharded = single file, dequantized values equal to numpy's,
// and errors naming the tensor for broken checkpoints.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "base/fd.h"
#include "base/json.h"
#include "inference/model_config.h"
#include "inference/model_weights.h"
#include "tests/inference/loader_test_util.h"

namespace envforge::inference {
namespace {

using testing::Contains;
using testing::TempDir;
namespace fs = std::filesystem;

// The generated models of this suite, made once.
struct TinyModels {
  TempDir dir;
  std::map<std::string, Json> reports;  // by subdirectory name

  const std::string Make(const std::string& name, const std::vector<std::string>& flags) {
    if (!reports.count(name)) reports[name] = testing::MakeTinyModel(dir / name, flags);
    return dir / name;
  }
};

TinyModels& Models() {
  static TinyModels models;
  return models;
}

const char kKvB0[] = "model.layers.0.self_attn.kv_b_proj.weight";
const char kQa1[] = "model.layers.1.self_attn.q_a_proj.weight";

std::string Fp32() { return Models().Make("fp32", {}); }
std::string Bf16() { return Models().Make("bf16", {"--dtype", "bf16", "--dump-tensor", kKvB0, "--dump-tensor", kQa1}); }
std::string Fp8() { return Models().Make("fp8", {"--dtype", "fp8", "--dump-tensor", kKvB0, "--dump-tensor", kQa1}); }

struct Loaded {
  ModelConfig config;
  std::unique_ptr<ModelWeights> weights;
};

Result<Loaded> TryLoad(const std::string& dir) {
  ENVFORGE_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir + "/config.json"));
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<ModelWeights> weights, ModelWeights::Load(dir, config));
  return Loaded{config, std::move(weights)};
}

Loaded Load(const std::string& dir) {
  Result<Loaded> loaded = TryLoad(dir);
  INFO(loaded.status().ToString());
  REQUIRE(loaded.ok());
  return std::move(loaded).value();
}

// Calls visit(name, matrix, expected rows, expected cols) for every matrix the config implies.
void ForEachMatrix(
    const ModelConfig& c, const ModelWeights& w,
    const std::function<void(const std::string&, const kernels::WeightMatrix&, int64_t, int64_t)>& visit) {
  const int64_t hidden = c.hidden_size;
  const int64_t heads = c.num_attention_heads;
  visit("embed", w.embed, c.vocab_size, hidden);
  visit("head", w.head, c.vocab_size, hidden);
  auto mlp = [&](const std::string& name, const MlpWeights& m, int64_t inter) {
    visit(name + ".w1", m.w1, inter, hidden);
    visit(name + ".w3", m.w3, inter, hidden);
    visit(name + ".w2", m.w2, hidden, inter);
  };
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& layer = w.layers[i];
    const AttentionWeights& a = layer.attn;
    std::string p = "layer" + std::to_string(i);
    visit(p + ".wq_a", a.wq_a, c.q_lora_rank, hidden);
    visit(p + ".wq_b", a.wq_b, heads * c.qk_head_dim(), c.q_lora_rank);
    visit(p + ".wkv_a", a.wkv_a, c.kv_lora_rank + c.qk_rope_head_dim, hidden);
    visit(p + ".wkv_b", a.wkv_b, heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    visit(p + ".wo", a.wo, hidden, heads * c.v_head_dim);
    if (a.has_indexer) {
      visit(p + ".indexer.wq_b", a.indexer.wq_b, c.index_n_heads * c.index_head_dim, c.q_lora_rank);
      visit(p + ".indexer.wk", a.indexer.wk, c.index_head_dim, hidden);
      visit(p + ".indexer.weights_proj", a.indexer.weights_proj, c.index_n_heads, hidden);
    }
    if (layer.is_moe) {
      visit(p + ".gate", layer.moe.gate, c.n_routed_experts, hidden);
      for (size_t e = 0; e < layer.moe.experts.size(); ++e) {
        mlp(p + ".expert" + std::to_string(e), layer.moe.experts[e], c.moe_intermediate_size);
      }
      if (layer.moe.has_shared) mlp(p + ".shared", layer.moe.shared, c.n_shared_experts * c.moe_intermediate_size);
    } else {
      mlp(p + ".dense", layer.dense, c.intermediate_size);
    }
  }
}

float ElementOf(const kernels::WeightMatrix& m, int64_t row, int64_t col) {
  int64_t index = row * m.cols + col;
  const uint8_t* data = static_cast<const uint8_t*>(m.data);
  switch (m.dtype) {
    case kernels::DType::kF32: {
      float v;
      std::memcpy(&v, data + 4 * index, 4);
      return v;
    }
    case kernels::DType::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * index, 2);
      return kernels::Bf16ToFloat(bits);
    }
    case kernels::DType::kF16: {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * index, 2);
      return kernels::HalfToFloat(bits);
    }
    case kernels::DType::kF8E4M3:
      return kernels::Fp8E4M3ToFloat(data[index]) * m.block_scale_inv[(row / 128) * ((m.cols + 127) / 128) + col / 128];
  }
  return NAN;
}

void CheckStructure(const Loaded& loaded, kernels::DType matrix_dtype) {
  const ModelConfig& c = loaded.config;
  const ModelWeights& w = *loaded.weights;
  REQUIRE(w.layers.size() == static_cast<size_t>(c.num_hidden_layers));
  int matrices = 0;
  ForEachMatrix(c, w, [&](const std::string& name, const kernels::WeightMatrix& m, int64_t rows, int64_t cols) {
    INFO(name);
    ++matrices;
    CHECK(m.data != nullptr);
    CHECK(m.rows == rows);
    CHECK(m.cols == cols);
    bool high_precision =
        Contains(name, "embed") || Contains(name, "head") || Contains(name, "gate") || Contains(name, "weights_proj");
    if (matrix_dtype == kernels::DType::kF8E4M3 && high_precision) {
      CHECK(m.dtype == kernels::DType::kBF16);
    } else {
      CHECK(m.dtype == matrix_dtype);
    }
    CHECK((m.block_scale_inv != nullptr) == (m.dtype == kernels::DType::kF8E4M3));
    if (m.dtype == kernels::DType::kF8E4M3) {
      CHECK(m.pow2_activation_scales == c.ue8m0_scales);
      int64_t grid = ((rows + 127) / 128) * ((cols + 127) / 128);
      for (int64_t i = 0; i < grid; ++i) {  // UE8M0: powers of two
        int exponent;
        CHECK(std::frexp(m.block_scale_inv[i], &exponent) == 0.5f);
      }
    }
  });
  CHECK(matrices > 0);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& layer = w.layers[i];
    CHECK(layer.is_moe == (static_cast<int64_t>(i) >= c.first_k_dense_replace));
    CHECK(layer.attn_norm != nullptr);
    CHECK(layer.ffn_norm != nullptr);
    CHECK(layer.attn.q_norm != nullptr);
    CHECK(layer.attn.kv_norm != nullptr);
    CHECK(layer.attn.wkv_b_f32 != nullptr);
    CHECK(layer.attn.has_indexer == c.has_indexer());
    if (c.has_indexer()) {
      CHECK(layer.attn.indexer.k_norm_weight != nullptr);
      CHECK(layer.attn.indexer.k_norm_bias != nullptr);
    }
    if (layer.is_moe) {
      CHECK(layer.moe.gate_bias != nullptr);
      CHECK(layer.moe.experts.size() == static_cast<size_t>(c.n_routed_experts));
      CHECK(layer.moe.has_shared);
    }
    // Norms are 1 + small noise in the generator.
    CHECK(std::abs(layer.attn_norm[0] - 1.0f) < 0.5f);
  }
  CHECK(w.final_norm != nullptr);
}

// Every value of the dumped tensor equals what the loader reads.
void CheckDumped(const Json& dump, const kernels::WeightMatrix& matrix, const float* dequantized = nullptr) {
  const std::vector<float> values = dump["values"].get<std::vector<float>>();
  REQUIRE(values.size() == static_cast<size_t>(matrix.rows * matrix.cols));
  double sum = 0;
  size_t mismatches = 0;
  for (int64_t row = 0; row < matrix.rows; ++row) {
    for (int64_t col = 0; col < matrix.cols; ++col) {
      float expected = values[row * matrix.cols + col];
      float read = ElementOf(matrix, row, col);
      if (read != expected) ++mismatches;
      if (dequantized != nullptr && dequantized[row * matrix.cols + col] != expected) ++mismatches;
      sum += read;
    }
  }
  CHECK(mismatches == 0);
  CHECK(sum == doctest::Approx(dump["sum"].get<double>()).epsilon(1e-9));
}

TEST_SUITE("inference.model_weights") {
  TEST_CASE("a tiny fp32 V3.2 checkpoint binds every tensor") {
    Loaded loaded = Load(Fp32());
    CheckStructure(loaded, kernels::DType::kF32);
    const Json& report = Models().reports["fp32"];
    CHECK(loaded.weights->parameter_count() == report["parameters"].get<size_t>());
    CHECK(loaded.weights->parameter_count() == report["checkpoint_parameters"].get<size_t>());  // nothing left unbound
    CHECK(loaded.weights->weight_bytes() == 4 * loaded.weights->parameter_count());
    CHECK(loaded.weights->checkpoint().TensorNames().size() == report["tensors"].get<size_t>());
  }

  TEST_CASE("bf16 matrices read back equal to numpy's values") {
    Loaded loaded = Load(Bf16());
    CheckStructure(loaded, kernels::DType::kBF16);
    const Json& report = Models().reports["bf16"];
    CHECK(loaded.weights->parameter_count() == report["parameters"].get<size_t>());
    CHECK(report["dump"][kKvB0]["dtype"] == "BF16");
    CheckDumped(report["dump"][kKvB0], loaded.weights->layers[0].attn.wkv_b, loaded.weights->layers[0].attn.wkv_b_f32);
    CheckDumped(report["dump"][kQa1], loaded.weights->layers[1].attn.wq_a);
  }

  TEST_CASE("fp8 matrices dequantize with their 128x128 power-of-two block scales to numpy's values") {
    Loaded loaded = Load(Fp8());
    CHECK(loaded.config.fp8_weights);
    CHECK(loaded.config.ue8m0_scales);
    CheckStructure(loaded, kernels::DType::kF8E4M3);
    const Json& report = Models().reports["fp8"];
    CHECK(loaded.weights->parameter_count() == report["parameters"].get<size_t>());
    CHECK(report["dump"][kKvB0]["dtype"] == "F8_E4M3");
    CheckDumped(report["dump"][kKvB0], loaded.weights->layers[0].attn.wkv_b, loaded.weights->layers[0].attn.wkv_b_f32);
    CheckDumped(report["dump"][kQa1], loaded.weights->layers[1].attn.wq_a);
    // The 2-row-block scale grid of kv_a_proj_with_mqa (128 + 64 rows): ceil-div.
    const TensorInfo* scale =
        loaded.weights->checkpoint().Find("model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv");
    REQUIRE(scale != nullptr);
    CHECK(scale->shape == std::vector<int64_t>{2, 2});
  }

  TEST_CASE("a DeepseekV3 checkpoint binds without indexer tensors") {
    std::string dir = Models().Make("v3", {"--arch", "v3", "--dtype", "fp8"});
    Loaded loaded = Load(dir);
    CHECK_FALSE(loaded.config.has_indexer());
    CheckStructure(loaded, kernels::DType::kF8E4M3);
    CHECK(loaded.weights->parameter_count() == Models().reports["v3"]["parameters"].get<size_t>());
    CHECK(loaded.weights->checkpoint().Find("model.layers.0.self_attn.indexer.wk.weight") == nullptr);
  }

  TEST_CASE("a sharded checkpoint loads the same bytes as the single file") {
    std::string sharded_dir = Models().Make("sharded", {"--dtype", "fp8", "--shards", "3"});
    Loaded single = Load(Fp8());
    Loaded sharded = Load(sharded_dir);
    CHECK(fs::exists(fs::path(sharded_dir) / "model-00003-of-00003.safetensors"));
    CHECK(sharded.weights->parameter_count() == single.weights->parameter_count());
    CHECK(sharded.weights->weight_bytes() == single.weights->weight_bytes());
    std::map<std::string, const kernels::WeightMatrix*> by_name;
    ForEachMatrix(
        single.config, *single.weights,
        [&](const std::string& name, const kernels::WeightMatrix& m, int64_t, int64_t) { by_name[name] = &m; });
    size_t compared = 0;
    ForEachMatrix(sharded.config, *sharded.weights,
                  [&](const std::string& name, const kernels::WeightMatrix& m, int64_t rows, int64_t cols) {
                    INFO(name);
                    const kernels::WeightMatrix& other = *by_name.at(name);
                    size_t bytes = static_cast<size_t>(rows * cols * kernels::DTypeSize(m.dtype));
                    CHECK(std::memcmp(m.data, other.data, bytes) == 0);
                    ++compared;
                  });
    CHECK(compared == by_name.size());
    const float* a = single.weights->layers[2].attn.wkv_b_f32;
    const float* b = sharded.weights->layers[2].attn.wkv_b_f32;
    CHECK(std::memcmp(a, b, sizeof(float) * single.weights->layers[2].attn.wkv_b.rows * 128) == 0);
  }

  TEST_CASE("the MTP layer beyond num_hidden_layers is ignored") {
    std::string dir = Models().Make("mtp", {"--mtp"});
    Loaded loaded = Load(dir);
    const Json& report = Models().reports["mtp"];
    CHECK(loaded.weights->layers.size() == 3);
    CHECK(loaded.weights->checkpoint().Find("model.layers.3.eh_proj.weight") != nullptr);
    CHECK(loaded.weights->parameter_count() == report["parameters"].get<size_t>());
    CHECK(report["parameters"].get<size_t>() < report["checkpoint_parameters"].get<size_t>());
  }

  TEST_CASE("the generator is a pure function of its arguments") {
    TempDir dir;
    testing::MakeTinyModel(dir / "again", {"--dtype", "fp8"});
    testing::MakeTinyModel(dir / "seed1", {"--dtype", "fp8", "--seed", "1"});
    auto contents = [](const std::string& path) {
      Result<std::string> text = ReadFileToString(path);
      REQUIRE(text.ok());
      return *text;
    };
    const std::string original = contents(Fp8() + "/model.safetensors");
    CHECK(contents(dir / "again/model.safetensors") == original);
    CHECK(contents(dir / "again/config.json") == contents(Fp8() + "/config.json"));
    CHECK(contents(dir / "seed1/model.safetensors") != original);
  }

  TEST_CASE("with the tokenizer, config.json's vocab_size covers every token id") {
    TempDir dir;
    std::string text = testing::RunPython({"scripts/make_tiny_model.py", "--out", dir / "m"});
    Result<Json> report = ParseJson(text.substr(0, text.find('\n')));
    REQUIRE(report.ok());
    Result<std::string> tokenizer_text = ReadFileToString(dir / "m/tokenizer.json");
    REQUIRE(tokenizer_text.ok());
    Result<Json> tokenizer = ParseJson(*tokenizer_text);
    REQUIRE(tokenizer.ok());
    int64_t max_id = -1;
    for (const auto& [token, id] : (*tokenizer)["model"]["vocab"].items()) max_id = std::max(max_id, id.get<int64_t>());
    for (const Json& added : (*tokenizer)["added_tokens"]) max_id = std::max(max_id, added["id"].get<int64_t>());
    Loaded loaded = Load(dir / "m");
    CHECK(loaded.config.vocab_size == (*report)["vocab_size"].get<int64_t>());
    CHECK(loaded.config.vocab_size > max_id);
    CHECK(loaded.weights->embed.rows == loaded.config.vocab_size);
  }

  TEST_CASE("1-D tensors stored in bf16 are widened to fp32") {
    TempDir dir;
    const std::string norm = "model.layers.0.input_layernorm.weight";
    float expected = 0;
    testing::RewriteCheckpoint(Fp32(), dir / "m", [&](TensorToWrite& t) {
      if (t.name != norm) return true;
      std::string bytes;
      for (size_t i = 0; i < t.bytes.size(); i += 4) {
        float v;
        std::memcpy(&v, t.bytes.data() + i, 4);
        uint16_t bits = kernels::FloatToBf16(v);
        if (i == 0) expected = kernels::Bf16ToFloat(bits);
        bytes.append(reinterpret_cast<const char*>(&bits), 2);
      }
      t.dtype_name = "BF16";
      t.bytes = bytes;
      return true;
    });
    Loaded loaded = Load(dir / "m");
    CHECK(loaded.weights->layers[0].attn_norm[0] == expected);
  }

  TEST_CASE("broken checkpoints are errors naming the tensor") {
    TempDir dir;
    const std::string broken = dir / "broken";
    auto check_error = [&](StatusCode code, const std::string& part) {
      Result<Loaded> loaded = TryLoad(broken);
      REQUIRE_FALSE(loaded.ok());
      CHECK(loaded.status().code() == code);
      CHECK_MESSAGE(Contains(loaded.status().message(), part), loaded.status().message());
    };

    SUBCASE("a truncated file") {
      fs::create_directories(broken);
      fs::copy_file(fs::path(Fp32()) / "config.json", fs::path(broken) / "config.json");
      fs::copy_file(fs::path(Fp32()) / "model.safetensors", fs::path(broken) / "model.safetensors");
      fs::resize_file(fs::path(broken) / "model.safetensors",
                      fs::file_size(fs::path(broken) / "model.safetensors") / 2);
      check_error(StatusCode::kDataLoss, "runs past the end of the file");
      Result<Loaded> loaded = TryLoad(broken);
      CHECK(Contains(loaded.status().message(), "tensor 'model."));
    }
    SUBCASE("a missing tensor") {
      testing::RewriteCheckpoint(
          Fp32(), broken, [](TensorToWrite& t) { return t.name != "model.layers.2.mlp.experts.7.up_proj.weight"; });
      check_error(StatusCode::kNotFound, "tensor 'model.layers.2.mlp.experts.7.up_proj.weight' is missing");
    }
    SUBCASE("a missing indexer tensor") {
      testing::RewriteCheckpoint(
          Fp32(), broken, [](TensorToWrite& t) { return t.name != "model.layers.1.self_attn.indexer.k_norm.bias"; });
      check_error(StatusCode::kNotFound, "tensor 'model.layers.1.self_attn.indexer.k_norm.bias' is missing");
    }
    SUBCASE("a wrong shape (config and tensors disagree)") {
      testing::RewriteCheckpoint(Fp32(), broken, [](TensorToWrite&) { return true; });
      testing::EditConfig(broken, [](Json& c) { c["intermediate_size"] = 384; });
      check_error(StatusCode::kInvalidArgument,
                  "tensor 'model.layers.0.mlp.gate_proj.weight': shape [512,256], expected [384,256]");
    }
    SUBCASE("an unsupported dtype") {
      testing::RewriteCheckpoint(Fp32(), broken, [](TensorToWrite& t) {
        if (t.name == "model.norm.weight") {
          t.dtype_name = "I64";
          t.bytes += t.bytes;  // 8 bytes per element
        }
        return true;
      });
      check_error(StatusCode::kInvalidArgument, "tensor 'model.norm.weight': unsupported dtype I64");
    }
    SUBCASE("an FP8 weight without its scale") {
      testing::RewriteCheckpoint(
          Fp8(), broken, [](TensorToWrite& t) { return t.name != "model.layers.1.self_attn.o_proj.weight_scale_inv"; });
      check_error(StatusCode::kNotFound, "tensor 'model.layers.1.self_attn.o_proj.weight_scale_inv' is missing");
    }
    SUBCASE("a wrong scale grid") {
      testing::RewriteCheckpoint(Fp8(), broken, [](TensorToWrite& t) {
        if (t.name == "model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv") {  // [2,2] -> [1,2]
          t.shape = {1, 2};
          t.bytes.resize(8);
        }
        return true;
      });
      check_error(StatusCode::kInvalidArgument,
                  "tensor 'model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv': shape [1,2], expected [2,2]");
    }
    SUBCASE("an FP8 router gate") {
      testing::RewriteCheckpoint(Fp8(), broken, [](TensorToWrite& t) {
        if (t.name == "model.layers.1.mlp.gate.weight") {
          t.dtype_name = "F8_E4M3";
          t.bytes.resize(t.bytes.size() / 2);
        }
        return true;
      });
      check_error(StatusCode::kInvalidArgument, "tensor 'model.layers.1.mlp.gate.weight': dtype F8_E4M3");
    }
    SUBCASE("an FP8 norm") {
      testing::RewriteCheckpoint(Fp32(), broken, [](TensorToWrite& t) {
        if (t.name == "model.layers.0.post_attention_layernorm.weight") {
          t.dtype_name = "F8_E4M3";
          t.bytes.resize(t.bytes.size() / 4);
        }
        return true;
      });
      check_error(StatusCode::kInvalidArgument,
                  "tensor 'model.layers.0.post_attention_layernorm.weight': dtype F8_E4M3");
    }
    SUBCASE("no checkpoint at all") {
      fs::create_directories(broken);
      fs::copy_file(fs::path(Fp32()) / "config.json", fs::path(broken) / "config.json");
      check_error(StatusCode::kNotFound, "no model.safetensors");
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
