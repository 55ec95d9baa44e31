// Grouped sigmoid routing (DeepSeek-V3 noaux_tc).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/moe_routing.h"
#include "tests/kernels/kernel_test_util.h"

namespace envforge::kernels {
namespace {

// Logits whose sigmoid is exactly-ish p.
float Logit(float p) { return std::log(p / (1.0f - p)); }

TEST_SUITE("kernels.moe_routing") {
  TEST_CASE("group restriction changes the choice: a lone strong expert loses to a strong group") {
    // 8 experts in 4 groups of 2; keep 2 groups, choose 2 experts.
    // Group 0 = {0.95, 0.05} (score 1.0), group 1 = {0.6, 0.6} (1.2), group 2 = {0.55, 0.55} (1.1),
    // group 3 = {0.1, 0.1}. Ungrouped top-2 would be experts 0 and 2; grouped keeps groups 1 and 2.
    const std::vector<float> p = {0.95f, 0.05f, 0.6f, 0.6f, 0.55f, 0.55f, 0.1f, 0.1f};
    std::vector<float> logits;
    for (float v : p) logits.push_back(Logit(v));
    MoeRouting routing;
    routing.n_experts = 8;
    routing.n_groups = 4;
    routing.topk_groups = 2;
    routing.top_k = 2;
    routing.route_scale = 1.0f;
    int32_t ids[2];
    float weights[2];
    RouteExperts(logits.data(), nullptr, routing, ids, weights);
    CHECK(ids[0] == 2);  // ties toward the lower index
    CHECK(ids[1] == 3);
    routing.n_groups = 1;
    routing.topk_groups = 1;
    RouteExperts(logits.data(), nullptr, routing, ids, weights);
    CHECK(ids[0] == 0);
    CHECK(ids[1] == 2);
  }

  TEST_CASE("weights are the unbiased scores, normalised and scaled; the bias only selects") {
    const std::vector<float> p = {0.9f, 0.2f, 0.3f, 0.8f};
    std::vector<float> logits;
    for (float v : p) logits.push_back(Logit(v));
    const std::vector<float> bias = {0.0f, 1.0f, 0.0f, 0.0f};  // lifts expert 1 above expert 3
    MoeRouting routing;
    routing.n_experts = 4;
    routing.top_k = 2;
    routing.route_scale = 2.5f;
    int32_t ids[2];
    float weights[2];
    RouteExperts(logits.data(), bias.data(), routing, ids, weights);
    CHECK(ids[0] == 1);  // biased 1.2
    CHECK(ids[1] == 0);  // biased 0.9
    CHECK(weights[0] == doctest::Approx(0.2 / 1.1 * 2.5).epsilon(1e-5));
    CHECK(weights[1] == doctest::Approx(0.9 / 1.1 * 2.5).epsilon(1e-5));
    CHECK(weights[0] + weights[1] == doctest::Approx(2.5).epsilon(1e-5));
    routing.normalize = false;
    RouteExperts(logits.data(), bias.data(), routing, ids, weights);
    CHECK(weights[0] == doctest::Approx(0.2 * 2.5).epsilon(1e-5));
    CHECK(weights[1] == doctest::Approx(0.9 * 2.5).epsilon(1e-5));
  }

  TEST_CASE("RouteExperts equals ref::RouteExperts bit for bit over routing shapes, biases and ties") {
    struct Shape {
      int64_t experts, groups, topk_groups, top_k;
    };
    const Shape shapes[] = {{8, 1, 1, 2}, {8, 4, 2, 2}, {8, 4, 4, 3}, {64, 8, 3, 6}, {256, 8, 4, 8}, {6, 6, 2, 2}};
    for (const Shape& shape : shapes) {
      for (uint32_t seed = 0; seed < 20; ++seed) {
        CAPTURE(shape.experts);
        CAPTURE(shape.groups);
        CAPTURE(seed);
        std::vector<float> logits = testing::RandomFloats(static_cast<size_t>(shape.experts), seed + 100, 2.0f);
        const std::vector<float> bias = testing::RandomFloats(static_cast<size_t>(shape.experts), seed + 200, 0.1f);
        if (seed % 5 == 0) std::fill(logits.begin(), logits.end(), 0.25f);  // every expert tied
        if (seed % 5 == 1) {
          for (size_t e = 0; e < logits.size(); e += 2) logits[e + 1] = logits[e];  // tied pairs
        }
        MoeRouting routing;
        routing.n_experts = shape.experts;
        routing.n_groups = shape.groups;
        routing.topk_groups = shape.topk_groups;
        routing.top_k = shape.top_k;
        routing.route_scale = 2.5f;
        routing.normalize = seed % 2 == 0;
        const float* b = seed % 3 == 0 ? nullptr : bias.data();
        std::vector<int32_t> ids(static_cast<size_t>(shape.top_k)), ids_ref(ids.size());
        std::vector<float> weights(ids.size()), weights_ref(ids.size());
        RouteExperts(logits.data(), b, routing, ids.data(), weights.data());
        ref::RouteExperts(logits.data(), b, routing, ids_ref.data(), weights_ref.data());
        CHECK(ids == ids_ref);
        CHECK(weights == weights_ref);
      }
    }
  }

  TEST_CASE("the 671B routing shape picks 8 distinct experts from 4 groups") {
    std::vector<float> logits(256);
    for (size_t e = 0; e < logits.size(); ++e) logits[e] = std::sin(static_cast<float>(e) * 1.7f) * 3.0f;
    MoeRouting routing;
    routing.n_experts = 256;
    routing.n_groups = 8;
    routing.topk_groups = 4;
    routing.top_k = 8;
    routing.route_scale = 2.5f;
    int32_t ids[8];
    float weights[8];
    RouteExperts(logits.data(), nullptr, routing, ids, weights);
    std::vector<bool> group_used(8, false);
    float total = 0.0f;
    for (int i = 0; i < 8; ++i) {
      group_used[static_cast<size_t>(ids[i] / 32)] = true;
      total += weights[i];
      if (i > 0)
        CHECK(Sigmoid(logits[static_cast<size_t>(ids[i - 1])]) >= Sigmoid(logits[static_cast<size_t>(ids[i])]));
    }
    int groups = 0;
    for (bool used : group_used) groups += used ? 1 : 0;
    CHECK(groups <= 4);
    CHECK(total == doctest::Approx(2.5).epsilon(1e-5));
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
