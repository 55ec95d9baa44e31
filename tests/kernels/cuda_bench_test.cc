// kernels/cuda/kernel_bench.h and `envforge bench kernels`: the roofline table (pure, runs
// everywhere), the bench itself at the tiny model's shapes when a GPU is present, and the CLI's
// behaviour through the real binary: a clear "no CUDA device" line and {"available": false} with
// exit code 3 without a GPU, a JSON report with one entry per kernel shape with one.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "base/json.h"
#include "kernels/cuda/kernel_bench.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/run_envforge.h"

namespace envforge::kernels::cuda {
namespace {

DeviceInfo Named(const std::string& name) {
  DeviceInfo info;
  info.name = name;
  // 2619 MHz x 5120-bit bus: 2 * 2.619e9 * 640 B = 3352.3 GB/s.
  info.memory_clock_khz = 2619000;
  info.memory_bus_bits = 5120;
  return info;
}

TEST_SUITE("kernels.cuda.bench") {
  TEST_CASE("RooflineFor picks the dense peaks of dsa-engine.md 9.1 by device name") {
    struct Row {
      const char* name;
      const char* row;
      double bf16, fp8, hbm;
    };
    const Row rows[] = {
        {"NVIDIA H100 80GB HBM3", "H100 SXM5", 989, 1979, 3350},
        {"NVIDIA H100 SXM5 80GB", "H100 SXM5", 989, 1979, 3350},
        {"NVIDIA H100 PCIe", "H100 PCIe", 756, 1513, 2000},
        {"NVIDIA H800", "H800 SXM5", 989, 1979, 3350},
        {"NVIDIA H200", "H200 SXM", 989, 1979, 4800},
        {"NVIDIA H200 NVL", "H200 SXM", 989, 1979, 4800},
    };
    for (const Row& row : rows) {
      CAPTURE(row.name);
      const Roofline r = RooflineFor(Named(row.name));
      CHECK(r.device == row.row);
      CHECK(r.bf16_tflops == row.bf16);
      CHECK(r.fp8_tflops == row.fp8);
      CHECK(r.hbm_gbs == row.hbm);
    }
  }

  TEST_CASE("RooflineFor falls back to the clock-derived bandwidth and no compute peak") {
    for (const char* name : {"NVIDIA H100 NVL", "NVIDIA GeForce RTX 4090", "NVIDIA B200", ""}) {
      CAPTURE(name);
      const Roofline r = RooflineFor(Named(name));
      CHECK(r.device == "unknown");
      CHECK(r.bf16_tflops == 0);
      CHECK(r.fp8_tflops == 0);
      CHECK(r.hbm_gbs == doctest::Approx(3352.32));
    }
  }

  TEST_CASE("RunKernelBench reports a missing device as Unavailable, or measures the tiny shapes") {
    std::vector<std::string> progress;
    KernelBenchOptions options;
    options.real_shapes = false;
    options.tiny_shapes = true;
    options.iterations = 2;
    options.progress = [&progress](std::string_view line) { progress.emplace_back(line); };
    Roofline roofline;
    auto figures = RunKernelBench(options, &roofline);
    if (testing::GpuOrNull() == nullptr) {
      REQUIRE_FALSE(figures.ok());
      CHECK(figures.status().code() == StatusCode::kUnavailable);
      return;
    }
    REQUIRE_MESSAGE(figures.ok(), figures.status().message());
    CHECK(roofline.hbm_gbs > 0);
    std::set<std::string> kernels;
    for (const KernelFigure& f : *figures) {
      CAPTURE(f.kernel);
      CAPTURE(f.shape);
      kernels.insert(f.kernel);
      CHECK(f.model == "tiny");
      CHECK(f.goal.empty());  // the goals are about the real model
      CHECK(f.time_us > 0);
      CHECK(f.bytes > 0);
      CHECK((f.bound == "compute" || f.bound == "memory"));
      CHECK(f.gbs == doctest::Approx(f.bytes / (f.time_us * 1e-6) / 1e9));
      if (f.bound == "memory") CHECK(f.roofline_fraction == doctest::Approx(f.gbs / roofline.hbm_gbs));
    }
    for (const char* expected : {"indexer_logits_prefill", "indexer_logits_decode", "topk", "sparse_mla_prefill",
                                 "sparse_mla_decode", "hadamard_quant", "gemm_bf16"}) {
      CHECK(kernels.count(expected) == 1);
    }
    // One progress line per figure, plus one per skipped configuration.
    CHECK(progress.size() >= figures->size());
  }

  // The CLI through the real binary (built beside this test in build/bin).
  bool HaveBinary() {
    if (std::filesystem::exists(ExecutableDirectory() + "/envforge")) return true;
    MESSAGE("skipped: the envforge binary is not built beside kernels_cuda_test");
    return false;
  }

  TEST_CASE("envforge bench kernels rejects bad usage with exit code 2") {
    if (!HaveBinary()) return;
    auto shapes = envforge::testing::Envforge({"bench", "kernels", "--shapes", "huge"});
    CHECK(shapes.exit_code == 2);
    CHECK(shapes.stderr_text.find("--shapes expects real, tiny or all, got 'huge'") != std::string::npos);
    auto iterations = envforge::testing::Envforge({"bench", "kernels", "--iterations", "0"});
    CHECK(iterations.exit_code == 2);
    auto unknown = envforge::testing::Envforge({"bench", "kernels", "--bogus"});
    CHECK(unknown.exit_code == 2);
  }

  TEST_CASE("envforge bench kernels says clearly when there is no device, and reports JSON when there is one") {
    if (!HaveBinary()) return;
    auto out = envforge::testing::Envforge({"bench", "kernels", "--json", "--shapes", "tiny", "--iterations", "1"});
    CAPTURE(out.stdout_text);
    CAPTURE(out.stderr_text);
    auto json = ParseJson(out.stdout_text);
    REQUIRE_MESSAGE(json.ok(), json.status().message());
    if (testing::GpuOrNull() == nullptr) {
      CHECK(out.exit_code == 3);
      CHECK((*json)["available"] == false);
      CHECK(!(*json)["reason"].get<std::string>().empty());
      CHECK(out.stderr_text.find("envforge bench kernels: no CUDA device (") != std::string::npos);
      // Without --json: the same line, nothing on stdout.
      auto plain = envforge::testing::Envforge({"bench", "kernels"});
      CHECK(plain.exit_code == 3);
      CHECK(plain.stdout_text.empty());
      CHECK(plain.stderr_text.find("envforge bench kernels: no CUDA device (") != std::string::npos);
      return;
    }
    REQUIRE(out.exit_code == 0);
    CHECK((*json)["available"] == true);
    CHECK((*json)["device"]["name"] == testing::GpuOrNull()->name);
    CHECK((*json)["roofline"]["hbm_gbs"].get<double>() > 0);
    const Json& kernels = (*json)["kernels"];
    REQUIRE(kernels.is_array());
    REQUIRE(!kernels.empty());
    for (const Json& figure : kernels) {
      CHECK(figure["model"] == "tiny");
      CHECK(figure["time_us"].get<double>() > 0);
      CHECK((figure["roofline_fraction"].is_null() || figure["roofline_fraction"].get<double>() >= 0));
    }
    // A progress line per shape on stderr.
    CHECK(out.stderr_text.find("bench kernels: topk") != std::string::npos);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels::cuda
