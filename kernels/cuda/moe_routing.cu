// Grouped sigmoid routing on the GPU (moe_routing.h): one warp per token, kWarps tokens per block,
// each warp with its own slice of dynamic shared memory:
//   scores[n] (sigmoid), biased[n] (scores + bias, then -inf outside the kept groups),
//   group_scores[n_groups], chosen[32] (expert ids in selection order).
//
// Selection is top_k (or topk_groups) rounds of a warp argmax. Item i is owned by lane i % 32 as
// bit i / 32 of that lane's `taken` mask (n <= 1024, so 32 bits suffice). In a round each lane
// scans its untaken items in ascending index keeping the first strictly larger value (so the
// lower index wins ties within a lane), then a 5-step xor butterfly merges lanes under the total
// order "larger value first, then lower index": every lane ends with the same winner, which is
// exactly the next element of the CPU's partial_sort order (kernels/cpu/moe_routing.cc). -inf
// entries remain selectable (the CPU picks them, lowest index first, when fewer than top_k finite
// scores remain); only `taken` excludes an item. NaN logits are not supported (the CPU's sort is
// undefined for them too).
//
// The arithmetic is the CPU's: sigmoid 1 / (1 + exp(-x)) with exp in double rounded to float (the
// correctly rounded expf; glibc's expf is within 0.502 ulp, so a score can differ in its last bit
// only for rare inputs), group score (0 + top1) + top2 in float, the normaliser summed in double
// in selection order.
#include "kernels/cuda/internal/cuda_compat.cuh"

#include "kernels/cuda/moe_routing.h"

#include <cuda_runtime_api.h>

#include <climits>
#include <string>

