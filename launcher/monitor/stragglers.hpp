// Who is a straggler (pure; docs/architecture.md "The monitor"). Under synchronous training
// every rank's step takes the same wall time, so a slow rank shows as lateness: it arrives at
// the step's agreement (primus.should_stop()'s allreduce) later than the others, and so waits
// there less. Each rank reports the median of its waits; a rank's lateness is the median wait of
// all ranks minus its own. A rank whose median lateness over the window exceeds half the median
// step time is a straggler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace primus::launch {

// Values over a sliding window of time (seconds on any monotonic clock).
class WindowSeries {
 public:
  void add(double time, double value);
  void trim(double now, double window);  // drops what is older than now - window
  std::optional<double> median() const;
  std::size_t size() const { return values_.size(); }
  void clear() { values_.clear(); }

 private:
  std::deque<std::pair<double, double>> values_;
};

std::optional<double> median_of(std::vector<double> values);

struct RankTiming {
  std::optional<double> wait_median;  // over the window
  std::optional<double> step_median;  // over the window
  std::size_t wait_samples = 0;
};

struct LatenessVerdict {
  std::map<std::uint32_t, double> lateness;  // ranks with enough samples
  std::optional<double> median_step_seconds;
  std::set<std::uint32_t> stragglers;
};

// At least `min_samples` waits in the window for a rank to be judged, and at least two ranks
// judged: a rank alone cannot be late.
LatenessVerdict judge_lateness(const std::map<std::uint32_t, RankTiming>& ranks,
                               std::size_t min_samples);

}  // namespace primus::launch
