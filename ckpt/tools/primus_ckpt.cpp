// primus-ckpt: lists, inspects, verifies, prunes and compares the checkpoints of libprimus-ckpt
// under a checkpoint root directory (docs/man/primus-ckpt.1).
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "primus/ckpt/manifest.hpp"
#include "render.hpp"

namespace primus::ckpt::tool {
namespace {

constexpr const char* kUsage =
    "Usage: primus-ckpt COMMAND DIR [options]\n"
    "\n"
    "Looks after the checkpoints of libprimus-ckpt under DIR, the directory that holds the\n"
    "step-NNNNNNNNNNNN directories and LATEST.\n"
    "  list DIR [--full]                  the checkpoints, newest first, quickly verified\n"
    "  latest DIR [--quick]               the newest one that verifies (what a job resumes from)\n"
    "  inspect DIR [--step N]             tensors and per-rank state of the newest valid one\n"
    "  verify DIR [--step N] [--quick]    every problem of every checkpoint (CRC32C of all data)\n"
    "  prune DIR --keep N [--every K] [--dry-run]\n"
    "                                     remove old checkpoints (never LATEST's)\n"
    "  diff DIR STEP_A STEP_B             compare two checkpoints' tensors\n"
    "  set-aside DIR                      move DIR aside as DIR.old-TIME (--primus-fresh)\n"
    "Every command takes --json (one JSON document instead of tables) and --help.\n"
    "  --help      this text; --version the version\n"
    "\n"
    "Exit status: 0 success; 1 corrupt, different, or no valid checkpoint; 2 usage errors and\n"
    "other failures.\n";

std::vector<Command> all_commands() {
  return {list_command(),  latest_command(), inspect_command(),  verify_command(),
          prune_command(), diff_command(),   set_aside_command()};
}

int run(int argc, char** argv) {
  if (argc < 2)
    throw UsageError(
        "missing COMMAND: list, latest, inspect, verify, prune, diff or set-aside (see --help)");
  const std::string first = argv[1];
  if (first == "--help" || first == "-h") {
    std::cout << kUsage;
    return kExitOk;
  }
  if (first == "--version") {
    std::cout << "primus-ckpt " << PACKAGE_VERSION << "\n";
    return kExitOk;
  }
  for (const Command& command : all_commands()) {
    if (command.spec.name != first) continue;
    const ParsedArgs args =
        parse_args(command.spec, std::vector<std::string>(argv + 2, argv + argc));
    if (args.help) {
      std::cout << command.spec.help;
      return kExitOk;
    }
    // The report is printed only when the command returns: an error leaves stdout empty.
    // Both streams are printed through printable(): names and fields come from the files.
    return run_printing(
        [&](std::ostream& out, std::ostream& err) { return command.run(args, out, err); });
  }
  if (first.rfind('-', 0) == 0) throw UsageError("unknown option '" + first + "' (see --help)");
  throw UsageError(
      "unknown command '" + first +
      "': expected list, latest, inspect, verify, prune, diff or set-aside (see --help)");
}

}  // namespace
}  // namespace primus::ckpt::tool

int main(int argc, char** argv) {
  using namespace primus::ckpt;
  try {
    return tool::run(argc, argv);
  } catch (const CorruptCheckpoint& e) {
    std::cerr << "primus-ckpt: " << tool::printable(e.what(), false) << "\n";
    return tool::kExitFound;
  } catch (const std::exception& e) {
    std::cerr << "primus-ckpt: " << tool::printable(e.what(), false) << "\n";
    return tool::kExitUsage;
  }
}
