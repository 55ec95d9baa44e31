// Binding checkpoint tensors to the model's weight structs (see model_weights.h).
#include "inference/model_weights.h"
#include "base/int_math.h"

#include <cstring>

namespace envforge::inference {
namespace {

constexpr int64_t kFp8Block = 128;

std::string LayerPrefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

float ElementToFloat(kernels::DType dtype, const uint8_t* data, int64_t index) {
  switch (dtype) {
    case kernels::DType::kF32: {
      float value;
      std::memcpy(&value, data + 4 * index, 4);
      return value;
    }
    case kernels::DType::kBF16:
    case kernels::DType::kF16: {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * index, 2);
      return dtype == kernels::DType::kBF16 ? kernels::Bf16ToFloat(bits) : kernels::HalfToFloat(bits);
    }
    case kernels::DType::kF8E4M3: return kernels::Fp8E4M3ToFloat(data[index]);
  }
  return 0.0f;
}

// Binds tensors by name, checking them, and owns the copies it has to make until Load hands them
// to the ModelWeights.
class WeightBinder {
 public:
  WeightBinder(const Checkpoint& checkpoint, const ModelConfig& config) : checkpoint_(checkpoint), config_(config) {}

  // A [rows, cols] matrix. FP8 needs "<name>_scale_inv"; allow_fp8 false for the matrices the
  // reference keeps in higher precision (router gate, indexer weights_proj, embedding, head).
  Result<kernels::WeightMatrix> Matrix(const std::string& name, int64_t rows, int64_t cols, bool allow_fp8 = true) {
    ENVFORGE_ASSIGN_OR_RETURN(const TensorInfo* tensor, checkpoint_.Require(name, {rows, cols}));
    kernels::WeightMatrix matrix;
    matrix.dtype = tensor->dtype;
    matrix.rows = rows;
    matrix.cols = cols;
    matrix.data = Aligned(*tensor);
    matrix.pow2_activation_scales = config_.ue8m0_scales;
    Count(*tensor, true);
    if (tensor->dtype != kernels::DType::kF8E4M3) return matrix;
    if (!allow_fp8) {
      return InvalidArgumentError("tensor '" + name + "': dtype F8_E4M3, expected F32|BF16|F16 (kept unquantized)");
    }
    std::string scale_name = name + "_scale_inv";
    if (checkpoint_.Find(scale_name) == nullptr) {
      return NotFoundError("tensor '" + scale_name + "' is missing (the FP8 weight '" + name + "' needs it)");
    }
    ENVFORGE_ASSIGN_OR_RETURN(const TensorInfo* scale,
                              checkpoint_.Require(scale_name, {CeilDiv(rows, kFp8Block), CeilDiv(cols, kFp8Block)}));
    if (scale->dtype != kernels::DType::kF32) {
      return InvalidArgumentError("tensor '" + scale_name + "': dtype " + scale->dtype_name + ", expected F32");
    }
    matrix.block_scale_inv = static_cast<const float*>(Aligned(*scale));
    Count(*scale, false);
    return matrix;
  }

  // A 1-D tensor widened to an owned fp32 copy.
  Result<const float*> Vector(const std::string& name, int64_t size) {
    ENVFORGE_ASSIGN_OR_RETURN(const TensorInfo* tensor, checkpoint_.Require(name, {size}));
    if (tensor->dtype == kernels::DType::kF8E4M3) {
      return InvalidArgumentError("tensor '" + name + "': dtype F8_E4M3, expected F32|BF16|F16");
    }
    std::vector<float>& values = owned_.emplace_back(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) values[i] = ElementToFloat(tensor->dtype, tensor->data, i);
    Count(*tensor, true);
    return values.data();
  }

  // The matrix dequantized into an owned fp32 copy (row-major).
  const float* Dequantized(const kernels::WeightMatrix& matrix) {
    std::vector<float>& values = owned_.emplace_back(static_cast<size_t>(matrix.rows * matrix.cols));
    const uint8_t* data = static_cast<const uint8_t*>(matrix.data);
    const int64_t scale_cols = CeilDiv(matrix.cols, kFp8Block);
    for (int64_t row = 0; row < matrix.rows; ++row) {
      for (int64_t col = 0; col < matrix.cols; ++col) {
        float value = ElementToFloat(matrix.dtype, data, row * matrix.cols + col);
        if (matrix.dtype == kernels::DType::kF8E4M3) {
          value *= matrix.block_scale_inv[(row / kFp8Block) * scale_cols + col / kFp8Block];
        }
        values[row * matrix.cols + col] = value;
      }
    }
    return values.data();
  }

