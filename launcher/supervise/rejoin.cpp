// A rejoin's decisions (rejoin.hpp).
#include "supervise/rejoin.hpp"

namespace primus::launch {
namespace {

double seconds_between(Rejoin::Clock::time_point from, Rejoin::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

bool Rejoin::begin(std::uint32_t rank, bool checkpoint, Clock::time_point now,
                   std::string& why_not) {
  if (!settings_.enabled) {
    why_not = "--primus-recover=restart";
    return false;
  }
  if (given_up_) {
    why_not = "an earlier rejoin of this attempt failed";
    return false;
  }
  if (under_way()) {
    why_not = "rank " + std::to_string(*failed_) + "'s rejoin was under way";
    return false;
  }
  if (completed_ >= settings_.limit) {
    why_not = "no restart left (--primus-max-restarts)";
    return false;
  }
  if (!checkpoint) {
    why_not = "no checkpoint was committed yet to go on from";
    return false;
  }
  if (!left_.empty()) {
    why_not =
        "rank " + std::to_string(*left_.begin()) + " has left its training loop (it finished)";
    return false;
  }
  for (std::uint32_t r = 0; r < settings_.world_size; ++r) {
    const auto it = rejoinable_.find(r);
    if (it == rejoinable_.end() || it->second != generation_) {
      why_not = "rank " + std::to_string(r) +
                " cannot rejoin (only primus.train on CPU ranks can, once its groups are up)";
      return false;
    }
  }
  failed_ = rank;
  failed_at_ = now;
  all_waiting_at_.reset();
  placed_at_.reset();
  note_all_waiting(now);
  return true;
}

void Rejoin::waiting(std::uint32_t rank, std::uint32_t generation, Clock::time_point now) {
  // A survivor's word may come before the launcher has seen the failed rank end: its
  // connections closed first. It counts once the rejoin begins.
  if (is_placed() || generation != generation_ || rank >= settings_.world_size) return;
  waiting_.insert(rank);
  note_all_waiting(now);
}

void Rejoin::note_all_waiting(Clock::time_point now) {
  if (!under_way() || all_waiting_at_) return;
  for (std::uint32_t r = 0; r < settings_.world_size; ++r) {
    if (r != *failed_ && waiting_.count(r) == 0) return;
  }
  all_waiting_at_ = now;
}

bool Rejoin::wants_standby() const {
  if (!settings_.enabled || given_up_ || under_way() || completed_ >= settings_.limit) {
    return false;
  }
  for (std::uint32_t r = 0; r < settings_.world_size; ++r) {
    const auto it = rejoinable_.find(r);
    if (it == rejoinable_.end() || it->second != generation_) return false;
  }
  return true;
}

bool Rejoin::ready_to_place() const {
  return under_way() && !is_placed() && all_waiting_at_.has_value();
}

void Rejoin::placed(Clock::time_point now) {
  placed_at_ = now;
  waiting_.clear();
  ++generation_;
}

std::optional<RejoinPhases> Rejoin::rejoinable(std::uint32_t rank, std::uint32_t generation,
                                               Clock::time_point now) {
  if (rank >= settings_.world_size) return std::nullopt;
  rejoinable_[rank] = generation;
  if (!under_way() || !is_placed()) return std::nullopt;
  for (std::uint32_t r = 0; r < settings_.world_size; ++r) {
    const auto it = rejoinable_.find(r);
    if (it == rejoinable_.end() || it->second != generation_) return std::nullopt;
  }
  RejoinPhases phases;
  phases.tear_down = seconds_between(failed_at_, *all_waiting_at_);
  phases.place = seconds_between(*all_waiting_at_, *placed_at_);
  phases.regroup = seconds_between(*placed_at_, now);
  ++completed_;
  first_step_of_ = generation_;
  last_failed_at_ = failed_at_;
  last_rejoined_at_ = now;
  failed_.reset();
  placed_at_.reset();
  all_waiting_at_.reset();
  waiting_.clear();
  return phases;
}

std::optional<RejoinFirstStep> Rejoin::first_step(std::uint32_t generation, Clock::time_point now) {
  if (first_step_of_ != generation) return std::nullopt;
  first_step_of_.reset();
  return RejoinFirstStep{seconds_between(last_rejoined_at_, now),
                         seconds_between(last_failed_at_, now)};
}

bool Rejoin::past_deadline(Clock::time_point now) const {
  return under_way() && now - failed_at_ >= settings_.deadline;
}

void Rejoin::give_up() {
  given_up_ = true;
  failed_.reset();
  placed_at_.reset();
  all_waiting_at_.reset();
  waiting_.clear();
}

}  // namespace primus::launch
