// Command-line parsing for the envforge CLI: positional words, `--name value` options and
// `--flag` switches, each command declaring which it accepts. Unknown options are errors that
// name the option, so a typo never silently changes behaviour.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace envforge::cli {

struct ArgSpec {
  std::set<std::string> value_options;  // "--task" takes a value
  std::set<std::string> flags;          // "--json" does not
  std::set<std::string> repeated_options;  // "--allow-origin" takes a value and may be given again
  size_t min_positional = 0;
  size_t max_positional = 0;
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

// `command` is used in error messages ("envforge session solve: ...").
Result<ParsedArgs> ParseArgs(const std::string& command, const std::vector<std::string>& args, const ArgSpec& spec);

}  // namespace envforge::cli
