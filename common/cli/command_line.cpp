#include "command_line.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <sstream>

#include "primus/common/options.hpp"

namespace primus::cli {
namespace po = boost::program_options;
namespace {

// The hidden option that collects operands.
constexpr const char* kOperand = "\x01operand";
// How the extra parser marks an optional value: absent, or given after '=' (maybe empty).
constexpr char kAbsent = '\x01';
constexpr char kGiven = '=';

// "-3" is an operand (a bad number the caller reports as such), "-x" an option.
bool looks_like_option(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1]));
}

Arg arg_of(OptionArg arg) {
  switch (arg) {
    case OptionArg::kNone:
      return Arg::kNone;
    case OptionArg::kOptional:
      return Arg::kOptional;
    case OptionArg::kRequired:
      break;
  }
  return Arg::kRequired;
}

}  // namespace

std::optional<std::string> Parsed::value(const std::string& name) const {
  const auto it = options.find(name);
  if (it == options.end()) return std::nullopt;
  return it->second;
}

Parser::Parser(std::string see_help, std::string unknown_context)
    : see_help_(std::move(see_help)), unknown_context_(std::move(unknown_context)) {}

Parser& Parser::add(Option option) {
  if (option.expected.empty()) option.expected = option.value_name;
  options_.push_back(std::move(option));
  return *this;
}

Parser& Parser::add_option_table() {
  for (const OptionSpec& spec : option_table()) {
    if (spec.scope != OptionScope::kUser) continue;
    Option option;
    option.name = std::string(spec.name);
    option.arg = arg_of(spec.arg);
    option.value_name = std::string(spec.placeholder);
    option.expected = "a value (" + option.value_name + ")";
    option.help = std::string(spec.help);
    const OptionValidator validate = spec.validate;
    if (validate != nullptr) {
      option.check = [validate](const std::string& value) { return validate(value); };
    }
    option.from_table = true;
    add(std::move(option));
  }
  return *this;
}

Parser& Parser::operands(std::vector<Operand> required) {
  operands_ = std::move(required);
  return *this;
}

Parser& Parser::command(std::string what, bool bare) {
  command_ = std::move(what);
  bare_command_ = bare;
  return *this;
}

std::size_t Parser::command_start(const std::vector<std::string>& args) const {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || arg == "-m" || arg.empty() || arg[0] != '-') return i;
    const Option* option = nullptr;
    if (arg.rfind("--", 0) == 0 && arg.find('=') == std::string::npos) {
      option = find(arg.substr(2));
    } else if (arg.size() == 2 && arg[0] == '-') {
      const auto it = std::find_if(options_.begin(), options_.end(),
                                   [&](const Option& o) { return o.short_name == arg[1]; });
      option = it == options_.end() ? nullptr : &*it;
    }
    if (option != nullptr && option->arg == Arg::kRequired) ++i;  // its value, the next word
  }
  return args.size();
}

const Option* Parser::find(const std::string& name) const {
  const auto it = std::find_if(options_.begin(), options_.end(),
                               [&](const Option& option) { return option.name == name; });
  return it == options_.end() ? nullptr : &*it;
}

void Parser::usage(const std::string& what) const {
  throw UsageError(what + see_help_);
}

std::vector<std::pair<std::string, std::vector<std::string>>> Parser::tokens(
    const std::vector<std::string>& before) const {
  po::options_description description;
  bool any_short = false;
  for (const Option& option : options_) {
    std::string names = option.name;
    if (option.short_name != 0) {
      names += std::string(",") + option.short_name;
      any_short = true;
    }
    // Every option is declared with a value: flags and optional values are taken by the extra
    // parser below (Boost would take the next word as an optional value), whose results carry
    // one.
    description.add_options()(names.c_str(), po::value<std::string>());
  }
  description.add_options()(kOperand, po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add(kOperand, -1);

  // --flag, --flag=..., --optional and --optional=VALUE, by this parser's rules.
  auto extra = [this](const std::string& token) -> std::pair<std::string, std::string> {
    // "-3" is an operand, also where short options exist (none is a digit).
    if (token.size() > 1 && token[0] == '-' && std::isdigit(static_cast<unsigned char>(token[1]))) {
      return {kOperand, token};
    }
    if (token.compare(0, 2, "--") != 0) return {};
    const std::size_t eq = token.find('=');
    const std::string name = token.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const Option* option = find(name);
    if (option == nullptr || option->arg == Arg::kRequired) return {};
    if (eq == std::string::npos) return {name, std::string(1, kAbsent)};
    if (option->arg == Arg::kNone) usage("--" + name + ": takes no value");
    return {name, kGiven + token.substr(eq + 1)};
  };

  int style = po::command_line_style::allow_long | po::command_line_style::long_allow_adjacent |
              po::command_line_style::long_allow_next;
  if (any_short) {
    style |= po::command_line_style::allow_short | po::command_line_style::short_allow_adjacent |
             po::command_line_style::short_allow_next |
             po::command_line_style::allow_dash_for_short;
  }
  po::parsed_options result(&description);
  try {
    result = po::command_line_parser(before)
                 .options(description)
                 .positional(positional)
                 .style(style)
                 .extra_parser(extra)
                 .run();
  } catch (const po::unknown_option& e) {
    std::string name = e.get_option_name();
    if (const std::size_t eq = name.find('='); eq != std::string::npos) name.resize(eq);
    if (name.compare(0, 2, "--") == 0) {
      usage(name + ": unknown option" + unknown_context_);
    }
    usage("unknown option '" + name + "'");
  } catch (const po::invalid_command_line_syntax& e) {
    const std::string name = e.get_option_name();
    const Option* option = find(name.compare(0, 2, "--") == 0 ? name.substr(2) : name);
    if (option == nullptr && name.size() == 2) {  // "-o": its long name
      const auto it = std::find_if(options_.begin(), options_.end(),
                                   [&](const Option& o) { return o.short_name == name[1]; });
      if (it != options_.end()) option = &*it;
    }
    if (option != nullptr && e.kind() == po::invalid_command_line_syntax::missing_parameter) {
      throw UsageError("--" + option->name + ": expected " + option->expected + ", got nothing");
    }
    usage(e.what());
  } catch (const UsageError&) {
    throw;
  } catch (const po::error& e) {
    usage(e.what());
  }

  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const po::option& given : result.options) {
    const bool operand = given.position_key >= 0 || given.string_key == kOperand;
    out.emplace_back(operand ? std::string(kOperand) : given.string_key, given.value);
  }
  return out;
}

