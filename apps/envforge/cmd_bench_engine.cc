// envforge bench engine: throughput figures of the embedded DSA engine on this machine.
//
//   envforge bench engine --model DIR [--contexts 1024,4096,16384,65536] [--samples 100]
//                         [--prefill-tokens 256] [--steps 3] [--threads N] [--json]
//
// Figures (JSON with --json, a table otherwise; progress lines on stderr):
//   * machine: FMA peak GFLOP/s and streaming memory bandwidth (kernels/cpu/peak.h);
//   * gemm: Linear throughput at a prefill-like shape as a fraction of the FMA peak, and at m = 1
//     (decode) as weight bytes per second over the measured bandwidth;
//   * prefill tokens/s through the whole model, decode tokens/s at batch 1, and for `samples`
//     sequences sharing the prompt (forked KV caches, one batched Forward per step) with its
//     speed-up over batch 1 in aggregate tokens/s;
//   * batch-1 decode's memory traffic as a fraction of the bandwidth: the bytes a step must read,
//     as the model counts them (ForwardProfile::weight_bytes + cache_bytes: every weight matrix
//     the step used once, in its stored dtype, with only the routed experts actually chosen plus
//     the shared expert, the embedding row, and the latent rows attended plus the indexer keys
//     scored), over the step time. Step times are the mean over --steps; "best_step_ms" and the
//     "_best" fractions use the fastest step (useful on a machine shared with other work);
//   * KV bytes per token (DSA: latent + indexer key; dense: latent only);
//   * per context L: the decode step time split into indexer / attention / rest, for DSA and for
//     dense attention. Long contexts are not prefilled through the model (far too slow on a few
//     cores): the caches are filled with L synthetic but valid rows (random latents and indexer
//     keys, quantized exactly as the model stores them), then decode steps at position L are timed.
// Goals checked and reported (never asserted): DSA attention time flat beyond index_topk while
// dense attention grows with L; at the largest context the DSA step <= 0.35x the dense step.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "base/json.h"
#include "inference/kv_cache.h"
#include "inference/model.h"
#include "kernels/cpu/fp8_quant.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/peak.h"

namespace envforge::cli {
namespace {

using Clock = std::chrono::steady_clock;
using inference::KvCache;
using inference::Model;
using inference::SequenceInput;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
double Round(double v, double unit = 1e-3) { return std::round(v / unit) * unit; }

void Note(const std::string& line) {
  std::fprintf(stderr, "bench engine: %s\n", line.c_str());
  std::fflush(stderr);
}

Result<std::vector<int64_t>> ParseContexts(const std::string& text) {
  std::vector<int64_t> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    int64_t value = 0;
    auto [ptr, error] = std::from_chars(text.data() + begin, text.data() + end, value);
    if (error != std::errc() || ptr != text.data() + end || value < 1) {
      return InvalidArgumentError("--contexts expects comma-separated positive integers, got '" + text + "'");
    }
    out.push_back(value);
    begin = end + 1;
  }
  return out;
}

// Appends `rows` synthetic rows to every layer of the cache: latents and indexer keys of unit-scale
// random values, quantized by the same writers the model uses.
void FillSynthetic(KvCache& cache, int64_t rows, uint64_t seed) {
  const inference::KvCacheShape& shape = cache.shape();
  cache.BeginAppend(rows);
  kernels::ParallelFor(shape.layers * rows, 256, [&](int64_t begin, int64_t end) {
    std::vector<float> values(static_cast<size_t>(std::max(shape.kv_rank + shape.rope_dim, shape.index_head_dim)));
    std::vector<uint8_t> key(static_cast<size_t>(shape.index_head_dim));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t layer = item / rows, row = item % rows;
      uint64_t state = seed ^ (static_cast<uint64_t>(item) * 0x9e3779b97f4a7c15ULL);
      for (float& v : values) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        v = static_cast<float>(static_cast<int64_t>(state >> 40) - (int64_t{1} << 23)) / static_cast<float>(1 << 23);
      }
      cache.WriteLatent(layer, row, values.data(), values.data() + shape.kv_rank);
      if (shape.index_head_dim > 0) {
        float scale = 0;
        kernels::ActQuantFp8(values.data(), 1, shape.index_head_dim, shape.index_head_dim, shape.pow2_scales,
                             key.data(), &scale);
        cache.WriteIndexKey(layer, row, key.data(), scale);
      }
    }
  });
  cache.CommitAppend();
}

