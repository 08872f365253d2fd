// `primus-launch status` as text (pure): the job's line, its newest checkpoint, a table of the
// ranks and one of the nodes, from a parsed status.json. `now` (UNIX time) turns the times in it
// into ages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "monitor/status.hpp"

namespace primus::launch {

std::string status_view(const JobStatus& status, double now);

// The launcher's progress line (--primus-progress-interval), without its "primus-launch: "
// prefix: "12:03:04 step 300/1000, loss 0.4123, 2310.0 samples/s, 5m12s left, checkpoint 20 s
// ago (step 300)"; each part only when known.
struct ProgressFacts {
  std::string clock;  // "12:03:04"
  std::optional<std::uint64_t> step;
  std::optional<std::uint64_t> total_steps;
  std::optional<double> loss;
  std::optional<double> samples_per_second;
  std::optional<double> seconds_left;
  std::optional<double> seconds_since_checkpoint;
  std::optional<std::uint64_t> checkpoint_step;
  std::size_t stragglers = 0;
};
std::string progress_text(const ProgressFacts& facts);

// "1h02m", "3m05s", "12s".
std::string duration_text(double seconds);

}  // namespace primus::launch
