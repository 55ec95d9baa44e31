// envforge: synthesize agentic RL environments and run them for RL trainers.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "apps/envforge/commands.h"

namespace {

constexpr const char* kUsage = R"(envforge — agentic RL environments: pack, run, verify.

usage:
  envforge env pack DIR -o OUT.envdb [--max-seconds S] [--max-bytes N] [--provenance JSON] [--json]
                                              pack an environment source directory into a bundle;
                                              schema.sql and the analysis run within S seconds
                                              (default 300) and the bundle within N bytes (default
                                              1073741824), or the pack fails (exit 2) naming the
                                              budget and the statement; an interrupted pack leaves
                                              no temporary file
  envforge env show X.envdb [--json]          manifest, tools, tasks and content hash
  envforge env check X.envdb [--json]         sources compile, schemas valid, every gold solution
                                              passes its verifier in a sandbox session
  envforge session solve X.envdb --task ID [--json]
                                              run the task's gold solution in a session, submit it,
                                              print the verifier's verdict
  envforge session run X.envdb --task ID --calls FILE.jsonl [--json]
                                              play tool calls ({"name","arguments"} per line) in one
                                              session, print each typed result
  envforge bench sandbox X.envdb [--sessions N] [--calls N] [--task T --tool submit_result --arguments JSON]
                        [--code-ready-copies N] [--json]
                                              session create and tool call latency, memory per session
  envforge audit X.envdb [--task ID[,ID]] [--json] [--seed S] [--k K] [--samples N]
                 [--max-enumerate N] [--neighbourhood N] [--boundary N] [--walk N] [--rejudge N] [--lanes N]
                 [--batch N] [--limits JSON] [--task-budget-seconds S] [--no-store]
                                              per task: gold runs, trivial probes, the answer space
                                              (x-domain annotations) and mutants judged by the
                                              verifier and the oracle; false accepts/rejects,
                                              determinism, defects; verdict sound|suspect|broken,
                                              stored in _tasks.audit; exit 1 when any is broken.
                                              A judge that never returns (hang) or a task whose
                                              audit outlasts S seconds (default 600) stops that
                                              task's audit at once: broken, with "stopped" in the
                                              report

