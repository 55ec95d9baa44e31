// FP8 e4m3 group quantization on the GPU (act_quant.h): one warp per (row, group) work item,
// grid-stride over the items. The warp takes the group's amax with a butterfly max, computes the
// scale, then each lane encodes its elements. Every step is the bit recipe of the CPU twin
// (kernels/cpu/fp8_quant.cc with internal/fp8_round.h), so scales and codes are identical to the
// CPU's: the amax ignores NaN exactly as std::max does (a NaN never compares larger), the scale is
// an IEEE division by 448 (and the UE8M0 exponent trick), values are divided by the scale with an
// IEEE division and clamped to +-448, then rounded to the e4m3 grid with ties to even.
//
// WriteLatentRows reuses the group quantizer per 128-group of c_kv and adds one extra work item
// per token for the bf16 rope part. Its scale and rope fields are stored byte by byte: a cache
// row (kv_rank + kv_rank / 32 + 2 rope_dim bytes) need not start at a 4-byte boundary. A negative
// slot is padding and writes nothing; c_stride 0 means kv_rank and r_stride 0 means rope_dim.
#include "kernels/cuda/internal/cuda_compat.cuh"

#include "kernels/cuda/act_quant.h"

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/sparse_mla.h"

namespace envforge::kernels::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int64_t kMaxBlocks = 65535;
constexpr int64_t kLatentGroup = 128;  // the latent cache's quantization group (sparse_mla.h)

// Fp8GroupScale: max(amax, 1e-4) / 448, or its UE8M0 power of two 2^(exponent + (mantissa != 0)).
// The scale is at least 1e-4 / 448 (exponent >= -22), so the power of two is a normal float, or
// +inf for an infinite amax (exponent 128 gives the bits of +inf).
__device__ float GroupScale(float amax, bool pow2_scales) {
  const float scale = __fdiv_rn(amax < 1e-4f ? 1e-4f : amax, 448.0f);
  if (!pow2_scales) return scale;
  const uint32_t bits = __float_as_uint(scale);
  const int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127 + ((bits & 0x7fffffu) != 0 ? 1 : 0);
  return __uint_as_float(static_cast<uint32_t>(exponent + 127) << 23);
}

// The e4m3fn code of x / scale clamped to +-448, round to nearest even; NaN gives 0x7f.
// (ScaledAndClamped + RoundClampedToFp8 + EncodeExactFp8 of the CPU.)
__device__ uint8_t Fp8Code(float x, float scale) {
  float v = __fdiv_rn(x, scale);
  if (v == v) v = v < -448.0f ? -448.0f : (448.0f < v ? 448.0f : v);
  const uint32_t bits = __float_as_uint(v);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7f;
  if (magnitude < 0x3c800000u) {
    // Below 2^-6: the subnormal grid, multiples of 2^-9. Adding 2^14 leaves 2^-9 as the fp32
    // quantum, so the addition rounds to the grid (ties to even); subtracting it back is exact.
    const float rounded = __fsub_rn(__fadd_rn(__uint_as_float(magnitude), 0x1p14f), 0x1p14f);
    magnitude = __float_as_uint(rounded);
    // Rounding up to 2^-6 lands on the first normal code, encoded below.
    if (magnitude < 0x3c800000u) return sign | static_cast<uint8_t>(rounded * 512.0f);
  } else {
    // Keep 3 mantissa bits, ties to even; a carry bumps the exponent, as it should.
    magnitude += 0x7ffffu + ((magnitude >> 20) & 1u);
    magnitude &= 0xfff00000u;
  }
  const uint32_t exponent = (magnitude >> 23) - 127 + 7;
  const uint32_t mantissa = (magnitude >> 20) & 0x7u;
  return sign | static_cast<uint8_t>(exponent << 3 | mantissa);
}

// One warp quantizes in[0, count) into codes[0, count) and returns the group's scale (all lanes).
__device__ float QuantizeGroup(const float* in, int64_t count, bool pow2_scales, uint8_t* codes, int lane) {
  float amax = 0.0f;
  for (int64_t i = lane; i < count; i += 32) {
    const float a = fabsf(in[i]);
    amax = amax < a ? a : amax;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, amax, offset);
    amax = amax < other ? other : amax;
  }
  const float scale = GroupScale(amax, pow2_scales);
  for (int64_t i = lane; i < count; i += 32) codes[i] = Fp8Code(in[i], scale);
  return scale;
}

__device__ void StoreBytes(uint8_t* dst, uint32_t bits, int bytes) {
  for (int b = 0; b < bytes; ++b) dst[b] = static_cast<uint8_t>(bits >> (8 * b));  // little-endian
}

__device__ uint16_t ToBf16Bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

struct ActQuantParams {
  const float* x;
  int64_t rows, cols, x_stride, group, groups;
  bool pow2_scales;
  uint8_t* q;
  float* scales;
};

__global__ void act_quant_fp8_kernel(ActQuantParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t items = p.rows * p.groups;
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + warp; item < items;
       item += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t row = item / p.groups, g = item - row * p.groups;
    const int64_t begin = g * p.group;
    const int64_t count = p.cols - begin < p.group ? p.cols - begin : p.group;
    const float scale =
        QuantizeGroup(p.x + row * p.x_stride + begin, count, p.pow2_scales, p.q + row * p.cols + begin, lane);
    if (lane == 0) p.scales[item] = scale;  // item == row * groups + g
  }
}

