// kernels/cuda/topk.h against its CPU twin (kernels/cpu/topk.h TopKRows).
//
// Host cases (run everywhere): PlanTopK's choices, TopKWorkspaceBytes's monotonicity, and the
// argument checks, which return before any CUDA call.
// GPU cases: every output row is checked for validity (rows of length <= k: exactly 0..len-1 then
// -1; longer rows: k distinct in-range indices, and the smallest selected key >= the largest
// unselected key, keys being the order-preserving bits the kernel sorts by, NaN as -inf). When the
// k-th largest key is untied the selection is unique, so the index set must also equal the CPU
// twin's exactly. Tolerance: none; top-k of fp32 keys has no rounding. Random, distinct-valued
// cases also assert that the untied comparison happened.
// Under the host emulator (kernels_cuda_emulated_test, where every CUDA thread is a fiber on the
// CPU) the heaviest cases take smaller shapes (OnGpuOrEmulated); each keeps its path (single- or
// multi-block) and the adversarial property it is about.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cpu/topk.h"
#include "kernels/cuda/device_runtime.h"
#include "kernels/cuda/topk.h"
#include "tests/kernels/cuda_test_util.h"

namespace envforge::kernels::cuda {
namespace {

using testing::FromDevice;
using testing::GpuOrNull;
using testing::ToDevice;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kH100Sms = 132;

// The order the kernel selects by (topk.cu OrderKey): NaN as -inf, +0 above -0.
uint32_t SortKey(float value) {
  if (std::isnan(value)) value = -kInf;
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

struct TopKProblem {
  int64_t rows = 1, n = 0, stride = 0, k = 0;
  std::vector<float> scores;     // rows * stride
  std::vector<int32_t> lengths;  // empty: n for every row
};

TopKProblem MakeProblem(int64_t rows, int64_t n, int64_t k, int64_t stride = 0) {
  TopKProblem problem;
  problem.rows = rows;
  problem.n = n;
  problem.k = k;
  problem.stride = stride == 0 ? n : stride;
  problem.scores.assign(static_cast<size_t>(rows * problem.stride), std::nanf(""));  // stride padding: NaN
  return problem;
}

float& At(TopKProblem& problem, int64_t row, int64_t i) {
  return problem.scores[static_cast<size_t>(row * problem.stride + i)];
}

void FillNormal(TopKProblem& problem, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t r = 0; r < problem.rows; ++r) {
    for (int64_t i = 0; i < problem.n; ++i) At(problem, r, i) = normal(rng);
  }
}

// A shuffled run of n consecutive integers starting at `first` (exact in fp32 while below 2^24):
// distinct values packed densely, so a large offset crowds a whole row into a few top-digit bins.
void FillDistinctIntegers(TopKProblem& problem, uint32_t seed, int64_t first) {
  std::mt19937 rng(seed);
  std::vector<int64_t> values(static_cast<size_t>(problem.n));
  for (int64_t r = 0; r < problem.rows; ++r) {
    std::iota(values.begin(), values.end(), first);
    std::shuffle(values.begin(), values.end(), rng);
    for (int64_t i = 0; i < problem.n; ++i) At(problem, r, i) = static_cast<float>(values[static_cast<size_t>(i)]);
  }
}

// TopK on the device: out is pre-filled with a byte pattern (0xABABABAB, neither an index nor -1)
// so a slot left unwritten shows. `calls` > 1 runs it again on the same workspace after refilling
// out, which checks that TopK itself resets the workspace.
std::vector<int32_t> RunOnGpu(const TopKProblem& problem, int calls = 1) {
  const DeviceInfo* gpu = GpuOrNull();
  REQUIRE(gpu != nullptr);
  DeviceBuffer scores = ToDevice(problem.scores);
  DeviceBuffer lengths;
  if (!problem.lengths.empty()) lengths = ToDevice(problem.lengths);
  Result<DeviceBuffer> out = DeviceBuffer::Allocate(static_cast<size_t>(problem.rows * problem.k) * sizeof(int32_t));
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  const size_t workspace_bytes = TopKWorkspaceBytes(problem.rows, problem.n, problem.k, gpu->sm_count);
  Result<DeviceBuffer> workspace = DeviceBuffer::Allocate(workspace_bytes);
  REQUIRE_MESSAGE(workspace.ok(), workspace.status().message());
  Result<Stream> stream = Stream::Create();
  REQUIRE_MESSAGE(stream.ok(), stream.status().message());

  TopKArgs args;
  args.scores = scores.as<float>();
  args.rows = problem.rows;
  args.n = problem.n;
  args.stride = problem.stride;
  args.row_len = problem.lengths.empty() ? nullptr : lengths.as<int32_t>();
  args.k = problem.k;
  args.out = out->as<int32_t>();
  for (int call = 0; call < calls; ++call) {
    Status status = out->Fill(0xAB);
    REQUIRE_MESSAGE(status.ok(), status.message());
    // Upload and Fill run on the legacy default stream, which a non-blocking stream does not wait
    // for (and a pageable upload may return before its DMA lands): finish them first.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    status = TopK(args, workspace->data(), workspace_bytes, gpu->sm_count, stream->get());
    REQUIRE_MESSAGE(status.ok(), status.message());
    status = stream->Synchronize();
    REQUIRE_MESSAGE(status.ok(), status.message());
  }
  return FromDevice<int32_t>(*out, static_cast<size_t>(problem.rows * problem.k));
}

std::vector<int32_t> RunOnCpu(const TopKProblem& problem) {
  std::vector<int64_t> lengths(problem.lengths.begin(), problem.lengths.end());
  std::vector<int32_t> out(static_cast<size_t>(problem.rows * problem.k));
  TopKRows(problem.scores.data(), problem.rows, problem.n, problem.stride, lengths.empty() ? nullptr : lengths.data(),
           problem.k, out.data());
  return out;
}

int64_t RowLength(const TopKProblem& problem, int64_t row) {
  if (problem.lengths.empty()) return problem.n;
  return std::clamp<int64_t>(problem.lengths[static_cast<size_t>(row)], 0, problem.n);
}

struct Verdict {
  std::string error;        // empty when every row is a valid selection
  int64_t untied_rows = 0;  // rows whose index set was compared with the CPU's
};

// Checks every row of `gpu` (see the file comment); `cpu` is TopKRows's output.
Verdict CheckSelections(const TopKProblem& problem, const std::vector<int32_t>& gpu, const std::vector<int32_t>& cpu) {
  Verdict verdict;
  const auto k = static_cast<size_t>(problem.k);
  for (int64_t row = 0; row < problem.rows && verdict.error.empty(); ++row) {
    const std::string where = "row " + std::to_string(row) + ": ";
    const int64_t len = RowLength(problem, row);
    const int32_t* got = gpu.data() + static_cast<size_t>(row) * k;
    const int32_t* expected = cpu.data() + static_cast<size_t>(row) * k;
    if (len <= problem.k) {
      for (size_t i = 0; i < k; ++i) {
        const int32_t want = static_cast<int64_t>(i) < len ? static_cast<int32_t>(i) : -1;
        if (got[i] != want) {
          verdict.error = where + "slot " + std::to_string(i) + " holds " + std::to_string(got[i]) + ", expected " +
                          std::to_string(want) + " (row_len " + std::to_string(len) + " <= k)";
          break;
        }
      }
      continue;
    }
    std::vector<char> chosen(static_cast<size_t>(len), 0);
    for (size_t i = 0; i < k && verdict.error.empty(); ++i) {
      if (got[i] < 0 || got[i] >= len) {
        verdict.error = where + "slot " + std::to_string(i) + " holds " + std::to_string(got[i]) + ", outside [0, " +
                        std::to_string(len) + ")";
      } else if (chosen[static_cast<size_t>(got[i])]) {
        verdict.error = where + "index " + std::to_string(got[i]) + " selected twice";
      } else {
        chosen[static_cast<size_t>(got[i])] = 1;
      }
    }
    if (!verdict.error.empty()) break;
    const float* scores = problem.scores.data() + static_cast<size_t>(row * problem.stride);
    uint32_t min_selected = std::numeric_limits<uint32_t>::max(), max_unselected = 0;
    for (int64_t i = 0; i < len; ++i) {
      const uint32_t key = SortKey(scores[i]);
      if (chosen[static_cast<size_t>(i)]) {
        min_selected = std::min(min_selected, key);
      } else {
        max_unselected = std::max(max_unselected, key);
      }
    }
    if (min_selected < max_unselected) {
      verdict.error = where + "an unselected score ranks above a selected one";
      break;
    }
    if (min_selected > max_unselected) {  // the k-th largest is untied: the set is unique
      ++verdict.untied_rows;
      const std::set<int32_t> gpu_set(got, got + k), cpu_set(expected, expected + k);
      if (gpu_set != cpu_set) verdict.error = where + "index set differs from the CPU twin's";
    }
  }
  return verdict;
}

// Runs the problem on both backends and checks it; requires set equality on every row longer than
// k when `distinct` (the scores of each row are pairwise distinct).
void CheckAgainstCpu(const TopKProblem& problem, bool distinct, int calls = 1) {
  const std::vector<int32_t> gpu = RunOnGpu(problem, calls);
  const Verdict verdict = CheckSelections(problem, gpu, RunOnCpu(problem));
  CHECK_MESSAGE(verdict.error.empty(), verdict.error);
  if (distinct) {
    int64_t long_rows = 0;
    for (int64_t row = 0; row < problem.rows; ++row) long_rows += RowLength(problem, row) > problem.k ? 1 : 0;
    CHECK(verdict.untied_rows == long_rows);
  }
}

int BlocksPerRow(const TopKProblem& problem) {
  return PlanTopK(problem.rows, problem.n, problem.k, GpuOrNull()->sm_count).blocks_per_row;
}

int64_t OnGpuOrEmulated(int64_t on_gpu, int64_t emulated) { return testing::Emulated() ? emulated : on_gpu; }

// The fewest rows that take the single-block path at any length (rows * 2 blocks > the SMs).
int64_t FewestSingleBlockRows() { return GpuOrNull()->sm_count / 2 + 1; }

// ---- host-side cases

TopKArgs ValidArgs() {
  // Fake, suitably aligned device addresses: these cases never reach a CUDA call.
  alignas(16) static float scores[16];
  alignas(16) static int32_t out[16];
  TopKArgs args;
  args.scores = scores;
  args.rows = 1;
  args.n = 1 << 16;
  args.stride = 1 << 16;
  args.k = 2048;
  args.out = out;
  return args;
}

void CheckInvalid(const Status& status, const std::vector<std::string>& mentions) {
  CHECK(status.code() == StatusCode::kInvalidArgument);
  for (const std::string& word : mentions) {
    CHECK_MESSAGE(status.message().find(word) != std::string::npos, status.message() << " lacks '" << word << "'");
  }
}

TEST_SUITE("kernels.cuda.topk") {
  TEST_CASE("PlanTopK splits few long rows across the SMs and keeps one block per row otherwise") {
    const TopKPlan decode_64k = PlanTopK(1, 65536, 2048, kH100Sms);
    CHECK(decode_64k.blocks_per_row == 16);  // slices of 4096 scores
    CHECK(decode_64k.threads == 1024);
    CHECK(PlanTopK(1, 524288, 2048, kH100Sms).blocks_per_row == 128);  // 128 slices of 4096
    CHECK(PlanTopK(8, 131072, 2048, kH100Sms).blocks_per_row == 16);   // 8 * 16 <= 132 SMs
    CHECK(PlanTopK(64, 131072, 2048, kH100Sms).blocks_per_row == 2);
    CHECK(PlanTopK(67, 131072, 2048, kH100Sms).blocks_per_row == 1);  // rows alone fill the SMs
    CHECK(PlanTopK(1024, 131072, 2048, kH100Sms).blocks_per_row == 1);
    CHECK(PlanTopK(1, 8191, 2048, kH100Sms).blocks_per_row == 1);  // two slices would be < 4096
    CHECK(PlanTopK(1, 8192, 2048, kH100Sms).blocks_per_row == 2);
    CHECK(PlanTopK(1, 2048, 2048, kH100Sms).blocks_per_row == 1);  // n <= k: nothing to select
    CHECK(PlanTopK(1, 1 << 20, 16, 1).blocks_per_row == 1);        // one SM: nothing to split across
    for (int64_t rows : {1, 2, 3, 7, 33, 66, 67, 200}) {
      for (int64_t n : {1, 4096, 8192, 20000, 65536, 300000, 524288}) {
        const TopKPlan plan = PlanTopK(rows, n, 2048, kH100Sms);
        CAPTURE(rows);
        CAPTURE(n);
        CHECK(plan.threads == 1024);
        CHECK(plan.blocks_per_row >= 1);
        if (plan.blocks_per_row > 1) {
          CHECK(rows * plan.blocks_per_row <= kH100Sms);
          CHECK(n / plan.blocks_per_row >= 4096);
        }
      }
    }
  }

  TEST_CASE("TopKWorkspaceBytes grows with rows and n, so one allocation serves every smaller call") {
    const std::vector<int64_t> row_counts = {1, 2, 5, 65, 66, 67, 128, 1024};
    const std::vector<int64_t> lengths = {1, 100, 4096, 8191, 8192, 20000, 65536, 65537, 300000, 524288};
    for (int64_t k : {16, 2048, 4096}) {
      for (size_t r = 0; r < row_counts.size(); ++r) {
        for (size_t i = 0; i < lengths.size(); ++i) {
          CAPTURE(k);
          CAPTURE(row_counts[r]);
          CAPTURE(lengths[i]);
          const size_t bytes = TopKWorkspaceBytes(row_counts[r], lengths[i], k, kH100Sms);
          if (r + 1 < row_counts.size()) CHECK(bytes <= TopKWorkspaceBytes(row_counts[r + 1], lengths[i], k, kH100Sms));
          if (i + 1 < lengths.size()) CHECK(bytes <= TopKWorkspaceBytes(row_counts[r], lengths[i + 1], k, kH100Sms));
          // Every shape that plans several blocks per row needs a workspace.
          if (PlanTopK(row_counts[r], lengths[i], k, kH100Sms).blocks_per_row > 1) CHECK(bytes > 0);
        }
      }
    }
    CHECK(TopKWorkspaceBytes(1024, 8191, 2048, kH100Sms) == 0);  // no shape this small goes multi-block
    CHECK(TopKWorkspaceBytes(0, 65536, 2048, kH100Sms) == 0);
    CHECK(TopKWorkspaceBytes(4, 1 << 20, 2048, 1) == 0);
    // Beyond rows = sm_count / 2 every call is single-block: the bound stops growing.
    CHECK(TopKWorkspaceBytes(66, 65536, 2048, kH100Sms) == TopKWorkspaceBytes(1024, 65536, 2048, kH100Sms));
    CHECK(TopKWorkspaceBytes(2, 65536, 2048, kH100Sms) == 2 * TopKWorkspaceBytes(1, 65536, 2048, kH100Sms));
  }

  TEST_CASE("TopK rejects bad arguments before any CUDA call, naming the argument and the value") {
    const int sms = kH100Sms;
    TopKArgs args = ValidArgs();
    const size_t bytes = TopKWorkspaceBytes(args.rows, args.n, args.k, sms);
    REQUIRE(bytes > 0);
    alignas(16) static unsigned char fake_workspace[16];

    SUBCASE("k") {
      for (int64_t k : {0, -1, 4097}) {
        args.k = k;
        CheckInvalid(TopK(args, fake_workspace, bytes, sms, nullptr), {"k", std::to_string(k)});
      }
    }
    SUBCASE("stride below n") {
      args.stride = args.n - 1;
      CheckInvalid(TopK(args, fake_workspace, bytes, sms, nullptr), {"stride", std::to_string(args.n - 1)});
    }
    SUBCASE("negative rows and n; n past int32 indices") {
      args.rows = -2;
      CheckInvalid(TopK(args, fake_workspace, bytes, sms, nullptr), {"rows", "-2"});
      args = ValidArgs();
      args.n = -5;
      CheckInvalid(TopK(args, fake_workspace, bytes, sms, nullptr), {"n", "-5"});
      args.n = int64_t{1} << 31;
      args.stride = args.n;
      CheckInvalid(TopK(args, fake_workspace, bytes, sms, nullptr), {"n", std::to_string(args.n)});
    }
    SUBCASE("null pointers") {
      args.scores = nullptr;
      CheckInvalid(TopK(args, fake_workspace, bytes, sms, nullptr), {"scores", "null"});
      args = ValidArgs();
      args.out = nullptr;
      CheckInvalid(TopK(args, fake_workspace, bytes, sms, nullptr), {"out", "null"});
      args = ValidArgs();
      CheckInvalid(TopK(args, nullptr, bytes, sms, nullptr), {"workspace", "null"});
    }
    SUBCASE("workspace too small for a multi-block call") {
      REQUIRE(PlanTopK(args.rows, args.n, args.k, sms).blocks_per_row > 1);
      CheckInvalid(TopK(args, fake_workspace, bytes - 1, sms, nullptr),
                   {"workspace_bytes", std::to_string(bytes - 1), std::to_string(bytes)});
      CheckInvalid(TopK(args, fake_workspace, 0, sms, nullptr), {"workspace_bytes", "0"});
    }
    SUBCASE("misaligned pointers and a bad sm_count") {
      args.scores = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(args.scores) + 2);
      CheckInvalid(TopK(args, fake_workspace, bytes, sms, nullptr), {"scores", "aligned"});
      args = ValidArgs();
      CheckInvalid(TopK(args, fake_workspace + 4, bytes, sms, nullptr), {"workspace", "aligned"});
      CheckInvalid(TopK(args, fake_workspace, bytes, 0, nullptr), {"sm_count", "0"});
    }
  }