  envforge generate --model DIR (--prompt TEXT | --prompt-tokens 1,2,3) [--chat] [--thinking] [-n N]
                 [--max-tokens M] [--temperature T] [--top-p P] [--top-k K] [--seed S] [--stop IDS]
                 [--dense] [--device cpu|cuda|auto] [--json]
                                              N sampled continuations from the embedded DSA engine
                                              (HF config.json + safetensors + tokenizer.json; fp32,
                                              bf16, fp16, FP8 e4m3 with block scales); --json gives
                                              tokens, per-token logprobs and kept-set sizes;
                                              --device cuda runs on the GPU, or says why not and
                                              runs on the CPU
  envforge rollout X.envdb (--task ID | --all) --backend embedded:MODEL_DIR|openai:URL|scripted:FILE.jsonl
                 [-n N] [--model NAME] [--thinking] [--max-turns T] [--max-tokens M] [--temperature X]
                 [--top-p P] [--seed S] [--context-strategy none|summary|discard75|discard-all]
                 [--context-window W] [--trajectories F.sqlite] [--json] ...
                                              N episodes per task played by a model: pass@k for
                                              k = 1, 2, 4, ... N, mean turns and tokens, outcomes by
                                              kind; envforge rollout --help lists every option
  envforge synth --categories ID[,ID...] --envs N --tasks-per-env M --out DIR
                 [--policy embedded:DIR|openai:URL|scripted:F | --no-filter] [--k 100] [--band 0,1]
                 [--max-levels L] [--seed S] [--run RUN.sqlite] [--shard I/N] [--json] ...
                                              synthesize environments: database, toolset, tasks
                                              escalated level by level, validated with repair,
                                              audited, filtered by the policy's pass rate; kept
                                              bundles in DIR; envforge synth --help lists it all
  envforge synth resume RUN.sqlite | report RUN.sqlite [--json] | categories
                                              continue a stopped run; its funnel and cost; the
                                              procedural categories
  envforge bench engine --model DIR [--contexts 1024,4096,16384,65536] [--samples 100]
                 [--prefill-tokens N] [--steps N] [--threads N] [--json]
                                              prefill/decode tokens/s, n-sample decode, KV bytes per
                                              token, decode step split indexer/attention/rest for DSA
                                              vs dense per context, GEMM and bandwidth vs this CPU's
                                              measured peaks
  envforge bench frames [--sessions 1000] [--max-frame-bytes N] [--json]
                                              the manager's RSS while N hostile sessions each
                                              announce the largest frame (and one byte more) and
                                              send nothing; how the over-limit ones end
  envforge bench rollout --model DIR --env X.envdb --task ID [-n 100] [--max-turns 8] [--json]
                                              N episodes at once vs one after another on the embedded
                                              engine: episodes/s, generated tokens/s, their ratio, and
                                              prefill tokens / unique context tokens
  envforge bench kernels [--shapes real|tiny|all] [--iterations N] [--json]
                                              every CUDA kernel at the real and tiny model shapes:
                                              time, TFLOPS or GB/s, fraction of the GPU's roofline
                                              (exit 3 when there is no GPU)
  envforge serve --envs DIR [--host 127.0.0.1] [--port 8080] [--token T] [--max-sessions N]
                 [--session-ttl SECONDS] [--trajectories FILE.sqlite] [--limits JSON] [--kernel-pool N]
                 [--code-ready-copies N] [--runs DIR]
                 [--max-payload BYTES] [--port-file F] [--io-threads N] [--allow-origin O]...
                 [--max-connections N] [--max-unauthenticated N] [--header-timeout-ms MS] ...
                                              JSON-RPC 2.0 over HTTP (POST /rpc), WebSocket (/ws) and
                                              MCP (POST /mcp); GET /health, GET /metrics (Prometheus);
                                              every session recorded; SIGTERM drains and flushes;
                                              envforge serve --help lists every option
  envforge view TRAJECTORIES.sqlite [--host 127.0.0.1] [--port 8080] [--token T] [--port-file F]
                [--runs DIR] [--envs DIR]
                                              the trajectory viewer alone, read-only, at /ui/
                                              (--runs: also the synth runs in DIR, #/runs;
                                              --envs: replay an episode from its page)
  envforge serve --envs DIR --model MODEL_DIR [--model-name NAME] [--device cpu|cuda|auto] ...
  envforge serve --envs DIR --backend embedded:DIR|openai:URL|scripted:FILE.jsonl ...
                                              also an OpenAI-compatible /v1: GET /v1/models, POST
                                              /v1/chat/completions (tools, reasoning, streaming),
                                              POST /v1/completions; concurrent requests are batched
  envforge serve --stdio --envs DIR [--mcp] ...
                                              one JSON-RPC message per line on stdin/stdout (MCP
                                              clients: --mcp)
  envforge bench serve --url URL --env E --task T [--sessions 1000] [--steps 20]
                 [--concurrency 256] [--transport ws|http] [--tool T --arguments JSON] [--chaos]
                 [--trajectories FILE.sqlite] [--token T] [--idle-connections N [--idle-peers K]
                 [--idle-reopen]] [--json]
                                              load a running server through real sockets: latency per
                                              method, calls/s, errors by kind, trajectory
                                              reconciliation (lost must be 0); --chaos kills sessions
                                              and drops connections meanwhile; --idle-connections
                                              holds N silent connections meanwhile and reports the
                                              server's descriptors and memory
  envforge bench v1 --url URL [--concurrency 32] [--requests N] [--max-tokens M] [--model NAME]
                 [--token T] [--json]
                                              load a running server's /v1/chat/completions:
                                              requests/s, completion tokens/s, latency p50/p99
  envforge bench interpreter X.envdb [--sessions 100] [--pool 8] [--executes 2000]
                 [--concurrency 32] [--cold 8] [--json]
                                              interpreter sessions (a sandboxed Jupyter kernel each):
                                              create p50/p99 from the warm pool and cold,
                                              execute("1+1") round trip, executes/s across
                                              sessions, memory per kernel, pool refill rate
  envforge bench viewer [--episodes 100000] [--steps 200] [--store F.sqlite] [--repeat 20] [--browser-runs 5]
                 [--no-browser] [--json]
                                              the trajectory viewer on a synthetic store of N
                                              episodes: /ui/api first page, deep pages, filtered
                                              pages and one long episode (p50/p99 over real HTTP);
                                              list and episode render in headless Chromium
  envforge traj ls FILE.sqlite [--env E] [--task T] [--outcome O] [--rollout R] [--kind K]
                  [--limit N] [--json]        recorded episodes, newest first: id, kind (served |
                                              rollout), env, task, steps, outcome, verdict, start
                                              time, backend
  envforge traj show FILE.sqlite ID [--json]  one episode (ID or a unique prefix of 6+ hex digits):
                                              versions, answer, verdict, each step's call and
                                              result; a rollout: its whole conversation (reasoning,
                                              tool calls, typed results, model turns' tokens,
                                              context events), then the verdict
  envforge traj export FILE.sqlite [--jsonl] [-o OUT] [--env E] [--task T] [--outcome O]
                  [--rollout R] [--kind K]    every episode as one JSON line, oldest first (stdout
                                              by default), with messages, model turns and the
                                              token-exact "tokens" segments
  envforge traj export FILE.sqlite --ipynb -o DIR [--env E] [--task T] [--outcome O] [--rollout R]
                  [--kind K]                  each interpreter episode (execute calls) as a Jupyter
                                              notebook DIR/<episode-id>.ipynb (nbformat 4.5; DIR
                                              is created): code cells with their outputs, the
                                              prompt, model text, restarts and the verdict as
                                              markdown; other episodes are skipped with a warning;
                                              exit 2 when no notebook was written
  envforge search corpus build --from debian -o CORPUS.sqlite [--sources a,b,...] [--json]
  envforge search corpus info|query|open CORPUS.sqlite ...
                                              offline search corpora (SQLite FTS5) built from
                                              Debian dictionaries, WordNet, iso-codes and the
                                              Python documentation (envforge search --help)
  envforge search synth --corpus CORPUS.sqlite --questions N --hops 1..4 -o X.envdb [--seed S]
                        [--breadth B] [--obfuscation quote|keywords|sparse] [--json]
                                              multi-hop questions about long-tail entities of a
                                              corpus, unique by search, with solution paths;
                                              packed as a search environment
  envforge code import INSTANCES.json|.jsonl --repo PATH -o X.envdb [--name NAME] [--json]
                                              a code environment: one task per SWE-bench shaped
                                              instance, its repository at base_commit with no later
                                              history, the gold and test patches kept apart from
                                              sessions
  envforge code validate X.envdb [--task ID] [--runs 3] [--patch FILE] [--json]
                                              runs the tests in the sandbox before and after the
                                              gold patch (or FILE), prints F2P, P2F, P2P, flaky
                                              tests and valid/invalid with the reason, stores the
                                              lists in the bundle; exit 0 valid, 1 invalid
  envforge code junit FILE.xml [--producer auto|pytest|unittest|jest|vitest|mocha|go|surefire|gradle|gtest|ctest|
                 catch2|doctest|phpunit|generic] [--root DIR] [--json]
                                              a test runner's JUnit XML as envforge reads it: each
                                              test's stable id and status (pass, fail, error, skip,
                                              xfail), counts, the producer (detected unless given),
                                              and what made the run broken (a package that did not
                                              build, a file that did not load); exit 2 for a missing,
                                              empty or malformed report or one with no tests
  envforge replay FILE.sqlite ID --envs DIR|X.envdb [--verifier-of OTHER.envdb]
                  [--allow-version-drift] [--live-search] [--limits JSON] [--json]
                                              re-run the episode's calls on a fresh session of the
                                              recorded env version, diff each observation, re-judge
                                              the answer (with OTHER's verifier if given); search
                                              episodes get their recorded search/open/find
                                              responses back (--live-search: ask the backend and
                                              diff what it answers today); exit 0
                                              identical, 1 diverged or verdict changed, 2 bad input,
                                              3 infra

options: --limits JSON on check, solve, run, bench, audit and replay sets per-session limits, e.g.
  '{"wall_time_ms": 2000, "cpu_seconds": 30, "memory_bytes": 268435456, "max_output_bytes": 65536,
    "max_processes": 8, "disk_bytes": 67108864}' (defaults: 10 s per call (audit: 3 s per answer),
  60 s CPU, 512 MiB, 1 MiB output, 16 processes, 256 MiB of disk per session family)