struct StepFigures {
  double step_ms = 0, best_step_ms = 0, indexer_ms = 0, attention_ms = 0, rest_ms = 0;
  double weight_bytes = 0, cache_bytes = 0;  // per step (ForwardProfile)
  Json ToJson() const {
    return Json{{"step_ms", Round(step_ms)},
                {"best_step_ms", Round(best_step_ms)},
                {"indexer_ms", Round(indexer_ms)},
                {"attention_ms", Round(attention_ms)},
                {"rest_ms", Round(rest_ms)}};
  }
};

// Times `steps` decode steps (after one warm-up step) of the given caches, one token each.
Result<StepFigures> TimeDecode(Model& model, const std::vector<KvCache*>& caches, int64_t steps) {
  std::vector<int32_t> tokens(caches.size(), 2);
  std::vector<SequenceInput> batch;
  for (size_t i = 0; i < caches.size(); ++i) batch.push_back({caches[i], std::span<const int32_t>(&tokens[i], 1)});
  std::vector<float> logits;
  ENVFORGE_RETURN_IF_ERROR(model.Forward(batch, &logits));
  model.profile().Reset();
  auto start = Clock::now();
  double best = 1e30;
  for (int64_t s = 0; s < steps; ++s) {
    auto step_start = Clock::now();
    ENVFORGE_RETURN_IF_ERROR(model.Forward(batch, &logits));
    best = std::min(best, SecondsSince(step_start));
  }
  double seconds = SecondsSince(start);
  const auto& p = model.profile();
  const double per_step = 1000.0 / static_cast<double>(steps);
  StepFigures figures;
  figures.step_ms = seconds * per_step;
  figures.best_step_ms = best * 1000.0;
  figures.weight_bytes = static_cast<double>(p.weight_bytes) / static_cast<double>(steps);
  figures.cache_bytes = static_cast<double>(p.cache_bytes) / static_cast<double>(steps);
  figures.indexer_ms = p.indexer_s * per_step;
  figures.attention_ms = p.attention_s * per_step;
  figures.rest_ms = p.rest_s * per_step;
  return figures;
}

