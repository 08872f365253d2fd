// The command line of every Primus tool (primus-launch, primus-env, primus-ckpt,
// primus-bench-collectives): options declared once (name, whether and what value it takes, a
// check of the value, help) and parsed by Boost.Program_options, including every user row of
// the option table under its srun spelling. Only executables link this library; common/ itself
// stays standard-library only.
//
// The rules, the same in every tool:
//   --name=VALUE and --name VALUE for an option that requires a value; --name[=VALUE] only
//   adjacent for one whose value is optional (as srun takes --primus[=FRAMEWORK]); no value for a
//   flag. The last occurrence wins. "--" ends the options. --help (or -h) anywhere before "--"
//   wins over any mistake beside it. Every mistake is a UsageError (exit status 2) that names the
//   option or operand and what was expected.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "primus/common/error.hpp"

namespace primus::cli {

// A mistake on the command line: exit status 2, the message on stderr, nothing on stdout.
class UsageError : public Error {
 public:
  using Error::Error;
};

enum class Arg { kNone, kOptional, kRequired };

// What a value must look like: nothing when it is fine, else what was expected ("a number of
// ranks from 1 to 4096"), for "--name: expected ..., got 'value'".
using ValueCheck = std::function<std::optional<std::string>(const std::string&)>;

struct Option {
  std::string name;  // without "--"
  Arg arg = Arg::kNone;
  std::string value_name;  // in help: "N", "DIR"
  std::string expected;    // in "--name: expected <expected>, got nothing"; default value_name
  std::string help;
  ValueCheck check = nullptr;  // optional
  char short_name = 0;         // '-o' as well as '--op' (0: none)
  bool from_table = false;     // a row of the option table (see Parsed::table)
};

struct Operand {
  std::string name;         // "DIR"
  std::string description;  // "the checkpoint root directory"
};

struct Parsed {
  bool help = false;
  std::vector<std::string> operands;
  // What followed "--" when the parser keeps it apart (Parser::command()); else those words are
  // operands.
  std::vector<std::string> command;
  // Every option given, the last occurrence's value; a flag, or an optional value not given,
  // maps to "".
  std::map<std::string, std::string> options;
  // The option-table rows given, in order, as parse_command_line_options() takes them (nullopt:
  // given without a value).
  std::vector<std::pair<std::string, std::optional<std::string>>> table;

  bool has(const std::string& name) const { return options.count(name) > 0; }
  std::optional<std::string> value(const std::string& name) const;
};

class Parser {
 public:
  // see_help: how messages point at the help (" (see primus-ckpt list --help)");
  // unknown_context: said after "unknown option" for a long option (" for 'list'").
  explicit Parser(std::string see_help, std::string unknown_context = "");

  Parser& add(Option option);
  // Every user row of the option table (--primus, --primus-ckpt-dir=PATH, ...), checked by the
  // row's validator.
  Parser& add_option_table();
  // The operands, each required, in order.
  Parser& operands(std::vector<Operand> required);
  // After "--" comes a command and its arguments, kept in Parsed::command (at least one word,
  // else a UsageError naming `what`). With `bare` (primus-launch, as torchrun takes its script)
  // the command may also start without "--": at the first word that is neither an option nor
  // an option's value, or at "-m" (Python's module flag).
  Parser& command(std::string what, bool bare = false);

  // Parses the arguments after the program's (or subcommand's) name. Throws UsageError.
  Parsed parse(const std::vector<std::string>& args) const;

  // One line per option, "  --name=VALUE    help", wrapped for an 80-column terminal.
  std::string options_help() const;

 private:
  const Option* find(const std::string& name) const;
  [[noreturn]] void usage(const std::string& what) const;
  // The words before "--" as Boost.Program_options splits them: (option name, values), or
  // (kOperand, words) for operands; a usage error for an unknown option or a missing value.
  std::vector<std::pair<std::string, std::vector<std::string>>> tokens(
      const std::vector<std::string>& before) const;
  // Where the command starts in `args` (a bare command()): "--", "-m", or the first word that
  // is neither an option nor a required value's separate word; args.size() when there is none.
  std::size_t command_start(const std::vector<std::string>& args) const;
  // One of them into `parsed`: its value decoded and checked.
  void take(const std::string& key, const std::vector<std::string>& values, Parsed& parsed) const;

  std::string see_help_;
  std::string unknown_context_;
  std::vector<Option> options_;
  std::vector<Operand> operands_;
  std::optional<std::string> command_;
  bool bare_command_ = false;
};

}  // namespace primus::cli