  Result<MlpWeights> Mlp(const std::string& prefix, int64_t inter) {
    const int64_t hidden = config_.hidden_size;
    MlpWeights mlp;
    ENVFORGE_ASSIGN_OR_RETURN(mlp.w1, Matrix(prefix + "gate_proj.weight", inter, hidden));
    ENVFORGE_ASSIGN_OR_RETURN(mlp.w3, Matrix(prefix + "up_proj.weight", inter, hidden));
    ENVFORGE_ASSIGN_OR_RETURN(mlp.w2, Matrix(prefix + "down_proj.weight", hidden, inter));
    return mlp;
  }

  Result<AttentionWeights> Attention(const std::string& prefix) {
    const ModelConfig& c = config_;
    const int64_t heads = c.num_attention_heads;
    AttentionWeights attn;
    ENVFORGE_ASSIGN_OR_RETURN(attn.wq_a, Matrix(prefix + "q_a_proj.weight", c.q_lora_rank, c.hidden_size));
    ENVFORGE_ASSIGN_OR_RETURN(attn.q_norm, Vector(prefix + "q_a_layernorm.weight", c.q_lora_rank));
    ENVFORGE_ASSIGN_OR_RETURN(attn.wq_b, Matrix(prefix + "q_b_proj.weight", heads * c.qk_head_dim(), c.q_lora_rank));
    ENVFORGE_ASSIGN_OR_RETURN(
        attn.wkv_a, Matrix(prefix + "kv_a_proj_with_mqa.weight", c.kv_lora_rank + c.qk_rope_head_dim, c.hidden_size));
    ENVFORGE_ASSIGN_OR_RETURN(attn.kv_norm, Vector(prefix + "kv_a_layernorm.weight", c.kv_lora_rank));
    ENVFORGE_ASSIGN_OR_RETURN(
        attn.wkv_b, Matrix(prefix + "kv_b_proj.weight", heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank));
    attn.wkv_b_f32 = Dequantized(attn.wkv_b);
    ENVFORGE_ASSIGN_OR_RETURN(attn.wo, Matrix(prefix + "o_proj.weight", c.hidden_size, heads * c.v_head_dim));
    attn.has_indexer = c.has_indexer();
    if (!attn.has_indexer) return attn;
    const std::string indexer = prefix + "indexer.";
    IndexerWeights& idx = attn.indexer;
    ENVFORGE_ASSIGN_OR_RETURN(idx.wq_b,
                              Matrix(indexer + "wq_b.weight", c.index_n_heads * c.index_head_dim, c.q_lora_rank));
    ENVFORGE_ASSIGN_OR_RETURN(idx.wk, Matrix(indexer + "wk.weight", c.index_head_dim, c.hidden_size));
    ENVFORGE_ASSIGN_OR_RETURN(idx.k_norm_weight, Vector(indexer + "k_norm.weight", c.index_head_dim));
    ENVFORGE_ASSIGN_OR_RETURN(idx.k_norm_bias, Vector(indexer + "k_norm.bias", c.index_head_dim));
    ENVFORGE_ASSIGN_OR_RETURN(idx.weights_proj, Matrix(indexer + "weights_proj.weight", c.index_n_heads, c.hidden_size,
                                                       /*allow_fp8=*/false));
    return attn;
  }

  Result<MoeWeights> Moe(const std::string& prefix) {
    const ModelConfig& c = config_;
    MoeWeights moe;
    ENVFORGE_ASSIGN_OR_RETURN(moe.gate, Matrix(prefix + "gate.weight", c.n_routed_experts, c.hidden_size,
                                               /*allow_fp8=*/false));
    ENVFORGE_ASSIGN_OR_RETURN(moe.gate_bias, Vector(prefix + "gate.e_score_correction_bias", c.n_routed_experts));
    moe.experts.reserve(static_cast<size_t>(c.n_routed_experts));
    for (int64_t expert = 0; expert < c.n_routed_experts; ++expert) {
      ENVFORGE_ASSIGN_OR_RETURN(MlpWeights mlp,
                                Mlp(prefix + "experts." + std::to_string(expert) + ".", c.moe_intermediate_size));
      moe.experts.push_back(mlp);
    }
    moe.has_shared = c.n_shared_experts > 0;
    if (moe.has_shared) {
      ENVFORGE_ASSIGN_OR_RETURN(moe.shared,
                                Mlp(prefix + "shared_experts.", c.n_shared_experts * c.moe_intermediate_size));
    }
    return moe;
  }

