#include "cli_args.hpp"

#include <algorithm>
#include <cctype>

#include "primus/ckpt/layout.hpp"

namespace primus::ckpt::tool {
namespace {

const OptionSpec* find_option(const CommandSpec& spec, const std::string& name) {
  const auto it = std::find_if(spec.options.begin(), spec.options.end(),
                               [&](const OptionSpec& option) { return option.name == name; });
  return it == spec.options.end() ? nullptr : &*it;
}

std::string see_help(const CommandSpec& spec) {
  return " (see primus-ckpt " + spec.name + " --help)";
}

// "-3" is an operand (a bad step number the caller reports as such), "-x" an option.
bool looks_like_option(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1]));
}

}  // namespace

std::optional<std::string> ParsedArgs::value(const std::string& name) const {
  const auto it = options.find(name);
  if (it == options.end()) return std::nullopt;
  return it->second;
}

ParsedArgs parse_args(const CommandSpec& spec, const std::vector<std::string>& args) {
  ParsedArgs parsed;
  // --help wins over any mistake next to it.
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      return parsed;
    }
  }
  bool options_done = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!options_done && arg == "--") {
      options_done = true;
      continue;
    }
    if (options_done || !looks_like_option(arg)) {
      parsed.operands.push_back(arg);
      continue;
    }
    if (arg.compare(0, 2, "--") != 0) {
      throw UsageError("unknown option '" + arg + "'" + see_help(spec));
    }
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const OptionSpec* option = find_option(spec, name);
    if (option == nullptr) {
      throw UsageError("--" + name + ": unknown option for '" + spec.name + "'" + see_help(spec));
    }
    if (option->value_name.empty()) {
      if (eq != std::string::npos) throw UsageError("--" + name + ": takes no value");
      parsed.options[name] = "";
      continue;
    }
    if (eq != std::string::npos) {
      parsed.options[name] = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      parsed.options[name] = args[++i];
    } else {
      throw UsageError("--" + name + ": expected " + option->value_name + ", got nothing");
    }
  }
  if (parsed.operands.size() < spec.operands.size()) {
    const OperandSpec& missing = spec.operands[parsed.operands.size()];
    throw UsageError("missing " + missing.name + ", " + missing.description + see_help(spec));
  }
  if (parsed.operands.size() > spec.operands.size()) {
    throw UsageError("unexpected argument '" + parsed.operands[spec.operands.size()] + "'" +
                     see_help(spec));
  }
  return parsed;
}

std::optional<std::uint64_t> parse_number(const std::string& text, std::uint64_t max) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (digit > max || value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::int64_t parse_step(const std::string& text, const std::string& what) {
  const auto step = parse_number(text, static_cast<std::uint64_t>(kMaxStep));
  if (!step) {
    throw UsageError(what + ": expected a step number from 0 to " + std::to_string(kMaxStep) +
                     ", got '" + text + "'");
  }
  return static_cast<std::int64_t>(*step);
}

}  // namespace primus::ckpt::tool
