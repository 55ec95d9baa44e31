// Micro-benchmarks behind peak.h.
#include "kernels/cpu/peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "kernels/cpu/internal/cpu_features.h"
#include "kernels/cpu/internal/simd.h"
#include "kernels/cpu/linear.h"

namespace envforge::kernels {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Runs body(thread_index) on `threads` threads started together; returns the wall time.
template <typename Body>
double RunOnThreads(int threads, const Body& body) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      body(t);
    });
  }
  while (ready.load() != threads) std::this_thread::yield();
  const Clock::time_point start = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& thread : pool) thread.join();
  return SecondsSince(start);
}

// 12 independent accumulator chains hide the FMA latency on current cores (latency 4-5 cycles,
// 2 FMA pipes). Returns a value depending on every chain so nothing is optimised away.
constexpr int kChains = 12;

#if ENVFORGE_KERNELS_X86
ENVFORGE_TARGET_AVX2 float FmaLoopAvx2(int64_t iterations) {
  __m256 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return internal::HorizontalSum(sum);
}

ENVFORGE_TARGET_AVX512 float FmaLoopAvx512(int64_t iterations) {
  __m512 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

ENVFORGE_TARGET_AVX2 double SumFloatsAvx2(const float* data, int64_t count) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_load_ps(data + i + 8 * j));
  }
  double sum = internal::HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < count; ++i) sum += data[i];
  return sum;
}
#endif

float FmaLoopScalar(int64_t iterations) {
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = static_cast<float>(c) * 1e-3f;
  for (int64_t i = 0; i < iterations; ++i) {
    for (float& value : acc) value = value * 0.999999f + 1e-7f;
  }
  float sum = 0.0f;
  for (float value : acc) sum += value;
  return sum;
}

double SumFloats(const float* data, int64_t count) {
#if ENVFORGE_KERNELS_X86
  if (internal::CpuHasAvx2Fma()) return SumFloatsAvx2(data, count);
#endif
  float partial[8] = {};
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (int lane = 0; lane < 8; ++lane) partial[lane] += data[i + lane];
  double sum = 0.0;
  for (; i < count; ++i) sum += data[i];
  for (float p : partial) sum += p;
  return sum;
}

// Lanes of the loop FmaPeakIsa() names.
int FmaLanes() {
  if (internal::CpuHasAvx512F()) return 16;
  if (internal::CpuHasAvx2Fma()) return 8;
  return 1;
}

float FmaLoop(int64_t iterations) {
#if ENVFORGE_KERNELS_X86
  if (internal::CpuHasAvx512F()) return FmaLoopAvx512(iterations);
  if (internal::CpuHasAvx2Fma()) return FmaLoopAvx2(iterations);
#endif
  return FmaLoopScalar(iterations);
}

std::atomic<float> sink{0.0f};

}  // namespace

const char* FmaPeakIsa() {
  if (internal::CpuHasAvx512F()) return "avx512";
  if (internal::CpuHasAvx2Fma()) return "avx2";
  return "scalar";
}

double MeasureFmaPeakGflops(int threads) {
  threads = std::max(threads, 1);
  // Calibrate on one thread to about 30 ms, then take the best of five timed runs.
  int64_t iterations = 1 << 20;
  for (;;) {
    Clock::time_point start = Clock::now();
    sink.store(FmaLoop(iterations));
    if (SecondsSince(start) > 0.03 || iterations > (int64_t{1} << 34)) break;
    iterations *= 2;
  }
  double best = 0.0;
  for (int run = 0; run < 5; ++run) {
    double seconds = RunOnThreads(threads, [&](int) { sink.store(FmaLoop(iterations)); });
    double flops = 2.0 * kChains * FmaLanes() * static_cast<double>(iterations) * threads;
    best = std::max(best, flops / seconds / 1e9);
  }
  return best;
}

double MeasureMemoryBandwidthGBs(int threads) {
  threads = std::max(threads, 1);
  constexpr int64_t kBytes = int64_t{256} << 20;
  const int64_t count = kBytes / static_cast<int64_t>(sizeof(float));
  std::unique_ptr<float, decltype(&std::free)> buffer(static_cast<float*>(std::aligned_alloc(64, kBytes)), &std::free);
  if (!buffer) return 0.0;
  float* data = buffer.get();
  auto slice = [&](int t, int64_t& begin, int64_t& end) {
    begin = count * t / threads / 32 * 32;
    end = t + 1 == threads ? count : count * (t + 1) / threads / 32 * 32;
  };
  // First touch by the thread that later reads the slice (NUMA placement, page faults out of
  // the timed runs).
  RunOnThreads(threads, [&](int t) {
    int64_t begin, end;
    slice(t, begin, end);
    std::fill(data + begin, data + end, 1.0f);
  });
  double best = 0.0;
  for (int run = 0; run < 3; ++run) {
    std::vector<double> sums(static_cast<size_t>(threads));
    double seconds = RunOnThreads(threads, [&](int t) {
      int64_t begin, end;
      slice(t, begin, end);
      sums[static_cast<size_t>(t)] = SumFloats(data + begin, end - begin);
    });
    double total = 0.0;
    for (double s : sums) total += s;
    sink.store(static_cast<float>(total));
    best = std::max(best, static_cast<double>(kBytes) / seconds / 1e9);
  }
  return best;
}

GemmFigure MeasureLinearGflops(int64_t m, int64_t n, int64_t k, DType dtype) {
  GemmFigure figure;
  figure.m = m;
  figure.n = n;
  figure.k = k;
  figure.dtype = dtype;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t elements = static_cast<size_t>(n * k);
  std::vector<unsigned char> weights(elements * static_cast<size_t>(DTypeSize(dtype)));
  std::vector<float> block_scales;
  for (size_t i = 0; i < elements; ++i) {
    const float v = normal(rng) * 0.05f;
    switch (dtype) {
      case DType::kF32: reinterpret_cast<float*>(weights.data())[i] = v; break;
      case DType::kBF16: reinterpret_cast<uint16_t*>(weights.data())[i] = FloatToBf16(v); break;
      case DType::kF16: reinterpret_cast<uint16_t*>(weights.data())[i] = FloatToHalf(v); break;
      case DType::kF8E4M3: weights[i] = FloatToFp8E4M3(v * 4000.0f); break;
    }
  }
  WeightMatrix w;
  w.dtype = dtype;
  w.data = weights.data();
  w.rows = n;
  w.cols = k;
  if (dtype == DType::kF8E4M3) {
    block_scales.assign(static_cast<size_t>(((n + 127) / 128) * ((k + 127) / 128)), 1.0f / 4000.0f);
    w.block_scale_inv = block_scales.data();
  }
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
  for (float& v : x) v = normal(rng);
  Linear(x.data(), m, w, y.data());  // warm-up: thread pool, page faults
  double best = 1e30, spent = 0.0;
  for (int run = 0; run < 50 && (run < 3 || spent < 0.5); ++run) {
    Clock::time_point start = Clock::now();
    Linear(x.data(), m, w, y.data());
    double seconds = SecondsSince(start);
    spent += seconds;
    best = std::min(best, seconds);
  }
  figure.seconds = best;
  figure.gflops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / best / 1e9;
  figure.weight_gbs = static_cast<double>(weights.size()) / best / 1e9;
  return figure;
}

}  // namespace envforge::kernels
