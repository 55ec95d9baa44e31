// Fused Walsh-Hadamard rotation + FP8 quantization (hadamard_quant.h).
//
// One warp per vector. Lane l holds elements l, l + 32, l + 64, l + 96 (dim / 32 of them), so the
// loads and the code stores of a warp are contiguous, and the butterfly stage with stride `half`
// pairs element e with e ^ half: a shuffle with lane l ^ half for half < 32, another register of
// the same lane for half >= 32. The stages run in the CPU's order (half = 1, 2, 4, ...), each
// output being a single fp32 a + b or a - b of the same two values, and the final product with
// `scale` is a separate multiply, so y is bit-identical to kernels/cpu HadamardTransform. The
// amax, the scale (Fp8GroupScale: fp32 division by 448, UE8M0 by the exponent bit trick), the
// IEEE division y / s, the clamp and CUDA's satfinite round-to-nearest-even e4m3 conversion (equal
// to the CPU encoder, tests/kernels/cuda_device_test.cc) then match ActQuantFp8 with group = dim.
// The explicit __fadd_rn / __fsub_rn / __fmul_rn / __fdiv_rn keep the compiler from contracting
// or approximating any of these steps.
#include "kernels/cuda/internal/cuda_compat.cuh"

#include "kernels/cuda/hadamard_quant.h"

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace envforge::kernels::cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;

template <int kDim>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    hadamard_quant_fp8_kernel(const float* __restrict__ x, int64_t rows, float scale, bool pow2_scales,
                              uint8_t* __restrict__ q, float* __restrict__ scales) {
  constexpr int kPerLane = kDim / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // whole warps leave together, so the shuffles below stay full-warp

  const float* in = x + row * kDim;
  float v[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) v[i] = in[i * kWarpSize + lane];

#pragma unroll
  for (int half = 1; half < kWarpSize && half < kDim; half *= 2) {
    const bool upper = (lane & half) != 0;  // this lane holds the e + half side of each pair
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const float other = __shfl_xor_sync(0xffffffffu, v[i], half);
      // Pair (a, b) = (v[e], v[e + half]) becomes (a + b, a - b).
      v[i] = upper ? __fsub_rn(other, v[i]) : __fadd_rn(v[i], other);
    }
  }
#pragma unroll
  for (int half = 1; half < kPerLane; half *= 2) {  // strides 32, 64: within the lane
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if ((i & half) == 0) {
        const float a = v[i], b = v[i + half];
        v[i] = __fadd_rn(a, b);
        v[i + half] = __fsub_rn(a, b);
      }
    }
  }

  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    v[i] = __fmul_rn(v[i], scale);
    amax = fmaxf(amax, fabsf(v[i]));  // fmaxf drops NaN, as std::max(amax, NaN) keeps amax on the CPU
  }
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  }

  float s = __fdiv_rn(fmaxf(amax, 1e-4f), 448.0f);
  if (pow2_scales) {
    // 2^ceil(log2(s)): the exponent, plus one when any mantissa bit is set (s is normal: >= 2^-23).
    const uint32_t bits = __float_as_uint(s);
    const int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127 + ((bits & 0x7fffffu) != 0 ? 1 : 0);
    s = ldexpf(1.0f, exponent);
  }
  if (lane == 0) scales[row] = s;

  uint8_t* out = q + row * kDim;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const float y = __fdiv_rn(v[i], s);
    uint8_t code;
    if (y != y) {
      code = 0x7f;  // NaN: the CPU encoder's code
    } else {
      code = static_cast<uint8_t>(__nv_cvt_float_to_fp8(fminf(fmaxf(y, -448.0f), 448.0f), __NV_SATFINITE, __NV_E4M3));
    }
    out[i * kWarpSize + lane] = code;
  }
}

}  // namespace

Status HadamardQuantFp8(const HadamardQuantArgs& args, cudaStream_t stream) {
  if (args.rows < 0) return InvalidArgumentError("rows must be >= 0, got " + std::to_string(args.rows));
  if (args.dim != 32 && args.dim != 64 && args.dim != 128) {
    return InvalidArgumentError("dim must be 32, 64 or 128, got " + std::to_string(args.dim));
  }
  if (args.rows == 0) return Status();
  if (args.x == nullptr) return InvalidArgumentError("x is null");
  if (args.q == nullptr) return InvalidArgumentError("q is null");
  if (args.scales == nullptr) return InvalidArgumentError("scales is null");
  if (reinterpret_cast<uintptr_t>(args.x) % alignof(float) != 0) return InvalidArgumentError("x is not 4-byte aligned");
  if (reinterpret_cast<uintptr_t>(args.scales) % alignof(float) != 0) {
    return InvalidArgumentError("scales is not 4-byte aligned");
  }
  const int64_t blocks = (args.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7fffffff) return InvalidArgumentError("rows exceeds the grid limit: " + std::to_string(args.rows));
  const dim3 grid(static_cast<unsigned>(blocks));
  const dim3 block(kWarpsPerBlock * kWarpSize);
  switch (args.dim) {
    case 32:
      ENVFORGE_LAUNCH(grid, block, 0, stream, hadamard_quant_fp8_kernel<32>)
      (args.x, args.rows, args.scale, args.pow2_scales, args.q, args.scales);
      break;
    case 64:
      ENVFORGE_LAUNCH(grid, block, 0, stream, hadamard_quant_fp8_kernel<64>)
      (args.x, args.rows, args.scale, args.pow2_scales, args.q, args.scales);
      break;
    default:
      ENVFORGE_LAUNCH(grid, block, 0, stream, hadamard_quant_fp8_kernel<128>)
      (args.x, args.rows, args.scale, args.pow2_scales, args.q, args.scales);
      break;
  }
  return CheckCuda(cudaGetLastError(), "hadamard_quant_fp8_kernel launch");
}

}  // namespace envforge::kernels::cuda
