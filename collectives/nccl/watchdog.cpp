// The watchdog's decisions (pure) and its polling loop.
#include "watchdog.hpp"

#include <algorithm>
#include <thread>
#include <utility>

namespace primus::coll::nccl {

std::string describe_duration(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

Decision decide(const std::string& what, Clock::time_point started, Clock::time_point now,
                std::chrono::milliseconds timeout, const Observation& observed) {
  if (observed.async.result == Result::kError) {
    return {Verdict::kAbortError,
            "NCCL reported an asynchronous error during " + what + ": " + observed.async.message +
                "; the communicator was aborted",
            observed.async.remote};
  }
  if (observed.stream.state == StreamState::kError) {
    return {Verdict::kAbortError,
            "CUDA reported an error on the NCCL stream during " + what + ": " +
                observed.stream.message + "; the communicator was aborted",
            false};
  }
  if (observed.async.result == Result::kSuccess && observed.stream.state == StreamState::kDone) {
    return {Verdict::kDone, "", false};
  }
  if (now - started >= timeout) {
    const char* waiting = observed.async.result == Result::kInProgress
                              ? " (NCCL still in progress)"
                              : " (the GPU work had not finished)";
    return {Verdict::kAbortTimeout,
            "NCCL " + what + " did not complete within " + describe_duration(timeout) + waiting +
                "; the communicator was aborted",
            true};
  }
  return {Verdict::kContinue, "", false};
}

Watchdog::Watchdog(std::chrono::milliseconds timeout, std::chrono::milliseconds poll_interval,
                   NowFn now, SleepFn sleep)
    : timeout_(timeout),
      poll_interval_(std::max(poll_interval, std::chrono::milliseconds(0))),
      now_(std::move(now)),
      sleep_(std::move(sleep)) {}

Watchdog Watchdog::real(std::chrono::milliseconds timeout,
                        std::chrono::milliseconds poll_interval) {
  return Watchdog(
      timeout, poll_interval, [] { return Clock::now(); },
      [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); });
}

Decision Watchdog::wait(const std::string& what, const std::function<Observation()>& poll) const {
  const Clock::time_point started = now_();
  for (;;) {
    const Observation observed = poll();
    const Clock::time_point now = now_();
    Decision decision = decide(what, started, now, timeout_, observed);
    if (decision.verdict != Verdict::kContinue) return decision;
    // Wake at the deadline at the latest, so that a timeout is seen on time.
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(started + timeout_ - now);
    sleep_(std::max(std::chrono::milliseconds(0), std::min(poll_interval_, left)));
  }
}

}  // namespace primus::coll::nccl