void Parser::take(const std::string& key, const std::vector<std::string>& values,
                  Parsed& parsed) const {
  if (key == kOperand) {
    for (const std::string& word : values) {
      if (looks_like_option(word)) usage("unknown option '" + word + "'");
      parsed.operands.push_back(word);
    }
    return;
  }
  const Option* option = find(key);
  if (option == nullptr) usage("--" + key + ": unknown option" + unknown_context_);
  std::optional<std::string> value;
  if (!values.empty()) value = values.front();
  if (option->arg != Arg::kRequired && value) {
    if (value->front() == kAbsent) {
      value.reset();
    } else {
      value = value->substr(1);  // after kGiven
    }
  }
  if (value && option->check) {
    if (const auto expected = option->check(*value)) {
      throw UsageError("--" + option->name + ": expected " + *expected + ", got '" + *value + "'");
    }
  }
  parsed.options[option->name] = value.value_or("");
  if (option->from_table) parsed.table.emplace_back(option->name, value);
}

Parsed Parser::parse(const std::vector<std::string>& args) const {
  Parsed parsed;
  auto dashes = std::find(args.begin(), args.end(), "--");
  std::vector<std::string> after;
  if (command_ && bare_command_) {
    const auto start = args.begin() + static_cast<std::ptrdiff_t>(command_start(args));
    if (start != args.end() && *start != "--") {
      dashes = start;
      after.assign(start, args.end());
    }
  }
  const std::vector<std::string> before(args.begin(), dashes);
  if (after.empty() && dashes != args.end()) after.assign(dashes + 1, args.end());
  // --help wins over any mistake next to it.
  if (std::any_of(before.begin(), before.end(),
                  [](const std::string& arg) { return arg == "--help" || arg == "-h"; })) {
    parsed.help = true;
    return parsed;
  }
  for (const auto& [key, values] : tokens(before))
    take(key, values, parsed);
  if (command_) {
    parsed.command = after;
    if (dashes == args.end() || after.empty()) {
      usage("missing " + *command_ + " after '--'");
    }
  } else {
    parsed.operands.insert(parsed.operands.end(), after.begin(), after.end());
  }
  if (parsed.operands.size() < operands_.size()) {
    const Operand& missing = operands_[parsed.operands.size()];
    usage("missing " + missing.name + ", " + missing.description);
  }
  if (parsed.operands.size() > operands_.size()) {
    usage("unexpected argument '" + parsed.operands[operands_.size()] + "'");
  }
  return parsed;
}

std::string Parser::options_help() const {
  constexpr std::size_t kColumn = 30;
  constexpr std::size_t kWidth = 100;
  std::ostringstream out;
  for (const Option& option : options_) {
    std::string left = "  ";
    if (option.short_name != 0) left += std::string("-") + option.short_name + ", ";
    left += "--" + option.name;
    if (option.arg == Arg::kRequired) left += "=" + option.value_name;
    if (option.arg == Arg::kOptional) left += "[=" + option.value_name + "]";
    out << left;
    std::size_t column = left.size();
    if (column + 2 > kColumn) {
      out << "\n";
      column = 0;
    }
    out << std::string(kColumn - column, ' ');
    column = kColumn;
    std::istringstream words(option.help);
    std::string word;
    bool first = true;
    while (words >> word) {
      if (!first && column + 1 + word.size() > kWidth) {
        out << "\n" << std::string(kColumn, ' ');
        column = kColumn;
        first = true;
      }
      if (!first) {
        out << ' ';
        ++column;
      }
      out << word;
      column += word.size();
      first = false;
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace primus::cli
