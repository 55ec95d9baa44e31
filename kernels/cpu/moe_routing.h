// DeepSeek-V3 grouped sigmoid routing (dsa-engine.md 4.8), for one token:
//   s = sigmoid(logits) (n_experts values); b = s + bias (bias may be nullptr = 0);
//   groups: n_groups equal groups of b; group score = sum of its top-2 b values (top-1 when a
//   group has one expert); keep the top `topk_groups` groups; choose the top `top_k` experts by b
//   among the kept groups; weight_e = s_e / sum of the chosen s (when normalize) * route_scale.
// Ties are broken towards the lower index, so routing is deterministic. expert_ids and weights
// hold top_k entries, in descending b.
#pragma once

#include <cstdint>

namespace envforge::kernels {

struct MoeRouting {
  int64_t n_experts = 0;
  int64_t n_groups = 1;
  int64_t topk_groups = 1;
  int64_t top_k = 1;
  float route_scale = 1.0f;
  bool normalize = true;
};

void RouteExperts(const float* logits, const float* bias, const MoeRouting& routing, int32_t* expert_ids,
                  float* weights);

namespace ref {
// The rule above by repeated arg-max scans (no sorting), for tests: the same expert ids and
// weights bit for bit.
void RouteExperts(const float* logits, const float* bias, const MoeRouting& routing, int32_t* expert_ids,
                  float* weights);
}  // namespace ref

}  // namespace envforge::kernels
