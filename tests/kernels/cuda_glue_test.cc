// The GPU engine's glue ops (kernels/cuda/{norm,rope,elementwise,moe_routing,act_quant}.h) against
// their CPU twins. Host cases (argument validation, no-op shapes) run everywhere; the GPU cases
// skip without a device and compare with kernels/cpu on odd shapes (rows 1, 3, 130; widths 128,
// 512, 7168 and ones not a multiple of 128; strides above the width) and adversarial values
// (ties, -inf, NaN, saturating exponentials, rounding midpoints). Each case states its tolerance
// and why it holds.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/float_formats.h"
#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/act_quant.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/moe_routing.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/sparse_mla.h"
#include "tests/kernels/cuda_test_util.h"

namespace envforge::kernels::cuda {
namespace {

using testing::DeviceZeros;
using testing::FromDevice;
using testing::ToDevice;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Normal(size_t count, uint32_t seed, float stddev = 1.0f, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(mean, stddev);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

uint32_t Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void CheckInvalid(const Status& status, std::string_view needle) {
  CHECK_MESSAGE(status.code() == StatusCode::kInvalidArgument, status.ToString());
  CHECK_MESSAGE(status.message().find(needle) != std::string::npos,
                "'" << status.message() << "' should name '" << needle << "'");
}

void RequireOk(const Status& status) { REQUIRE_MESSAGE(status.ok(), status.ToString()); }

Stream MakeStream() {
  Result<Stream> stream = Stream::Create();
  REQUIRE_MESSAGE(stream.ok(), stream.status().message());
  return std::move(stream).value();
}

// Every element: |actual - expected| <= rel * |expected| + abs_tol, NaN where NaN is expected.
// Reports the first few failures and checks the count of failures is zero.
void CheckClose(const std::vector<float>& actual, const std::vector<float>& expected, double rel, double abs_tol,
                const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  size_t failures = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const bool ok =
        std::isnan(e) ? std::isnan(a) : (std::isfinite(e) ? std::fabs(a - e) <= rel * std::fabs(e) + abs_tol : a == e);
    if (!ok && ++failures <= 5) MESSAGE(what << ": element " << i << " gpu " << a << " cpu " << e);
  }
  CHECK_MESSAGE(failures == 0, what << ": " << failures << " of " << actual.size() << " elements out of tolerance");
}

std::vector<float> WidenBf16(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = Bf16ToFloat(bits[i]);
  return out;
}

// The rows [0, rows) x [0, cols) of a strided host matrix, packed.
std::vector<float> Packed(const std::vector<float>& strided, int64_t rows, int64_t cols, int64_t stride) {
  std::vector<float> packed(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      packed[static_cast<size_t>(r * cols + c)] = strided[static_cast<size_t>(r * stride + c)];
  }
  return packed;
}

// =============================================================================================
// Host-side cases: argument validation before any CUDA call (these run without a GPU).

TEST_SUITE("kernels.cuda.glue.validation") {
  TEST_CASE("RmsNorm and LayerNorm refuse bad shapes, strides and missing pointers by name") {
    float fake[8] = {};
    NormArgs good;
    good.x = fake;
    good.rows = 2;
    good.dim = 8;
    good.weight = fake;
    good.bias = fake;
    good.out_f32 = fake + 1;  // not aliasing x: validation passes everything but the field under test

    NormArgs a = good;
    a.rows = -1;
    CheckInvalid(RmsNorm(a, nullptr), "rows");
    a = good;
    a.dim = 0;
    CheckInvalid(RmsNorm(a, nullptr), "dim");
    a = good;
    a.x_stride = 5;
    CheckInvalid(LayerNorm(a, nullptr), "x_stride");
    a = good;
    a.out_stride = 7;
    CheckInvalid(RmsNorm(a, nullptr), "out_stride");
    a = good;
    a.x = nullptr;
    CheckInvalid(RmsNorm(a, nullptr), "x is null");
    a = good;
    a.weight = nullptr;
    CheckInvalid(LayerNorm(a, nullptr), "weight");
    a = good;
    a.bias = nullptr;
    CheckInvalid(LayerNorm(a, nullptr), "bias");
    a = good;
    a.out_f32 = nullptr;
    CheckInvalid(RmsNorm(a, nullptr), "out_f32 and out_bf16");
    a = good;
    a.out_f32 = fake;
    a.x_stride = 8;
    a.out_stride = 9;
    CheckInvalid(RmsNorm(a, nullptr), "aliases x");

    // No rows: nothing to do, no pointer is looked at and no CUDA call is made.
    NormArgs empty;
    CHECK(RmsNorm(empty, nullptr).ok());
    CHECK(LayerNorm(empty, nullptr).ok());
  }

  TEST_CASE("ApplyRope refuses odd or oversized rotary_dim, overlapping vectors and missing pointers") {
    float fake[4] = {};
    int32_t position = 0;
    RopeArgs good;
    good.x = fake;
    good.tokens = 2;
    good.count = 3;
    good.rotary_dim = 64;
    good.positions = &position;
    good.freqs = fake;

    RopeArgs a = good;
    a.rotary_dim = 63;
    CheckInvalid(ApplyRope(a, nullptr), "rotary_dim");
    a.rotary_dim = 0;
    CheckInvalid(ApplyRope(a, nullptr), "rotary_dim");
    a.rotary_dim = 2048;
    CheckInvalid(ApplyRope(a, nullptr), "rotary_dim");
    a = good;
    a.vector_stride = 32;
    CheckInvalid(ApplyRope(a, nullptr), "vector_stride");
    a = good;
    a.token_stride = -1;
    CheckInvalid(ApplyRope(a, nullptr), "token_stride");
    a = good;
    a.tokens = -3;
    CheckInvalid(ApplyRope(a, nullptr), "tokens");
    a = good;
    a.positions = nullptr;
    CheckInvalid(ApplyRope(a, nullptr), "positions");
    a = good;
    a.freqs = nullptr;
    CheckInvalid(ApplyRope(a, nullptr), "freqs");
    a = good;
    a.x = nullptr;
    CheckInvalid(ApplyRope(a, nullptr), "x is null");
    a = good;
    a.layout = static_cast<RopeLayout>(7);
    CheckInvalid(ApplyRope(a, nullptr), "layout");
    RopeArgs empty;
    empty.tokens = 0;
    CHECK(ApplyRope(empty, nullptr).ok());
  }

  TEST_CASE("SiluMul, AddInPlace, ScaleRowsAdd and the conversions refuse bad arguments by name") {
    float fake[4] = {};
    uint16_t fake16[4] = {};
    int32_t fake_rows[2] = {};
    SiluMulArgs good;
    good.gate = fake;
    good.up = fake;
    good.rows = 2;
    good.cols = 4;
    good.out_f32 = fake;

    SiluMulArgs a = good;
    a.out_bf16 = fake16;
    CheckInvalid(SiluMul(a, nullptr), "exactly one of out_f32 and out_bf16");
    a = good;
    a.out_f32 = nullptr;
    CheckInvalid(SiluMul(a, nullptr), "exactly one of out_f32 and out_bf16");
    a = good;
    a.in_stride = 3;
    CheckInvalid(SiluMul(a, nullptr), "in_stride");
    a = good;
    a.out_stride = 2;
    CheckInvalid(SiluMul(a, nullptr), "out_stride");
    a = good;
    a.gate = nullptr;
    CheckInvalid(SiluMul(a, nullptr), "gate");
    a = good;
    a.up = nullptr;
    CheckInvalid(SiluMul(a, nullptr), "up");
    a = good;
    a.cols = -1;
    CheckInvalid(SiluMul(a, nullptr), "cols");

    CheckInvalid(AddInPlace(fake, fake, -1, 1.0f, nullptr), "n must be >= 0");
    CheckInvalid(AddInPlace(nullptr, fake, 4, 1.0f, nullptr), "y is null");
    CheckInvalid(AddInPlace(fake, nullptr, 4, 1.0f, nullptr), "x is null");
    CHECK(AddInPlace(nullptr, nullptr, 0, 1.0f, nullptr).ok());

    CheckInvalid(ScaleRowsAdd(fake, fake, fake, fake_rows, -2, 4, nullptr), "rows");
    CheckInvalid(ScaleRowsAdd(fake, fake, fake, fake_rows, 2, -4, nullptr), "cols");
    CheckInvalid(ScaleRowsAdd(fake, fake, fake, nullptr, 2, 4, nullptr), "row_of");
    CheckInvalid(ScaleRowsAdd(fake, fake, nullptr, fake_rows, 2, 4, nullptr), "row_scale");
    CheckInvalid(ScaleRowsAdd(nullptr, fake, fake, fake_rows, 2, 4, nullptr), "y is null");

    CheckInvalid(ToBf16(fake, -1, fake16, nullptr), "n must be >= 0");
    CheckInvalid(ToBf16(fake, 4, nullptr, nullptr), "out is null");
    CheckInvalid(Bf16ToF32(nullptr, 4, fake, nullptr), "x is null");
    CHECK(ToBf16(nullptr, 0, nullptr, nullptr).ok());
  }

  TEST_CASE("GatherRows refuses missing fp8 scales, misaligned tables, unknown dtypes and empty tables") {
    alignas(16) unsigned char table[64] = {};
    int32_t ids[2] = {};
    float out[4] = {};
    GatherRowsArgs good;
    good.table = table;
    good.dtype = DType::kF8E4M3;
    good.block_scales = out;
    good.table_rows = 4;
    good.cols = 16;
    good.ids = ids;
    good.count = 2;
    good.out = out;

    GatherRowsArgs a = good;
    a.block_scales = nullptr;
    CheckInvalid(GatherRows(a, nullptr), "block_scales");
    a = good;
    a.dtype = DType::kF32;
    a.table = table + 2;
    CheckInvalid(GatherRows(a, nullptr), "aligned");
    a = good;
    a.dtype = static_cast<DType>(9);
    CheckInvalid(GatherRows(a, nullptr), "dtype");
    a = good;
    a.table_rows = 0;
    CheckInvalid(GatherRows(a, nullptr), "table_rows");
    a = good;
    a.ids = nullptr;
    CheckInvalid(GatherRows(a, nullptr), "ids");
    a = good;
    a.count = -1;
    CheckInvalid(GatherRows(a, nullptr), "count");
    a = good;
    a.out = nullptr;
    CheckInvalid(GatherRows(a, nullptr), "out is null");
  }

  TEST_CASE("RouteExperts refuses routings the kernel cannot run, naming the field") {
    float logits[4] = {};
    int32_t ids[4] = {};
    float weights[4] = {};
    RouteExpertsArgs good;
    good.logits = logits;
    good.tokens = 1;
    good.routing = MoeRouting{256, 8, 4, 8, 2.5f, true};
    good.expert_ids = ids;
    good.weights = weights;

    RouteExpertsArgs a = good;
    a.routing.n_experts = 0;
    CheckInvalid(RouteExperts(a, nullptr), "n_experts");
    a.routing.n_experts = 2048;
    a.routing.n_groups = 8;
    CheckInvalid(RouteExperts(a, nullptr), "n_experts");
    a = good;
    a.routing.n_groups = 3;
    CheckInvalid(RouteExperts(a, nullptr), "n_groups");
    a = good;
    a.routing.topk_groups = 0;
    CheckInvalid(RouteExperts(a, nullptr), "topk_groups");
    a.routing.topk_groups = 9;
    CheckInvalid(RouteExperts(a, nullptr), "topk_groups");
    a = good;
    a.routing.top_k = 33;
    CheckInvalid(RouteExperts(a, nullptr), "top_k");
    a = good;
    a.routing = MoeRouting{4, 1, 1, 5, 1.0f, true};
    CheckInvalid(RouteExperts(a, nullptr), "top_k");
    a = good;
    a.logits = nullptr;
    CheckInvalid(RouteExperts(a, nullptr), "logits");
    a = good;
    a.weights = nullptr;
    CheckInvalid(RouteExperts(a, nullptr), "weights");
    a = good;
    a.tokens = -1;
    CheckInvalid(RouteExperts(a, nullptr), "tokens");
  }

  TEST_CASE("ActQuantFp8 and WriteLatentRows refuse bad groups, strides, ranks and missing pointers") {
    float fake[4] = {};
    uint8_t codes[4] = {};
    int32_t slots[1] = {};
    ActQuantArgs good;
    good.x = fake;
    good.rows = 2;
    good.cols = 256;
    good.q = codes;
    good.scales = fake;

    ActQuantArgs a = good;
    a.group = 0;
    CheckInvalid(ActQuantFp8(a, nullptr), "group");
    a = good;
    a.x_stride = 100;
    CheckInvalid(ActQuantFp8(a, nullptr), "x_stride");
    a = good;
    a.q = nullptr;
    CheckInvalid(ActQuantFp8(a, nullptr), "q is null");
    a = good;
    a.scales = nullptr;
    CheckInvalid(ActQuantFp8(a, nullptr), "scales");
    a = good;
    a.rows = -1;
    CheckInvalid(ActQuantFp8(a, nullptr), "rows");

    WriteLatentRowsArgs latent;
    latent.c_kv = fake;
    latent.k_rope = fake;
    latent.tokens = 1;
    latent.slots = slots;
    latent.cache = codes;
    WriteLatentRowsArgs b = latent;
    b.kv_rank = 100;
    CheckInvalid(WriteLatentRows(b, nullptr), "kv_rank");
    b = latent;
    b.c_stride = 511;
    CheckInvalid(WriteLatentRows(b, nullptr), "c_stride");
    b = latent;
    b.r_stride = 63;
    CheckInvalid(WriteLatentRows(b, nullptr), "r_stride");
    b = latent;
    b.rope_dim = -1;
    CheckInvalid(WriteLatentRows(b, nullptr), "rope_dim");
    b = latent;
    b.k_rope = nullptr;
    CheckInvalid(WriteLatentRows(b, nullptr), "k_rope");
    b = latent;
    b.slots = nullptr;
    CheckInvalid(WriteLatentRows(b, nullptr), "slots");
    b = latent;
    b.cache = nullptr;
    CheckInvalid(WriteLatentRows(b, nullptr), "cache");
    b = latent;
    b.tokens = 0;
    b.c_kv = nullptr;
    CHECK(WriteLatentRows(b, nullptr).ok());
  }

}  // TEST_SUITE("kernels.cuda.glue.validation")

// =============================================================================================
// GPU consistency with the CPU twins.

TEST_SUITE("kernels.cuda.glue.gpu") {
  TEST_CASE("RmsNorm and LayerNorm match the CPU on 1, 3 and 130 rows of 128, 512 and 7168, strided") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    uint32_t seed = 100;
    for (int64_t rows : {1, 3, 130}) {
      for (int64_t dim : {128, 512, 7168}) {
        for (int64_t pad : {0, 5}) {
          CAPTURE(rows);
          CAPTURE(dim);
          CAPTURE(pad);
          const int64_t x_stride = dim + pad, out_stride = dim + 3;
          // Offset mean so LayerNorm's centring matters; a few large entries stress the sums.
          std::vector<float> x = Normal(static_cast<size_t>(rows * x_stride), ++seed, 2.0f, 0.5f);
          x[0] = 300.0f;
          const std::vector<float> weight = Normal(static_cast<size_t>(dim), ++seed, 0.3f, 1.0f);
          const std::vector<float> bias = Normal(static_cast<size_t>(dim), ++seed, 0.5f);
          const std::vector<float> packed = Packed(x, rows, dim, x_stride);
          std::vector<float> expected_rms(packed.size()), expected_layer(packed.size());
          kernels::RmsNorm(packed.data(), rows, dim, weight.data(), 1e-6f, expected_rms.data());
          kernels::LayerNorm(packed.data(), rows, dim, weight.data(), bias.data(), 1e-5f, expected_layer.data());

          DeviceBuffer x_d = ToDevice(x), weight_d = ToDevice(weight), bias_d = ToDevice(bias);
          DeviceBuffer out_d = DeviceZeros<float>(static_cast<size_t>(rows * out_stride));
          DeviceBuffer out16_d = DeviceZeros<uint16_t>(static_cast<size_t>(rows * out_stride));
          NormArgs args;
          args.x = x_d.as<float>();
          args.rows = rows;
          args.dim = dim;
          args.x_stride = x_stride;
          args.weight = weight_d.as<float>();
          args.bias = bias_d.as<float>();
          args.out_f32 = out_d.as<float>();
          args.out_bf16 = out16_d.as<uint16_t>();
          args.out_stride = out_stride;

          // Tolerance 1e-5 relative (+1e-6 absolute): both sides sum in double and differ only in
          // the summation order, which moves inv_rms / inv_std (and LayerNorm's fp32 mean) by at most
          // an ulp; the per-element arithmetic is the same rounded expression. The bf16 output is the
          // same value rounded once more: within 2^-8 relative of the CPU's fp32 result.
          args.eps = 1e-6f;
          RequireOk(RmsNorm(args, stream.get()));
          RequireOk(stream.Synchronize());
          const std::vector<float> rms =
              Packed(FromDevice<float>(out_d, static_cast<size_t>(rows * out_stride)), rows, dim, out_stride);
          const std::vector<float> rms16 = Packed(
              WidenBf16(FromDevice<uint16_t>(out16_d, static_cast<size_t>(rows * out_stride))), rows, dim, out_stride);
          CheckClose(rms, expected_rms, 1e-5, 1e-6, "RmsNorm fp32");
          CheckClose(rms16, expected_rms, 1.0 / 256 + 1e-5, 1e-6, "RmsNorm bf16");

          args.eps = 1e-5f;
          RequireOk(LayerNorm(args, stream.get()));
          RequireOk(stream.Synchronize());
          const std::vector<float> layer =
              Packed(FromDevice<float>(out_d, static_cast<size_t>(rows * out_stride)), rows, dim, out_stride);
          const std::vector<float> layer16 = Packed(
              WidenBf16(FromDevice<uint16_t>(out16_d, static_cast<size_t>(rows * out_stride))), rows, dim, out_stride);
          CheckClose(layer, expected_layer, 1e-5, 1e-6, "LayerNorm fp32");
          CheckClose(layer16, expected_layer, 1.0 / 256 + 1e-5, 1e-6, "LayerNorm bf16");
        }
      }
    }
  }

