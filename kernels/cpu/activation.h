// Element-wise and row-wise helpers of the FFN, the router and the sampler (fp32).
#pragma once

#include <cstdint>

namespace envforge::kernels {

// out[i] = silu(gate[i]) * up[i]  (SwiGLU), n elements; out may alias gate or up.
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
// In place: x <- softmax(x) over n values (max-subtracted). -inf entries get 0.
void SoftmaxInPlace(float* x, int64_t n);
// log(sum(exp(x))) over n values, stable.
double LogSumExp(const float* x, int64_t n);
inline float Sigmoid(float x);

namespace ref {
// The definitions above in long double, for tests: silu(g) = g / (1 + e^-g); softmax and
// log-sum-exp shifted by the maximum (an all -inf input: zeros, and -inf).
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
void SoftmaxInPlace(float* x, int64_t n);
double LogSumExp(const float* x, int64_t n);
}  // namespace ref

}  // namespace envforge::kernels

#include <cmath>
inline float envforge::kernels::Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
