// The watch of --primus-hang-timeout over one attempt's ranks (pure: times in, a rank out).
// A rank is watched from its hello, and once any rank has said hello, every rank that has not
// is watched from that moment too: a rank stopped while it imports torch holds the others in
// the rendezvous, and would otherwise never be found. Advancing a step renews a rank's time; a
// goodbye (the rank's interpreter is exiting) renews it once more, so that a rank stopped on
// its way out is found as well; an end takes the rank out of the watch. Heartbeats without a
// step tell a rank that waits from one that is stopped: the hang is blamed on the latter. A rank
// inside torch's rendezvous (init_process_group, between its "rendezvous" and "ready" events)
// sends no heartbeats either, since torch holds the GIL there; among silent ranks, one that is
// not waiting in the rendezvous is blamed before those that wait in it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

namespace primus::launch {

class HangWatch {
 public:
  using Clock = std::chrono::steady_clock;

  explicit HangWatch(std::uint32_t world_size) : world_size_(world_size) {}

  void hello(std::uint32_t rank, Clock::time_point now);
  void heard(std::uint32_t rank, Clock::time_point now);  // any report (a heartbeat)
  void advanced(std::uint32_t rank, Clock::time_point now);
  void goodbye(std::uint32_t rank, Clock::time_point now);
  // The rank entered torch's rendezvous (its heartbeats may stop there), and left it (ready).
  void rendezvous(std::uint32_t rank) { in_rendezvous_.insert(rank); }
  void ready(std::uint32_t rank) { in_rendezvous_.erase(rank); }
  void ended(std::uint32_t rank);
  // A replacement for an ended rank started (a rejoin): watched again from `now`.
  void replaced(std::uint32_t rank, Clock::time_point now);
  // A rejoin ended (every rank's groups up in the new generation): every rank watched again from
  // `now`. The survivors made no progress from the failure on (the check waits while a rejoin
  // is under way), and their first step after it comes only once the checkpoint is loaded.
  void rejoined(Clock::time_point now);

  // Once a rank made no progress for more than `timeout`: the rank to blame, the one silent
  // longest (no heartbeat either: stopped, or never said hello) among those without progress,
  // else the one whose progress is oldest.
  std::optional<std::uint32_t> hung(Clock::time_point now, std::chrono::milliseconds timeout) const;
  // When the rank was last heard from (or watched since); `now` for a rank not watched.
  Clock::time_point since(std::uint32_t rank, Clock::time_point now) const;

 private:
  std::uint32_t world_size_;
  bool any_hello_ = false;
  std::map<std::uint32_t, Clock::time_point> last_;
  std::map<std::uint32_t, Clock::time_point> heard_;  // the last report of any kind
  std::set<std::uint32_t> ended_;
  std::set<std::uint32_t> in_rendezvous_;
};

}  // namespace primus::launch
