// primus-ckpt's command line: one subcommand's options and operands, declared for the tools'
// shared command-line layer (common/cli), and the numbers they take. Every mistake is a
// UsageError naming the option and what was expected.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "../../common/cli/command_line.hpp"

namespace primus::ckpt::tool {

// A mistake on the command line: exit status 2, the message on stderr, nothing on stdout.
using UsageError = cli::UsageError;

struct OptionSpec {
  std::string name;        // without the leading "--"
  std::string value_name;  // what the value is ("a step number"); empty: a flag
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

// The parsed words: operands, and the options given (flags map to ""; the last one wins).
using ParsedArgs = cli::Parsed;

// Parses the arguments after the subcommand's name (common/cli's rules: "--name=value" and
// "--name value" both work, "--" ends the options, --help wins). Throws UsageError.
ParsedArgs parse_args(const CommandSpec& spec, const std::vector<std::string>& args);

// A whole number from 0 to max; nullopt for anything else (signs, spaces, overflow).
std::optional<std::uint64_t> parse_number(const std::string& text, std::uint64_t max);

// `what` names the operand or option in the message: "--step: expected a step number from 0
// to 999999999999, got 'x'".
std::int64_t parse_step(const std::string& text, const std::string& what);

}  // namespace primus::ckpt::tool
