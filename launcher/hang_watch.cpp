#include "hang_watch.hpp"

#include "outcome.hpp"

namespace primus::launch {

void HangWatch::hello(std::uint32_t rank, Clock::time_point now) {
  if (ended_.count(rank) != 0) return;
  last_[rank] = now;
  unheard_.erase(rank);
  if (any_hello_) return;
  any_hello_ = true;
  for (std::uint32_t r = 0; r < world_size_; ++r) {
    if (ended_.count(r) == 0 && last_.count(r) == 0) {
      last_[r] = now;
      unheard_.insert(r);
    }
  }
}

void HangWatch::advanced(std::uint32_t rank, Clock::time_point now) {
  if (ended_.count(rank) == 0) last_[rank] = now;
}

void HangWatch::goodbye(std::uint32_t rank, Clock::time_point now) {
  advanced(rank, now);
}

void HangWatch::ended(std::uint32_t rank) {
  ended_.insert(rank);
  last_.erase(rank);
  unheard_.erase(rank);
}

std::optional<std::uint32_t> HangWatch::hung(Clock::time_point now,
                                             std::chrono::milliseconds timeout) const {
  // The ranks that said hello wait for the one that did not (in the rendezvous): it is the one.
  std::map<std::uint32_t, Clock::time_point> unheard;
  for (const std::uint32_t rank : unheard_)
    unheard[rank] = last_.at(rank);
  if (const auto rank = hung_rank(unheard, now, timeout)) return rank;
  return hung_rank(last_, now, timeout);
}

HangWatch::Clock::time_point HangWatch::since(std::uint32_t rank, Clock::time_point now) const {
  const auto it = last_.find(rank);
  return it != last_.end() ? it->second : now;
}

}  // namespace primus::launch