  TEST_CASE("TopK with zero rows is a no-op that touches nothing") {
    TopKArgs args;
    args.rows = 0;
    args.n = 100;
    args.stride = 100;
    args.k = 16;
    CHECK(TopK(args, nullptr, 0, kH100Sms, nullptr).ok());
  }

  // ---- GPU consistency cases

  TEST_CASE("random scores: the same index sets as the CPU for k = 2048 and 16, lengths 1 to 300K") {
    ENVFORGE_REQUIRE_GPU();
    for (int64_t k : {2048, 16}) {
      for (int64_t n : {1, 16, 17, 1000, 2048, 2049, 4097, 8191, 8192, 20000, 65536, 100003, 300000}) {
        for (int64_t rows : {1, 3}) {
          CAPTURE(k);
          CAPTURE(n);
          CAPTURE(rows);
          TopKProblem problem = MakeProblem(rows, n, k);
          FillNormal(problem, static_cast<uint32_t>(n * 7 + k + rows));
          // Normal samples of 300K floats may repeat a value; distinctness is asserted only where it
          // is certain, CheckSelections still compares the sets of every untied row.
          CheckAgainstCpu(problem, /*distinct=*/false);
        }
      }
    }
  }

  TEST_CASE("distinct values crowded into few bins: candidate buffers overflow and rows are read again") {
    ENVFORGE_REQUIRE_GPU();
    const int sms = GpuOrNull()->sm_count;
    for (int64_t k : {2048, 16}) {
      CAPTURE(k);
      // Multi-block: 3,800,000 + [0, 300000) puts ~168K scores in the top pass-1 bin [3932160,
      // 4194304), past the 65536-entry candidate list, so the finishing block reads the row again.
      // Emulated: 2^21 + [0, 70000), all in the pass-1 bin [2^21, 2^21 + 2^18), still past 65536.
      TopKProblem multi = MakeProblem(1, OnGpuOrEmulated(300000, 70000), k);
      FillDistinctIntegers(multi, 11, OnGpuOrEmulated(3800000, int64_t{1} << 21));
      REQUIRE(BlocksPerRow(multi) > 1);
      CheckAgainstCpu(multi, /*distinct=*/true);
      // Single-block: more rows than SMs, each 950,000 + [0, 70000): ~37K scores share the top
      // pass-1 bin [983040, 1048576), past the 4096-entry shared buffer, so pass 2 reads the row again.
      // Emulated: 3 rows of 2^19 + [0, 8000) (too short to split), all 8000 in the pass-1 bin
      // [2^19, 2^19 + 2^16), again past the shared buffer.
      TopKProblem single = testing::Emulated() ? MakeProblem(3, 8000, k) : MakeProblem(sms + 1, 70000, k);
      FillDistinctIntegers(single, 12, OnGpuOrEmulated(950000, int64_t{1} << 19));
      REQUIRE(BlocksPerRow(single) == 1);
      CheckAgainstCpu(single, /*distinct=*/true);
    }
  }

