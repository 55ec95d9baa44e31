// ApplyRope on the GPU (rope.h): one block per token (grid-stride over tokens). The block first
// computes the token's rotary_dim / 2 cos/sin pairs into shared memory exactly as the CPU twin
// (kernels/cpu/rope.cc): angle = float(double(pos) * double(f)), then cos/sin in double rounded
// to float; then its threads rotate every (vector, pair) of the token. The rotation uses explicit
// round-to-nearest intrinsics so nvcc does not fuse a0*c - b0*s into an FMA the CPU never uses.
//
// Strides (in floats): vector_stride 0 means rotary_dim (vectors packed), token_stride 0 means
// count * vector_stride (tokens packed).
#include "kernels/cuda/internal/cuda_compat.cuh"

#include "kernels/cuda/rope.h"

#include <cuda_runtime_api.h>

#include <string>

namespace envforge::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPairs = 512;  // rotary_dim <= 1024: 4 KiB of shared cos/sin
constexpr int64_t kMaxBlocks = 65535;

struct RopeParams {
  float* x;
  int64_t tokens, count, token_stride, vector_stride;
  int pairs;
  const int32_t* positions;
  const float* freqs;
  bool interleaved;
};

__global__ void rope_f32_kernel(RopeParams p) {
  __shared__ float cos_values[kMaxPairs];
  __shared__ float sin_values[kMaxPairs];
  // Interleaved pairs (2i, 2i+1); half pairs (i, i + pairs).
  const int first_step = p.interleaved ? 2 : 1;
  const int partner_offset = p.interleaved ? 1 : p.pairs;
  const int64_t items = p.count * p.pairs;
  for (int64_t token = blockIdx.x; token < p.tokens; token += gridDim.x) {
    const double pos = static_cast<double>(p.positions[token]);
    for (int i = threadIdx.x; i < p.pairs; i += kThreads) {
      const float angle = static_cast<float>(pos * static_cast<double>(p.freqs[i]));
      cos_values[i] = static_cast<float>(cos(static_cast<double>(angle)));
      sin_values[i] = static_cast<float>(sin(static_cast<double>(angle)));
    }
    __syncthreads();
    float* token_base = p.x + token * p.token_stride;
    for (int64_t item = threadIdx.x; item < items; item += kThreads) {
      const int64_t vector = item / p.pairs;
      const int i = static_cast<int>(item - vector * p.pairs);
      float* vec = token_base + vector * p.vector_stride;
      float* a = vec + i * first_step;
      float* b = a + partner_offset;
      const float a0 = *a, b0 = *b, c = cos_values[i], s = sin_values[i];
      *a = __fsub_rn(__fmul_rn(a0, c), __fmul_rn(b0, s));
      *b = __fadd_rn(__fmul_rn(a0, s), __fmul_rn(b0, c));
    }
    __syncthreads();  // the next token overwrites cos/sin
  }
}

}  // namespace

Status ApplyRope(const RopeArgs& args, cudaStream_t stream) {
  auto invalid = [](const std::string& what) { return InvalidArgumentError("ApplyRope: " + what); };
  if (args.tokens < 0) return invalid("tokens must be >= 0, got " + std::to_string(args.tokens));
  if (args.count < 0) return invalid("count must be >= 0, got " + std::to_string(args.count));
  if (args.rotary_dim <= 0 || args.rotary_dim % 2 != 0 || args.rotary_dim > 2 * kMaxPairs) {
    return invalid("rotary_dim must be even and in [2, " + std::to_string(2 * kMaxPairs) + "], got " +
                   std::to_string(args.rotary_dim));
  }
  if (args.vector_stride < 0) return invalid("vector_stride must be >= 0, got " + std::to_string(args.vector_stride));
  if (args.token_stride < 0) return invalid("token_stride must be >= 0, got " + std::to_string(args.token_stride));
  const int64_t vector_stride = args.vector_stride == 0 ? args.rotary_dim : args.vector_stride;
  const int64_t token_stride = args.token_stride == 0 ? args.count * vector_stride : args.token_stride;
  if (args.count > 1 && vector_stride < args.rotary_dim) {
    // Overlapping vectors would be rotated by two threads at once.
    return invalid("vector_stride " + std::to_string(vector_stride) + " is below rotary_dim " +
                   std::to_string(args.rotary_dim));
  }
  if (args.tokens == 0 || args.count == 0) return Status();
  if (args.x == nullptr) return invalid("x is null");
  if (args.positions == nullptr) return invalid("positions is null");
  if (args.freqs == nullptr) return invalid("freqs is null");
  if (args.layout != RopeLayout::kInterleaved && args.layout != RopeLayout::kHalf) {
    return invalid("unknown layout " + std::to_string(static_cast<int>(args.layout)));
  }

  RopeParams params{args.x,         args.tokens,   args.count,
                    token_stride,   vector_stride, args.rotary_dim / 2,
                    args.positions, args.freqs,    args.layout == RopeLayout::kInterleaved};
  const auto blocks = static_cast<unsigned>(args.tokens < kMaxBlocks ? args.tokens : kMaxBlocks);
  ENVFORGE_LAUNCH(blocks, kThreads, 0, stream, rope_f32_kernel)(params);
  return CheckCuda(cudaGetLastError(), "ApplyRope: rope_f32_kernel launch");
}

}  // namespace envforge::kernels::cuda
