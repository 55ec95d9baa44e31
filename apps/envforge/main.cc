// envforge: synthesize agentic RL environments and run them for RL trainers. The commands, their
// options and their help live in the command table (apps/envforge/command_table.h).
#include <string>
#include <vector>

#include "apps/envforge/command_table.h"

int main(int argc, char** argv) { return envforge::cli::RunCli(std::vector<std::string>(argv + 1, argv + argc)); }