  TEST_CASE("a pass-1 pivot bin that exactly fills its candidate buffer, and one more than fills it") {
    ENVFORGE_REQUIRE_GPU();
    // The row holds n - crowd small integers (0, 1, ...), then crowd integers first, first + 1, ...
    // ascending at the end, all inside one pass-1 bin above every small one: that bin is the pivot
    // bin, holding exactly `crowd` keys. At the buffer's capacity they are collected; one more makes
    // the next pass read the source again. The largest scores sit last, so they would be the ones
    // dropped if an overflow were mishandled; k = crowd - 1 (single-block) needs all but one of them.
    struct Boundary {
      int64_t n, first, capacity;
      bool multi_block;
    };
    // Single-block: n < 8192 cannot split; the bin [2^19, 2^19 + 2^16) against the 4096-entry
    // shared buffer. Multi-block (17 slices): [2^21, 2^21 + 2^18) against the 65536-entry list.
    for (const Boundary boundary :
         {Boundary{6000, int64_t{1} << 19, 4096, false}, Boundary{70000, int64_t{1} << 21, 65536, true}}) {
      for (int64_t crowd : {boundary.capacity, boundary.capacity + 1}) {
        for (int64_t k : {int64_t{16}, std::min<int64_t>(crowd - 1, 4096)}) {
          CAPTURE(boundary.n);
          CAPTURE(crowd);
          CAPTURE(k);
          TopKProblem problem = MakeProblem(1, boundary.n, k);
          const int64_t small = boundary.n - crowd;
          for (int64_t i = 0; i < boundary.n; ++i) {
            At(problem, 0, i) = static_cast<float>(i < small ? i : boundary.first + (i - small));
          }
          REQUIRE((BlocksPerRow(problem) > 1) == boundary.multi_block);
          CheckAgainstCpu(problem, /*distinct=*/true);
        }
      }
    }
  }

