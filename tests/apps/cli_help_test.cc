// The CLI's declarations (apps/envforge/command_table.h) against what the real binary does: every
// command in the table answers --help (and -h) with exit 0 and shows every option it declares
// with its metavar; every command refuses an undeclared option with exit 2, naming it; the
// command list of `envforge --help` and of the hidden `envforge help --commands` is the table.
// Plus the parser and the help generator in process.
#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/command_table.h"
#include "tests/run_envforge.h"

namespace envforge {
namespace {

using cli::AllCommands;
using cli::CommandDecl;
using cli::OptionDecl;
using testing::Envforge;

std::vector<std::string> Words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> words;
  for (std::string word; stream >> word;) words.push_back(word);
  return words;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_CASE("envforge help --commands lists exactly the table, and envforge --help shows each with the footer") {
  auto listed = Envforge({"help", "--commands"});
  REQUIRE(listed.exit_code == 0);
  std::vector<std::string> names;
  std::istringstream lines(listed.stdout_text);
  for (std::string line; std::getline(lines, line);) names.push_back(line);
  std::vector<std::string> table;
  for (const cli::Command& command : AllCommands()) table.push_back(command.decl.name);
  CHECK(names == table);

  auto top = Envforge({"--help"});
  REQUIRE(top.exit_code == 0);
  for (const std::string& name : table) CHECK_MESSAGE(Contains(top.stdout_text, "envforge " + name), name);
  for (const char* footer : {"--limits JSON", "exit codes:", "3 infrastructure failure", "ENVFORGE_LOG"}) {
    CHECK_MESSAGE(Contains(top.stdout_text, footer), footer);
  }
  auto bare = Envforge({});
  CHECK(bare.exit_code == 2);
  CHECK(Contains(bare.stderr_text, "envforge env pack"));
}

TEST_CASE("every command: --help and -h show every declared option; an undeclared option is refused by name") {
  for (const cli::Command& command : AllCommands()) {
    const CommandDecl& decl = command.decl;
    CAPTURE(decl.name);
    std::vector<std::string> args = Words(decl.name);
    args.push_back("--help");
    auto help = Envforge(args);
    CHECK(help.exit_code == 0);
    CHECK(Contains(help.stdout_text, "usage: envforge " + decl.name));
    for (const OptionDecl& option : decl.options) {
      std::string shown = option.name + (option.metavar.empty() ? "" : " " + option.metavar);
      CHECK_MESSAGE(Contains(help.stdout_text, shown), shown, "\n", help.stdout_text);
    }
    args.back() = "-h";
    CHECK(Envforge(args).stdout_text == help.stdout_text);

    args.back() = "--no-such-option-xyz";
    auto refused = Envforge(args);
    CHECK(refused.exit_code == 2);
    CHECK_MESSAGE(Contains(refused.stderr_text, "unknown option --no-such-option-xyz"), refused.stderr_text);
    CHECK(refused.stdout_text.empty());
  }
}

TEST_CASE("groups answer --help with their commands; an unknown sub-command is exit 2") {
  auto bench = Envforge({"bench", "--help"});
  CHECK(bench.exit_code == 0);
  for (const char* name : {"bench sandbox", "bench engine", "bench serve", "bench viewer"}) CHECK(Contains(bench.stdout_text, name));
  auto unknown = Envforge({"bench", "nope"});
  CHECK(unknown.exit_code == 2);
  CHECK(Contains(unknown.stderr_text, "unknown sub-command 'nope'"));
  auto synth = Envforge({"synth", "--help"});  // a command that heads a group lists its sub-commands
  CHECK(Contains(synth.stdout_text, "sub-commands:"));
  CHECK(Contains(synth.stdout_text, "envforge synth merge"));
  CHECK(Envforge({"help", "traj", "export"}).stdout_text == Envforge({"traj", "export", "--help"}).stdout_text);
}

TEST_CASE("the declarations are well formed") {
  std::set<std::string> commands;
  for (const cli::Command& command : AllCommands()) {
    const CommandDecl& decl = command.decl;
    CAPTURE(decl.name);
    CHECK(commands.insert(decl.name).second);
    CHECK(static_cast<bool>(command.run));
    CHECK_FALSE(decl.summary.empty());
    CHECK(decl.min_positional <= decl.max_positional);
    std::set<std::string> options;
    for (const OptionDecl& option : decl.options) {
      CAPTURE(option.name);
      CHECK(options.insert(option.name).second);
      CHECK(option.name.size() >= 2);
      CHECK(option.name[0] == '-');
      CHECK(option.name != "--help");
      CHECK(option.name != "-h");
      CHECK_FALSE(option.help.empty());
      CHECK_FALSE((option.repeated && option.metavar.empty()));
    }
  }
}

const CommandDecl kDemo = {.name = "demo run",
                           .positionals = "FILE [MORE...]",
                           .summary = "a demo",
                           .options = {{.name = "--task", .metavar = "ID", .help = "the task", .required = true},
                                       {.name = "-n", .metavar = "N", .help = "count", .default_text = "1"},
                                       {.name = "--tag", .metavar = "T", .help = "a tag", .repeated = true},
                                       {.name = "--json", .help = "json"}},
                           .min_positional = 1,
                           .max_positional = 3,
                           .separator = true};

TEST_CASE("ParseArgs: values, inline values, flags, repeated options, the separator") {
  auto parsed = cli::ParseArgs(kDemo, {"a", "--task=t1", "-n", "3", "--tag", "x", "--json", "--tag=y", "--", "-q"});
  REQUIRE(parsed.ok());
  CHECK(parsed->positional == std::vector<std::string>{"a", "-q"});
  CHECK(parsed->Option("--task") == "t1");
  CHECK(*parsed->IntOption("-n", 1, 1, 10) == 3);
  CHECK(parsed->Values("--tag") == std::vector<std::string>{"x", "y"});
  CHECK(parsed->Has("--json"));
}

TEST_CASE("ParseArgs: each usage error names what was wrong") {
  auto message = [](std::vector<std::string> args) {
    auto parsed = cli::ParseArgs(kDemo, args);
    REQUIRE_FALSE(parsed.ok());
    return parsed.status().message();
  };
  CHECK(Contains(message({"a", "--task", "t", "--jsn"}), "envforge demo run: unknown option --jsn"));
  CHECK(Contains(message({"a", "--task", "t", "--json=1"}), "--json takes no value"));
  CHECK(Contains(message({"a", "--task"}), "--task needs a value"));
  CHECK(Contains(message({"a"}), "--task ID is required"));
  CHECK(Contains(message({"--task", "t"}), "missing argument (usage: envforge demo run FILE [MORE...] --task ID [options])"));
  CHECK(Contains(message({"a", "b", "c", "d", "--task", "t"}), "unexpected argument 'd'"));
}

TEST_CASE("HelpOf: synopsis, metavars, defaults, repeatable and required marks, wrapped help") {
  std::string help = cli::HelpOf(kDemo);
  CHECK(help.starts_with("usage: envforge demo run FILE [MORE...] --task ID [options]\n"));
  CHECK(Contains(help, "  --task ID                   the task (required)\n"));
  CHECK(Contains(help, "  -n N                        count (default: 1)\n"));
  CHECK(Contains(help, "  --tag T                     a tag (repeatable)\n"));
  CHECK(Contains(help, "  -h, --help                  this text\n"));
  std::string wrapped = cli::Wrap(std::string(150, 'x') + " a b", 4, 40);
  CHECK(wrapped == "    " + std::string(150, 'x') + "\n    a b\n");
}

}  // namespace
}  // namespace envforge
