// Where the ranks of an attempt resume from (docs/architecture.md, "Preemption and requeue", rule
// 4): the launcher resolves it once, before each attempt, and gives every rank the same
// PRIMUS_RESUME, so that ranks which see the checkpoint directory differently (a shared file
// system's attribute cache) never start from different steps.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace primus::launch {

struct NewestCheckpoint {
  std::optional<std::string> path;  // the newest committed checkpoint that verifies
  std::optional<std::int64_t> step;
  std::vector<std::string> skipped;  // newer ones that did not verify, each with why
};

// What `primus-ckpt latest --json` printed (pure). Throws Error for anything else.
NewestCheckpoint parse_newest_checkpoint(const std::string& json_text);

// PRIMUS_RESUME for an attempt (pure): the job's own newest checkpoint; without one, the
// PRIMUS_RESUME the user gave (a start from another run's checkpoint); else none.
std::optional<std::string> resume_point(const NewestCheckpoint& newest,
                                        const std::optional<std::string>& given);

// The newest committed checkpoint under `root` that verifies as loading verifies it (manifests,
// files, sizes, rank indexes and every dataset's CRC32C: a bit flipped in place is skipped
// here rather than failing every rank's load in every attempt), asked of primus-ckpt, which links
// HDF5 so that primus-launch need not (HDF5 and its libraries would cost every exec of
// primus-launch about 4 ms). A root that does not exist has none. Throws Error with primus-ckpt's
// message when it fails (a root other users can write, say): the ranks would refuse it too.
NewestCheckpoint find_newest_checkpoint(const std::filesystem::path& root,
                                        std::chrono::seconds timeout);

// What `primus-ckpt set-aside --json` printed: where the root went, or nullopt when there was
// none (pure). Throws Error for anything else.
std::optional<std::string> parse_set_aside(const std::string& json_text);

// --primus-fresh: `primus-ckpt set-aside ROOT` (the one implementation, in libprimus-ckpt).
// Returns where the root went, nullopt when there was none; throws Error with primus-ckpt's
// message when it cannot be moved.
std::optional<std::string> set_aside_root(const std::filesystem::path& root,
                                          std::chrono::seconds timeout);

}  // namespace primus::launch