  TEST_CASE("values sharing their high bits resolve in the low-digit passes on both paths") {
    ENVFORGE_REQUIRE_GPU();
    for (int64_t n : {5000, 100000, 524288}) {
      for (int64_t k : {2048, 16}) {
        CAPTURE(n);
        CAPTURE(k);
        // 1 + j * 2^-23 for a permutation j of [0, n) (7919 is prime to every n here): distinct, all
        // within [1, 1.07), so the first digit is the same for every score and passes 2 and 3 decide.
        TopKProblem problem = MakeProblem(1, n, k);
        for (int64_t i = 0; i < n; ++i)
          At(problem, 0, i) = 1.0f + static_cast<float>((i * 7919) % n) * std::ldexp(1.0f, -23);
        CheckAgainstCpu(problem, /*distinct=*/true);
      }
    }
  }

  TEST_CASE("row_len per row (0, 1, k, k + 1, negative, above n) and a stride above n") {
    ENVFORGE_REQUIRE_GPU();
    // A row_len above n means n. The last row of each problem says so with +inf in its stride
    // padding, which an unclamped length would select (indices the check rejects as >= n).
    const auto set_padding_inf = [](TopKProblem& problem, int64_t row) {
      for (int64_t i = problem.n; i < problem.stride; ++i) At(problem, row, i) = kInf;
    };
    for (int64_t k : {2048, 16}) {
      CAPTURE(k);
      // Single-block path; stride n + 3 leaves most rows misaligned for 16-byte loads.
      TopKProblem single = MakeProblem(8, 5000, k, 5003);
      FillNormal(single, 21);
      single.lengths = {5000, 0, 1, static_cast<int32_t>(k), static_cast<int32_t>(k + 1), 4999, -3, 5003};
      set_padding_inf(single, 7);
      REQUIRE(BlocksPerRow(single) == 1);
      CheckAgainstCpu(single, /*distinct=*/false);
      // Multi-block path: a full row, one covering a few of the slices, one shorter than k, one above n.
      TopKProblem multi = MakeProblem(4, 40000, k, 40001);
      FillNormal(multi, 22);
      multi.lengths = {40000, 9000, 100, 40001};
      set_padding_inf(multi, 3);
      REQUIRE(BlocksPerRow(multi) > 1);
      CheckAgainstCpu(multi, /*distinct=*/false);
    }
  }