struct LatentParams {
  const float* c_kv;
  const float* k_rope;
  int64_t c_stride, r_stride, tokens, kv_rank, rope_dim, row_bytes;
  bool pow2_scales;
  const int32_t* slots;
  uint8_t* cache;
};

// Work item (token, part): part < kv_rank / 128 quantizes that group, part == kv_rank / 128
// writes the rope values.
__global__ void write_latent_rows_kernel(LatentParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t groups = p.kv_rank / kLatentGroup;
  const int64_t items = p.tokens * (groups + 1);
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + warp; item < items;
       item += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t token = item / (groups + 1), part = item - token * (groups + 1);
    const int32_t slot = p.slots[token];
    if (slot < 0) continue;  // uniform across the warp
    uint8_t* row = p.cache + static_cast<int64_t>(slot) * p.row_bytes;
    if (part < groups) {
      const float scale = QuantizeGroup(p.c_kv + token * p.c_stride + part * kLatentGroup, kLatentGroup, p.pow2_scales,
                                        row + part * kLatentGroup, lane);
      if (lane == 0) StoreBytes(row + p.kv_rank + part * 4, __float_as_uint(scale), 4);
    } else {
      const float* rope = p.k_rope + token * p.r_stride;
      uint8_t* out = row + p.kv_rank + groups * 4;
      for (int64_t j = lane; j < p.rope_dim; j += 32) StoreBytes(out + 2 * j, ToBf16Bits(rope[j]), 2);
    }
  }
}

unsigned WarpBlocks(int64_t items) {
  const int64_t blocks = (items + kWarps - 1) / kWarps;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

std::string Str(int64_t v) { return std::to_string(v); }

}  // namespace

Status ActQuantFp8(const ActQuantArgs& args, cudaStream_t stream) {
  auto invalid = [](const std::string& what) { return InvalidArgumentError("ActQuantFp8: " + what); };
  if (args.rows < 0) return invalid("rows must be >= 0, got " + Str(args.rows));
  if (args.cols < 0) return invalid("cols must be >= 0, got " + Str(args.cols));
  if (args.group < 1) return invalid("group must be >= 1, got " + Str(args.group));
  const int64_t x_stride = args.x_stride == 0 ? args.cols : args.x_stride;
  if (x_stride < args.cols) return invalid("x_stride " + Str(args.x_stride) + " is below cols " + Str(args.cols));
  if (args.rows == 0 || args.cols == 0) return Status();
  if (args.x == nullptr) return invalid("x is null");
  if (args.q == nullptr) return invalid("q is null");
  if (args.scales == nullptr) return invalid("scales is null");
  const int64_t groups = (args.cols + args.group - 1) / args.group;
  ActQuantParams params{args.x, args.rows,        args.cols, x_stride,   args.group,
                        groups, args.pow2_scales, args.q,    args.scales};
  ENVFORGE_LAUNCH(WarpBlocks(args.rows * groups), kWarps * 32, 0, stream, act_quant_fp8_kernel)(params);
  return CheckCuda(cudaGetLastError(), "ActQuantFp8: act_quant_fp8_kernel launch");
}

Status WriteLatentRows(const WriteLatentRowsArgs& args, cudaStream_t stream) {
  auto invalid = [](const std::string& what) { return InvalidArgumentError("WriteLatentRows: " + what); };
  if (args.tokens < 0) return invalid("tokens must be >= 0, got " + Str(args.tokens));
  if (args.kv_rank <= 0 || args.kv_rank % kLatentGroup != 0) {
    return invalid("kv_rank must be a positive multiple of 128, got " + Str(args.kv_rank));
  }
  if (args.rope_dim < 0) return invalid("rope_dim must be >= 0, got " + Str(args.rope_dim));
  const int64_t c_stride = args.c_stride == 0 ? args.kv_rank : args.c_stride;
  const int64_t r_stride = args.r_stride == 0 ? args.rope_dim : args.r_stride;
  if (c_stride < args.kv_rank)
    return invalid("c_stride " + Str(args.c_stride) + " is below kv_rank " + Str(args.kv_rank));
  if (r_stride < args.rope_dim) {
    return invalid("r_stride " + Str(args.r_stride) + " is below rope_dim " + Str(args.rope_dim));
  }
  if (args.tokens == 0) return Status();
  if (args.c_kv == nullptr) return invalid("c_kv is null");
  if (args.k_rope == nullptr && args.rope_dim > 0) return invalid("k_rope is null");
  if (args.slots == nullptr) return invalid("slots is null");
  if (args.cache == nullptr) return invalid("cache is null");
  LatentParams params{args.c_kv,        args.k_rope,  c_stride,      r_stride,
                      args.tokens,      args.kv_rank, args.rope_dim, LatentRowBytes(args.kv_rank, args.rope_dim),
                      args.pow2_scales, args.slots,   args.cache};
  const int64_t items = args.tokens * (args.kv_rank / kLatentGroup + 1);
  ENVFORGE_LAUNCH(WarpBlocks(items), kWarps * 32, 0, stream, write_latent_rows_kernel)(params);
  return CheckCuda(cudaGetLastError(), "WriteLatentRows: write_latent_rows_kernel launch");
}

}  // namespace envforge::kernels::cuda