exit codes: 0 ok, 1 check failed (e.g. a verdict that did not pass), 2 bad usage or input,
            3 infrastructure failure. Logs: ENVFORGE_LOG=debug|info|warn|error.
)";

// The part of kUsage after the command entries: --limits and the exit codes.
std::string UsageFooter() {
  std::string usage = kUsage;
  size_t at = usage.find("\noptions: ");
  return at == std::string::npos ? std::string() : usage.substr(at + 1);
}

// kUsage's entries of `command` ("env pack", "replay"; a group alone, "env", gives all of its
// entries): each from its "  envforge <command>" line to the line before the next entry, a blank
// line or the footer. Empty when kUsage has none.
std::string UsageOf(const std::string& command) {
  std::istringstream lines(kUsage);
  std::string line, out;
  bool inside = false;
  const std::string head = "  envforge " + command;
  while (std::getline(lines, line)) {
    if (line.rfind("  envforge ", 0) == 0) {
      inside = line.size() == head.size() ? line == head : line.rfind(head + " ", 0) == 0;
    } else if (line.empty() || line[0] != ' ') {
      inside = false;
    }
    if (inside) out += line + "\n";
  }
  return out;
}

// The command words of args: the group, and its subcommand for the groups that have them.
std::string CommandOf(const std::vector<std::string>& args) {
  static const char* const kGroups[] = {"env", "session", "bench", "traj", "code"};
  bool grouped = std::find(std::begin(kGroups), std::end(kGroups), args[0]) != std::end(kGroups);
  if (grouped && args.size() > 1 && !args[1].starts_with("-")) return args[0] + " " + args[1];
  return args[0];
}

