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
      for (int64_t index : TopIndices(members, std::min<int64_t>(2, group_size)))
        sum += members[static_cast<size_t>(index)];
      group_scores[static_cast<size_t>(g)] = sum;
    }
    std::vector<bool> kept(static_cast<size_t>(routing.n_groups), false);
    for (int64_t g : TopIndices(group_scores, routing.topk_groups)) kept[static_cast<size_t>(g)] = true;
    for (int64_t e = 0; e < n; ++e) {
      if (!kept[static_cast<size_t>(e / group_size)])
        biased[static_cast<size_t>(e)] = -std::numeric_limits<float>::infinity();
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

namespace ref {
namespace {

// The index of the largest value among [begin, end) not yet taken; the lower index on ties; -1
// when every one is taken.
int64_t ArgMax(const std::vector<float>& values, int64_t begin, int64_t end, const std::vector<bool>& taken) {
  int64_t best = -1;
  for (int64_t i = begin; i < end; ++i) {
    if (taken[static_cast<size_t>(i)]) continue;
    if (best < 0 || values[static_cast<size_t>(i)] > values[static_cast<size_t>(best)]) best = i;
  }
  return best;
}

}  // namespace

void RouteExperts(const float* logits, const float* bias, const MoeRouting& routing, int32_t* expert_ids,
                  float* weights) {
  const int64_t n = routing.n_experts, groups = routing.n_groups, group_size = n / groups;
  std::vector<float> scores(static_cast<size_t>(n)), biased(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    scores[static_cast<size_t>(e)] = Sigmoid(logits[e]);
    biased[static_cast<size_t>(e)] = scores[static_cast<size_t>(e)] + (bias != nullptr ? bias[e] : 0.0f);
  }
  // Experts of groups outside the top topk_groups (by the sum of their two best) are never chosen.
  std::vector<bool> excluded(static_cast<size_t>(n), false);
  if (groups > 1 && routing.topk_groups < groups) {
    std::vector<float> group_scores(static_cast<size_t>(groups));
    for (int64_t g = 0; g < groups; ++g) {
      std::vector<bool> taken(static_cast<size_t>(n), false);
      float sum = 0.0f;
      for (int64_t pick = 0; pick < std::min<int64_t>(2, group_size); ++pick) {
        const int64_t best = ArgMax(biased, g * group_size, (g + 1) * group_size, taken);
        taken[static_cast<size_t>(best)] = true;
        sum += biased[static_cast<size_t>(best)];
      }
      group_scores[static_cast<size_t>(g)] = sum;
    }
    std::vector<bool> kept(static_cast<size_t>(groups), false);
    for (int64_t pick = 0; pick < routing.topk_groups; ++pick) {
      const int64_t best = ArgMax(group_scores, 0, groups, kept);
      kept[static_cast<size_t>(best)] = true;
    }
    for (int64_t e = 0; e < n; ++e) excluded[static_cast<size_t>(e)] = !kept[static_cast<size_t>(e / group_size)];
  }
  // Excluded experts rank below every kept one (as -inf), still by index among themselves.
  std::vector<float> ranked = biased;
  for (int64_t e = 0; e < n; ++e) {
    if (excluded[static_cast<size_t>(e)]) ranked[static_cast<size_t>(e)] = -std::numeric_limits<float>::infinity();
  }
  std::vector<bool> taken(static_cast<size_t>(n), false);
  double chosen_sum = 0.0;
  for (int64_t k = 0; k < routing.top_k; ++k) {
    const int64_t best = ArgMax(ranked, 0, n, taken);
    taken[static_cast<size_t>(best)] = true;
    expert_ids[k] = static_cast<int32_t>(best);
    chosen_sum += scores[static_cast<size_t>(best)];
  }
  for (int64_t k = 0; k < routing.top_k; ++k) {
    const float s = scores[static_cast<size_t>(expert_ids[k])];
    weights[k] = (routing.normalize && chosen_sum > 0.0 ? static_cast<float>(s / chosen_sum) : s) * routing.route_scale;
  }
}

}  // namespace ref

}  // namespace envforge::kernels
