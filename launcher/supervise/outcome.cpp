#include "supervise/outcome.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstring>

namespace primus::launch {

int exit_code(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string describe(int wait_status) {
  if (WIFEXITED(wait_status)) return "exit status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int signal = WTERMSIG(wait_status);
    const char* abbrev = sigabbrev_np(signal);
    std::string text = "killed by signal " + std::to_string(signal);
    if (abbrev != nullptr) text += std::string(" (SIG") + abbrev + ")";
    if (WCOREDUMP(wait_status)) text += ", core dumped";
    return text;
  }
  return "ended with wait status " + std::to_string(wait_status);
}

namespace {

bool stopped_while_starting(const RankEnd& end, bool stop_requested) {
  return stop_requested && end.after_stop_request && !end.ready && exit_code(end.wait_status) != 0;
}

}  // namespace

Outcome judge(const std::vector<RankEnd>& ends, bool stop_requested, int preempted_status) {
  Outcome outcome;
  outcome.stop_requested = stop_requested;
  for (const RankEnd& end : ends) {
    if (stopped_while_starting(end, stop_requested))
      outcome.stopped_while_starting.push_back(end.rank);
  }
  const bool peer_lost_while_starting = !outcome.stopped_while_starting.empty();
  bool any_stopped = peer_lost_while_starting;
  for (const RankEnd& end : ends) {
    const int code = exit_code(end.wait_status);
    if (code == 0 || stopped_while_starting(end, stop_requested)) continue;
    if (stop_requested && code == preempted_status) {
      any_stopped = true;
      continue;
    }
    // A rank the launcher stopped after another one failed is not a cause; under a stop
    // request, a rank that did not stop as asked is one, unless a peer stopped while starting.
    if (end.after_stop_request && (!stop_requested || peer_lost_while_starting)) continue;
    if (!outcome.cause) outcome.cause = end;
  }
  if (outcome.cause) {
    outcome.verdict = Verdict::kFailed;
    outcome.stopped_while_starting.clear();
  } else if (any_stopped) {
    outcome.verdict = Verdict::kStopped;
  } else {
    outcome.verdict = Verdict::kFinished;
  }
  return outcome;
}

std::optional<int> blame_the_lost_peer(Outcome& outcome, const std::vector<RankEnd>& ends,
                                       const std::map<std::uint32_t, std::uint32_t>& lost_peer) {
  if (outcome.verdict != Verdict::kFailed || !outcome.cause || outcome.cause->rank < 0) {
    return std::nullopt;
  }
  const int first = outcome.cause->rank;
  for (std::size_t hops = 0; hops <= lost_peer.size(); ++hops) {
    const auto it = lost_peer.find(static_cast<std::uint32_t>(outcome.cause->rank));
    if (it == lost_peer.end() || static_cast<int>(it->second) == outcome.cause->rank) break;
    const int peer = static_cast<int>(it->second);
    const auto end =
        std::find_if(ends.begin(), ends.end(), [&](const RankEnd& e) { return e.rank == peer; });
    if (end != ends.end() && exit_code(end->wait_status) == 0) break;  // it finished
    // A peer with no end reported: its node went, or its report did not come; its status is
    // unknown (1).
    outcome.cause = end != ends.end() ? *end : RankEnd{peer, 1 << 8, false, false};
  }
  if (outcome.cause->rank == first) return std::nullopt;
  return first;
}

Decision decide(const Outcome& outcome, std::uint32_t restarts_done, std::uint32_t max_restarts,
                int preempted_status) {
  switch (outcome.verdict) {
    case Verdict::kFinished:
      return {false, 0};
    case Verdict::kStopped:
      return {false, preempted_status};
    case Verdict::kFailed:
      break;
  }
  if (!outcome.stop_requested && restarts_done < max_restarts) return {true, 0};
  const int code = outcome.cause ? exit_code(outcome.cause->wait_status) : 1;
  return {false, code == 0 ? 1 : code};
}

std::optional<std::uint32_t> hung_rank(
    const std::map<std::uint32_t, std::chrono::steady_clock::time_point>& last_progress,
    std::chrono::steady_clock::time_point now, std::chrono::milliseconds timeout) {
  std::optional<std::uint32_t> oldest;
  std::chrono::steady_clock::time_point when{};
  for (const auto& [rank, at] : last_progress) {
    if (!oldest || at < when) {
      oldest = rank;
      when = at;
    }
  }
  if (oldest && now - when > timeout) return oldest;
  return std::nullopt;
}

StopDecision decide_stop(const StopFacts& facts) {
  StopDecision d;
  if (facts.user_stop) {
    d.reason = StopReason::kUserStop;
    d.event = "finished";
    return d;
  }
  if (facts.job_state == "TIMEOUT") {
    d.reason = StopReason::kTimeLimit;
    d.event = "time-limit";
    d.exit_status = facts.preempted_status;
    return d;
  }
  if (facts.job_state != "RUNNING") {
    d.reason = StopReason::kCancelled;
    d.event = "cancelled";
    d.exit_status = 128 + SIGTERM;
    return d;
  }
  if (facts.preempted) {
    d.reason = StopReason::kPreempted;
    d.event = "preempted";
    d.requeue = true;
    d.exit_status = facts.preempted_status;
    return d;
  }
  d.reason = StopReason::kTimeLimit;
  if (facts.requeues_so_far < facts.max_requeues) {
    d.event = "time-limit";
    d.requeue = true;
    d.exit_status = facts.preempted_status;
  } else {
    d.event = "requeue-cap-reached";
    d.exit_status = 1;
  }
  return d;
}

}  // namespace primus::launch
