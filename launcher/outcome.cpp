#include "outcome.hpp"

#include <sys/wait.h>

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

Outcome judge(const std::vector<RankEnd>& ends, bool stop_requested, int preempted_status) {
  Outcome outcome;
  outcome.stop_requested = stop_requested;
  bool any_stopped = false;
  for (const RankEnd& end : ends) {
    const int code = exit_code(end.wait_status);
    if (code == 0) continue;
    if (stop_requested && code == preempted_status) {
      any_stopped = true;
      continue;
    }
    // A rank the launcher stopped after another one failed is not a cause; under a stop
    // request, a rank that did not stop as asked is one.
    if (end.after_stop_request && !stop_requested) continue;
    if (!outcome.cause) outcome.cause = end;
  }
  if (outcome.cause) {
    outcome.verdict = Verdict::kFailed;
  } else if (any_stopped) {
    outcome.verdict = Verdict::kStopped;
  } else {
    outcome.verdict = Verdict::kFinished;
  }
  return outcome;
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
