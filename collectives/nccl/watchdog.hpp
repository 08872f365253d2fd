// When to stop waiting for NCCL: pure decisions over what was observed and the time, which
// the caller passes in (no clock here), and a polling loop over injected callables.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "nccl_api.hpp"

namespace primus::coll::nccl {

using Clock = std::chrono::steady_clock;

enum class Verdict {
  kContinue,      // not finished, time left: poll again
  kDone,          // the communicator is ready and the stream has finished
  kAbortTimeout,  // past the deadline: abort the communicator
  kAbortError,    // NCCL or CUDA reported an error: abort the communicator
};

struct Decision {
  Verdict verdict = Verdict::kContinue;
  std::string message;        // the abort verdicts: what happened, ready for the exception
  bool peer_failure = false;  // the abort verdicts: a peer is to blame (or may be: a timeout)
};

// One poll's observation: the communicator's state (async_error) and its stream's. Waits that
// involve no stream (initialization, finalization) observe StreamState::kDone.
struct Observation {
  Status async;
  StreamStatus stream;
};

// What to do about the operation `what` ("allreduce", "communicator initialization") started at
// `started`, at `now`, with `timeout` allowed. An error wins over everything (the communicator
// is broken), then completion (finished work is not thrown away at the deadline), then the
// deadline (now - started >= timeout).
Decision decide(const std::string& what, Clock::time_point started, Clock::time_point now,
                std::chrono::milliseconds timeout, const Observation& observed);

// "300 s" for whole seconds, else "1500 ms".
std::string describe_duration(std::chrono::milliseconds duration);

// Polls until decide() says something other than kContinue, sleeping between polls (never past
// the deadline). Time comes from `now` and passes in `sleep`, so tests drive it.
class Watchdog {
 public:
  using NowFn = std::function<Clock::time_point()>;
  using SleepFn = std::function<void(std::chrono::milliseconds)>;

  Watchdog(std::chrono::milliseconds timeout, std::chrono::milliseconds poll_interval, NowFn now,
           SleepFn sleep);

  // The real clock: std::chrono::steady_clock and std::this_thread::sleep_for.
  static Watchdog real(std::chrono::milliseconds timeout, std::chrono::milliseconds poll_interval);

  // The final decision: kDone, kAbortTimeout or kAbortError (never kContinue). Exceptions
  // from `poll`, `now` or `sleep` pass through.
  Decision wait(const std::string& what, const std::function<Observation()>& poll) const;

 private:
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds poll_interval_;
  NowFn now_;
  SleepFn sleep_;
};

}  // namespace primus::coll::nccl
