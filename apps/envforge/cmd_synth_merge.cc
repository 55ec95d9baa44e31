// envforge synth merge: combines the run databases of a run split with --shard I/N into one
// (envsynth/run_merge.h) and prints its funnel as `envforge synth report` does.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "envsynth/funnel.h"
#include "envsynth/run_merge.h"
#include "envsynth/run_store.h"

namespace envforge::cli {
namespace {

int Merge(const ParsedArgs& parsed) {
  const char* kCommand = "envforge synth merge";
  if (parsed.positional.empty())
    return Fail(InvalidArgumentError("give at least one run database to merge"), kExitUsage, kCommand);
  auto output = parsed.Option("--out");
  if (!output) return Fail(InvalidArgumentError("--out RUN.sqlite is required"), kExitUsage, kCommand);
  Status merged = envsynth::MergeRuns(parsed.positional, *output);
  if (!merged.ok()) return Fail(merged, ExitCodeFor(merged), kCommand);
  auto store = envsynth::RunStore::Open(*output);
  if (!store.ok()) return Fail(store.status(), kExitInfra, kCommand);
  auto funnel = envsynth::BuildFunnel(*store);
  if (!funnel.ok()) return Fail(funnel.status(), ExitCodeFor(funnel.status()), kCommand);
  if (parsed.Has("--json")) {
    std::printf("%s\n", funnel->ToJson().dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    funnel->Print(stdout);
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> SynthMergeCommands() {
  return {
      {{.name = "synth merge",
        .positionals = "RUN1.sqlite [RUN2.sqlite ...]",
        .summary = "merge the run databases of one run made in shards (--shard I/N) into one, then print its funnel",
        .details =
            "The inputs must have been made with the same options except --shard, --run and --out; an environment "
            "or candidate in two inputs is refused unless its rows are identical. The output is written whole or not "
            "at all.\n"
            "Exit 0 merged, 2 bad input (no input, a missing or foreign file, configs that differ, environments in "
            "two inputs, an existing --out), 3 infrastructure.",
        .options = {{.name = "--out",
                     .metavar = "RUN.sqlite",
                     .help = "the merged run database (must not exist)",
                     .required = true},
                    JsonOption("the funnel as JSON")},
        .min_positional = 1,
        .max_positional = SIZE_MAX},
       Merge},
  };
}

}  // namespace envforge::cli
