// Command-line declarations and parsing for the envforge CLI. Each command declares its options
// once (CommandDecl: name, metavar, help, default, repeated, required); the parser's accepted
// options, the command's --help and the command list of `envforge --help` are all generated from
// that declaration, so the help cannot drift from what the parser accepts. Unknown options are
// errors that name the option, so a typo never silently changes behaviour.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace envforge::cli {

// One option of a command.
struct OptionDecl {
  std::string name;          // "--task", "-o", "-n"
  std::string metavar;       // "ID", "FILE.sqlite"; empty: a flag that takes no value
  std::string help;          // what it does; wrapped by the help generator
  std::string default_text;  // shown as "(default: X)"; empty when there is none to show
  bool repeated = false;     // takes a value and may be given again (ParsedArgs::Values)
  bool required = false;     // the parser refuses the command line without it; shown in the synopsis
  std::string section;       // a heading printed before this option when it differs from the previous one's
};

// One command: "env pack", "audit", "search corpus build".
struct CommandDecl {
  std::string name;         // the command words after "envforge"
  std::string positionals;  // their metavars for the synopsis: "X.envdb", "FILE.sqlite ID"
  std::string summary;      // one line for `envforge --help`
  std::string details;      // paragraphs for `envforge NAME --help` ("\n" starts a new one); may be empty
  std::vector<OptionDecl> options;
  size_t min_positional = 0;
  size_t max_positional = 0;
  bool separator = false;  // words after a "--" are positional (a query may start with '-')
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;
  std::set<std::string> flags;
  std::map<std::string, std::vector<std::string>> repeated;

  bool Has(const std::string& flag) const { return flags.count(flag) > 0; }
  std::optional<std::string> Option(const std::string& name) const;
  std::string OptionOr(const std::string& name, const std::string& fallback) const;
  // Every value of a repeated option, in command-line order (empty when not given).
  std::vector<std::string> Values(const std::string& name) const;
  // Parses an integer option within [min, max]; the error names the option.
  Result<long long> IntOption(const std::string& name, long long fallback, long long min, long long max) const;
  // Parses a number option; the error names the option.
  Result<double> DoubleOption(const std::string& name, double fallback) const;
};

// "a,b,,c" -> {"a", "b", "c"} (empty parts dropped): lists given as one option value.
std::vector<std::string> SplitCommas(const std::string& text);

// Parses the words after the command's name against its declaration. Errors (InvalidArgument)
// start with "envforge NAME: " and name the offending word: an undeclared option, a value given
// to a flag, a missing value, a missing required option, too few or too many positionals.
// --help is not handled here (the dispatcher answers it before parsing).
Result<ParsedArgs> ParseArgs(const CommandDecl& command, const std::vector<std::string>& args);

// "usage: envforge NAME POSITIONALS REQUIRED... [options]".
std::string SynopsisOf(const CommandDecl& command);
// The whole `envforge NAME --help` text: synopsis, summary, details, every option with its
// metavar, help and default.
std::string HelpOf(const CommandDecl& command);
// `text` wrapped to `width` columns, every line indented by `indent` spaces ("\n" in text starts a
// new line). Lines of the result end in "\n".
std::string Wrap(const std::string& text, size_t indent, size_t width);

// Options several commands share, declared once here.
OptionDecl JsonOption(std::string help = "the result as JSON on stdout");
OptionDecl LimitsOption();  // --limits JSON: per-session sandbox limits, with the defaults

}  // namespace envforge::cli
