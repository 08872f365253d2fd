#include "cli_args.hpp"

#include "primus/ckpt/layout.hpp"

namespace primus::ckpt::tool {
ParsedArgs parse_args(const CommandSpec& spec, const std::vector<std::string>& args) {
  cli::Parser parser(" (see primus-ckpt " + spec.name + " --help)", " for '" + spec.name + "'");
  for (const OptionSpec& option : spec.options) {
    parser.add({option.name, option.value_name.empty() ? cli::Arg::kNone : cli::Arg::kRequired,
                "VALUE", option.value_name, ""});
  }
  std::vector<cli::Operand> operands;
  for (const OperandSpec& operand : spec.operands)
    operands.push_back({operand.name, operand.description});
  parser.operands(std::move(operands));
  return parser.parse(args);
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
