// primus-ckpt's subcommands. Each writes its report to `out` (printed only when it returns, so
// that an error leaves stdout empty) and notes such as "no valid checkpoint" to `err`, and
// returns the exit status; mistakes and failures are thrown (see primus_ckpt.cpp).
#pragma once

#include <ostream>

#include "cli_args.hpp"

namespace primus::ckpt::tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFound = 1;  // corrupt, different, or no valid checkpoint found
inline constexpr int kExitUsage = 2;  // and every other error

struct Command {
  CommandSpec spec;
  int (*run)(const ParsedArgs& args, std::ostream& out, std::ostream& err);
};

Command list_command();
Command latest_command();
Command inspect_command();
Command verify_command();
Command prune_command();
Command diff_command();
Command set_aside_command();

}  // namespace primus::ckpt::tool
