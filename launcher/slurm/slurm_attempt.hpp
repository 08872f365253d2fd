// One attempt of the ranks as an srun step (OS adapter): every task of the step is
// `primus-task -- COMMAND` (task_wrapper.hpp), supervised through the control channel, whose
// reports rank_reports.hpp reads. A rank that fails, or hangs past --primus-hang-timeout, ends
// the attempt (SIGTERM to the step with scancel, SIGKILL after the grace time), unless its
// failure is a rejoin (--primus-recover=rejoin): then its task wrapper starts the replacement
// in its task, in the generation the launcher's notice names, and the others stay; a stop signal
// to the launcher, or a stop request in the job directory, is forwarded to the step with
// `scancel --signal`, never to srun (which would turn SIGTERM into SIGKILL); a stop signal
// that Slurm sent the ranks itself (preemption, --signal) is learnt from their reports.
#pragma once

#include <chrono>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "slurm/slurm_queries.hpp"
#include "supervise/attempt_runner.hpp"
#include "supervise/rank_reports.hpp"

namespace primus::launch {

struct SrunStep {
  std::string srun;               // resolved path of srun
  std::vector<std::string> argv;  // srun's arguments after argv[0]
  std::vector<std::string> env;   // "NAME=value"
  std::string job;                // SLURM_JOB_ID
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
  // --primus-recover=rejoin: MASTER_PORT and PRIMUS_PORT of a rejoin's new generation of the
  // step ("<job>.<step>", the wrappers' hello), or nullopt when it has none. Empty: no rejoin.
  std::function<std::optional<std::pair<std::uint16_t, std::uint16_t>>(const std::string& step,
                                                                       std::uint32_t generation)>
      generation_ports;
};

// Runs the step to its end; `context` names the attempt (its `slurm` set).
AttemptReport run_srun_step(const SrunStep& step, const RunnerSettings& settings,
                            const AttemptContext& context);

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
