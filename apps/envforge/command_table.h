// The envforge CLI's command table: every command's declaration (cli_args.h CommandDecl) with the
// function that runs it, and the dispatcher main() calls. `envforge --help`, `envforge CMD --help`
// and the parser all read this one table.
#pragma once

#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"

namespace envforge::cli {

struct Command {
  CommandDecl decl;
  // Runs the command on its parsed arguments; returns the process exit code (commands.h).
  int (*run)(const ParsedArgs& args) = nullptr;
};

// Every command, in the order `envforge --help` lists them. Built once; never empty.
const std::vector<Command>& AllCommands();

// `envforge --help`: the command list with each one's summary, then --limits and the exit codes.
std::string TopLevelHelp();

// The whole CLI: `args` are the words after "envforge". Handles `help`, `--help`/`-h` (top level,
// per group, per command; before any "--"), the hidden `help --commands` (one command name per
// line), unknown commands and usage errors (exit 2), and runs the matched command.
int RunCli(const std::vector<std::string>& args);

}  // namespace envforge::cli
