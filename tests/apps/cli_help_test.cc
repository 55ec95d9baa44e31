// The CLI's declarations (apps/envforge/command_table.h) against what the real binary does: every
// command in the table answers --help (and -h) with exit 0 and shows every option it declares
// with its metavar; every command refuses an undeclared option with exit 2, naming it; the
// command list of `envforge --help` and of the hidden `envforge help --commands` is the table.
// Plus the parser and the help generator in process.
#include <doctest/doctest.h>

#include <charconv>
#include <climits>
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
  for (const char* name : {"bench sandbox", "bench engine", "bench serve", "bench viewer"})
    CHECK(Contains(bench.stdout_text, name));
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
  CHECK(*parsed->IntOption("-n", 1, 10) == 3);
  CHECK(parsed->Values("--tag") == std::vector<std::string>{"x", "y"});
  CHECK(parsed->Has("--json"));
}

TEST_CASE("ParsedArgs: an option not given reads as its declared default; a computed one as absent") {
  const CommandDecl decl = {.name = "demo defaults",
                            .options = {{.name = "-n", .metavar = "N", .help = "count", .default_text = "7"},
                                        {.name = "--x", .metavar = "X", .help = "a number", .default_text = "0.5"},
                                        {.name = "--mode", .metavar = "M", .help = "a mode", .default_text = "fast"},
                                        {.name = "--none", .metavar = "V", .help = "no default"},
                                        {.name = "--cores",
                                         .metavar = "C",
                                         .help = "threads",
                                         .default_text = "the number of cores",
                                         .computed = true},
                                        {.name = "--flag", .help = "a flag"}}};
  auto bare = cli::ParseArgs(decl, {});
  REQUIRE(bare.ok());
  CHECK(*bare->IntOption("-n", 1, 10) == 7);
  CHECK(*bare->DoubleOption("--x") == 0.5);
  CHECK(bare->Option("--mode") == "fast");
  CHECK(bare->OptionOr("--mode") == "fast");
  CHECK_FALSE(bare->Given("--mode"));
  CHECK_FALSE(bare->Option("--none").has_value());
  CHECK(bare->OptionOr("--none").empty());
  CHECK_FALSE(bare->Option("--cores").has_value());  // computed: shown in the help, never parsed
  CHECK(*bare->ComputedIntOption("--cores", 16, 1, 64) == 16);
  CHECK_FALSE(bare->IntOption("--cores", 1, 64).ok());        // a computed default is not read as text
  CHECK_FALSE(bare->ComputedIntOption("-n", 3, 1, 10).ok());  // nor a declared one computed
  CHECK_FALSE(bare->IntOption("--none", 1, 10).ok());         // nothing to read
  CHECK_FALSE(bare->IntOption("-n", 8, 10).ok());             // the declared default outside the bounds
  CHECK(Contains(cli::HelpOf(decl), "threads (default: the number of cores)"));

  auto given = cli::ParseArgs(decl, {"-n", "9", "--x=2", "--mode", "slow", "--cores", "4"});
  REQUIRE(given.ok());
  CHECK(*given->IntOption("-n", 1, 10) == 9);
  CHECK(*given->DoubleOption("--x") == 2.0);
  CHECK(given->Option("--mode") == "slow");
  CHECK(given->Given("--mode"));
  CHECK(*given->ComputedIntOption("--cores", 16, 1, 64) == 4);
  auto bad = cli::ParseArgs(decl, {"-n", "11"});
  REQUIRE(bad.ok());
  CHECK(Contains(bad->IntOption("-n", 1, 10).status().message(), "-n must be between 1 and 10, got 11"));
}

bool ParsesAsInteger(const std::string& text) {
  long long value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

bool ParsesAsNumber(const std::string& text) {
  try {
    size_t used = 0;
    (void)std::stod(text, &used);
    return used == text.size();
  } catch (...) {
    return false;
  }
}

TEST_CASE("every command: each declared default reads back through the parser; computed ones say so in words") {
  for (const cli::Command& command : AllCommands()) {
    const CommandDecl& decl = command.decl;
    CAPTURE(decl.name);
    // The command with nothing optional given: its required options and positionals only.
    std::vector<std::string> args(decl.min_positional, "p");
    for (const OptionDecl& option : decl.options) {
      if (!option.required) continue;
      args.push_back(option.name);
      if (!option.metavar.empty()) args.push_back("1");
    }
    auto parsed = cli::ParseArgs(decl, args);
    REQUIRE(parsed.ok());
    for (const OptionDecl& option : decl.options) {
      CAPTURE(option.name);
      if (option.computed) {
        CHECK_FALSE(option.default_text.empty());  // the help says, in words, what the code computes
        CHECK_FALSE(option.metavar.empty());
        if (!option.required) CHECK_FALSE(parsed->Option(option.name).has_value());
        continue;
      }
      if (option.default_text.empty() || option.required) continue;
      CHECK_FALSE(option.metavar.empty());  // a flag has no default to show
      CHECK_FALSE(option.repeated);         // a repeated option's default is not read (Values)
      CHECK(parsed->Option(option.name) == option.default_text);
      if (ParsesAsInteger(option.default_text)) {
        auto value = parsed->IntOption(option.name, LLONG_MIN, LLONG_MAX);
        CHECK_MESSAGE(value.ok(), value.status().message());
      }
      if (ParsesAsNumber(option.default_text)) {
        auto value = parsed->DoubleOption(option.name);
        CHECK_MESSAGE(value.ok(), value.status().message());
      }
    }
  }
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
  CHECK(Contains(message({"--task", "t"}),
                 "missing argument (usage: envforge demo run FILE [MORE...] --task ID [options])"));
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
