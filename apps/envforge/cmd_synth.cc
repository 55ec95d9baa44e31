// envforge synth: the synthesis loop (envsynth/synth_run.h) -- categories in, audited and
// pass@k-filtered environment bundles out -- and its report and resume.
#include <unistd.h>

#include <cerrno>
#include <cctype>
#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/progress.h"
#include "apps/envforge/solve_task.h"
#include "base/cleanup_registry.h"
#include "envsynth/funnel.h"
#include "envsynth/llm_proposer.h"
#include "envsynth/procedural_proposer.h"
#include "envsynth/run_store.h"
#include "envsynth/synth_run.h"
#include "inference/backend.h"

namespace envforge::cli {
namespace {

constexpr const char* kDefaultPolicyDir = "data/models/policy-small";

Result<std::pair<double, double>> ParseBand(const std::string& text) {
  size_t comma = text.find(',');
  char* end = nullptr;
  if (comma != std::string::npos) {
    std::string lo_text = text.substr(0, comma), hi_text = text.substr(comma + 1);
    double lo = std::strtod(lo_text.c_str(), &end);
    bool lo_ok = !lo_text.empty() && *end == '\0';
    double hi = std::strtod(hi_text.c_str(), &end);
    if (lo_ok && !hi_text.empty() && *end == '\0') return std::make_pair(lo, hi);
  }
  return InvalidArgumentError("--band takes LO,HI (e.g. 0,1 or 0.1,0.9), got '" + text + "'");
}

Result<std::pair<int64_t, int64_t>> ParseShard(const std::string& text) {
  size_t slash = text.find('/');
  char* end = nullptr;
  if (slash != std::string::npos) {
    long long index = std::strtoll(text.substr(0, slash).c_str(), &end, 10);
    bool index_ok = slash > 0 && *end == '\0';
    std::string count_text = text.substr(slash + 1);
    long long count = std::strtoll(count_text.c_str(), &end, 10);
    if (index_ok && !count_text.empty() && *end == '\0') return std::make_pair<int64_t, int64_t>(index, count);
  }
  return InvalidArgumentError("--shard takes I/N (e.g. 0/4), got '" + text + "'");
}

Status ReadSynthOptions(const ParsedArgs& args, envsynth::SynthOptions& o) {
  o.categories = SplitCommas(args.OptionOr("--categories"));
  struct IntOption {
    const char* name;
    long long min, max;
    int64_t* out;
  };
  int64_t seed = 1;
  const IntOption ints[] = {
      // defaults: the declarations' (SynthCommands; --envs and --tasks-per-env are required)
      {"--envs", 1, 1'000'000, &o.envs},
      {"--tasks-per-env", 1, 1000, &o.tasks_per_env},
      {"--max-levels", 1, 5, &o.max_levels},
      {"--repairs", 0, 100, &o.repairs},
      {"--k", 1, 100'000, &o.band.k},
      {"--early-stop", 0, 100'000, &o.band.early_after},
      {"--audit-lanes", 1, 16, &o.audit_lanes},
      {"--max-turns", 1, 10'000, &o.max_turns},
      {"--max-tokens", 1, 10'000'000, &o.max_tokens},
      {"--seed", 0, INT64_MAX, &seed},
  };
  for (const IntOption& option : ints) {
    ENVFORGE_ASSIGN_OR_RETURN(long long value, args.IntOption(option.name, option.min, option.max));
    *option.out = value;
  }
  o.seed = static_cast<uint64_t>(seed);
  ENVFORGE_ASSIGN_OR_RETURN(
      o.max_tokens_per_turn,
      args.ComputedIntOption("--max-tokens-per-turn", envsynth::DefaultMaxTokensPerTurn(o.max_tokens), 1, 10'000'000));
  o.band.chunk = std::min<int64_t>(20, o.band.k);
  ENVFORGE_ASSIGN_OR_RETURN(o.temperature, args.DoubleOption("--temperature"));
  o.tool_choice = args.OptionOr("--tool-choice");
  o.strict_tools = args.Has("--strict-tools");
  o.dense_policy = args.Has("--dense");
  ENVFORGE_ASSIGN_OR_RETURN(auto band, ParseBand(args.OptionOr("--band")));
  o.band.lo = band.first;
  o.band.hi = band.second;
  if (auto shard = args.Option("--shard")) {
    ENVFORGE_ASSIGN_OR_RETURN(auto parsed, ParseShard(*shard));
    o.shard_index = parsed.first;
    o.shard_count = parsed.second;
  }
  o.out_dir = args.OptionOr("--out");
  if (!o.out_dir.empty()) o.out_dir = std::filesystem::absolute(o.out_dir).lexically_normal().string();
  o.proposer = args.OptionOr("--proposer");
  o.proposer_backend = args.OptionOr("--backend");
  if (o.proposer != "llm" && !o.proposer_backend.empty())
    return InvalidArgumentError("--backend is for --proposer llm");
  o.full_audit = args.Has("--full-audit");
  o.filter = !args.Has("--no-filter");
  if (o.filter) {
    o.policy = args.OptionOr("--policy");
    std::error_code error;
    if (o.policy.empty() && std::filesystem::is_directory(kDefaultPolicyDir, error)) {
      o.policy = "embedded:" + std::filesystem::absolute(kDefaultPolicyDir).string();
    }
    if (o.policy.empty()) {
      return InvalidArgumentError(std::string("no policy for the filter: give --policy SPEC (") + kDefaultPolicyDir +
                                  " is not there), or --no-filter for synthesis only");
    }
  } else if (args.Option("--policy")) {
    return InvalidArgumentError("--policy and --no-filter contradict each other");
  }
  return o.Validate();
}

Result<std::unique_ptr<inference::Backend>> OpenPolicy(const envsynth::SynthOptions& o, const ParsedArgs& args) {
  if (!o.filter) return std::unique_ptr<inference::Backend>();
  inference::BackendOptions backend_options;
  backend_options.model_name = args.OptionOr("--model");
  backend_options.api_key_env = args.OptionOr("--api-key-env");
  backend_options.max_concurrency = 256;
  backend_options.dense_attention = o.dense_policy;
  auto backend = inference::OpenBackend(o.policy, backend_options);
  if (!backend.ok()) return backend.status().WithContext("policy " + o.policy);
  return std::move(backend).value();
}

// The proposer of a run, with the backend that writes for it (llm).
struct ProposerHandle {
  std::unique_ptr<inference::Backend> backend;
  std::unique_ptr<envsynth::Proposer> proposer;
};

Result<ProposerHandle> OpenProposer(const envsynth::SynthOptions& o, const ParsedArgs& args) {
  ProposerHandle handle;
  if (o.proposer != "llm") {
    ENVFORGE_ASSIGN_OR_RETURN(handle.proposer, envsynth::OpenProceduralProposer());
    return handle;
  }
  inference::BackendOptions backend_options;
  backend_options.model_name = args.OptionOr("--model");
  backend_options.api_key_env = args.OptionOr("--api-key-env");
  auto backend = inference::OpenBackend(o.proposer_backend, backend_options);
  if (!backend.ok()) return backend.status().WithContext("--backend " + o.proposer_backend);
  handle.backend = std::move(backend).value();
  envsynth::LlmProposerOptions llm;
  llm.backend_spec = o.proposer_backend;
  llm.temperature = o.temperature;
  ENVFORGE_ASSIGN_OR_RETURN(handle.proposer, envsynth::OpenLlmProposer(*handle.backend, llm));
  return handle;
}

// Checks the categories against the proposer's list before anything is written (a proposer of
// any category, llm, takes ids of [a-z][a-z0-9_]*).
Status CheckCategories(envsynth::Proposer& proposer, const std::vector<std::string>& categories) {
  ENVFORGE_ASSIGN_OR_RETURN(auto known, proposer.Categories());
  if (known.empty()) {
    for (const std::string& category : categories) {
      bool ok = !category.empty() && std::islower(static_cast<unsigned char>(category[0]));
      for (char c : category)
        ok = ok &&
             (std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_');
      if (!ok) return InvalidArgumentError("category id '" + category + "' is not [a-z][a-z0-9_]*");
    }
    return Status::Ok();
  }
  std::string names;
  for (const auto& [id, levels] : known) names += (names.empty() ? "" : ", ") + id;
  for (const std::string& category : categories) {
    bool found = false;
    for (const auto& [id, levels] : known) found = found || id == category;
    if (!found) return InvalidArgumentError("unknown category '" + category + "' (known: " + names + ")");
  }
  return Status::Ok();
}

int PrintFunnel(envsynth::RunStore& store, bool json, const char* command) {
  auto funnel = envsynth::BuildFunnel(store);
  if (!funnel.ok()) return Fail(funnel.status(), ExitCodeFor(funnel.status()), command);
  if (json) {
    std::printf("%s\n", funnel->ToJson().dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    funnel->Print(stdout);
  }
  return kExitOk;
}

// Runs (or continues) the run in `store` to its end, then prints the funnel.
int Drive(envsynth::RunStore& store, envsynth::Proposer& proposer, inference::Backend* policy,
          const envsynth::SynthOptions& o, bool json, const char* command) {
  RaiseFileLimit();
  InstallCleanupSignalHandlers();
  Progress progress("synth", static_cast<size_t>((o.envs + o.shard_count - 1 - o.shard_index) / o.shard_count));
  envsynth::SynthRun run(store, proposer, policy, o, [&](const envsynth::SynthProgress& p) {
    char line[512];
    std::snprintf(line, sizeof line, "%s %s%s %s | %" PRId64 " candidates, %" PRId64 " kept", p.env.c_str(),
                  p.stage.c_str(), p.level ? (" L" + std::to_string(p.level)).c_str() : "", p.detail.c_str(),
                  p.candidates, p.kept);
    progress.Update(static_cast<size_t>(p.envs_done), line);
  });
  Status status = run.Run();
  if (!status.ok()) {
    progress.Finish("stopped");
    return Fail(status, status.code() == StatusCode::kFailedPrecondition ? kExitUsage : ExitCodeFor(status), command);
  }
  progress.Finish("done");
  return PrintFunnel(store, json, command);
}

int RunSynthNew(const ParsedArgs& parsed) {
  const char* kCommand = "envforge synth";
  envsynth::SynthOptions options;
  Status read = ReadSynthOptions(parsed, options);
  if (!read.ok()) return Fail(read, kExitUsage, kCommand);
  auto proposer = OpenProposer(options, parsed);
  if (!proposer.ok()) return Fail(proposer.status(), ExitCodeFor(proposer.status()), kCommand);
  Status categories = CheckCategories(*proposer->proposer, options.categories);
  if (!categories.ok()) return Fail(categories, ExitCodeFor(categories), kCommand);
  std::error_code error;
  std::filesystem::create_directories(options.out_dir, error);
  if (error) return Fail(ErrnoError("--out " + options.out_dir, error.value()), kExitUsage, kCommand);
  if (::access(options.out_dir.c_str(), W_OK) != 0)
    return Fail(ErrnoError("--out " + options.out_dir, errno), kExitUsage, kCommand);
  auto policy = OpenPolicy(options, parsed);
  if (!policy.ok()) return Fail(policy.status(), ExitCodeFor(policy.status()), kCommand);
  const std::string run_path =
      parsed.Option("--run").value_or((std::filesystem::path(options.out_dir) / "run.sqlite").string());
  auto store = envsynth::RunStore::Create(run_path, options.ToJson());
  if (!store.ok()) return Fail(store.status(), ExitCodeFor(store.status()), kCommand);
  return Drive(*store, *proposer->proposer, policy->get(), options, parsed.Has("--json"), kCommand);
}

int RunSynthResume(const ParsedArgs& parsed) {
  const char* kCommand = "envforge synth resume";
  auto store = envsynth::RunStore::Open(parsed.positional[0]);
  if (!store.ok()) return Fail(store.status(), ExitCodeFor(store.status()), kCommand);
  auto options = envsynth::SynthOptions::FromJson(store->config());
  if (!options.ok()) return Fail(options.status(), kExitUsage, kCommand);
  if (auto policy = parsed.Option("--policy")) options->policy = *policy;
  if (auto backend = parsed.Option("--backend")) options->proposer_backend = *backend;
  auto proposer = OpenProposer(*options, parsed);
  if (!proposer.ok()) return Fail(proposer.status(), ExitCodeFor(proposer.status()), kCommand);
  auto policy = OpenPolicy(*options, parsed);
  if (!policy.ok()) return Fail(policy.status(), ExitCodeFor(policy.status()), kCommand);
  Status noted = store->AddEvent({0, 0, "", "", "resume", {{"policy", options->policy}}});
  if (!noted.ok()) return Fail(noted, kExitInfra, kCommand);
  return Drive(*store, *proposer->proposer, policy->get(), *options, parsed.Has("--json"), kCommand);
}

int RunSynthReport(const ParsedArgs& parsed) {
  const char* kCommand = "envforge synth report";
  auto store = envsynth::RunStore::Open(parsed.positional[0]);
  if (!store.ok()) return Fail(store.status(), ExitCodeFor(store.status()), kCommand);
  return PrintFunnel(*store, parsed.Has("--json"), kCommand);
}

int RunSynthCategories(const ParsedArgs& parsed) {
  const char* kCommand = "envforge synth categories";
  auto proposer = envsynth::OpenProceduralProposer();
  if (!proposer.ok()) return Fail(proposer.status(), ExitCodeFor(proposer.status()), kCommand);
  auto categories = (*proposer)->Categories();
  if (!categories.ok()) return Fail(categories.status(), ExitCodeFor(categories.status()), kCommand);
  Json out = Json::array();
  for (const auto& [id, levels] : *categories) out.push_back({{"id", id}, {"max_level", levels}});
  if (parsed.Has("--json")) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    for (const auto& [id, levels] : *categories) std::printf("%-18s levels 1..%" PRId64 "\n", id.c_str(), levels);
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> SynthCommands() {
  const std::string filter = "the filter's episodes";
  const std::string json_help = "the funnel as JSON on stdout (progress stays on stderr)";
  const OptionDecl policy = {.name = "--policy",
                             .metavar = "SPEC",
                             .help = "the filter's policy: embedded:MODEL_DIR | openai:URL | scripted:FILE.jsonl",
                             .default_text = "embedded:data/models/policy-small when that directory exists",
                             .computed = true};
  OptionDecl resume_policy = policy;  // a resumed run keeps the policy it was started with unless given
  resume_policy.default_text = "the run's own";
  const OptionDecl backend = {
      .name = "--backend",
      .metavar = "SPEC",
      .help =
          "with --proposer llm: the model that writes the artefacts (embedded:DIR, openai:URL, scripted:FILE.jsonl)"};
  const OptionDecl model = {
      .name = "--model", .metavar = "NAME", .help = "the model name, for an openai policy or backend"};
  const OptionDecl api_key = {
      .name = "--api-key-env", .metavar = "VAR", .help = "the environment variable holding an openai API key"};
  return {
      {{.name = "synth",
        .summary = "synthesize environments: database, toolset, tasks escalated level by level, validated with repair, "
                   "audited, filtered by the policy's pass rate; kept bundles in --out DIR",
        .details =
            "Synthesizes <environment, tools, task, verifier> bundles (DeepSeek-V3.2 section 3.2.3): per environment "
            "a seeded database and toolset, then M task lineages escalated level by level (a catalogue tool is added "
            "when a level needs it), each candidate validated in sandbox sessions (repaired up to R times), audited "
            "(only \"sound\" verifiers go on) and filtered by the policy's pass rate over k episodes (kept when "
            "strictly inside the band). Kept tasks are written as one DIR/<name>.envdb per environment, servable at "
            "once by `envforge serve --envs DIR`. Every stage is recorded in the run database, so a stopped run (kill "
            "-9 included) resumes where it was.\n"
            "Exit 0 the run finished, 2 bad input (unknown category, unwritable --out, a policy that does not load, "
            "a band that is not 0 <= LO < HI <= 1, a run file of another version), 3 infrastructure.",
        .options =
            {{.name = "--categories",
              .metavar = "ID[,ID...]",
              .help = "comma-separated (envforge synth categories lists them)",
              .required = true},
             {.name = "--envs",
              .metavar = "N",
              .help = "environments, round robin over the categories",
              .required = true},
             {.name = "--tasks-per-env",
              .metavar = "M",
              .help = "task lineages per environment (each gives up to one task per level)",
              .required = true},
             {.name = "--out", .metavar = "DIR", .help = "where kept bundles go (created)", .required = true},
             {.name = "--run",
              .metavar = "RUN.sqlite",
              .help = "the run database, which must not exist",
              .default_text = "DIR/run.sqlite",
              .computed = true},
             {.name = "--proposer",
              .metavar = "procedural|llm",
              .help = "procedural: the seeded generators (offline, deterministic); llm: a model (--backend) writes the "
                      "artefacts through data/prompts/, any category id, errors fed back for repair",
              .default_text = "procedural"},
             backend,
             policy,
             {.name = "--no-filter", .help = "synthesis only: keep every sound candidate, no policy"},
             {.name = "--k", .metavar = "K", .help = "episodes per candidate", .default_text = "100"},
             {.name = "--band",
              .metavar = "LO,HI",
              .help = "keep when LO < pass rate < HI (0,1: solvable but not always)",
              .default_text = "0,1"},
             {.name = "--early-stop",
              .metavar = "N",
              .help = "declare a candidate too easy after N episodes that all passed (0 plays all k; "
                      "envsynth/band_filter.h says what bias this adds)",
              .default_text = "20"},
             {.name = "--max-levels", .metavar = "L", .help = "levels per lineage, 1..5", .default_text = "4"},
             {.name = "--repairs",
              .metavar = "R",
              .help = "re-proposals of a candidate that fails validation",
              .default_text = "2"},
             {.name = "--seed",
              .metavar = "S",
              .help = "the run's seed; environment seeds derive from it",
              .default_text = "1"},
             {.name = "--shard",
              .metavar = "I/N",
              .help =
                  "make only environments i with i % N == I (disjoint across shards; envforge synth merge joins them)"},
             {.name = "--full-audit", .help = "the audit at envforge audit's sizes (default: a tenth of them)"},
             {.name = "--audit-lanes", .metavar = "N", .help = "judge lanes of the audit", .default_text = "2"},
             {.name = "--max-turns",
              .metavar = "T",
              .help = "model turns per episode",
              .default_text = "16",
              .section = filter},
             {.name = "--max-tokens",
              .metavar = "M",
              .help = "generated tokens per episode",
              .default_text = "4096",
              .section = filter},
             {.name = "--max-tokens-per-turn",
              .metavar = "M",
              .help = "generated tokens per policy turn, at most --max-tokens (a turn that runs on ends there)",
              .default_text = "--max-tokens or 2048, the smaller",
              .section = filter,
              .computed = true},
             {.name = "--temperature",
              .metavar = "X",
              .help = "sampling temperature (also the llm proposer's)",
              .default_text = "1.0",
              .section = filter},
             {.name = "--tool-choice",
              .metavar = "auto|required",
              .help = "required: the policy's turns decoded under the tool-call grammar (embedded)",
              .default_text = "auto",
              .section = filter},
             {.name = "--strict-tools",
              .help = "every tool strict, the prompt unchanged (embedded, with --tool-choice auto: a turn is text "
                      "alone or calls decoded under the tool-call grammar; openai: strict function specs)",
              .section = filter},
             {.name = "--dense",
              .help = "an embedded policy plays with dense attention instead of DSA's top-k (same weights)",
              .section = filter},
             {.name = "--model", .metavar = "NAME", .help = model.help, .section = filter},
             {.name = "--api-key-env", .metavar = "VAR", .help = api_key.help, .section = filter},
             JsonOption(json_help)}},
       RunSynthNew},
      {{.name = "synth resume",
        .positionals = "RUN.sqlite",
        .summary = "continue a stopped run where it was",
        .options = {resume_policy, backend, model, api_key, JsonOption(json_help)},
        .min_positional = 1,
        .max_positional = 1},
       RunSynthResume},
      {{.name = "synth report",
        .positionals = "RUN.sqlite",
        .summary = "a run's funnel (candidates, kept, dropped by stage and reason) and cost",
        .options = {JsonOption("the funnel as JSON")},
        .min_positional = 1,
        .max_positional = 1},
       RunSynthReport},
      {{.name = "synth categories",
        .summary = "the procedural categories and their levels",
        .options = {JsonOption("[{id, max_level}] as JSON")}},
       RunSynthCategories},
  };
}

}  // namespace envforge::cli
