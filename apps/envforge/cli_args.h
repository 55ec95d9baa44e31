// Command-line declarations and parsing for the envforge CLI. Each command declares its options
// once (CommandDecl: name, metavar, help, default, repeated, required); the parser's accepted
// options, the command's --help and the command list of `envforge --help` are all generated from
// that declaration, so the help cannot drift from what the parser accepts. Unknown options are
// errors that name the option, so a typo never silently changes behaviour. The declaration is also
// the single source of each default: an option not given reads as its declared default text
// (ParsedArgs keeps the declaration it was parsed against), so the "(default: X)" of the help is
// the value used; a default computed at run time is declared `computed`, in words.
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
  std::string name;     // "--task", "-o", "-n"
  std::string metavar;  // "ID", "FILE.sqlite"; empty: a flag that takes no value
  std::string help;     // what it does; wrapped by the help generator
  // Shown as "(default: X)", and the value the option reads as when it is not given: Option,
  // OptionOr, IntOption and DoubleOption parse this text, so the help and the behaviour cannot
  // differ. Empty when there is no default (the option reads as absent).
  std::string default_text;
  bool repeated = false;  // takes a value and may be given again (ParsedArgs::Values)
  bool required = false;  // the parser refuses the command line without it; shown in the synopsis
  std::string section;    // a heading printed before this option when it differs from the previous one's
  // The default is computed at run time (default_text says how, in words: "the number of cores"):
  // the text is shown in the help but never parsed; the option reads as absent when not given and
  // the code computes the value (ComputedIntOption, or Option(...).value_or(computed)).
  bool computed = false;
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
  // The declaration these were parsed against (set by ParseArgs; it outlives the ParsedArgs): the
  // single source of every option's default. Null: no option has a default.
  const CommandDecl* command = nullptr;

  bool Has(const std::string& flag) const { return flags.count(flag) > 0; }
  // Whether the option was given on the command line (a value, a flag or a repeated value).
  bool Given(const std::string& name) const;
  // The given value, else the declared default text (unless it is computed), else nullopt.
  std::optional<std::string> Option(const std::string& name) const;
  // Option(name), or "" when it has neither a value nor a declared default.
  std::string OptionOr(const std::string& name) const;
  // Every value of a repeated option, in command-line order (empty when not given).
  std::vector<std::string> Values(const std::string& name) const;
  // Parses an integer option (the given value, else the declared default) within [min, max]; the
  // error names the option. An option with no declared default, or a computed one, is an internal
  // error when not given (a computed one is read with ComputedIntOption).
  Result<long long> IntOption(const std::string& name, long long min, long long max) const;
  // For an option declared `computed`: the given value within [min, max], else `computed` (the
  // value the code computed, which the declared text describes in words). Internal error for an
  // option not declared computed.
  Result<long long> ComputedIntOption(const std::string& name, long long computed, long long min, long long max) const;
  // Parses a number option (the given value, else the declared default); the error names the option.
  Result<double> DoubleOption(const std::string& name) const;
};

// The declaration of `name` in `command`, or null.
const OptionDecl* FindOption(const CommandDecl& command, const std::string& name);

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