  TEST_CASE("RmsNorm in place (out_f32 == x) and with only a bf16 output") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    const int64_t rows = 3, dim = 512, stride = 520;
    const std::vector<float> x = Normal(static_cast<size_t>(rows * stride), 7);
    const std::vector<float> weight = Normal(static_cast<size_t>(dim), 8, 0.2f, 1.0f);
    const std::vector<float> packed = Packed(x, rows, dim, stride);
    std::vector<float> expected(packed.size());
    kernels::RmsNorm(packed.data(), rows, dim, weight.data(), 1e-6f, expected.data());

    DeviceBuffer x_d = ToDevice(x), weight_d = ToDevice(weight);
    DeviceBuffer out16_d = DeviceZeros<uint16_t>(static_cast<size_t>(rows * dim));
    NormArgs args;
    args.x = x_d.as<float>();
    args.rows = rows;
    args.dim = dim;
    args.x_stride = stride;
    args.weight = weight_d.as<float>();
    args.out_bf16 = out16_d.as<uint16_t>();
    RequireOk(RmsNorm(args, stream.get()));
    args.out_bf16 = nullptr;
    args.out_f32 = x_d.as<float>();
    args.out_stride = stride;
    RequireOk(RmsNorm(args, stream.get()));
    RequireOk(stream.Synchronize());
    // Same tolerances as above; the padding between rows must be untouched (bit for bit).
    const std::vector<float> in_place = FromDevice<float>(x_d, x.size());
    CheckClose(Packed(in_place, rows, dim, stride), expected, 1e-5, 1e-6, "RmsNorm in place");
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = dim; c < stride; ++c)
        CHECK(Bits(in_place[static_cast<size_t>(r * stride + c)]) == Bits(x[static_cast<size_t>(r * stride + c)]));
    }
    CheckClose(WidenBf16(FromDevice<uint16_t>(out16_d, static_cast<size_t>(rows * dim))), expected, 1.0 / 256 + 1e-5,
               1e-6, "RmsNorm bf16 only");
  }

  TEST_CASE("ApplyRope matches the CPU for both pairings, odd head counts and large positions") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    YarnParams yarn;
    yarn.rotary_dim = 64;
    yarn.factor = 40;  // the 671B config: YaRN-scaled frequencies
    const std::vector<float> freqs = YarnFrequencies(yarn);
    DeviceBuffer freqs_d = ToDevice(freqs);
    uint32_t seed = 200;
    for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
      for (int64_t tokens : {1, 3, 130}) {
        for (int64_t count : {1, 3, 128}) {
          CAPTURE(static_cast<int>(layout));
          CAPTURE(tokens);
          CAPTURE(count);
          // MLA-like rows: each head is [nope 128 | rope 64]; rope starts 128 floats into the head;
          // tokens padded by 7 floats.
          const int64_t head = 192, offset = 128, rotary = 64;
          const int64_t token_stride = count * head + 7;
          std::vector<float> buffer = Normal(static_cast<size_t>(tokens * token_stride + offset), ++seed);
          std::vector<int32_t> positions(static_cast<size_t>(tokens));
          std::mt19937 rng(++seed);
          for (int32_t& p : positions) p = static_cast<int32_t>(rng() % 163840);
          positions[0] = tokens > 1 ? 0 : 163839;
          if (tokens > 2) positions[2] = 163839;

          std::vector<float> expected = buffer;
          std::vector<bool> rotated(buffer.size(), false);
          for (int64_t t = 0; t < tokens; ++t) {
            float* base = expected.data() + offset + t * token_stride;
            kernels::ApplyRope(base, count, head, static_cast<int>(rotary), positions[static_cast<size_t>(t)],
                               freqs.data(), layout);
            for (int64_t j = 0; j < count; ++j) {
              for (int64_t i = 0; i < rotary; ++i)
                rotated[static_cast<size_t>(offset + t * token_stride + j * head + i)] = true;
            }
          }
          DeviceBuffer buffer_d = ToDevice(buffer), positions_d = ToDevice(positions);
          RopeArgs args;
          args.x = buffer_d.as<float>() + offset;
          args.tokens = tokens;
          args.count = count;
          args.token_stride = token_stride;
          args.vector_stride = head;
          args.rotary_dim = static_cast<int>(rotary);
          args.positions = positions_d.as<int32_t>();
          args.freqs = freqs_d.as<float>();
          args.layout = layout;
          RequireOk(ApplyRope(args, stream.get()));
          RequireOk(stream.Synchronize());
          const std::vector<float> actual = FromDevice<float>(buffer_d, buffer.size());
          // Tolerance 1e-5 absolute on unit-scale values: the angle is the same fp32 value on both
          // sides (double product rounded), cos/sin in double rounded to fp32 agree to an ulp, and
          // the rotation is the same rounded expression. Values outside the rotary spans: untouched.
          CheckClose(actual, expected, 0.0, 1e-5, "ApplyRope");
          size_t touched = 0;
          for (size_t i = 0; i < actual.size(); ++i) {
            if (!rotated[i] && Bits(actual[i]) != Bits(buffer[i])) ++touched;
          }
          CHECK_MESSAGE(touched == 0, touched << " values outside the rotary spans changed");
        }
      }
    }
  }

  TEST_CASE("ApplyRope with zero strides rotates packed vectors of packed tokens") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    const int64_t tokens = 3, count = 2;
    const int rotary = 32;
    YarnParams yarn;
    yarn.rotary_dim = rotary;
    const std::vector<float> freqs = YarnFrequencies(yarn);
    const std::vector<int32_t> positions = {5, 0, 4095};
    std::vector<float> buffer = Normal(static_cast<size_t>(tokens * count * rotary), 9);
    std::vector<float> expected = buffer;
    for (int64_t t = 0; t < tokens; ++t) {
      kernels::ApplyRope(expected.data() + t * count * rotary, count, rotary, rotary, positions[static_cast<size_t>(t)],
                         freqs.data(), RopeLayout::kHalf);
    }
    DeviceBuffer buffer_d = ToDevice(buffer), positions_d = ToDevice(positions), freqs_d = ToDevice(freqs);
    RopeArgs args;
    args.x = buffer_d.as<float>();
    args.tokens = tokens;
    args.count = count;
    args.rotary_dim = rotary;
    args.positions = positions_d.as<int32_t>();
    args.freqs = freqs_d.as<float>();
    args.layout = RopeLayout::kHalf;
    RequireOk(ApplyRope(args, stream.get()));
    RequireOk(stream.Synchronize());
    CheckClose(FromDevice<float>(buffer_d, buffer.size()), expected, 0.0, 1e-5, "ApplyRope packed");  // as above
  }

  TEST_CASE("SiluMul matches the CPU, fp32 and bf16 outputs, strided, with saturating gates") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    uint32_t seed = 300;
    for (int64_t rows : {1, 3, 130}) {
      for (int64_t cols : {128, 512, 7168, 300}) {
        CAPTURE(rows);
        CAPTURE(cols);
        const int64_t in_stride = cols + 3, out_stride = cols + 1;
        std::vector<float> gate = Normal(static_cast<size_t>(rows * in_stride), ++seed, 4.0f);
        const std::vector<float> up = Normal(static_cast<size_t>(rows * in_stride), ++seed);
        // exp(-g) overflowing to inf (g = -100: silu -> -0), near the overflow edge, saturating to
        // g itself (g = 100), zeros of both signs.
        const float specials[] = {-100.0f, 100.0f, -88.5f, -87.0f, 88.5f, 0.0f, -0.0f, 20.0f, -20.0f};
        for (size_t i = 0; i < std::size(specials) && i < static_cast<size_t>(cols); ++i) gate[i] = specials[i];
        std::vector<float> expected(static_cast<size_t>(rows * cols));
        for (int64_t r = 0; r < rows; ++r) {
          kernels::SiluMul(gate.data() + r * in_stride, up.data() + r * in_stride, cols, expected.data() + r * cols);
        }
        DeviceBuffer gate_d = ToDevice(gate), up_d = ToDevice(up);
        DeviceBuffer out_d = DeviceZeros<float>(static_cast<size_t>(rows * out_stride));
        DeviceBuffer out16_d = DeviceZeros<uint16_t>(static_cast<size_t>(rows * out_stride));
        SiluMulArgs args;
        args.gate = gate_d.as<float>();
        args.up = up_d.as<float>();
        args.rows = rows;
        args.cols = cols;
        args.in_stride = in_stride;
        args.out_stride = out_stride;
        args.out_f32 = out_d.as<float>();
        RequireOk(SiluMul(args, stream.get()));
        args.out_f32 = nullptr;
        args.out_bf16 = out16_d.as<uint16_t>();
        RequireOk(SiluMul(args, stream.get()));
        RequireOk(stream.Synchronize());
        // Tolerance 1e-6 relative: the only difference is exp (glibc expf within 0.502 ulp, the GPU's
        // double exp rounded to fp32 correctly rounded), at most 1 ulp of exp(-g), a few 1e-7 in
        // the result. A 1e-35 absolute floor covers results in the fp32 subnormal range.
        CheckClose(Packed(FromDevice<float>(out_d, static_cast<size_t>(rows * out_stride)), rows, cols, out_stride),
                   expected, 1e-6, 1e-35, "SiluMul fp32");
        // bf16: the same value rounded to bf16, within 2^-8 relative of the CPU's fp32 result.
        CheckClose(Packed(WidenBf16(FromDevice<uint16_t>(out16_d, static_cast<size_t>(rows * out_stride))), rows, cols,
                          out_stride),
                   expected, 1.0 / 256 + 1e-6, 1e-35, "SiluMul bf16");
      }
    }
  }

  TEST_CASE("SiluMul in place over gate gives the same values as out of place") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    const int64_t rows = 3, cols = 512;
    const std::vector<float> gate = Normal(static_cast<size_t>(rows * cols), 31, 3.0f);
    const std::vector<float> up = Normal(static_cast<size_t>(rows * cols), 32);
    std::vector<float> expected(gate.size());
    kernels::SiluMul(gate.data(), up.data(), rows * cols, expected.data());
    DeviceBuffer gate_d = ToDevice(gate), up_d = ToDevice(up);
    SiluMulArgs args;
    args.gate = gate_d.as<float>();
    args.up = up_d.as<float>();
    args.rows = rows;
    args.cols = cols;
    args.out_f32 = gate_d.as<float>();
    RequireOk(SiluMul(args, stream.get()));
    RequireOk(stream.Synchronize());
    CheckClose(FromDevice<float>(gate_d, gate.size()), expected, 1e-6, 1e-35, "SiluMul in place");  // as above
  }

  TEST_CASE("AddInPlace and ScaleRowsAdd equal the CPU forward's loops bit for bit") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    for (int64_t n : {1, 1000, 3 * 7168 + 1}) {
      for (float alpha : {1.0f, -0.5f, 0.3f}) {
        CAPTURE(n);
        CAPTURE(alpha);
        const std::vector<float> y = Normal(static_cast<size_t>(n), 41);
        const std::vector<float> x = Normal(static_cast<size_t>(n), 42, 3.0f);
        std::vector<float> expected = y;
        for (size_t i = 0; i < expected.size(); ++i) expected[i] += alpha * x[i];
        DeviceBuffer y_d = ToDevice(y), x_d = ToDevice(x);
        RequireOk(AddInPlace(y_d.as<float>(), x_d.as<float>(), n, alpha, stream.get()));
        RequireOk(stream.Synchronize());
        // Exact: one multiply and one add, each rounded to nearest, on both sides.
        CheckClose(FromDevice<float>(y_d, y.size()), expected, 0.0, 0.0, "AddInPlace");
      }
    }

    // Five expert-output rows into four residual rows; -1 is padding. Distinct targets: exact.
    const int64_t cols = 7168 + 3, residual_rows = 4;
    const std::vector<int32_t> row_of = {2, -1, 0, 3, 1};
    const int64_t rows = static_cast<int64_t>(row_of.size());
    const std::vector<float> scale = {0.25f, 9.0f, -1.5f, 0.7f, 2.5f};
    const std::vector<float> x = Normal(static_cast<size_t>(rows * cols), 43);
    const std::vector<float> y = Normal(static_cast<size_t>(residual_rows * cols), 44);
    std::vector<float> expected = y;
    for (int64_t r = 0; r < rows; ++r) {
      if (row_of[static_cast<size_t>(r)] < 0) continue;
      float* target = expected.data() + row_of[static_cast<size_t>(r)] * cols;
      for (int64_t c = 0; c < cols; ++c)
        target[c] += scale[static_cast<size_t>(r)] * x[static_cast<size_t>(r * cols + c)];
    }
    DeviceBuffer y_d = ToDevice(y), x_d = ToDevice(x), scale_d = ToDevice(scale), row_of_d = ToDevice(row_of);
    RequireOk(ScaleRowsAdd(y_d.as<float>(), x_d.as<float>(), scale_d.as<float>(), row_of_d.as<int32_t>(), rows, cols,
                           stream.get()));
    RequireOk(stream.Synchronize());
    CheckClose(FromDevice<float>(y_d, y.size()), expected, 0.0, 0.0, "ScaleRowsAdd distinct rows");

    // Repeated targets (several experts of one token in one call): the adds meet in an order the
    // GPU chooses, so the sum agrees within fp32 reassociation: 1e-6 of the magnitudes summed.
    const std::vector<int32_t> repeated = {1, 1, 0, 1, 1};
    DeviceBuffer y2_d = ToDevice(y), repeated_d = ToDevice(repeated);
    RequireOk(ScaleRowsAdd(y2_d.as<float>(), x_d.as<float>(), scale_d.as<float>(), repeated_d.as<int32_t>(), rows, cols,
                           stream.get()));
    RequireOk(stream.Synchronize());
    const std::vector<float> actual = FromDevice<float>(y2_d, y.size());
    std::vector<double> exact(y.begin(), y.end()), magnitude(y.size());
    for (size_t i = 0; i < y.size(); ++i) magnitude[i] = std::fabs(y[i]);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t target = repeated[static_cast<size_t>(r)];
      for (int64_t c = 0; c < cols; ++c) {
        const double term = static_cast<double>(scale[static_cast<size_t>(r)]) * x[static_cast<size_t>(r * cols + c)];
        exact[static_cast<size_t>(target * cols + c)] += term;
        magnitude[static_cast<size_t>(target * cols + c)] += std::fabs(term);
      }
    }
    size_t failures = 0;
    for (size_t i = 0; i < actual.size(); ++i) {
      if (std::fabs(actual[i] - exact[i]) > 1e-6 * magnitude[i]) ++failures;
    }
    CHECK(failures == 0);
  }

  TEST_CASE("ToBf16 is bit-exact with the CPU encoder (ties, NaN, inf, subnormals); Bf16ToF32 for every code") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    std::vector<float> values;
    for (uint32_t bits : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x3f808000u, 0x3f818000u,
                          0x3f808001u, 0x3f80ffffu, 0x00000001u, 0x807fffffu, 0x7f800001u, 0xffc00000u, 0x7fbfffffu}) {
      values.push_back(FromBits(bits));
    }
    std::mt19937 rng(51);
    while (values.size() < 100003) values.push_back(FromBits(static_cast<uint32_t>(rng())));
    std::vector<uint16_t> expected(values.size());
    for (size_t i = 0; i < values.size(); ++i) expected[i] = FloatToBf16(values[i]);
    DeviceBuffer values_d = ToDevice(values);
    DeviceBuffer out_d = DeviceZeros<uint16_t>(values.size());
    RequireOk(ToBf16(values_d.as<float>(), static_cast<int64_t>(values.size()), out_d.as<uint16_t>(), stream.get()));
    RequireOk(stream.Synchronize());
    const std::vector<uint16_t> actual = FromDevice<uint16_t>(out_d, values.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      if (actual[i] != expected[i] && ++mismatches <= 5) {
        MESSAGE("bits 0x" << std::hex << Bits(values[i]) << ": gpu 0x" << actual[i] << " cpu 0x" << expected[i]);
      }
    }
    CHECK(mismatches == 0);

    std::vector<uint16_t> codes(65536);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint16_t>(i);
    DeviceBuffer codes_d = ToDevice(codes);
    DeviceBuffer widened_d = DeviceZeros<float>(codes.size());
    RequireOk(
        Bf16ToF32(codes_d.as<uint16_t>(), static_cast<int64_t>(codes.size()), widened_d.as<float>(), stream.get()));
    RequireOk(stream.Synchronize());
    const std::vector<float> widened = FromDevice<float>(widened_d, codes.size());
    size_t widening_mismatches = 0;
    for (size_t i = 0; i < codes.size(); ++i) {
      if (Bits(widened[i]) != Bits(Bf16ToFloat(codes[i]))) ++widening_mismatches;
    }
    CHECK(widening_mismatches == 0);
  }

  TEST_CASE("GatherRows equals the CPU dequantization for every dtype, fp8 block scales included") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    const int64_t table_rows = 300;  // three fp8 row blocks, the last partial
    uint32_t seed = 600;
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
      for (int64_t cols : {300, 1024}) {
        for (int64_t count : {1, 3, 130}) {
          CAPTURE(DTypeName(dtype));
          CAPTURE(cols);
          CAPTURE(count);
          std::mt19937 rng(++seed);
          // Every bit pattern of the element type, NaN and inf codes included.
          const size_t elements = static_cast<size_t>(table_rows * cols);
          std::vector<unsigned char> table(elements * static_cast<size_t>(DTypeSize(dtype)));
          if (dtype == DType::kF32) {
            const std::vector<float> values = Normal(elements, ++seed, 10.0f);
            std::memcpy(table.data(), values.data(), table.size());
          } else {
            for (unsigned char& byte : table) byte = static_cast<unsigned char>(rng());
          }
          const int64_t scale_rows = (table_rows + 127) / 128, scale_cols = (cols + 127) / 128;
          std::vector<float> scales(static_cast<size_t>(scale_rows * scale_cols));
          for (size_t i = 0; i < scales.size(); ++i)
            scales[i] = i % 3 == 0 ? std::ldexp(1.0f, static_cast<int>(i % 7) - 3) : 0.37f * static_cast<float>(i + 1);
          std::vector<int32_t> ids(static_cast<size_t>(count));
          for (int32_t& id : ids) id = static_cast<int32_t>(rng() % table_rows);
          const int32_t edges[] = {0, 299, 128, 127, -1, 300, 256, 5, 5};  // -1 and 300: out of range
          for (size_t i = 0; i < std::size(edges) && i < ids.size(); ++i) ids[i] = edges[i];
          if (count == 1) ids[0] = 299;

          WeightMatrix w;
          w.dtype = dtype;
          w.data = table.data();
          w.rows = table_rows;
          w.cols = cols;
          w.block_scale_inv = scales.data();
          std::vector<float> expected(static_cast<size_t>(count * cols), 0.0f);  // out of range: zeros
          for (int64_t r = 0; r < count; ++r) {
            const int32_t id = ids[static_cast<size_t>(r)];
            if (id >= 0 && id < table_rows) DequantizeRow(w, id, expected.data() + r * cols);
          }
          DeviceBuffer table_d = ToDevice(table), scales_d = ToDevice(scales), ids_d = ToDevice(ids);
          DeviceBuffer out_d = DeviceZeros<float>(static_cast<size_t>(count * cols));
          GatherRowsArgs args;
          args.table = table_d.data();
          args.dtype = dtype;
          args.block_scales = dtype == DType::kF8E4M3 ? scales_d.as<float>() : nullptr;
          args.table_rows = table_rows;
          args.cols = cols;
          args.ids = ids_d.as<int32_t>();
          args.count = count;
          args.out = out_d.as<float>();
          RequireOk(GatherRows(args, stream.get()));
          RequireOk(stream.Synchronize());
          // Exact: widening is exact and the fp8 scale is one rounded multiply on both sides (NaN
          // payloads may differ, so NaN only has to be NaN).
          CheckClose(FromDevice<float>(out_d, expected.size()), expected, 0.0, 0.0, "GatherRows");
        }
      }
    }
  }

  struct RouteCase {
    const char* name;
    MoeRouting routing;
    bool with_bias;
  };

  enum class LogitKind { kRandom, kTies, kSaturated, kNegativeInfinity };

  std::vector<float> RouteLogits(LogitKind kind, size_t count, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> logits = Normal(count, seed, 2.0f);
    for (float& v : logits) {
      switch (kind) {
        case LogitKind::kRandom: break;
        case LogitKind::kTies: v = static_cast<float>(static_cast<int>(rng() % 3) - 1); break;  // -1, 0, 1
        case LogitKind::kSaturated: v = 17.0f + static_cast<float>(rng() % 5); break;           // sigmoid == 1
        case LogitKind::kNegativeInfinity: v = rng() % 2 ? -kInf : v; break;                    // sigmoid == 0
      }
    }
    return logits;
  }

  TEST_CASE("RouteExperts chooses the CPU's experts (ties to the lower index) with the CPU's weights") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    const RouteCase cases[] = {
        {"DeepSeek-V3: 256 experts, 8 groups, top-4 groups, top-8", {256, 8, 4, 8, 2.5f, true}, true},
        {"one group", {64, 1, 1, 6, 1.0f, true}, true},
        {"1024 experts, 32 groups, top-3 groups, top-32", {1024, 32, 3, 32, 1.0f, true}, true},
        {"groups of one expert, no normalisation, no bias", {16, 16, 5, 4, 1.0f, false}, false},
        {"fewer kept experts than top_k: -inf picks by index", {16, 8, 1, 4, 1.0f, true}, true},
        {"72 experts in 3 groups (not a multiple of 32)", {72, 3, 2, 5, 1.5f, true}, true},
        {"all groups kept", {64, 4, 4, 8, 2.0f, true}, false},
    };
    uint32_t seed = 700;
    for (const RouteCase& c : cases) {
      for (LogitKind kind :
           {LogitKind::kRandom, LogitKind::kTies, LogitKind::kSaturated, LogitKind::kNegativeInfinity}) {
        for (int64_t tokens : {1, 3, 130}) {
          CAPTURE(c.name);
          CAPTURE(static_cast<int>(kind));
          CAPTURE(tokens);
          const int64_t n = c.routing.n_experts, k = c.routing.top_k;
          const std::vector<float> logits = RouteLogits(kind, static_cast<size_t>(tokens * n), ++seed);
          // A bias with ties of its own (steps of 1/8) so biased scores tie too in the ties case.
          std::vector<float> bias(static_cast<size_t>(n));
          std::mt19937 rng(++seed);
          for (float& b : bias) b = static_cast<float>(static_cast<int>(rng() % 5) - 2) / 8.0f;
          std::vector<int32_t> expected_ids(static_cast<size_t>(tokens * k));
          std::vector<float> expected_weights(static_cast<size_t>(tokens * k));
          for (int64_t t = 0; t < tokens; ++t) {
            kernels::RouteExperts(logits.data() + t * n, c.with_bias ? bias.data() : nullptr, c.routing,
                                  expected_ids.data() + t * k, expected_weights.data() + t * k);
          }
          DeviceBuffer logits_d = ToDevice(logits), bias_d = ToDevice(bias);
          DeviceBuffer ids_d = DeviceZeros<int32_t>(expected_ids.size());
          DeviceBuffer weights_d = DeviceZeros<float>(expected_weights.size());
          RouteExpertsArgs args;
          args.logits = logits_d.as<float>();
          args.bias = c.with_bias ? bias_d.as<float>() : nullptr;
          args.tokens = tokens;
          args.routing = c.routing;
          args.expert_ids = ids_d.as<int32_t>();
          args.weights = weights_d.as<float>();
          RequireOk(RouteExperts(args, stream.get()));
          RequireOk(stream.Synchronize());
          // Identical ids (same scores, same tie rule); weights within 1e-6 absolute (the scores can
          // differ only in the last bit of exp, see moe_routing.cu; in practice they are identical).
          CHECK(FromDevice<int32_t>(ids_d, expected_ids.size()) == expected_ids);
          CheckClose(FromDevice<float>(weights_d, expected_weights.size()), expected_weights, 0.0, 1e-6,
                     "RouteExperts weights");
        }
      }
    }
  }

  // The e4m3 codes a and b may differ because v (= x / scale) lies within 1e-6 (relative) of the
  // midpoint between their values, where a quantizer whose division rounds differently may land
  // on either side. Exactly on the midpoint there is one right answer (ties to even): no slack.
  bool NearMidpoint(float v, uint8_t a, uint8_t b) {
    const double fa = Fp8E4M3ToFloat(a), fb = Fp8E4M3ToFloat(b);
    if (std::isnan(fa) || std::isnan(fb)) return false;
    const double mid = (fa + fb) / 2, distance = std::fabs(v - mid);
    return distance > 0 && distance <= 1e-6 * std::fabs(mid);
  }

  TEST_CASE("ActQuantFp8 gives the CPU's scales and codes: strided rows, partial groups, zeros, NaN, inf, midpoints") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    uint32_t seed = 800;
    struct Shape {
      int64_t cols, group;
    };
    for (int64_t rows : {1, 3, 130}) {
      for (Shape shape :
           {Shape{128, 128}, Shape{512, 128}, Shape{7168, 128}, Shape{300, 128}, Shape{200, 64}, Shape{37, 5}}) {
        for (bool pow2 : {true, false}) {
          CAPTURE(rows);
          CAPTURE(shape.cols);
          CAPTURE(shape.group);
          CAPTURE(pow2);
          const int64_t cols = shape.cols, group = shape.group, x_stride = cols + 4;
          std::vector<float> x = Normal(static_cast<size_t>(rows * x_stride), ++seed);
          std::mt19937 rng(++seed);
          // Magnitudes from 1e-6 (below the 1e-4 amax floor) to 1e3, per group.
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t begin = 0; begin < cols; begin += group) {
              const float magnitude = std::pow(10.0f, static_cast<float>(rng() % 10) - 6.0f);
              for (int64_t i = begin; i < std::min(cols, begin + group); ++i)
                x[static_cast<size_t>(r * x_stride + i)] *= magnitude;
            }
          }
          // Row 0: a zero group, then a group whose amax is 448 (scale exactly 1) holding every
          // midpoint between adjacent positive codes (ties to even decide), then NaN / inf groups.
          if (cols >= 2 * group) {
            for (int64_t i = 0; i < group; ++i) x[static_cast<size_t>(i)] = 0.0f;
            x[static_cast<size_t>(group)] = 448.0f;
            for (int64_t i = 1; i < group; ++i) {
              const int code = static_cast<int>(i % 126);
              x[static_cast<size_t>(group + i)] =
                  (Fp8E4M3ToFloat(static_cast<uint8_t>(code)) + Fp8E4M3ToFloat(static_cast<uint8_t>(code + 1))) / 2 *
                  (i % 2 ? 1.0f : -1.0f);
            }
          }
          if (rows >= 3) {
            x[static_cast<size_t>(x_stride + 1)] = std::nanf("");
            x[static_cast<size_t>(2 * x_stride + 2)] = -kInf;
          }
          const int64_t groups = (cols + group - 1) / group;
          const std::vector<float> packed = Packed(x, rows, cols, x_stride);
          std::vector<uint8_t> expected_q(static_cast<size_t>(rows * cols));
          std::vector<float> expected_scales(static_cast<size_t>(rows * groups));
          kernels::ActQuantFp8(packed.data(), rows, cols, group, pow2, expected_q.data(), expected_scales.data());

          DeviceBuffer x_d = ToDevice(x);
          DeviceBuffer q_d = DeviceZeros<uint8_t>(expected_q.size());
          DeviceBuffer scales_d = DeviceZeros<float>(expected_scales.size());
          ActQuantArgs args;
          args.x = x_d.as<float>();
          args.rows = rows;
          args.cols = cols;
          args.x_stride = x_stride;
          args.group = group;
          args.pow2_scales = pow2;
          args.q = q_d.as<uint8_t>();
          args.scales = scales_d.as<float>();
          RequireOk(ActQuantFp8(args, stream.get()));
          RequireOk(stream.Synchronize());
          const std::vector<float> scales = FromDevice<float>(scales_d, expected_scales.size());
          const std::vector<uint8_t> q = FromDevice<uint8_t>(q_d, expected_q.size());
          // Scales: bit-identical (the same IEEE division and exponent trick). Codes: identical except
          // where x / scale is within 1e-6 of a rounding midpoint (the kernel is the CPU's bit recipe,
          // so none are expected; the allowance is the tolerance this op is specified with).
          size_t scale_mismatches = 0, code_mismatches = 0, midpoint_mismatches = 0;
          for (size_t i = 0; i < scales.size(); ++i) {
            if (Bits(scales[i]) != Bits(expected_scales[i])) ++scale_mismatches;
          }
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t i = 0; i < cols; ++i) {
              const size_t at = static_cast<size_t>(r * cols + i);
              if (q[at] == expected_q[at]) continue;
              const float v = packed[at] / expected_scales[static_cast<size_t>(r * groups + i / group)];
              if (NearMidpoint(v, q[at], expected_q[at])) {
                ++midpoint_mismatches;
              } else if (++code_mismatches <= 5) {
                MESSAGE("row " << r << " col " << i << " x " << packed[at] << ": gpu 0x" << std::hex << int(q[at])
                               << " cpu 0x" << int(expected_q[at]));
              }
            }
          }
          CHECK(scale_mismatches == 0);
          CHECK(code_mismatches == 0);
          if (midpoint_mismatches > 0) MESSAGE(midpoint_mismatches << " codes differ at rounding midpoints");
        }
      }
    }
  }

  // The cache rows the CPU KvCache::WriteLatent produces (ActQuantFp8 of c_kv in 128-groups,
  // FloatToBf16 of k_rope), laid out as sparse_mla.h's [codes | scales | rope] per slot.
  void WriteCpuLatentRow(const float* c_kv, const float* k_rope, int64_t kv_rank, int64_t rope_dim, bool pow2,
                         uint8_t* row) {
    const int64_t groups = kv_rank / 128;
    std::vector<float> scales(static_cast<size_t>(groups));
    kernels::ActQuantFp8(c_kv, 1, kv_rank, 128, pow2, row, scales.data());
    std::memcpy(row + kv_rank, scales.data(), scales.size() * sizeof(float));
    for (int64_t j = 0; j < rope_dim; ++j) {
      const uint16_t bits = FloatToBf16(k_rope[j]);
      std::memcpy(row + kv_rank + groups * 4 + 2 * j, &bits, 2);
    }
  }

  TEST_CASE("WriteLatentRows writes the bytes of the CPU KvCache rows into the right slots") {
    ENVFORGE_REQUIRE_GPU();
    Stream stream = MakeStream();
    uint32_t seed = 900;
    struct Shape {
      int64_t kv_rank, rope_dim;
    };
    // 512/64 is the model's 656-byte row; 128/7 makes rows of 270 bytes, so most rows start off a
    // 4-byte boundary.
    for (Shape shape : {Shape{512, 64}, Shape{256, 32}, Shape{128, 7}}) {
      for (int64_t tokens : {1, 3, 130}) {
        for (bool pow2 : {true, false}) {
          CAPTURE(shape.kv_rank);
          CAPTURE(shape.rope_dim);
          CAPTURE(tokens);
          CAPTURE(pow2);
          const int64_t kv_rank = shape.kv_rank, rope_dim = shape.rope_dim;
          const int64_t row_bytes = LatentRowBytes(kv_rank, rope_dim);
          // The wkv_a output layout: each token's row is [c_kv | k_rope] plus padding.
          const int64_t stride = kv_rank + rope_dim + 3;
          std::vector<float> rows = Normal(static_cast<size_t>(tokens * stride), ++seed, 0.7f);
          for (int64_t i = 0; i < 128; ++i) rows[static_cast<size_t>(i)] = 0.0f;  // an all-zero group
          if (kv_rank >= 256) {
            // Group 1 of token 0: amax 448 (scale exactly 1), the rest exact midpoints between codes.
            rows[128] = 448.0f;
            for (int64_t i = 1; i < 128; ++i) {
              const int code = static_cast<int>(i % 126);
              rows[static_cast<size_t>(128 + i)] =
                  (Fp8E4M3ToFloat(static_cast<uint8_t>(code)) + Fp8E4M3ToFloat(static_cast<uint8_t>(code + 1))) / 2;
            }
          }
          if (tokens > 1) rows[static_cast<size_t>(stride + 5)] = 3000.0f;  // an outlier group
          const int64_t slot_count = 2 * tokens + 1;
          std::vector<int32_t> slots(static_cast<size_t>(tokens));
          // A permutation into the larger cache (5 is coprime with 3, 7 and 261): distinct slots.
          for (int64_t t = 0; t < tokens; ++t)
            slots[static_cast<size_t>(t)] = static_cast<int32_t>((t * 5 + 3) % slot_count);
          if (tokens > 2) slots[2] = -1;  // padding: writes nothing

          std::vector<uint8_t> expected(static_cast<size_t>(slot_count * row_bytes), 0xab);
          for (int64_t t = 0; t < tokens; ++t) {
            const int32_t slot = slots[static_cast<size_t>(t)];
            if (slot < 0) continue;
            const float* row = rows.data() + t * stride;
            WriteCpuLatentRow(row, row + kv_rank, kv_rank, rope_dim, pow2, expected.data() + slot * row_bytes);
          }
          DeviceBuffer rows_d = ToDevice(rows), slots_d = ToDevice(slots);
          DeviceBuffer cache_d = ToDevice(std::vector<uint8_t>(expected.size(), 0xab));
          WriteLatentRowsArgs args;
          args.c_kv = rows_d.as<float>();
          args.k_rope = rows_d.as<float>() + kv_rank;
          args.c_stride = stride;
          args.r_stride = stride;
          args.tokens = tokens;
          args.kv_rank = kv_rank;
          args.rope_dim = rope_dim;
          args.pow2_scales = pow2;
          args.slots = slots_d.as<int32_t>();
          args.cache = cache_d.as<uint8_t>();
          RequireOk(WriteLatentRows(args, stream.get()));
          RequireOk(stream.Synchronize());
          // Byte-identical: the same quantizer recipe as ActQuantFp8 above, and FloatToBf16.
          const std::vector<uint8_t> actual = FromDevice<uint8_t>(cache_d, expected.size());
          size_t mismatches = 0;
          for (size_t i = 0; i < actual.size(); ++i) {
            if (actual[i] != expected[i] && ++mismatches <= 5) {
              MESSAGE("slot " << i / static_cast<size_t>(row_bytes) << " byte " << i % static_cast<size_t>(row_bytes)
                              << ": gpu " << int(actual[i]) << " cpu " << int(expected[i]));
            }
          }
          CHECK(mismatches == 0);
        }
      }
    }
  }

}  // TEST_SUITE("kernels.cuda.glue.gpu")

}  // namespace
}  // namespace envforge::kernels::cuda
