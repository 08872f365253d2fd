// How an attempt of the ranks ended, and what primus-launch does about it (pure: no process,
// no file). The rules are docs/architecture.md's "Exit statuses of primus-launch" and
// "Supervision": the first rank that fails is the root cause; ranks that the launcher itself
// stopped afterwards are not; a stop (a signal, primus-launch stop) ends with 75 when the ranks
// stopped as asked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace primus::launch {

constexpr int kExitUsage = 2;
constexpr int kExitCannotRun = 126;
constexpr int kExitNotFound = 127;
constexpr int kExitDefaultPreempted = 75;  // EX_TEMPFAIL, --primus-exit-preempted

// One rank's end, as waitpid(2) reported it.
struct RankEnd {
  int rank = 0;
  int wait_status = 0;
  // The launcher had already asked the ranks to stop (after another rank failed, or for a
  // stop): this end is a consequence, not a cause.
  bool after_stop_request = false;
};

// The exit status a shell would show for it: the code, or 128 + the signal.
int exit_code(int wait_status);
// "exit status 3", "killed by signal 9 (SIGKILL)".
std::string describe(int wait_status);

enum class Verdict {
  kFinished,  // every rank exited 0
  kStopped,   // stopped as asked: every rank exited 0 or with the preempted status, one of those
  kFailed,    // a rank failed: `cause`
};

struct Outcome {
  Verdict verdict = Verdict::kFinished;
  std::optional<RankEnd> cause;  // kFailed: the first rank that failed
  bool stop_requested = false;   // a stop was forwarded during the attempt
};

// `ends` in the order the ranks ended. stop_requested: the launcher forwarded a stop (signal
// or stop request) to the ranks during the attempt. preempted_status: --primus-exit-preempted.
Outcome judge(const std::vector<RankEnd>& ends, bool stop_requested, int preempted_status);

// What the launcher does after an attempt.
struct Decision {
  bool restart = false;  // start another attempt in this allocation
  int exit_status = 0;   // otherwise, primus-launch's exit status
};

// restarts_done: attempts restarted so far; max_restarts: --primus-max-restarts. An attempt
// during which a stop was asked for is never restarted, whatever its ranks did.
Decision decide(const Outcome& outcome, std::uint32_t restarts_done, std::uint32_t max_restarts,
                int preempted_status);

}  // namespace primus::launch
