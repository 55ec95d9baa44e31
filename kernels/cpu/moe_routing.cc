// DeepSeek-V3 grouped sigmoid routing (moe_routing.h). n_experts is small (256), so plain
// selection loops are fast enough; ties go to the lower index everywhere.
#include "kernels/cpu/moe_routing.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu/activation.h"

namespace envforge::kernels {
namespace {

// Indices of the `count` largest values, in descending value order, ties to the lower index.
std::vector<int64_t> TopIndices(const std::vector<float>& values, int64_t count) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  count = std::min<int64_t>(count, static_cast<int64_t>(order.size()));
  std::partial_sort(order.begin(), order.begin() + count, order.end(), [&](int64_t a, int64_t b) {
    const float va = values[static_cast<size_t>(a)], vb = values[static_cast<size_t>(b)];
    return va > vb || (va == vb && a < b);
  });
  order.resize(static_cast<size_t>(count));
  return order;
}

}  // namespace

void RouteExperts(const float* logits, const float* bias, const MoeRouting& routing, int32_t* expert_ids,
                  float* weights) {
  const int64_t n = routing.n_experts;
  assert(routing.n_groups >= 1 && n % routing.n_groups == 0 && routing.top_k <= n);
  std::vector<float> scores(static_cast<size_t>(n)), biased(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    scores[static_cast<size_t>(e)] = Sigmoid(logits[e]);
    biased[static_cast<size_t>(e)] = scores[static_cast<size_t>(e)] + (bias != nullptr ? bias[e] : 0.0f);
  }

  const int64_t group_size = n / routing.n_groups;
  if (routing.n_groups > 1 && routing.topk_groups < routing.n_groups) {
    std::vector<float> group_scores(static_cast<size_t>(routing.n_groups));
    for (int64_t g = 0; g < routing.n_groups; ++g) {
      std::vector<float> members(biased.begin() + g * group_size, biased.begin() + (g + 1) * group_size);
      float sum = 0.0f;
      for (int64_t index : TopIndices(members, std::min<int64_t>(2, group_size))) sum += members[static_cast<size_t>(index)];
      group_scores[static_cast<size_t>(g)] = sum;
    }
    std::vector<bool> kept(static_cast<size_t>(routing.n_groups), false);
    for (int64_t g : TopIndices(group_scores, routing.topk_groups)) kept[static_cast<size_t>(g)] = true;
    for (int64_t e = 0; e < n; ++e) {
      if (!kept[static_cast<size_t>(e / group_size)]) biased[static_cast<size_t>(e)] = -std::numeric_limits<float>::infinity();
    }
  }

  const std::vector<int64_t> chosen = TopIndices(biased, routing.top_k);
  double chosen_sum = 0.0;
  for (int64_t e : chosen) chosen_sum += scores[static_cast<size_t>(e)];
  for (size_t i = 0; i < chosen.size(); ++i) {
    const float s = scores[static_cast<size_t>(chosen[i])];
    const float normalized = routing.normalize && chosen_sum > 0.0 ? static_cast<float>(s / chosen_sum) : s;
    expert_ids[i] = static_cast<int32_t>(chosen[i]);
    weights[i] = normalized * routing.route_scale;
  }
}

}  // namespace envforge::kernels
