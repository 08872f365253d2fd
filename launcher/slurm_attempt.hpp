// One attempt of the ranks under Slurm (OS adapter): one srun step whose every task is
// `primus-launch task -- COMMAND` (task_wrapper.hpp), supervised through the control channel.
// A rank that fails, or hangs past --primus-hang-timeout, ends the attempt (SIGTERM to the step
// with scancel, SIGKILL after the grace time); a stop signal to the launcher, or a stop request
// in the job directory, is forwarded to the step with `scancel --signal`, never to srun (which
// would turn SIGTERM into SIGKILL); a stop signal that Slurm sent the ranks itself (preemption,
// --signal) is learnt from their reports.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control_server.hpp"
#include "data_tasks.hpp"
#include "events.hpp"
#include "job_monitor.hpp"
#include "outcome.hpp"
#include "slurm_queries.hpp"

namespace primus::launch {

struct SlurmAttemptSetup {
  std::string srun;               // resolved path of srun
  std::vector<std::string> argv;  // srun's arguments after argv[0]
  std::vector<std::string> env;   // "NAME=value"
  std::string job;                // SLURM_JOB_ID
  std::uint32_t world_size = 0;
  std::uint32_t attempt = 0;
  std::chrono::milliseconds grace{std::chrono::seconds(10)};  // SIGTERM to SIGKILL
  // After primus-launch stop, until the step is cancelled (--primus-stop-grace); a stop that
  // Slurm began ends by Slurm's own deadlines.
  std::chrono::milliseconds stop_grace{std::chrono::seconds(120)};
  std::optional<std::chrono::milliseconds> hang_timeout;
  // The dynamic split's queue (--primus-data-mode=dynamic), reset for each attempt; nullptr in
  // static mode.
  DataTasks* data = nullptr;
  std::filesystem::path stop_request;
  // The monitor (status.json, metrics, stragglers), fed every report; nullptr: none.
  JobMonitor* monitor = nullptr;
  std::string node;  // the launcher's, for events
  int preempted_status = kExitDefaultPreempted;
  // Ranks still running shortly before slurmctld ends the job (EndTime, less
  // `requeue_margin`) after a stop began: a preempted job is killed at the end of GraceTime
  // and ends TIMEOUT, never requeued by Slurm (seen on the testbed), so the launcher requeues
  // `requeue_target` itself then; a job at its time limit too while `may_requeue_at_time_limit`
  // (below --primus-max-requeues). Empty target: never.
  std::string requeue_target;
  bool may_requeue_at_time_limit = false;
  std::chrono::milliseconds requeue_margin{std::chrono::seconds(3)};
  // Nodes the requeued job must not be given (excluded-nodes.json): its ExcNodeList.
  std::vector<std::string> excluded_nodes;
  // Called once right after srun was started, on the attempt's thread, for work that must not
  // delay the ranks' start (it may run commands and wait for them: the attempt reaps no child
  // meanwhile). Empty: nothing.
  std::function<void()> after_start;
};

struct SlurmAttemptResult {
  std::vector<RankEnd> ends;          // as the task wrappers reported them, in that order
  bool stop_forwarded = false;        // the launcher forwarded a stop (signal or request)
  bool user_stop = false;             // primus-launch stop
  bool ranks_signalled = false;       // a rank reported a stop signal (Slurm's own included)
  bool checkpoint_committed = false;  // a rank reported a committed checkpoint
  std::string checkpoint;             // its path
  bool any_rank_connected = false;    // some rank itself (not only a wrapper) reported
  int srun_status = 0;                // waitpid status of srun
  std::optional<std::uint32_t> hung;  // the rank that hung, if the attempt ended for a hang
  bool ended_for_failure = false;     // a rank failed or hung first: never a stop
  std::map<std::uint32_t, std::string> nodes;  // where each rank ran
  std::string step;                            // "<job>.<step>" of the attempt
  bool requeued = false;  // the launcher requeued the job before slurmctld ended it
  std::map<std::uint32_t, std::string> exceptions;    // what each rank raised ("Type: message")
  std::map<std::uint32_t, std::uint32_t> lost_peers;  // rank -> the peer it lost (its report)
};

SlurmAttemptResult run_slurm_attempt(const SlurmAttemptSetup& setup, ControlServer& control,
                                     EventLog& events);

// When, counted from `now` (wall clock `wall_now`), the launcher requeues a job whose stop
// began and whose ranks still run (pure), `margin` before slurmctld ends it: a preempted job at
// PreemptTime + `grace` (its partition's GraceTime; or its EndTime when earlier), a job at its
// time limit at EndTime when it may be requeued. nullopt otherwise: no such end known, a grace
// time no longer than the margin (Slurm requeues such a job itself, at once), or a stop that is
// not Slurm ending the job. A deadline already past is `now`.
std::optional<std::chrono::steady_clock::time_point> requeue_deadline(
    const JobFacts& job, std::optional<std::chrono::seconds> grace, bool may_requeue_at_time_limit,
    std::chrono::milliseconds margin, std::chrono::steady_clock::time_point now,
    std::time_t wall_now);

}  // namespace primus::launch
