#include "supervise/hang_watch.hpp"

#include "supervise/outcome.hpp"

namespace primus::launch {

void HangWatch::hello(std::uint32_t rank, Clock::time_point now) {
  if (ended_.count(rank) != 0) return;
  last_[rank] = heard_[rank] = now;
  if (any_hello_) return;
  any_hello_ = true;
  for (std::uint32_t r = 0; r < world_size_; ++r) {
    if (ended_.count(r) == 0 && last_.count(r) == 0) last_[r] = heard_[r] = now;
  }
}

void HangWatch::heard(std::uint32_t rank, Clock::time_point now) {
  if (ended_.count(rank) == 0 && last_.count(rank) != 0) heard_[rank] = now;
}

void HangWatch::advanced(std::uint32_t rank, Clock::time_point now) {
  if (ended_.count(rank) == 0) last_[rank] = heard_[rank] = now;
}

void HangWatch::goodbye(std::uint32_t rank, Clock::time_point now) {
  advanced(rank, now);
}

void HangWatch::ended(std::uint32_t rank) {
  ended_.insert(rank);
  last_.erase(rank);
  heard_.erase(rank);
}

void HangWatch::replaced(std::uint32_t rank, Clock::time_point now) {
  ended_.erase(rank);
  in_rendezvous_.erase(rank);
  last_[rank] = heard_[rank] = now;
}

void HangWatch::rejoined(Clock::time_point now) {
  for (auto& [rank, at] : last_) {
    at = now;
    heard_[rank] = now;
  }
}

std::optional<std::uint32_t> HangWatch::hung(Clock::time_point now,
                                             std::chrono::milliseconds timeout) const {
  const auto oldest = hung_rank(last_, now, timeout);
  if (!oldest) return std::nullopt;
  // Every rank waits on the one that is stuck, and so makes no progress either; but the others
  // still send heartbeats, and a stopped process, or one that never said hello, sends nothing.
  // Among the ranks without progress, the one silent longest (silent for over half the
  // timeout) is the one, first among those not waiting in the rendezvous (silent there because
  // torch holds the GIL); else the one whose progress is oldest.
  std::map<std::uint32_t, Clock::time_point> silent, silent_outside;
  for (const auto& [rank, at] : last_) {
    if (now - at > timeout && heard_.count(rank) != 0 && now - heard_.at(rank) > timeout / 2) {
      silent[rank] = heard_.at(rank);
      if (in_rendezvous_.count(rank) == 0) silent_outside[rank] = heard_.at(rank);
    }
  }
  if (const auto rank = hung_rank(silent_outside, now, timeout / 2)) return rank;
  if (const auto rank = hung_rank(silent, now, timeout / 2)) return rank;
  return oldest;
}

HangWatch::Clock::time_point HangWatch::since(std::uint32_t rank, Clock::time_point now) const {
  const auto it = last_.find(rank);
  return it != last_.end() ? it->second : now;
}

}  // namespace primus::launch
