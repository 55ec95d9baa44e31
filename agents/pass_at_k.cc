// pass@k and pass^k estimators.
#include "agents/pass_at_k.h"

#include <string>

namespace envforge::agents {
namespace {

Status CheckCounts(int64_t n, int64_t c, int64_t k) {
  if (n < 1) return InvalidArgumentError("pass@k needs n >= 1 episodes, got " + std::to_string(n));
  if (c < 0 || c > n)
    return InvalidArgumentError("pass@k needs 0 <= c <= n, got c = " + std::to_string(c) +
                                ", n = " + std::to_string(n));
  if (k < 1 || k > n)
    return InvalidArgumentError("pass@k needs 1 <= k <= n, got k = " + std::to_string(k) +
                                ", n = " + std::to_string(n));
  return Status::Ok();
}

}  // namespace

Result<double> PassAtK(int64_t n, int64_t c, int64_t k) {
  ENVFORGE_RETURN_IF_ERROR(CheckCounts(n, c, k));
  if (n - c < k) return 1.0;
  double all_fail = 1.0;
  for (int64_t i = n - c + 1; i <= n; ++i) all_fail *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  return 1.0 - all_fail;
}

Result<double> PassHatK(int64_t n, int64_t c, int64_t k) {
  ENVFORGE_RETURN_IF_ERROR(CheckCounts(n, c, k));
  if (c < k) return 0.0;
  // C(c, k) / C(n, k) = prod_{i=0..k-1} (c - i) / (n - i)
  double ratio = 1.0;
  for (int64_t i = 0; i < k; ++i) ratio *= static_cast<double>(c - i) / static_cast<double>(n - i);
  return ratio;
}

std::vector<int64_t> PassAtKPoints(int64_t n) {
  std::vector<int64_t> points;
  for (int64_t k = 1; k < n; k *= 2) points.push_back(k);
  if (n >= 1) points.push_back(n);
  return points;
}

}  // namespace envforge::agents