namespace envforge::kernels::cuda {
namespace {

constexpr int kWarps = 2;
constexpr int kMaxExperts = 1024;
constexpr int kMaxTopK = 32;
constexpr int64_t kMaxBlocks = 65535;
constexpr int kNone = INT_MAX;  // "no candidate" in the argmax

struct RouteParams {
  const float* logits;
  const float* bias;
  int64_t tokens;
  int n_experts, n_groups, topk_groups, top_k;
  float route_scale;
  bool normalize;
  int32_t* expert_ids;
  float* weights;
};

constexpr int WarpFloats(int n_experts, int n_groups) { return 2 * n_experts + n_groups + kMaxTopK; }

// The index of the largest untaken values[i], i < count, ties to the lower index; the same in
// every lane. `taken` is this lane's mask (bit j: item lane + 32 j).
__device__ int WarpArgmax(const float* values, int count, uint32_t taken, int lane) {
  float best_value = -__int_as_float(0x7f800000);
  int best_index = kNone;
  for (int j = 0, i = lane; i < count; ++j, i += 32) {
    if ((taken >> j) & 1u) continue;
    const float v = values[i];
    if (best_index == kNone || v > best_value) {
      best_value = v;
      best_index = i;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other_value = __shfl_xor_sync(0xffffffffu, best_value, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
    const bool other_wins = other_index != kNone && (best_index == kNone || other_value > best_value ||
                                                     (other_value == best_value && other_index < best_index));
    if (other_wins) {
      best_value = other_value;
      best_index = other_index;
    }
  }
  return best_index;
}

__global__ void route_experts_kernel(RouteParams p) {
  ENVFORGE_DYNAMIC_SHARED(float, shared);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = p.n_experts;
  float* scores = shared + warp * WarpFloats(n, p.n_groups);
  float* biased = scores + n;
  float* group_scores = biased + n;
  int* chosen = reinterpret_cast<int*>(group_scores + p.n_groups);
  const float neg_inf = -__int_as_float(0x7f800000);

  for (int64_t token = static_cast<int64_t>(blockIdx.x) * kWarps + warp; token < p.tokens;
       token += static_cast<int64_t>(gridDim.x) * kWarps) {
    const float* logits = p.logits + token * n;
    for (int e = lane; e < n; e += 32) {
      const float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, static_cast<float>(exp(-static_cast<double>(logits[e])))));
      scores[e] = s;
      biased[e] = __fadd_rn(s, p.bias != nullptr ? p.bias[e] : 0.0f);
    }
    __syncwarp();

    if (p.n_groups > 1 && p.topk_groups < p.n_groups) {
      const int group_size = n / p.n_groups;
      for (int g = lane; g < p.n_groups; g += 32) {
        // The two largest values of the group (a repeated maximum counts twice).
        float top1 = neg_inf, top2 = neg_inf;
        for (int e = g * group_size; e < (g + 1) * group_size; ++e) {
          const float v = biased[e];
          if (v > top1) {
            top2 = top1;
            top1 = v;
          } else if (v > top2) {
            top2 = v;
          }
        }
        const float sum = __fadd_rn(0.0f, top1);
        group_scores[g] = group_size >= 2 ? __fadd_rn(sum, top2) : sum;
      }
      __syncwarp();
      uint32_t kept = 0;
      for (int round = 0; round < p.topk_groups; ++round) {
        const int winner = WarpArgmax(group_scores, p.n_groups, kept, lane);
        if (winner % 32 == lane) kept |= 1u << (winner / 32);
      }
      __syncwarp();  // every lane is done reading group_scores
      for (int g = lane, j = 0; g < p.n_groups; g += 32, ++j) group_scores[g] = ((kept >> j) & 1u) ? 1.0f : 0.0f;
      __syncwarp();
      for (int e = lane; e < n; e += 32) {
        if (group_scores[e / group_size] == 0.0f) biased[e] = neg_inf;
      }
      __syncwarp();
    }

    uint32_t taken = 0;
    for (int round = 0; round < p.top_k; ++round) {
      const int winner = WarpArgmax(biased, n, taken, lane);
      if (winner % 32 == lane) taken |= 1u << (winner / 32);
      if (lane == 0) chosen[round] = winner;
    }
    __syncwarp();

    double chosen_sum = 0.0;  // every lane, same order: no broadcast needed
    for (int round = 0; round < p.top_k; ++round) chosen_sum += scores[chosen[round]];
    if (lane < p.top_k) {
      const int expert = chosen[lane];
      const float s = scores[expert];
      const float normalized = p.normalize && chosen_sum > 0.0 ? static_cast<float>(s / chosen_sum) : s;
      p.expert_ids[token * p.top_k + lane] = expert;
      p.weights[token * p.top_k + lane] = __fmul_rn(normalized, p.route_scale);
    }
    __syncwarp();  // the next token overwrites this warp's arrays
  }
}

}  // namespace

Status RouteExperts(const RouteExpertsArgs& args, cudaStream_t stream) {
  auto invalid = [](const std::string& what) { return InvalidArgumentError("RouteExperts: " + what); };
  const MoeRouting& r = args.routing;
  if (args.tokens < 0) return invalid("tokens must be >= 0, got " + std::to_string(args.tokens));
  if (r.n_experts < 1 || r.n_experts > kMaxExperts) {
    return invalid("n_experts must be in [1, " + std::to_string(kMaxExperts) + "], got " + std::to_string(r.n_experts));
  }
  if (r.n_groups < 1 || r.n_experts % r.n_groups != 0) {
    return invalid("n_groups " + std::to_string(r.n_groups) + " does not divide n_experts " +
                   std::to_string(r.n_experts));
  }
  if (r.topk_groups < 1 || r.topk_groups > r.n_groups) {
    return invalid("topk_groups must be in [1, n_groups " + std::to_string(r.n_groups) + "], got " +
                   std::to_string(r.topk_groups));
  }
  const int64_t max_top_k = r.n_experts < kMaxTopK ? r.n_experts : kMaxTopK;
  if (r.top_k < 1 || r.top_k > max_top_k) {
    return invalid("top_k must be in [1, " + std::to_string(max_top_k) + "], got " + std::to_string(r.top_k));
  }
  if (args.tokens == 0) return Status();
  if (args.logits == nullptr) return invalid("logits is null");
  if (args.expert_ids == nullptr) return invalid("expert_ids is null");
  if (args.weights == nullptr) return invalid("weights is null");

  RouteParams params{args.logits,
                     args.bias,
                     args.tokens,
                     static_cast<int>(r.n_experts),
                     static_cast<int>(r.n_groups),
                     static_cast<int>(r.topk_groups),
                     static_cast<int>(r.top_k),
                     r.route_scale,
                     r.normalize,
                     args.expert_ids,
                     args.weights};
  const int64_t wanted_blocks = (args.tokens + kWarps - 1) / kWarps;
  const auto blocks = static_cast<unsigned>(wanted_blocks < kMaxBlocks ? wanted_blocks : kMaxBlocks);
  // At most 2 warps * (2 * 1024 + 1024 + 32) floats = 24.8 KiB: no opt-in needed.
  const size_t shared_bytes = sizeof(float) * kWarps * WarpFloats(params.n_experts, params.n_groups);
  ENVFORGE_LAUNCH(blocks, kWarps * 32, shared_bytes, stream, route_experts_kernel)(params);
  return CheckCuda(cudaGetLastError(), "RouteExperts: route_experts_kernel launch");
}

}  // namespace envforge::kernels::cuda