// `envforge COMMAND ... --help` (or -h, anywhere after the command). rollout, serve, bench
// rollout and code junit print their fuller help themselves: their arguments become just
// "--help". For the others, whose parsers have no help, prints their entries of the usage text
// and returns true.
bool PrintedCommandHelp(std::vector<std::string>& args) {
  bool asked = std::any_of(args.begin() + 1, args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; });
  if (!asked) return false;
  const std::string command = CommandOf(args);
  if (command == "search" || command == "synth") return false;  // their own help
  if (command == "rollout" || command == "serve" || command == "bench rollout" || command == "code junit") {
    args.resize(command == "bench rollout" || command == "code junit" ? 2 : 1);
    args.push_back("--help");
    return false;
  }
  std::string entries = UsageOf(command);
  if (entries.empty()) return false;
  std::printf("usage:\n%s\n%s", entries.c_str(), UsageFooter().c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? envforge::cli::kExitUsage : envforge::cli::kExitOk;
  }
  if (PrintedCommandHelp(args)) return envforge::cli::kExitOk;
  std::string group = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (group == "env") return envforge::cli::RunEnvCommand(rest);
  if (group == "session") return envforge::cli::RunSessionCommand(rest);
  if (group == "bench") return envforge::cli::RunBenchCommand(rest);
  if (group == "audit") return envforge::cli::RunAuditCommand(rest);
  if (group == "serve") return envforge::cli::RunServeCommand(rest);
  if (group == "view") return envforge::cli::RunViewCommand(rest);
  if (group == "traj") return envforge::cli::RunTrajCommand(rest);
  if (group == "replay") return envforge::cli::RunReplayCommand(rest);
  if (group == "generate") return envforge::cli::RunGenerateCommand(rest);
  if (group == "rollout") return envforge::cli::RunRolloutCommand(rest);
  if (group == "code") return envforge::cli::RunCodeCommand(rest);
  if (group == "search") return envforge::cli::RunSearchCommand(rest);
  if (group == "synth") return envforge::cli::RunSynthCommand(rest);
  std::fprintf(stderr, "envforge: unknown command '%s' (try envforge help)\n", group.c_str());
  return envforge::cli::kExitUsage;
}
