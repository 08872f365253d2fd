// The job directory of primus-launch (OS adapter): created 0700 and this user's alone, the
// allocation number of this launch, and where each rank's log goes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace primus::launch {

class JobDir {
 public:
  // Creates `path` (its parent must exist) with mode 0700, or takes it where it exists as a
  // directory of this user that no one else can write. Throws primus::Error naming it and
  // saying why not.
  explicit JobDir(std::filesystem::path path);

  const std::filesystem::path& path() const { return path_; }
  // In one-machine mode: one more than the highest logs/alloc-<a> of earlier launches (0 for
  // the first), so that running the same command again never reuses a log folder.
  std::uint32_t next_allocation() const;
  // logs/alloc-<a>/attempt-<k>, created (0700).
  std::filesystem::path attempt_logs(std::uint32_t allocation, std::uint32_t attempt) const;
  std::filesystem::path events_file() const { return path_ / "events.jsonl"; }
  std::filesystem::path stop_request_file() const { return path_ / "stop-request"; }

 private:
  std::filesystem::path path_;
};

// The rank log's name in an attempt's folder: rank-<r>.log.
std::string rank_log_name(std::uint32_t rank);
// A rejoin's replacement of `rank` in `generation` (above 0) logs to rank-<r>.gen-<g>.log beside
// it, so that the failed process's log stays whole.
std::string rank_log_name(std::uint32_t rank, std::uint32_t generation);

}  // namespace primus::launch
