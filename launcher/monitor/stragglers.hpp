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

// Values over a sliding window of time (seconds on any monotonic clock), at most kMaxSamples of
// them: past that, every other one kept is dropped and from then on only every stride-th value
// added is kept, an even sample of the window whose median stands for the window's. Memory and
// the median's cost stay bounded however long the window (up to an hour: 3,600 values a rank at
// a heartbeat a second) and with none (--primus-straggler-window=0, where nothing is trimmed).
class WindowSeries {
 public:
  static constexpr std::size_t kMaxSamples = 128;

  void add(double time, double value);
  // Drops what is older than now - window; a series thinned out below a quarter of
  // kMaxSamples keeps twice as many of the values that follow.
  void trim(double now, double window);
  std::optional<double> median() const;
  std::size_t size() const { return values_.size(); }
  std::size_t stride() const { return stride_; }
  void clear() {
    values_.clear();
    stride_ = 1;
    skipped_ = 0;
  }

 private:
  std::deque<std::pair<double, double>> values_;
  std::size_t stride_ = 1;   // one value kept of this many added
  std::size_t skipped_ = 0;  // values added and not kept since the last one kept
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
