// status.json (docs/architecture.md, "The launcher and its control channel"): the job as the
// launcher sees it now, rewritten atomically every heartbeat interval; `primus-launch status`
// reads it. The text is pure (status_json); writing it is an adapter (write_status).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace primus::launch {

struct RankStatus {
  std::uint32_t rank = 0;
  std::string node;
  std::string state = "starting";  // starting, running, exited (status in `ended`)
  std::optional<std::uint64_t> steps;
  std::optional<double> step_seconds;
  std::optional<std::uint64_t> rss_bytes;
  std::optional<double> cpu_seconds;
  std::optional<double> seconds_since_report;  // since its last heartbeat or message
  std::string ended;                           // "exit status 3", ...
};

struct JobStatus {
  std::string time;  // ISO 8601 UTC
  std::string job;
  std::string state;  // running, stopping, finished, failed, ...
  std::uint32_t allocation = 0;
  std::uint32_t attempt = 0;
  std::string checkpoint;  // the newest committed one reported
  std::vector<RankStatus> ranks;
};

std::string status_json(const JobStatus& status);

// Writes `text` to `path` through a temporary file and a rename (0600); false (and no partial
// file) when it cannot.
bool write_status(const std::filesystem::path& path, const std::string& text);

}  // namespace primus::launch
