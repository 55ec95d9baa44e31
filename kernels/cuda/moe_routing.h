// DeepSeek-V3 grouped sigmoid routing on the GPU, one warp/block per token, the twin of
// kernels/cpu/moe_routing.h RouteExperts (same tie rule: lower index first, so expert choices are
// identical to the CPU's for the same logits). logits [tokens, n_experts] fp32, bias [n_experts]
// (nullable); expert_ids / weights [tokens, top_k] in descending biased score.
// n_experts <= 1024, top_k <= 32, topk_groups <= n_groups (the CPU accepts more).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

struct RouteExpertsArgs {
  const float* logits = nullptr;
  const float* bias = nullptr;
  int64_t tokens = 0;
  MoeRouting routing;
  int32_t* expert_ids = nullptr;
  float* weights = nullptr;
};
Status RouteExperts(const RouteExpertsArgs& args, cudaStream_t stream);

}  // namespace envforge::kernels::cuda
