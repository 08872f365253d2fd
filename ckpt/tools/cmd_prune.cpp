// primus-ckpt prune DIR --keep N [--every K] [--dry-run]: removes old checkpoints with the
// library's retention rule (never the one LATEST names) and the leftovers of stale saves.
#include <algorithm>

#include "checkpoint_root.hpp"
#include "commands.hpp"
#include "primus/ckpt/checkpoint.hpp"
#include "primus/ckpt/layout.hpp"
#include "primus/ckpt/store.hpp"
#include "render.hpp"

namespace primus::ckpt::tool {
namespace {

int run(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  const auto keep_text = args.value("keep");
  if (!keep_text) {
    throw UsageError("--keep: required, the number of newest checkpoints to keep (1 or more)");
  }
  const auto keep = parse_number(*keep_text, static_cast<std::uint64_t>(kMaxStep));
  if (!keep || *keep == 0) {
    throw UsageError("--keep: expected a number of checkpoints to keep, 1 or more, got '" +
                     *keep_text + "'");
  }
  std::int64_t every = 0;
  if (const auto every_text = args.value("every")) {
    const auto number = parse_number(*every_text, static_cast<std::uint64_t>(kMaxStep));
    if (!number || *number == 0) {
      throw UsageError("--every: expected a step interval from 1 to " + std::to_string(kMaxStep) +
                       ", got '" + *every_text + "'");
    }
    every = static_cast<std::int64_t>(*number);
  }
  const bool dry_run = args.has("dry-run");
  const std::filesystem::path root = checked_root(args.operands[0]);

  // The retention rule counts steps, not valid checkpoints: refuse to remove the newest one
  // that a load would use when newer ones are corrupt.
  const PrunePlan plan = prune_plan(root, *keep, every);
  if (plan.spared) {
    err << "primus-ckpt: not pruning: " << plan.spared->string()
        << " is the newest checkpoint that verifies (newer ones are corrupt) and --keep " << *keep
        << " would remove it\n";
    return kExitFound;
  }
  std::vector<std::filesystem::path> removed = plan.remove;
  if (!dry_run) removed = prune(root, *keep, every);

  if (args.has("json")) {
    Json paths = Json::array();
    for (const std::filesystem::path& path : removed)
      paths.push_back(path.string());
    Json document;
    document["root"] = root.string();
    document["dry_run"] = dry_run;
    document["keep"] = *keep;
    document["every"] = every;
    document[dry_run ? "would_remove" : "removed"] = std::move(paths);
    print_json(out, document);
    return kExitOk;
  }
  for (const std::filesystem::path& path : removed)
    out << (dry_run ? "would remove " : "removed ") << path.string() << "\n";
  if (removed.empty()) out << "nothing to remove\n";
  return kExitOk;
}

}  // namespace

Command prune_command() {
  return {{"prune",
           {{"DIR", "the checkpoint root directory"}},
           {{"keep", "a number of checkpoints to keep, 1 or more"},
            {"every", "a step interval"},
            {"dry-run", ""},
            {"json", ""}},
           "Usage: primus-ckpt prune DIR --keep N [--every K] [--dry-run] [--json]\n"
           "\n"
           "Removes all but the newest N committed checkpoints under DIR, keeping also every\n"
           "step divisible by K, and never the one LATEST names; then the directories of saves\n"
           "that never committed, unless newer than the newest checkpoint. Refuses (exit 1)\n"
           "when that would remove the newest checkpoint that passes a quick verification.\n"
           "Prints what it removes.\n"
           "\n"
           "  --keep N    how many of the newest checkpoints to keep (1 or more)\n"
           "  --every K   also keep every step divisible by K\n"
           "  --dry-run   print what would be removed, remove nothing\n"
           "  --json      one JSON document instead of the list\n"},
          run};
}

}  // namespace primus::ckpt::tool
