// events.jsonl (docs/architecture.md, "The launcher and its control channel"): one JSON object
// per line, appended and flushed, never rewritten; written by the launcher only.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "primus/os/unique_fd.hpp"

namespace primus::launch {

// "1.234": the seconds from `since` to now, for an event's details.
std::string seconds_since(std::chrono::steady_clock::time_point since);

struct Event {
  std::string event;  // "launched", "rank-failed", ...
  std::optional<std::uint32_t> rank;
  std::optional<std::string> node;
  std::vector<std::pair<std::string, std::string>> details;  // string fields of "details"
};

// The line of one event (pure): {"time": ..., "event": ..., "allocation": a, "attempt": k,
// "rank": r, "node": ..., "details": {...}}, rank, node and details only where they apply.
std::string event_line(const Event& event, const std::string& time, std::uint32_t allocation,
                       std::uint32_t attempt);

// ISO 8601 UTC with milliseconds: 2026-12-01T21:54:11.123Z.
std::string utc_now_ms();

class EventLog {
 public:
  // Opens (creates, 0600) the file for appending. Throws primus::Error naming it.
  EventLog(const std::filesystem::path& path, std::uint32_t allocation);
  void set_attempt(std::uint32_t attempt) { attempt_ = attempt; }
  // Appends one line. Failing to write is reported once on stderr and never ends the job.
  void write(const Event& event);

 private:
  std::filesystem::path path_;
  os::UniqueFd fd_;
  std::uint32_t allocation_;
  std::uint32_t attempt_ = 0;
  bool warned_ = false;
};

}  // namespace primus::launch
