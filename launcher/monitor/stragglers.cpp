#include "monitor/stragglers.hpp"

#include <algorithm>
#include <vector>

namespace primus::launch {

void WindowSeries::add(double time, double value) {
  if (skipped_ + 1 < stride_) {
    ++skipped_;
    return;
  }
  skipped_ = 0;
  values_.emplace_back(time, value);
  if (values_.size() <= kMaxSamples) return;
  std::deque<std::pair<double, double>> kept;
  for (std::size_t k = values_.size() % 2 == 0 ? 1 : 0; k < values_.size(); k += 2)
    kept.push_back(values_[k]);  // the newest one among them
  values_.swap(kept);
  stride_ *= 2;
}

void WindowSeries::trim(double now, double window) {
  while (!values_.empty() && values_.front().first < now - window)
    values_.pop_front();
  if (stride_ > 1 && values_.size() < kMaxSamples / 4) {
    stride_ /= 2;
    skipped_ = 0;
  }
}

std::optional<double> WindowSeries::median() const {
  std::vector<double> values;
  values.reserve(values_.size());
  for (const auto& entry : values_)
    values.push_back(entry.second);
  return median_of(std::move(values));
}

std::optional<double> median_of(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle),
                   values.end());
  const double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle));
  return (lower + upper) / 2;
}

LatenessVerdict judge_lateness(const std::map<std::uint32_t, RankTiming>& ranks,
                               std::size_t min_samples) {
  LatenessVerdict verdict;
  std::vector<double> waits;
  std::vector<double> steps;
  for (const auto& [rank, timing] : ranks) {
    if (timing.step_median) steps.push_back(*timing.step_median);
    if (timing.wait_median && timing.wait_samples >= std::max<std::size_t>(min_samples, 1)) {
      waits.push_back(*timing.wait_median);
    }
  }
  verdict.median_step_seconds = median_of(steps);
  if (waits.size() < 2) return verdict;
  const double median_wait = *median_of(waits);
  for (const auto& [rank, timing] : ranks) {
    if (!timing.wait_median || timing.wait_samples < std::max<std::size_t>(min_samples, 1)) {
      continue;
    }
    const double lateness = std::max(0.0, median_wait - *timing.wait_median);
    verdict.lateness[rank] = lateness;
    if (verdict.median_step_seconds && lateness > *verdict.median_step_seconds / 2) {
      verdict.stragglers.insert(rank);
    }
  }
  return verdict;
}

}  // namespace primus::launch
