// primus-ckpt's command line: a small parser for one subcommand's options and operands, and the
// numbers they take. Every mistake is a UsageError naming the option and what was expected.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "primus/common/error.hpp"

namespace primus::ckpt::tool {

// A mistake on the command line: exit status 2, the message on stderr, nothing on stdout.
class UsageError : public Error {
 public:
  using Error::Error;
};

struct OptionSpec {
  std::string name;        // without the leading "--"
  std::string value_name;  // empty: a flag that takes no value
};

struct OperandSpec {
  std::string name;         // "DIR"
  std::string description;  // "the checkpoint root directory"
};

struct CommandSpec {
  std::string name;                   // "list"
  std::vector<OperandSpec> operands;  // each is required
  std::vector<OptionSpec> options;    // --help is implied
  std::string help;                   // the text --help prints
};

struct ParsedArgs {
  bool help = false;
  std::vector<std::string> operands;
  std::map<std::string, std::string> options;  // flags map to ""; the last one given wins

  bool has(const std::string& name) const { return options.count(name) > 0; }
  std::optional<std::string> value(const std::string& name) const;
};

// Parses the arguments after the subcommand's name. "--name=value" and "--name value" both
// work; "--" ends the options. Throws UsageError.
ParsedArgs parse_args(const CommandSpec& spec, const std::vector<std::string>& args);

// A whole number from 0 to max; nullopt for anything else (signs, spaces, overflow).
std::optional<std::uint64_t> parse_number(const std::string& text, std::uint64_t max);

// `what` names the operand or option in the message: "--step: expected a step number from 0
// to 999999999999, got 'x'".
std::int64_t parse_step(const std::string& text, const std::string& what);

}  // namespace primus::ckpt::tool
