// What primus-ckpt's subcommands share about a checkpoint root directory: checking the DIR
// operand, the manifest of a step without verifying it, uncommitted leftovers.
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "primus/ckpt/manifest.hpp"

namespace primus::ckpt::tool {

// DIR as given, if it is a directory (or a link to one); else Error naming it.
std::filesystem::path checked_root(const std::string& dir);

// <dir>/manifest.json parsed (its own checksum checked), without looking at the rank files;
// nullopt with the reason in *error when it cannot be read or parsed.
std::optional<Manifest> read_manifest_unverified(const std::filesystem::path& dir,
                                                 std::string* error);

// A temporary directory (".tmp-step-N") that a save left behind or is still writing.
struct Leftover {
  std::int64_t step = 0;
  std::filesystem::path dir;
  std::uint64_t bytes = 0;  // of the regular files in it
  std::string modified;     // its last change, UTC ISO 8601, "" if unknown
  std::size_t rank_files = 0;
};

// Newest first.
std::vector<Leftover> leftovers(const std::filesystem::path& root);

// "2026-01-31T12:00:00Z".
std::string utc_iso8601(std::time_t time);

}  // namespace primus::ckpt::tool
