#include "apps/envforge/cli_args.h"

#include <charconv>
#include <sstream>

namespace envforge::cli {

std::optional<std::string> ParsedArgs::Option(const std::string& name) const {
  auto it = options.find(name);
  if (it == options.end()) return std::nullopt;
  return it->second;
}

std::string ParsedArgs::OptionOr(const std::string& name, const std::string& fallback) const {
  return Option(name).value_or(fallback);
}

std::vector<std::string> ParsedArgs::Values(const std::string& name) const {
  auto it = repeated.find(name);
  return it == repeated.end() ? std::vector<std::string>() : it->second;
}

Result<long long> ParsedArgs::IntOption(const std::string& name, long long fallback, long long min, long long max) const {
  auto text = Option(name);
  if (!text) return fallback;
  long long value = 0;
  auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size()) {
    return InvalidArgumentError(name + " expects an integer, got '" + *text + "'");
  }
  if (value < min || value > max) {
    return InvalidArgumentError(name + " must be between " + std::to_string(min) + " and " + std::to_string(max) +
                                ", got " + *text);
  }
  return value;
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

Result<double> ParsedArgs::DoubleOption(const std::string& name, double fallback) const {
  auto text = Option(name);
  if (!text) return fallback;
  try {
    size_t used = 0;
    double value = std::stod(*text, &used);
    if (used == text->size()) return value;
  } catch (...) {
  }
  return InvalidArgumentError(name + " expects a number, got '" + *text + "'");
}

Result<ParsedArgs> ParseArgs(const std::string& command, const std::vector<std::string>& args, const ArgSpec& spec) {
  ParsedArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() > 1 && arg[0] == '-' && arg != "-") {
      std::string name = arg;
      std::optional<std::string> inline_value;
      if (auto eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        inline_value = arg.substr(eq + 1);
      }
      if (spec.flags.count(name)) {
        if (inline_value) return InvalidArgumentError(command + ": " + name + " takes no value");
        parsed.flags.insert(name);
      } else if (spec.value_options.count(name) || spec.repeated_options.count(name)) {
        std::string value;
        if (inline_value) {
          value = *inline_value;
        } else if (i + 1 < args.size()) {
          value = args[++i];
        } else {
          return InvalidArgumentError(command + ": " + name + " needs a value");
        }
        if (spec.repeated_options.count(name)) {
          parsed.repeated[name].push_back(std::move(value));
        } else {
          parsed.options[name] = std::move(value);
        }
      } else {
        return InvalidArgumentError(command + ": unknown option " + name);
      }
    } else {
      parsed.positional.push_back(arg);
    }
  }
  if (parsed.positional.size() < spec.min_positional) {
    return InvalidArgumentError(command + ": missing argument (see envforge help)");
  }
  if (parsed.positional.size() > spec.max_positional) {
    return InvalidArgumentError(command + ": unexpected argument '" + parsed.positional[spec.max_positional] + "'");
  }
  return parsed;
}

}  // namespace envforge::cli