  TEST_CASE("all-negative scores") {
    ENVFORGE_REQUIRE_GPU();
    // 1 row: multi-block; 300 (emulated: the fewest rows that stay single-block): single-block.
    for (int64_t rows : {int64_t{1}, OnGpuOrEmulated(300, FewestSingleBlockRows())}) {
      TopKProblem problem = MakeProblem(rows, 50000, 2048);
      FillNormal(problem, 31);
      for (float& v : problem.scores) v = -std::fabs(v) - 1.0f;
      CAPTURE(rows);
      CheckAgainstCpu(problem, /*distinct=*/false);
    }
  }

  TEST_CASE("all-equal scores, all -inf and all NaN: any k of them, each once") {
    ENVFORGE_REQUIRE_GPU();
    // One bin holds the whole row in every pass, past the 4096-entry shared buffers, so those passes
    // read their source again. 1 row of 10000: multi-block; 200 rows of 10000 (emulated: 3 rows of
    // 5000, too short to split and still past 4096): single-block.
    struct Shape {
      int64_t rows, n;
    };
    const Shape single_block = testing::Emulated() ? Shape{3, 5000} : Shape{200, 10000};
    for (float value : {1.5f, -kInf, std::nanf("")}) {
      for (const Shape shape : {Shape{1, 10000}, single_block}) {
        for (int64_t k : {2048, 16}) {
          CAPTURE(value);
          CAPTURE(shape.rows);
          CAPTURE(k);
          TopKProblem problem = MakeProblem(shape.rows, shape.n, k);
          std::fill(problem.scores.begin(), problem.scores.end(), value);
          REQUIRE(BlocksPerRow(problem) == (shape.rows == 1 ? 2 : 1));
          CheckAgainstCpu(problem, /*distinct=*/false);
        }
      }
    }
  }

