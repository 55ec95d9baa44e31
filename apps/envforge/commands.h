// The envforge CLI's command groups. Each takes the words after its group name and returns the
// process exit code: 0 success, 1 the command ran and its check failed (a verdict that did not
// pass, an environment that does not check), 2 bad usage or bad input, 3 infrastructure failure.
#pragma once

#include <string>
#include <vector>

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

int RunEnvCommand(const std::vector<std::string>& args);      // env pack|show|check
int RunSessionCommand(const std::vector<std::string>& args);  // session solve|run
int RunBenchCommand(const std::vector<std::string>& args);    // bench sandbox
int RunAuditCommand(const std::vector<std::string>& args);    // audit X.envdb
int RunServeCommand(const std::vector<std::string>& args);    // serve --envs DIR | --stdio
int RunViewCommand(const std::vector<std::string>& args);     // view TRAJECTORIES.sqlite (cmd_serve.cc)
int RunTrajCommand(const std::vector<std::string>& args);     // traj ls|show|export
int RunReplayCommand(const std::vector<std::string>& args);   // replay ID
int RunGenerateCommand(const std::vector<std::string>& args);  // generate --model DIR ...
int RunRolloutCommand(const std::vector<std::string>& args);   // rollout X.envdb --backend SPEC ...
int RunCodeCommand(const std::vector<std::string>& args);  // code junit|import|validate
int RunSearchCommand(const std::vector<std::string>& args);       // search corpus build|info, query, open, synth
int RunSearchSynthCommand(const std::vector<std::string>& args);  // search synth (cmd_search_synth.cc)
int RunSynthCommand(const std::vector<std::string>& args);   // synth ..., synth resume|report|categories
int RunSynthMerge(const std::vector<std::string>& args);     // synth merge RUN... --out RUN.sqlite [--json]
// bench sub-commands other than sandbox (called by RunBenchCommand with the words after the name).
int RunBenchEngine(const std::vector<std::string>& args);  // bench engine --model DIR
int RunBenchServe(const std::vector<std::string>& args);   // bench serve --url URL
int RunBenchKernels(const std::vector<std::string>& args);  // bench kernels [--json] (CUDA)
int RunBenchFrames(const std::vector<std::string>& args);   // bench frames [--sessions N] [--json]
int RunBenchRollout(const std::vector<std::string>& args);  // bench rollout --model DIR --env X --task T
int RunBenchV1(const std::vector<std::string>& args);       // bench v1 --url URL (OpenAI-compatible /v1)
int RunBenchInterpreter(const std::vector<std::string>& args);  // bench interpreter X.envdb (Jupyter kernels)
int RunBenchViewer(const std::vector<std::string>& args);       // bench viewer [--episodes N] (cmd_bench_viewer.cc)
// code sub-commands (called by RunCodeCommand with the words after the name).
int RunCodeJunit(const std::vector<std::string>& args);  // code junit FILE.xml [--producer P] [--root DIR] [--json]
int RunCodeImport(const std::vector<std::string>& args);    // code import INSTANCE.json --repo PATH -o X.envdb
int RunCodeValidate(const std::vector<std::string>& args);  // code validate X.envdb [--runs N]

}  // namespace envforge::cli
