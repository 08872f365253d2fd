// The checkpoint root directory: commit, list, prune, garbage collection.
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace primus::ckpt {

struct CommitResult {
  std::filesystem::path dir;  // <root>/step-<step>
  std::uint64_t bytes = 0;
};

// Rank 0, once every rank's RankWriter::finish() succeeded: manifest, fsync of every file and of
// the directory, rename into place, LATEST, fsync of the root. Throws on any failure, leaving
// the previous checkpoints and LATEST as they were.
CommitResult commit(const std::filesystem::path& root, std::int64_t step, int world_size);

struct StepEntry {
  std::int64_t step = 0;
  std::filesystem::path dir;
  bool latest = false;  // named by LATEST
};

// Committed step directories, newest first (not verified).
std::vector<StepEntry> list_steps(const std::filesystem::path& root);

// The step LATEST names, if it names a well-formed step directory name.
std::optional<std::int64_t> read_latest(const std::filesystem::path& root);

// Which of `steps` to delete: all but the newest keep_last and, when keep_every > 0, every step
// divisible by keep_every; never `protect` (LATEST's). Pure.
std::vector<std::int64_t> steps_to_prune(std::vector<std::int64_t> steps, std::size_t keep_last,
                                         std::int64_t keep_every,
                                         std::optional<std::int64_t> protect);

// What prune() removes, in that order, without removing anything: the steps steps_to_prune
// selects (LATEST's protected) except the newest one that passes a quick verification, which
// is `spared` when retention alone would have removed it; then the temporary directories of
// steps not newer than the newest committed one and the leftovers of replaced steps.
// `known_good`: a step the caller has just committed itself (its manifest was built from its
// rank files a moment ago), taken as verifying without opening its files again.
struct PrunePlan {
  std::vector<std::filesystem::path> remove;
  std::optional<std::filesystem::path> spared;
};
PrunePlan prune_plan(const std::filesystem::path& root, std::size_t keep_last,
                     std::int64_t keep_every = 0,
                     std::optional<std::int64_t> known_good = std::nullopt);

// Deletes what steps_to_prune selects and every temporary directory of a step not newer than
// the newest committed one. Returns the removed paths.
std::vector<std::filesystem::path> prune(const std::filesystem::path& root, std::size_t keep_last,
                                         std::int64_t keep_every = 0,
                                         std::optional<std::int64_t> known_good = std::nullopt);

// --primus-fresh: moves the checkpoint root aside, renamed in its directory to
// <name>.old-<UTC time> (set_aside_name), never over an existing name, so that a fresh run's
// checkpoints never mix with an earlier run's and the earlier ones are kept. Returns the new
// path; nullopt when there is no root. Throws Error naming the root when it is not a directory or
// cannot be renamed (nothing moved).
std::optional<std::filesystem::path> set_aside(const std::filesystem::path& root);
// "ckpt.old-20261206T025300Z", then "...Z-2", "...Z-3" for the `attempt`s after the first. Pure.
std::string set_aside_name(const std::string& root_name, std::time_t now, int attempt);

}  // namespace primus::ckpt
