#include "apps/envforge/command_table.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "apps/envforge/commands.h"

namespace envforge::cli {
namespace {

// The part of `envforge --help` after the command list.
constexpr const char* kFooter =
    R"(options: --limits JSON on check, solve, run, bench sandbox, audit, rollout and replay sets per-session
  limits, e.g. '{"wall_time_ms": 2000, "cpu_seconds": 30, "memory_bytes": 268435456, "max_output_bytes": 65536,
    "max_processes": 8, "disk_bytes": 67108864}' (defaults: 10 s per call (audit: 3 s per answer),
  60 s CPU, 512 MiB, 1 MiB output, 16 processes, 256 MiB of disk per session family)

exit codes: 0 ok, 1 check failed (e.g. a verdict that did not pass), 2 bad usage or input,
            3 infrastructure failure. Logs: ENVFORGE_LOG=debug|info|warn|error.
)";

std::vector<std::string> Words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> words;
  for (std::string word; stream >> word;) words.push_back(word);
  return words;
}

bool StartsWith(const std::vector<std::string>& args, const std::vector<std::string>& prefix) {
  return prefix.size() <= args.size() && std::equal(prefix.begin(), prefix.end(), args.begin());
}

// The command whose name is the longest prefix of `args`; nullptr when none is.
const Command* MatchCommand(const std::vector<std::string>& args, size_t* words_used) {
  const Command* best = nullptr;
  for (const Command& command : AllCommands()) {
    std::vector<std::string> words = Words(command.decl.name);
    if (StartsWith(args, words) && (best == nullptr || words.size() > *words_used)) {
      best = &command;
      *words_used = words.size();
    }
  }
  return best;
}

// The longest run of leading words of `args` that begins some command's name ("search corpus"):
// a group. Empty when args[0] begins none.
std::string MatchGroup(const std::vector<std::string>& args) {
  std::string group;
  std::vector<std::string> prefix;
  for (const std::string& word : args) {
    prefix.push_back(word);
    bool begins = std::any_of(AllCommands().begin(), AllCommands().end(),
                              [&](const Command& c) { return StartsWith(Words(c.decl.name), prefix); });
    if (!begins) break;
    group += (group.empty() ? "" : " ") + word;
  }
  return group;
}

// One line per command under `group` ("" for all): its synopsis, then its summary.
std::string CommandList(const std::string& group) {
  std::string out;
  for (const Command& command : AllCommands()) {
    const CommandDecl& decl = command.decl;
    // "synth " lists synth's sub-commands only; "synth" lists synth and them.
    bool under =
        group.ends_with(" ") ? decl.name.starts_with(group) : decl.name == group || decl.name.starts_with(group + " ");
    if (!group.empty() && !under) continue;
    std::string synopsis = SynopsisOf(decl).substr(std::string("usage: ").size());
    out += Wrap(synopsis, 2, 100) + Wrap(decl.summary, 8, 100);
  }
  return out;
}

// Words before a "--" (after it they are positional words of a query).
std::vector<std::string> BeforeSeparator(const std::vector<std::string>& args) {
  return {args.begin(), std::find(args.begin(), args.end(), "--")};
}

bool AsksHelp(const std::vector<std::string>& args) {
  auto words = BeforeSeparator(args);
  return std::any_of(words.begin(), words.end(), [](const std::string& a) { return a == "--help" || a == "-h"; });
}

// `envforge GROUP ...` with no command of the group named: its help, or a usage error.
int RunGroup(const std::string& group, const std::vector<std::string>& args) {
  if (AsksHelp(args)) {
    std::printf("usage: envforge %s COMMAND ... (envforge %s COMMAND --help for its options)\n\n%s\n%s", group.c_str(),
                group.c_str(), CommandList(group).c_str(), kFooter);
    return kExitOk;
  }
  size_t used = Words(group).size();
  if (used < args.size() && !args[used].starts_with("-")) {
    std::fprintf(stderr, "envforge %s: unknown sub-command '%s'; expected one of:\n", group.c_str(),
                 args[used].c_str());
  } else {
    std::fprintf(stderr, "envforge %s: expected a sub-command:\n", group.c_str());
  }
  std::fputs(CommandList(group).c_str(), stderr);
  return kExitUsage;
}

// `envforge help [--commands | COMMAND...]`.
int RunHelp(const std::vector<std::string>& rest) {
  if (!rest.empty() && rest[0] == "--commands") {
    for (const Command& command : AllCommands()) std::printf("%s\n", command.decl.name.c_str());
    return kExitOk;
  }
  if (rest.empty()) {
    std::fputs(TopLevelHelp().c_str(), stdout);
    return kExitOk;
  }
  std::vector<std::string> asked = rest;
  asked.push_back("--help");
  return RunCli(asked);
}

}  // namespace

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> table = [] {
    std::vector<Command> all;
    for (auto* part : {EnvCommands,         SessionCommands,     AuditCommands,        GenerateCommands,
                       RolloutCommands,     SynthCommands,       SynthMergeCommands,   BenchSandboxCommands,
                       BenchEngineCommands, BenchFramesCommands, BenchRolloutCommands, BenchKernelsCommands,
                       BenchServeCommands,  BenchBurstCommands,  BenchV1Commands,      BenchInterpreterCommands,
                       BenchViewerCommands, ServeCommands,       TrajCommands,         SearchCommands,
                       SearchSynthCommands, CodeEnvCommands,     CodeJunitCommands}) {
      for (Command& command : part()) all.push_back(std::move(command));
    }
    return all;
  }();
  return table;
}

std::string TopLevelHelp() {
  return "envforge — agentic RL environments: pack, run, verify.\n\n"
         "usage: envforge COMMAND [ARGUMENTS] [OPTIONS]\n"
         "       envforge COMMAND --help    every option of COMMAND with its metavar and default\n\n"
         "commands:\n" +
         CommandList("") + "\n" + kFooter;
}

int RunCli(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(TopLevelHelp().c_str(), stderr);
    return kExitUsage;
  }
  if (args[0] == "help" || args[0] == "--help" || args[0] == "-h") return RunHelp({args.begin() + 1, args.end()});
  size_t used = 0;
  const Command* command = MatchCommand(BeforeSeparator(args), &used);
  if (command == nullptr) {
    std::string group = MatchGroup(BeforeSeparator(args));
    if (!group.empty()) return RunGroup(group, args);
    std::fprintf(stderr, "envforge: unknown command '%s' (envforge --help lists them)\n", args[0].c_str());
    return kExitUsage;
  }
  std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(used), args.end());
  if (AsksHelp(rest)) {
    std::string subcommands = CommandList(command->decl.name + " ");
    std::printf("%s%s", HelpOf(command->decl).c_str(),
                subcommands.empty() ? "" : ("\nsub-commands:\n" + subcommands).c_str());
    return kExitOk;
  }
  auto parsed = ParseArgs(command->decl, rest);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.status().message().c_str());  // it starts with "envforge NAME: "
    return kExitUsage;
  }
  return command->run(*parsed);
}

}  // namespace envforge::cli