  TEST_CASE("infinities, NaN and signed zeros") {
    ENVFORGE_REQUIRE_GPU();
    std::mt19937 rng(41);
    for (int64_t n : {30000, 6000}) {
      // 1 row: multi-block at n = 30000; 200 (emulated: the fewest rows that stay single-block).
      for (int64_t rows : {int64_t{1}, OnGpuOrEmulated(200, FewestSingleBlockRows())}) {
        CAPTURE(n);
        CAPTURE(rows);
        // n = 30000: 150 +inf always selected, then finite values; n = 6000: only ~1000 finite
        // scores, so k = 2048 also takes -inf / NaN entries (which tie with each other).
        TopKProblem problem = MakeProblem(rows, n, 2048);
        FillNormal(problem, static_cast<uint32_t>(n + rows));
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < n; ++i) {
            const uint32_t pick = rng() % 1000;
            float& v = At(problem, r, i);
            if (n == 6000 && pick < 830) {
              v = pick % 2 ? -kInf : std::nanf("");
            } else if (pick < 100) {
              v = std::nanf("");
            } else if (pick < 200) {
              v = -kInf;
            } else if (pick < 205) {
              v = kInf;
            } else if (pick < 215) {
              v = pick % 2 ? 0.0f : -0.0f;
            }
          }
        }
        CheckAgainstCpu(problem, /*distinct=*/false);
      }
    }
  }

  TEST_CASE("many rows (1024; 140 under the emulator, still more blocks than SMs), k = 2048 and 16") {
    ENVFORGE_REQUIRE_GPU();
    for (int64_t k : {2048, 16}) {
      CAPTURE(k);
      TopKProblem problem = MakeProblem(OnGpuOrEmulated(1024, 140), 4500, k);
      FillDistinctIntegers(problem, static_cast<uint32_t>(51 + k), -2250);
      for (float& v : problem.scores) v *= 0.001f;  // still distinct: steps of 0.001 >> fp32 spacing below 4
      REQUIRE(BlocksPerRow(problem) == 1);
      CheckAgainstCpu(problem, /*distinct=*/true);
    }
  }

  TEST_CASE("a single 512K row takes the multi-block path; its workspace can be reused") {
    ENVFORGE_REQUIRE_GPU();
    for (int64_t k : {2048, 16}) {
      CAPTURE(k);
      TopKProblem problem = MakeProblem(1, 524288, k);
      FillDistinctIntegers(problem, static_cast<uint32_t>(61 + k), -262144);
      for (float& v : problem.scores) v = v * 1e-3f + 0.25f;  // mixed signs, many binades, still distinct
      REQUIRE(BlocksPerRow(problem) > 1);
      CheckAgainstCpu(problem, /*distinct=*/true, /*calls=*/2);
      FillNormal(problem, static_cast<uint32_t>(62 + k));
      CheckAgainstCpu(problem, /*distinct=*/false, /*calls=*/2);
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels::cuda
