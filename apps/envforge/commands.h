// The envforge CLI's commands. Each runs on its parsed arguments and returns the process exit
// code: 0 success, 1 the command ran and its check failed (a verdict that did not
// pass, an environment that does not check), 2 bad usage or bad input, 3 infrastructure failure.
#pragma once

#include <string>
#include <vector>

#include "apps/envforge/command_table.h"
#include "base/error_table.h"
#include "base/status.h"

namespace envforge::cli {

// base/error_table.h's exit codes.
using ::envforge::kExitCheckFailed;
using ::envforge::kExitInfra;
using ::envforge::kExitOk;
using ::envforge::kExitUsage;

// Prints "<prefix>: <message>" to stderr and returns `code`.
int Fail(const Status& status, int code, const char* prefix = "envforge");
// base/error_table.h's exit code: kExitUsage for what the user can fix (bad input, a missing file
// or task, a corrupt bundle, a denied permission, a wrong state), kExitInfra for everything else.
int ExitCodeFor(const Status& status);

// Each command file declares its commands (name, positionals, options with their metavars and
// help; cli_args.h) next to the functions that run them, and hands them to the table
// (command_table.h) through one of these.
std::vector<Command> EnvCommands();               // env pack|show|check (cmd_env.cc)
std::vector<Command> SessionCommands();           // session solve|run
std::vector<Command> AuditCommands();             // audit X.envdb
std::vector<Command> GenerateCommands();          // generate --model DIR ...
std::vector<Command> RolloutCommands();           // rollout X.envdb --backend SPEC ...
std::vector<Command> SynthCommands();             // synth, synth resume|report|categories
std::vector<Command> SynthMergeCommands();        // synth merge RUN... --out RUN.sqlite
std::vector<Command> BenchSandboxCommands();      // bench sandbox (cmd_bench.cc)
std::vector<Command> BenchEngineCommands();       // bench engine --model DIR
std::vector<Command> BenchFramesCommands();       // bench frames
std::vector<Command> BenchRolloutCommands();      // bench rollout --model DIR --env X --task T
std::vector<Command> BenchKernelsCommands();      // bench kernels (CUDA)
std::vector<Command> BenchServeCommands();        // bench serve --url URL
std::vector<Command> BenchBurstCommands();        // bench burst --url URL (cmd_bench_burst.cc)
std::vector<Command> BenchV1Commands();           // bench v1 --url URL
std::vector<Command> BenchInterpreterCommands();  // bench interpreter X.envdb
std::vector<Command> BenchViewerCommands();       // bench viewer
std::vector<Command> ServeCommands();             // serve, view (cmd_serve.cc)
std::vector<Command> TrajCommands();              // traj ls|show|export, replay (cmd_traj.cc)
std::vector<Command> SearchCommands();            // search corpus build|info, search query|open
std::vector<Command> SearchSynthCommands();       // search synth
std::vector<Command> CodeEnvCommands();           // code import|validate (cmd_code_env.cc)
std::vector<Command> CodeJunitCommands();         // code junit (cmd_code.cc)

}  // namespace envforge::cli