int Engine(const ParsedArgs& parsed) {
  auto model_dir = parsed.Option("--model");  // required by the declaration
  auto contexts = ParseContexts(parsed.OptionOr("--contexts"));
  if (!contexts.ok()) return Fail(contexts.status(), kExitUsage);
  auto samples = parsed.IntOption("--samples", 1, 100000);
  auto prefill_tokens = parsed.IntOption("--prefill-tokens", 2, 1'000'000);
  auto steps = parsed.IntOption("--steps", 1, 10000);
  auto threads = parsed.IntOption("--threads", 0, 4096);
  for (const auto* r : {&samples, &prefill_tokens, &steps, &threads}) {
    if (!r->ok()) return Fail(r->status(), kExitUsage);
  }
  if (*threads > 0) kernels::SetThreadCount(static_cast<int>(*threads));
  const int thread_count = kernels::ThreadCount();

  Note("loading " + *model_dir);
  auto sparse_model = Model::Load(*model_dir);
  if (!sparse_model.ok())
    return Fail(sparse_model.status(), ExitCodeFor(sparse_model.status()), "envforge bench engine");
  inference::ModelOptions dense_options;
  dense_options.dense_attention = true;
  auto dense_model = Model::Load(*model_dir, dense_options);
  if (!dense_model.ok()) return Fail(dense_model.status(), ExitCodeFor(dense_model.status()), "envforge bench engine");
  Model& dsa = **sparse_model;
  Model& dense = **dense_model;
  const auto& config = dsa.config();
  const bool has_dsa = !dsa.dense_attention();

  // 1. Machine and GEMM figures.
  Note("measuring the FMA peak and memory bandwidth on " + std::to_string(thread_count) + " threads");
  const double peak_gflops = kernels::MeasureFmaPeakGflops(thread_count);
  const double bandwidth_gbs = kernels::MeasureMemoryBandwidthGBs(thread_count);
  const kernels::WeightMatrix& probe = dsa.weights().layers[0].attn.wq_b;
  Note("measuring Linear throughput");
  kernels::GemmFigure gemm_large = kernels::MeasureLinearGflops(128, probe.rows, probe.cols, probe.dtype);
  kernels::GemmFigure gemm_decode = kernels::MeasureLinearGflops(1, probe.rows, probe.cols, probe.dtype);

  // 2. Prefill, batch-1 decode and n-sample decode with a shared prompt.
  std::vector<int32_t> prompt(static_cast<size_t>(*prefill_tokens));
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>(2 + (i * 7919) % static_cast<size_t>(config.vocab_size - 2));
  Note("prefill of " + std::to_string(prompt.size()) + " tokens");
  auto prompt_cache = dsa.NewCache();
  std::vector<float> logits;
  SequenceInput prefill_input{prompt_cache.get(), prompt};
  auto prefill_start = Clock::now();
  Status prefill_status = dsa.Forward(std::span<const SequenceInput>(&prefill_input, 1), &logits);
  double prefill_s = SecondsSince(prefill_start);
  if (!prefill_status.ok()) return Fail(prefill_status, kExitInfra, "envforge bench engine");

  Note("decode at batch 1");
  auto single = prompt_cache->Fork();
  auto batch1 = TimeDecode(dsa, {single.get()}, *steps);
  if (!batch1.ok()) return Fail(batch1.status(), kExitInfra, "envforge bench engine");
  single.reset();

  Note("decode of " + std::to_string(*samples) + " samples sharing the prompt");
  std::vector<std::unique_ptr<KvCache>> forks;
  std::vector<KvCache*> fork_ptrs;
  for (long long i = 0; i < *samples; ++i) {
    forks.push_back(prompt_cache->Fork());
    fork_ptrs.push_back(forks.back().get());
  }
  auto batched = TimeDecode(dsa, fork_ptrs, *steps);
  if (!batched.ok()) return Fail(batched.status(), kExitInfra, "envforge bench engine");
  const int64_t shared_bytes = forks.empty() ? 0 : forks[0]->prefix_bytes();
  int64_t private_bytes = 0;
  for (const auto& fork : forks) private_bytes += fork->own_bytes();
  forks.clear();
  fork_ptrs.clear();
  prompt_cache.reset();

  const double decode_bytes = batch1->weight_bytes + batch1->cache_bytes;
  const double batch1_tokens_per_s = 1000.0 / batch1->step_ms;
  const double batch1_gbs = decode_bytes / (batch1->step_ms / 1000.0) / 1e9;
  const double batch1_best_gbs = decode_bytes / (batch1->best_step_ms / 1000.0) / 1e9;
  const double batched_tokens_per_s = static_cast<double>(*samples) * 1000.0 / batched->step_ms;

  // 3. Decode step split per context, DSA vs dense, over synthetic caches.
  Json per_context = Json::array();
  std::vector<StepFigures> dsa_steps, dense_steps;
  for (int64_t context : *contexts) {
    Json entry{{"context", context}};
    if (has_dsa) {
      Note("context " + std::to_string(context) + ": DSA decode");
      auto cache = dsa.NewCache();
      FillSynthetic(*cache, context, 1);
      auto figures = TimeDecode(dsa, {cache.get()}, *steps);
      if (!figures.ok()) return Fail(figures.status(), kExitInfra, "envforge bench engine");
      entry["dsa"] = figures->ToJson();
      dsa_steps.push_back(*figures);
    }
    Note("context " + std::to_string(context) + ": dense decode");
    auto cache = dense.NewCache();
    FillSynthetic(*cache, context, 1);
    auto figures = TimeDecode(dense, {cache.get()}, *steps);
    if (!figures.ok()) return Fail(figures.status(), kExitInfra, "envforge bench engine");
    entry["dense"] = figures->ToJson();
    dense_steps.push_back(*figures);
    if (has_dsa) entry["dsa_over_dense"] = Round(dsa_steps.back().step_ms / figures->step_ms);
    per_context.push_back(std::move(entry));
  }

  // Goals: attention flat beyond index_topk (largest / smallest context >= index_topk), dense
  // attention growing, DSA step <= 0.35x dense at the largest context.
  Json goals = Json::object();
  if (has_dsa && !contexts->empty()) {
    int first_sparse = -1;
    for (size_t i = 0; i < contexts->size(); ++i) {
      if ((*contexts)[i] >= config.index_topk && first_sparse < 0) first_sparse = static_cast<int>(i);
    }
    size_t last = contexts->size() - 1;
    if (first_sparse >= 0 && static_cast<size_t>(first_sparse) < last) {
      double flat =
          dsa_steps[last].attention_ms / std::max(dsa_steps[static_cast<size_t>(first_sparse)].attention_ms, 1e-9);
      double dense_growth =
          dense_steps[last].attention_ms / std::max(dense_steps[static_cast<size_t>(first_sparse)].attention_ms, 1e-9);
      goals["dsa_attention_growth"] = Round(flat);
      goals["dense_attention_growth"] = Round(dense_growth);
      goals["context_growth"] = Round(static_cast<double>((*contexts)[last]) /
                                      static_cast<double>((*contexts)[static_cast<size_t>(first_sparse)]));
      goals["dsa_attention_flat"] = flat < 1.5;
    }
    double ratio = dsa_steps[last].step_ms / dense_steps[last].step_ms;
    goals["dsa_over_dense_at_max_context"] = Round(ratio);
    goals["dsa_step_le_0_35_dense"] = ratio <= 0.35;
  }

  Json figures{
      {"model", *model_dir},
      {"architecture", has_dsa ? "DeepseekV32" : "DeepseekV3"},
      {"threads", thread_count},
      {"machine",
       {{"fma_peak_gflops", Round(peak_gflops, 0.1)},
        {"isa", kernels::FmaPeakIsa()},
        {"memory_gbs", Round(bandwidth_gbs, 0.1)}}},
      {"gemm",
       {{"dtype", kernels::DTypeName(probe.dtype)},
        {"shape", {gemm_large.m, gemm_large.n, gemm_large.k}},
        {"gflops", Round(gemm_large.gflops, 0.1)},
        {"fraction_of_fma_peak", Round(gemm_large.gflops / peak_gflops)},
        {"decode_m1_weight_gbs", Round(gemm_decode.weight_gbs, 0.01)},
        {"decode_m1_fraction_of_bandwidth", Round(gemm_decode.weight_gbs / bandwidth_gbs)}}},
      {"prefill",
       {{"tokens", prompt.size()},
        {"seconds", Round(prefill_s)},
        {"tokens_per_s", Round(static_cast<double>(prompt.size()) / prefill_s, 0.1)}}},
      {"decode_batch1",
       {{"context", prompt.size()},
        {"step", batch1->ToJson()},
        {"tokens_per_s", Round(batch1_tokens_per_s, 0.1)},
        {"tokens_per_s_best", Round(1000.0 / batch1->best_step_ms, 0.1)},
        {"weight_bytes_per_step", static_cast<int64_t>(batch1->weight_bytes)},
        {"cache_bytes_per_step", static_cast<int64_t>(batch1->cache_bytes)},
        {"bytes_counted",
         "weights the step used (each matrix once, stored dtype; routed experts actually chosen + shared; embedding "
         "row) + latent rows attended + indexer keys scored (ForwardProfile)"},
        {"read_gbs", Round(batch1_gbs, 0.01)},
        {"fraction_of_bandwidth", Round(batch1_gbs / bandwidth_gbs)},
        {"fraction_of_bandwidth_best", Round(batch1_best_gbs / bandwidth_gbs)}}},
      {"decode_shared_prompt",
       {{"samples", *samples},
        {"step", batched->ToJson()},
        {"tokens_per_s", Round(batched_tokens_per_s, 0.1)},
        {"tokens_per_s_best", Round(static_cast<double>(*samples) * 1000.0 / batched->best_step_ms, 0.1)},
        {"speedup_over_batch1", Round(batched_tokens_per_s / batch1_tokens_per_s, 0.01)},
        {"weight_bytes_per_step", static_cast<int64_t>(batched->weight_bytes)},
        {"cache_bytes_per_step", static_cast<int64_t>(batched->cache_bytes)},
        {"shared_prefix_bytes", shared_bytes},
        {"private_bytes", private_bytes}}},
      {"kv_bytes_per_token",
       {{"dsa", dsa.cache_shape().bytes_per_token()}, {"dense", dense.cache_shape().bytes_per_token()}}},
      {"index_topk", config.index_topk},
      {"contexts", per_context},
      {"goals", goals},
  };
  if (parsed.Has("--json")) {
    std::printf("%s\n", figures.dump(2).c_str());
    return kExitOk;
  }
  std::printf("machine: %.1f GFLOP/s FMA peak (%s), %.1f GB/s memory, %d threads\n", peak_gflops, kernels::FmaPeakIsa(),
              bandwidth_gbs, thread_count);
  std::printf("gemm %s %lldx%lldx%lld: %.1f GFLOP/s (%.0f%% of peak); m=1: %.2f GB/s weights (%.0f%% of bandwidth)\n",
              kernels::DTypeName(probe.dtype), static_cast<long long>(gemm_large.m),
              static_cast<long long>(gemm_large.n), static_cast<long long>(gemm_large.k), gemm_large.gflops,
              100 * gemm_large.gflops / peak_gflops, gemm_decode.weight_gbs,
              100 * gemm_decode.weight_gbs / bandwidth_gbs);
  std::printf(
      "prefill: %.1f tokens/s; decode batch 1: %.1f tokens/s (%.0f%% of bandwidth); %lld shared-prompt samples: %.1f "
      "tokens/s\n",
      static_cast<double>(prompt.size()) / prefill_s, batch1_tokens_per_s, 100 * batch1_gbs / bandwidth_gbs, *samples,
      batched_tokens_per_s);
  std::printf("KV bytes per token: DSA %lld, dense %lld\n", static_cast<long long>(dsa.cache_shape().bytes_per_token()),
              static_cast<long long>(dense.cache_shape().bytes_per_token()));
  std::printf("%10s  %-38s  %-38s\n", "context", "DSA step ms (indexer/attention/rest)",
              "dense step ms (attention/rest)");
  for (size_t i = 0; i < contexts->size(); ++i) {
    std::string dsa_text = "-";
    if (has_dsa) {
      char buffer[128];
      std::snprintf(buffer, sizeof buffer, "%.2f (%.2f/%.2f/%.2f)", dsa_steps[i].step_ms, dsa_steps[i].indexer_ms,
                    dsa_steps[i].attention_ms, dsa_steps[i].rest_ms);
      dsa_text = buffer;
    }
    std::printf("%10lld  %-38s  %.2f (%.2f/%.2f)\n", static_cast<long long>((*contexts)[i]), dsa_text.c_str(),
                dense_steps[i].step_ms, dense_steps[i].attention_ms, dense_steps[i].rest_ms);
  }
  if (!goals.empty()) std::printf("goals: %s\n", goals.dump().c_str());
  return kExitOk;
}

}  // namespace

std::vector<Command> BenchEngineCommands() {
  return {
      {{.name = "bench engine",
        .summary = "prefill/decode tokens/s, n-sample decode, KV bytes per token, decode step split indexer/attention/"
                   "rest for DSA vs dense per context, GEMM and bandwidth vs this CPU's measured peaks",
        .options =
            {{.name = "--model", .metavar = "DIR", .help = "the model directory", .required = true},
             {.name = "--contexts",
              .metavar = "N,N,...",
              .help = "context lengths the decode step is measured at",
              .default_text = "1024,4096,16384,65536"},
             {.name = "--samples", .metavar = "N", .help = "sequences of the n-sample decode", .default_text = "100"},
             {.name = "--prefill-tokens",
              .metavar = "N",
              .help = "prompt tokens of the prefill",
              .default_text = "256"},
             {.name = "--steps", .metavar = "N", .help = "decode steps timed per figure", .default_text = "3"},
             {.name = "--threads", .metavar = "N", .help = "CPU threads (0: the machine's)", .default_text = "0"},
             JsonOption("the figures as JSON")}},
       Engine},
  };
}

}  // namespace envforge::cli
