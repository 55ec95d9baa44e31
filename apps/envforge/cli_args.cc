#include "apps/envforge/cli_args.h"

#include <charconv>
#include <sstream>

namespace envforge::cli {

const OptionDecl* FindOption(const CommandDecl& command, const std::string& name) {
  for (const OptionDecl& option : command.options) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

namespace {

// The declaration of `name` in the command `parsed` was parsed against, or null.
const OptionDecl* DeclOf(const ParsedArgs& parsed, const std::string& name) {
  return parsed.command == nullptr ? nullptr : FindOption(*parsed.command, name);
}

// The declared default text of `name` to parse, or nullopt (none declared, or a computed one).
std::optional<std::string> DeclaredDefault(const ParsedArgs& parsed, const std::string& name) {
  const OptionDecl* option = DeclOf(parsed, name);
  if (option == nullptr || option->computed || option->default_text.empty()) return std::nullopt;
  return option->default_text;
}

// Where the text being parsed came from, for errors: a declared default is a bug in the CLI.
Status BadValue(const std::string& name, bool declared, const std::string& message) {
  if (declared) return InternalError("the declared default of " + name + " is wrong: " + message);
  return InvalidArgumentError(name + " " + message);
}

Result<long long> ParseInt(const std::string& name, const std::string& text, bool declared, long long min,
                           long long max) {
  long long value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return BadValue(name, declared, "expects an integer, got '" + text + "'");
  }
  if (value < min || value > max) {
    return BadValue(name, declared,
                    "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + text);
  }
  return value;
}

}  // namespace

bool ParsedArgs::Given(const std::string& name) const {
  return options.count(name) > 0 || flags.count(name) > 0 || repeated.count(name) > 0;
}

std::optional<std::string> ParsedArgs::Option(const std::string& name) const {
  auto it = options.find(name);
  if (it == options.end()) return DeclaredDefault(*this, name);
  return it->second;
}

std::string ParsedArgs::OptionOr(const std::string& name) const { return Option(name).value_or(""); }

std::vector<std::string> ParsedArgs::Values(const std::string& name) const {
  auto it = repeated.find(name);
  return it == repeated.end() ? std::vector<std::string>() : it->second;
}

Result<long long> ParsedArgs::IntOption(const std::string& name, long long min, long long max) const {
  if (auto it = options.find(name); it != options.end()) return ParseInt(name, it->second, false, min, max);
  const OptionDecl* option = DeclOf(*this, name);
  if (option != nullptr && option->computed) {
    return InternalError(name + " has a computed default; it is read with ComputedIntOption");
  }
  auto declared = DeclaredDefault(*this, name);
  if (!declared) return InternalError(name + " was not given and declares no default");
  return ParseInt(name, *declared, true, min, max);
}

Result<long long> ParsedArgs::ComputedIntOption(const std::string& name, long long computed, long long min,
                                                long long max) const {
  const OptionDecl* option = DeclOf(*this, name);
  if (option == nullptr || !option->computed) return InternalError(name + " is not declared with a computed default");
  if (auto it = options.find(name); it != options.end()) return ParseInt(name, it->second, false, min, max);
  return computed;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

Result<double> ParsedArgs::DoubleOption(const std::string& name) const {
  std::optional<std::string> text;
  bool declared = false;
  if (auto it = options.find(name); it != options.end()) {
    text = it->second;
  } else {
    const OptionDecl* option = DeclOf(*this, name);
    if (option != nullptr && option->computed) return InternalError(name + " has a computed default");
    text = DeclaredDefault(*this, name);
    declared = true;
    if (!text) return InternalError(name + " was not given and declares no default");
  }
  try {
    size_t used = 0;
    double value = std::stod(*text, &used);
    if (used == text->size()) return value;
  } catch (...) {
  }
  return BadValue(name, declared, "expects a number, got '" + *text + "'");
}

namespace {

Status UsageError(const CommandDecl& command, const std::string& message) {
  return InvalidArgumentError("envforge " + command.name + ": " + message);
}

// Records one option word (and its value, taken from `inline_value` or the next word).
Status TakeOption(const CommandDecl& command, const std::vector<std::string>& args, size_t& i, ParsedArgs& parsed) {
  const std::string& arg = args[i];
  std::string name = arg;
  std::optional<std::string> inline_value;
  if (auto eq = arg.find('='); eq != std::string::npos) {
    name = arg.substr(0, eq);
    inline_value = arg.substr(eq + 1);
  }
  const OptionDecl* option = FindOption(command, name);
  if (option == nullptr) {
    return UsageError(command, "unknown option " + name + " (envforge " + command.name + " --help lists them)");
  }
  if (option->metavar.empty()) {
    if (inline_value) return UsageError(command, name + " takes no value");
    parsed.flags.insert(name);
    return Status::Ok();
  }
  std::string value;
  if (inline_value) {
    value = *inline_value;
  } else if (i + 1 < args.size()) {
    value = args[++i];
  } else {
    return UsageError(command, name + " needs a value (" + name + " " + option->metavar + ")");
  }
  if (option->repeated) {
    parsed.repeated[name].push_back(std::move(value));
  } else {
    parsed.options[name] = std::move(value);
  }
  return Status::Ok();
}

Status CheckComplete(const CommandDecl& command, const ParsedArgs& parsed) {
  for (const OptionDecl& option : command.options) {
    if (!option.required) continue;
    bool given =
        parsed.options.count(option.name) || parsed.flags.count(option.name) || parsed.repeated.count(option.name);
    if (!given)
      return UsageError(command, option.name + (option.metavar.empty() ? "" : " " + option.metavar) + " is required");
  }
  if (parsed.positional.size() < command.min_positional) {
    return UsageError(command, "missing argument (" + SynopsisOf(command) + ")");
  }
  if (parsed.positional.size() > command.max_positional) {
    return UsageError(command, "unexpected argument '" + parsed.positional[command.max_positional] + "'");
  }
  return Status::Ok();
}

bool IsOptionWord(const std::string& arg) { return arg.size() > 1 && arg[0] == '-'; }

}  // namespace

Result<ParsedArgs> ParseArgs(const CommandDecl& command, const std::vector<std::string>& args) {
  ParsedArgs parsed;
  parsed.command = &command;
  for (size_t i = 0; i < args.size(); ++i) {
    if (command.separator && args[i] == "--") {
      parsed.positional.insert(parsed.positional.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (IsOptionWord(args[i])) {
      ENVFORGE_RETURN_IF_ERROR(TakeOption(command, args, i, parsed));
    } else {
      parsed.positional.push_back(args[i]);
    }
  }
  ENVFORGE_RETURN_IF_ERROR(CheckComplete(command, parsed));
  return parsed;
}

std::string Wrap(const std::string& text, size_t indent, size_t width) {
  std::string out, line;
  const std::string pad(indent, ' ');
  auto flush = [&] {
    out += pad + line + "\n";
    line.clear();
  };
  std::istringstream paragraphs(text);
  std::string paragraph;
  while (std::getline(paragraphs, paragraph)) {
    std::istringstream words(paragraph);
    std::string word;
    bool any = false;
    while (words >> word) {
      if (!line.empty() && indent + line.size() + 1 + word.size() > width) flush();
      line += (line.empty() ? "" : " ") + word;
      any = true;
    }
    if (any || paragraph.empty()) flush();
  }
  return out;
}

std::string SynopsisOf(const CommandDecl& command) {
  std::string synopsis = "usage: envforge " + command.name;
  if (!command.positionals.empty()) synopsis += " " + command.positionals;
  bool optional = false;
  for (const OptionDecl& option : command.options) {
    if (option.required) {
      synopsis += " " + option.name + (option.metavar.empty() ? "" : " " + option.metavar);
    } else {
      optional = true;
    }
  }
  return optional ? synopsis + " [options]" : synopsis;
}

namespace {

constexpr size_t kHelpWidth = 100;
constexpr size_t kHelpColumn = 30;  // where an option's help starts

std::string OptionLine(const OptionDecl& option) {
  std::string head = "  " + option.name + (option.metavar.empty() ? "" : " " + option.metavar);
  std::string help = option.help;
  if (!option.default_text.empty()) help += " (default: " + option.default_text + ")";
  if (option.repeated) help += " (repeatable)";
  if (option.required) help += " (required)";
  std::string body = Wrap(help, kHelpColumn, kHelpWidth);
  if (head.size() + 2 <= kHelpColumn) return head + body.substr(head.size());
  return head + "\n" + body;
}

}  // namespace

std::string HelpOf(const CommandDecl& command) {
  std::string help = SynopsisOf(command) + "\n\n" + Wrap(command.summary, 0, kHelpWidth);
  if (!command.details.empty()) {
    std::string paragraphs;  // a blank line between the paragraphs of the details
    for (char c : command.details) paragraphs += c == '\n' ? std::string("\n\n") : std::string(1, c);
    help += "\n" + Wrap(paragraphs, 0, kHelpWidth);
  }
  help += "\noptions:\n";
  std::string section;
  for (const OptionDecl& option : command.options) {
    if (option.section != section) {  // an option of no section after sectioned ones: "other"
      section = option.section;
      help += (section.empty() ? std::string("other") : section) + ":\n";
    }
    help += OptionLine(option);
  }
  help += OptionLine({.name = "-h, --help", .help = "this text"});
  return help;
}

OptionDecl JsonOption(std::string help) { return {.name = "--json", .help = std::move(help)}; }

OptionDecl LimitsOption() {
  return {.name = "--limits",
          .metavar = "JSON",
          .help =
              "per-session sandbox limits, e.g. '{\"wall_time_ms\": 2000, \"cpu_seconds\": 30, \"memory_bytes\": "
              "268435456, \"max_output_bytes\": 65536, \"max_processes\": 8, \"disk_bytes\": 67108864}'; unset ones "
              "keep their defaults: 10 s per call, 60 s CPU, 512 MiB, 1 MiB output, 16 processes, 256 MiB of disk "
              "per session family"};
}

}  // namespace envforge::cli
