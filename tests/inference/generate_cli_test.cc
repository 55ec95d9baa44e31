// `envforge generate` as a user runs it: the real binary on a tiny model directory. Asserts exit
// codes, the --json output and the error messages for broken model directories.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "kernels/device.h"
#include "tests/inference/model_test_util.h"
#include "tests/run_envforge.h"

namespace envforge::inference {
namespace {

namespace fs = std::filesystem;
using model_testing::TinyModel;

using ::envforge::testing::Envforge;

TEST_SUITE("apps.generate") {
  TEST_CASE("generate --json prints n greedy samples with tokens, logprobs, raw logprobs and kept counts") {
    std::string dir = TinyModel("fp32", "v32", /*tokenizer=*/true);
    auto out = Envforge(
        {"generate", "--model", dir, "--prompt", "hi", "-n", "3", "--max-tokens", "5", "--temperature", "0", "--json"});
    INFO(out.stderr_text);
    REQUIRE(out.exit_code == 0);
    auto json = ParseJson(out.stdout_text);
    REQUIRE(json.ok());
    CHECK((*json)["model"] == dir);
    CHECK((*json)["prompt_tokens"].get<int>() >= 2);  // BOS + "hi"
    const Json& samples = (*json)["samples"];
    REQUIRE(samples.size() == 3);
    for (const Json& sample : samples) {
      CHECK(sample["tokens"] == samples[0]["tokens"]);  // greedy: all equal
      size_t n = sample["tokens"].size();
      CHECK(n >= 1);
      CHECK(n <= 5);
      CHECK(sample["logprobs"].size() == n);
      REQUIRE(sample["raw_logprobs"].size() == n);
      for (size_t i = 0; i < n; ++i) {
        // greedy picks from a one-token distribution; the model's own gives the token less mass
        CHECK(sample["raw_logprobs"][i].get<double>() < 0.0);
        CHECK(sample["raw_logprobs"][i].get<double>() <= sample["logprobs"][i].get<double>() + 1e-6);
      }
      CHECK(sample["kept"].size() == n);
      CHECK(sample["text"].is_string());
      std::string finish = sample["finish_reason"].get<std::string>();
      CHECK((finish == "stop" || finish == "length"));
    }
    CHECK((*json)["timing"]["prefill_tokens"] == (*json)["prompt_tokens"]);
  }

  TEST_CASE("generate --chat --thinking parses completions and --prompt-tokens works without a tokenizer") {
    std::string dir = TinyModel("fp32", "v32", /*tokenizer=*/true);
    auto chat = Envforge({"generate",
                          "--model",
                          dir,
                          "--prompt",
                          "what is 1+1?",
                          "--chat",
                          "--thinking",
                          "-n",
                          "2",
                          "--max-tokens",
                          "4",
                          "--temperature",
                          "1",
                          "--top-p",
                          "0.9",
                          "--top-k",
                          "50",
                          "--seed",
                          "7",
                          "--json"});
    INFO(chat.stderr_text);
    REQUIRE(chat.exit_code == 0);
    auto json = ParseJson(chat.stdout_text);
    REQUIRE(json.ok());
    for (const Json& sample : (*json)["samples"]) {
      CHECK((sample.contains("tool_calls") || sample.contains("parse_error")));
      for (const Json& kept : sample["kept"]) CHECK(kept.get<int>() <= 50);
    }
    auto ids =
        Envforge({"generate", "--model", TinyModel("fp32"), "--prompt-tokens", "0,5,9", "--max-tokens", "3", "--json"});
    INFO(ids.stderr_text);
    CHECK(ids.exit_code == 0);
    auto no_tokenizer = Envforge({"generate", "--model", TinyModel("fp32"), "--prompt", "hi"});
    CHECK(no_tokenizer.exit_code == 2);
    CHECK(no_tokenizer.stderr_text.find("tokenizer.json") != std::string::npos);
  }

  TEST_CASE("generate --device cuda runs on the GPU, or says why not and runs on the CPU") {
    std::string dir = TinyModel("fp32", "v32", /*tokenizer=*/true);
    std::vector<std::string> common = {"generate", "--model",      dir, "--prompt",      "hi", "-n",
                                       "2",        "--max-tokens", "6", "--temperature", "0",  "--json"};
    std::vector<std::string> on_cpu = common, on_cuda = common;
    on_cpu.insert(on_cpu.end(), {"--device", "cpu"});
    on_cuda.insert(on_cuda.end(), {"--device", "cuda"});
    auto cpu = Envforge(on_cpu);
    auto cuda = Envforge(on_cuda);
    INFO(cuda.stderr_text);
    REQUIRE(cpu.exit_code == 0);
    REQUIRE(cuda.exit_code == 0);
    auto cpu_json = ParseJson(cpu.stdout_text);
    auto cuda_json = ParseJson(cuda.stdout_text);
    REQUIRE(cpu_json.ok());
    REQUIRE(cuda_json.ok());
    CHECK((*cpu_json)["device"] == "cpu");
    CHECK(cpu.stderr_text.find("running on the CPU") == std::string::npos);  // cpu asked, nothing to say

    Result<kernels::DeviceSelection> expected = kernels::SelectDevice("cuda");
    REQUIRE(expected.ok());
    if (expected->device == kernels::Device::kCuda) {
      CHECK((*cuda_json)["device"] == "cuda");
      CHECK(cuda.stderr_text.find("running on " + expected->detail) != std::string::npos);
      // Greedy tokens of the GPU (bf16 compute) may part from the CPU's after a near-tie; the first
      // one is decided by a wide margin on this model.
      CHECK((*cuda_json)["samples"][0]["tokens"][0] == (*cpu_json)["samples"][0]["tokens"][0]);
    } else {
      // The fallback: one line naming the request and the reason, then the same CPU run.
      CHECK((*cuda_json)["device"] == "cpu");
      CHECK(cuda.stderr_text.find("envforge generate: --device cuda: ") != std::string::npos);
      CHECK(cuda.stderr_text.find(expected->note) != std::string::npos);
      CHECK(cuda.stderr_text.find("running on the CPU") != std::string::npos);
      CHECK((*cuda_json)["samples"] == (*cpu_json)["samples"]);
    }

    auto bad = Envforge({"generate", "--model", dir, "--prompt", "hi", "--device", "tpu"});
    CHECK(bad.exit_code == 2);
    CHECK(bad.stderr_text.find("unknown device 'tpu'") != std::string::npos);
  }

  TEST_CASE("a bad model directory exits 2 naming the missing file") {
    model_testing::TempDir dir;
    auto missing = Envforge({"generate", "--model", dir / "none", "--prompt", "hi"});
    CHECK(missing.exit_code == 2);
    CHECK(missing.stderr_text.find("does not exist") != std::string::npos);
    fs::create_directories(dir / "empty");
    auto empty = Envforge({"generate", "--model", dir / "empty", "--prompt", "hi"});
    CHECK(empty.exit_code == 2);
    CHECK(empty.stderr_text.find("config.json") != std::string::npos);
    fs::create_directories(dir / "config_only");
    fs::copy_file(fs::path(TinyModel("fp32")) / "config.json", dir / "config_only/config.json");
    auto no_weights = Envforge({"generate", "--model", dir / "config_only", "--prompt-tokens", "1,2"});
    INFO(no_weights.stderr_text);
    CHECK(no_weights.exit_code == 2);
    CHECK(no_weights.stderr_text.find("model.safetensors") != std::string::npos);
  }

  TEST_CASE("a truncated safetensors file exits 2 naming the tensor") {
    model_testing::TempDir dir;
    fs::create_directories(dir / "cut");
    fs::path source = TinyModel("fp32");
    fs::copy_file(source / "config.json", dir / "cut/config.json");
    fs::copy_file(source / "model.safetensors", dir / "cut/model.safetensors");
    auto size = fs::file_size(dir / "cut/model.safetensors");
    fs::resize_file(dir / "cut/model.safetensors", size - 1000);
    auto out = Envforge({"generate", "--model", dir / "cut", "--prompt-tokens", "1,2"});
    INFO(out.stderr_text);
    CHECK(out.exit_code == 2);
    CHECK(out.stderr_text.find("tensor") != std::string::npos);
    CHECK(out.stderr_text.find("'") != std::string::npos);  // the tensor's quoted name
  }

  TEST_CASE("bad arguments exit 2") {
    CHECK(Envforge({"generate", "--prompt", "hi"}).exit_code == 2);
    CHECK(Envforge({"generate", "--model", TinyModel("fp32"), "--prompt-tokens", "1,x"}).exit_code == 2);
    CHECK(Envforge({"generate", "--model", TinyModel("fp32"), "--prompt-tokens", "1", "--temperature", "warm"})
              .exit_code == 2);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
