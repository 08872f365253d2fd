// How an attempt of the ranks ended, and what primus-launch does about it (pure: no process,
// no file). The rules are docs/architecture.md's "Exit statuses of primus-launch" and
// "Supervision": the first rank that fails is the root cause; ranks that the launcher itself
// stopped afterwards are not; a stop (a signal, primus-launch stop) ends with 75 when the ranks
// stopped as asked.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
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
  // The rank had said it was ready (primus.init() returned: its "ready" event) before it
  // ended. A rank that never calls primus.init() is never ready.
  bool ready = false;
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
  // kStopped: ranks that ended, after the stop, before they were ready (docs/architecture.md,
  // "Preemption and requeue", rule 3): the attempt saved nothing, since no commit can
  // happen without every rank.
  std::vector<int> stopped_while_starting;
};

// `ends` in the order the ranks ended. stop_requested: a stop (a signal, a stop request) reached
// the ranks during the attempt, not one that the launcher sent after a failure.
// preempted_status: --primus-exit-preempted.
//
// Under a stop, a rank that stopped as asked exits with preempted_status; a rank that ended
// after the stop before it was ready (killed by the signal while it imported torch, or failed
// because a peer was) stopped while starting: neither is a cause, and once any rank stopped
// while starting, the failures of the others after the stop are its consequences (their
// collectives lost a peer). A ready rank that ended otherwise under a stop is the cause.
Outcome judge(const std::vector<RankEnd>& ends, bool stop_requested, int preempted_status);

// A rank whose failure came from losing its connection to a peer (its exception report named
// the peer: `lost_peer`, rank -> peer) is not the root cause when that peer failed too, or
// never reported how it ended: the peer is, following such reports from rank to rank. Returns
// the rank first blamed when the blame moved.
std::optional<int> blame_the_lost_peer(Outcome& outcome, const std::vector<RankEnd>& ends,
                                       const std::map<std::uint32_t, std::uint32_t>& lost_peer);

// What the launcher does after an attempt.
struct Decision {
  bool restart = false;  // start another attempt in this allocation
  int exit_status = 0;   // otherwise, primus-launch's exit status
};

// restarts_done: attempts restarted so far; max_restarts: --primus-max-restarts. An attempt
// during which a stop was asked for is never restarted, whatever its ranks did.
Decision decide(const Outcome& outcome, std::uint32_t restarts_done, std::uint32_t max_restarts,
                int preempted_status);

// Supervision for hangs: the rank whose steps (or heartbeats) stopped first, once that was more
// than `timeout` ago; nothing while every rank is within it. last_progress: when each rank
// that reports over the control channel last advanced a step (or said hello).
std::optional<std::uint32_t> hung_rank(
    const std::map<std::uint32_t, std::chrono::steady_clock::time_point>& last_progress,
    std::chrono::steady_clock::time_point now, std::chrono::milliseconds timeout);

// Under Slurm, after the ranks stopped as asked (docs/architecture.md, "Preemption and requeue",
// rule 3): why, whether the job goes back to the queue, and primus-launch's exit status.
enum class StopReason {
  kUserStop,   // primus-launch stop: no requeue, exit 0
  kCancelled,  // scancel (the job is ending, not RUNNING): never requeued
  kPreempted,  // PreemptTime set: requeued exactly once, by us, whatever the count
  kTimeLimit,  // otherwise (the --signal warning, a signal to the step): requeued below the cap;
               // past the limit itself (TIMEOUT) too late to requeue
};
struct StopFacts {
  bool user_stop = false;
  // JobState when the ranks had stopped (empty: unknown). Only a RUNNING job is requeued: on
  // the testbed a cancelled job shows COMPLETING while its steps end (its ranks, signalled by
  // Slurm, may well have saved and exited 75), and one past its time limit TIMEOUT.
  std::string job_state;
  bool preempted = false;             // PreemptTime set
  std::uint32_t requeues_so_far = 0;  // SLURM_RESTART_COUNT: every kind of requeue counts
  std::uint32_t max_requeues = 3;     // --primus-max-requeues
  int preempted_status = kExitDefaultPreempted;
};
struct StopDecision {
  StopReason reason = StopReason::kTimeLimit;
  bool requeue = false;
  int exit_status = 0;
  std::string event;  // preempted, time-limit, cancelled, requeue-cap-reached, finished
};
StopDecision decide_stop(const StopFacts& facts);

}  // namespace primus::launch