  std::vector<std::vector<float>> TakeOwned() { return std::move(owned_); }
  size_t parameter_count() const { return parameter_count_; }
  size_t weight_bytes() const { return weight_bytes_; }

 private:
  // The tensor's data, or an owned aligned copy when the file placed it off its element alignment
  // (safetensors packs tensors back to back, so an odd-sized FP8 tensor can misalign the next).
  const void* Aligned(const TensorInfo& tensor) {
    size_t alignment = static_cast<size_t>(kernels::DTypeSize(tensor.dtype));
    if (reinterpret_cast<uintptr_t>(tensor.data) % alignment == 0) return tensor.data;
    std::vector<float>& copy = owned_.emplace_back((tensor.nbytes + 3) / 4);
    std::memcpy(copy.data(), tensor.data, tensor.nbytes);
    return copy.data();
  }

  // Scale grids are quantization metadata: they count as bytes, not parameters.
  void Count(const TensorInfo& tensor, bool is_parameter) {
    weight_bytes_ += tensor.nbytes;
    if (is_parameter) parameter_count_ += tensor.nbytes / static_cast<size_t>(kernels::DTypeSize(tensor.dtype));
  }

  const Checkpoint& checkpoint_;
  const ModelConfig& config_;
  std::vector<std::vector<float>> owned_;
  size_t parameter_count_ = 0;
  size_t weight_bytes_ = 0;
};

}  // namespace

Result<std::unique_ptr<ModelWeights>> ModelWeights::Load(const std::string& dir, const ModelConfig& config) {
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(dir));
  std::unique_ptr<ModelWeights> weights(new ModelWeights());
  WeightBinder bind(*checkpoint, config);
  ENVFORGE_ASSIGN_OR_RETURN(weights->embed, bind.Matrix("model.embed_tokens.weight", config.vocab_size,
                                                        config.hidden_size, /*allow_fp8=*/false));
  // Layers past num_hidden_layers (the MTP module) are left unbound.
  weights->layers.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t layer_idx = 0; layer_idx < config.num_hidden_layers; ++layer_idx) {
    const std::string prefix = LayerPrefix(layer_idx);
    LayerWeights& layer = weights->layers[layer_idx];
    ENVFORGE_ASSIGN_OR_RETURN(layer.attn_norm, bind.Vector(prefix + "input_layernorm.weight", config.hidden_size));
    ENVFORGE_ASSIGN_OR_RETURN(layer.ffn_norm,
                              bind.Vector(prefix + "post_attention_layernorm.weight", config.hidden_size));
    ENVFORGE_ASSIGN_OR_RETURN(layer.attn, bind.Attention(prefix + "self_attn."));
    layer.is_moe = config.is_moe_layer(layer_idx);
    if (layer.is_moe) {
      ENVFORGE_ASSIGN_OR_RETURN(layer.moe, bind.Moe(prefix + "mlp."));
    } else {
      ENVFORGE_ASSIGN_OR_RETURN(layer.dense, bind.Mlp(prefix + "mlp.", config.intermediate_size));
    }
  }
  ENVFORGE_ASSIGN_OR_RETURN(weights->final_norm, bind.Vector("model.norm.weight", config.hidden_size));
  ENVFORGE_ASSIGN_OR_RETURN(weights->head, bind.Matrix("lm_head.weight", config.vocab_size, config.hidden_size,
                                                       /*allow_fp8=*/false));
  weights->owned_ = bind.TakeOwned();
  weights->parameter_count_ = bind.parameter_count();
  weights->weight_bytes_ = bind.weight_bytes();
  weights->checkpoint_ = std::move(checkpoint);
  return weights;
}

}  // namespace envforge::inference
