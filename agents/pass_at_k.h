// pass@k and pass^k from n scored episodes of which c passed (agents-and-rollouts.md section 2).
//
// pass@k (Chen et al. 2021): the probability that at least one of k episodes drawn without
// replacement from the n passes, unbiased: 1 - C(n-c, k) / C(n, k), computed as the product
// 1 - prod_{i=n-c+1..n} (1 - k/i) so nothing overflows; 1 when n - c < k.
// pass^k (tau-bench): the probability that all k drawn episodes pass: C(c, k) / C(n, k).
// Both need 1 <= k <= n and 0 <= c <= n (InvalidArgument otherwise).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace envforge::agents {

Result<double> PassAtK(int64_t n, int64_t c, int64_t k);
Result<double> PassHatK(int64_t n, int64_t c, int64_t k);
// The k a report shows for n episodes: 1, 2, 4, ... (powers of two below n), then n itself.
std::vector<int64_t> PassAtKPoints(int64_t n);

}  // namespace envforge::agents
