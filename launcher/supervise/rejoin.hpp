// A rejoin (--primus-recover=rejoin; docs/architecture.md, "Recovery without a restart"): the
// ranks that survive a rank's failure stay alive, and the attempt goes on in a new generation
// with a replacement for the failed rank. Pure: fed by the ranks' reports and ends and by the
// clock, it says when to place the replacement and when the rejoin is over or has failed; the
// runner starts the process and sends the notices (python/primus/_rejoin.py: the ranks' side).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace primus::launch {

// How long each part of one rejoin took (the monitor's phases, in the "rejoined" event).
struct RejoinPhases {
  double tear_down = 0;  // the failure to the last survivor waiting
  double place = 0;      // then to the replacement started and the notices sent
  double regroup = 0;    // then to every rank's groups up in the new generation
  double total() const { return tear_down + place + regroup; }
};

// The first step taken after a rejoin: from the rejoin's end, and from the failure (the
// "rejoin-first-step" event).
struct RejoinFirstStep {
  double after_rejoin = 0;
  double after_failure = 0;
};

class Rejoin {
 public:
  using Clock = std::chrono::steady_clock;

  struct Settings {
    bool enabled = false;          // --primus-recover=rejoin
    std::uint32_t world_size = 0;  // the attempt's
    std::uint32_t limit = 0;       // rejoins left to this attempt (--primus-max-restarts)
    std::chrono::milliseconds deadline{std::chrono::seconds(60)};  // --primus-rejoin-deadline
  };

  explicit Rejoin(const Settings& settings) : settings_(settings) {}
  bool enabled() const { return settings_.enabled; }

  // `rank` said its groups are up in `generation` ("rejoinable"). Ends a rejoin under way once
  // every rank has said so for its generation: then the phases, once.
  std::optional<RejoinPhases> rejoinable(std::uint32_t rank, std::uint32_t generation,
                                         Clock::time_point now);
  // `rank` left its training loop for good ("rejoin-off": it finished, or stops): it can no
  // longer rejoin, so neither can the others until a new attempt.
  void left(std::uint32_t rank) { left_.insert(rank); }
  // A survivor left its loop after a peer's failure in `generation` ("rejoin-waiting"), which
  // may come before the failed rank's end begins the rejoin.
  void waiting(std::uint32_t rank, std::uint32_t generation, Clock::time_point now);

  // Whether the failure of `rank` starts a rejoin (then under_way()); else `why_not` says why.
  // `checkpoint`: a committed checkpoint exists to go on from.
  bool begin(std::uint32_t rank, bool checkpoint, Clock::time_point now, std::string& why_not);
  bool under_way() const { return failed_.has_value(); }
  std::optional<std::uint32_t> failed_rank() const { return failed_; }
  // The generation the ranks are in (or, once placed, are joining).
  std::uint32_t generation() const { return generation_; }

  // Every survivor waits and the replacement is not placed yet: place it now.
  bool ready_to_place() const;
  // The replacement started and the notices sent: the ranks join generation() + 1 from now.
  void placed(Clock::time_point now);
  bool is_placed() const { return placed_at_.has_value(); }
  // A rejoin under way that has not ended by its deadline (from the failure) has failed.
  bool past_deadline(Clock::time_point now) const;
  // Ends a rejoin that failed (another failure, the deadline): no rejoin from now on.
  void give_up();
  std::uint32_t completed() const { return completed_; }
  // A rank took its first step in `generation`: once, after the rejoin that made it, how long
  // after that rejoin's end and after its failure.
  std::optional<RejoinFirstStep> first_step(std::uint32_t generation, Clock::time_point now);
  // Whether a standby would be of use now: a rejoin could begin (enabled, not given up, one
  // left under the limit, none under way) and every rank is up in the current generation, so
  // that the standby's imports no longer compete with the ranks' own start.
  bool wants_standby() const;

 private:
  Settings settings_;
  std::uint32_t generation_ = 0;
  std::map<std::uint32_t, std::uint32_t> rejoinable_;  // rank -> its newest generation said
  void note_all_waiting(Clock::time_point now);

  std::set<std::uint32_t> waiting_;  // ranks that said they wait, in generation_
  std::set<std::uint32_t> left_;     // ranks that left their loop for good
  std::optional<std::uint32_t> failed_;
  Clock::time_point failed_at_{};
  std::optional<Clock::time_point> all_waiting_at_;
  std::optional<Clock::time_point> placed_at_;
  std::uint32_t completed_ = 0;
  bool given_up_ = false;
  // The last completed rejoin, until its generation's first step is reported.
  std::optional<std::uint32_t> first_step_of_;
  Clock::time_point last_failed_at_{};
  Clock::time_point last_rejoined_at_{};
};

}  // namespace primus::launch
