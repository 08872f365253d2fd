// The attempt-runner interface (docs/architecture.md, "The launcher and its control channel"):
// what the one supervisor loop (supervisor.hpp) asks of a mode. A runner starts the ranks of
// one attempt, delivers the stops and ends them together, and turns what happens into one
// AttemptReport; the supervisor decides what comes next (policy.hpp). Two implementations:
// this machine (local_attempt.hpp) and an srun step (slurm_runner.hpp).
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/control_server.hpp"
#include "control/data_tasks.hpp"
#include "monitor/job_monitor.hpp"
#include "primus/common/environment.hpp"
#include "supervise/events.hpp"
#include "supervise/outcome.hpp"
#include "supervise/policy.hpp"

namespace primus::launch {

// What every attempt of a job is run with, in both modes.
struct RunnerSettings {
  std::string node;                  // the launcher's, for events
  ControlServer* control = nullptr;  // where the ranks report (nullptr: exit status only)
  EventLog* events = nullptr;
  JobMonitor* monitor = nullptr;                 // status.json, metrics, stragglers; nullptr: none
  int preempted_status = kExitDefaultPreempted;  // --primus-exit-preempted
  std::optional<std::chrono::milliseconds> hang_timeout;      // --primus-hang-timeout
  std::chrono::milliseconds grace{std::chrono::seconds(10)};  // SIGTERM to SIGKILL
  // After a stop that the launcher forwarded, until SIGKILL (--primus-stop-grace); under srun a
  // stop that Slurm began ends by Slurm's own deadlines.
  std::chrono::milliseconds stop_grace{std::chrono::seconds(120)};
  std::filesystem::path stop_request;  // checked every second; its appearance is a stop
  bool label = false;                  // --label
  int warning_signal = SIGUSR2;        // the ranks' --primus-preempt-signal (signal_for_ranks)
  // --primus-recover=rejoin: a rank's failure is a rejoin where one can be made, within
  // --primus-rejoin-deadline; resolve_resume gives its checkpoint (the supervisor's rule 4).
  bool rejoin = false;
  std::chrono::milliseconds rejoin_deadline{std::chrono::seconds(60)};
  // A rejoin's replacement from a standby (--primus-no-standby): on one machine the launcher's,
  // under srun each node's (its first task's wrapper starts it).
  bool standby = true;
  std::function<std::optional<std::string>()> resolve_resume;
};

// What the supervisor gives one attempt.
struct AttemptPlan {
  std::uint32_t attempt = 0;          // restarts before it in this allocation
  std::uint32_t world_size = 0;       // as the runner's prepare() placed it
  std::optional<std::string> resume;  // PRIMUS_RESUME for the ranks, or none
  std::filesystem::path log_dir;      // logs/alloc-<a>/attempt-<k>
  DataTasks* data = nullptr;          // --primus-data-mode=dynamic's queue; nullptr: static
  std::uint32_t rejoins_left = 0;     // --primus-max-restarts less the restarts and rejoins made
};

// What happened in one attempt, as the runner saw it (both modes; the Slurm-only fields stay
// at their defaults on one machine).
struct AttemptReport {
  std::vector<RankEnd> ends;          // in the order the ranks ended
  bool stop_forwarded = false;        // the launcher forwarded a stop (signal or request)
  bool user_stop = false;             // primus-launch stop
  bool ranks_signalled = false;       // Slurm: a rank reported a stop signal (Slurm's own)
  bool ended_for_failure = false;     // a rank failed or hung first: never a stop
  bool checkpoint_committed = false;  // a rank reported a committed checkpoint
  std::string checkpoint;             // its path
  bool any_rank_connected = false;    // some rank itself (not only a wrapper) reported
  std::optional<std::uint32_t> hung;  // the rank that hung, if the attempt ended for a hang
  std::map<std::uint32_t, std::string> exceptions;    // what each rank raised ("Type: message")
  std::map<std::uint32_t, std::uint32_t> lost_peers;  // rank -> the peer it lost (its report)
  std::map<std::uint32_t, std::string> nodes;         // Slurm: where each rank ran
  std::string step;                                   // Slurm: "<job>.<step>" of the attempt
  int srun_status = 0;                                // Slurm: waitpid status of srun
  bool requeued = false;      // Slurm: the runner requeued the job before slurmctld ended it
  std::uint32_t rejoins = 0;  // rejoins completed (--primus-recover=rejoin): restarts they count as
};

// What the policy needs of a report (the same for both modes).
AttemptFacts facts_of(const AttemptReport& report, std::uint32_t world_size);

// The variables every rank of an attempt gets from the launcher, in both modes:
// PRIMUS_LAUNCH_RESTARTS, PRIMUS_CONTROL, and PRIMUS_RESUME (removed when there is none).
void set_attempt_variables(Environment& env, const AttemptPlan& plan, const ControlServer* control);
// "NAME=value" for each variable, as exec takes them.
std::vector<std::string> environment_entries(const Environment& env);

class AttemptRunner {
 public:
  virtual ~AttemptRunner() = default;
  // Where attempt `attempt` runs: its world size, or nullopt with `why` when the ranks cannot
  // be started (no placement left).
  virtual std::optional<std::uint32_t> prepare(std::uint32_t attempt, std::string& why) = 0;
  // Runs the attempt to its end: starts the ranks, forwards stops, ends them together.
  virtual AttemptReport run(const AttemptPlan& plan) = 0;
  // What the runner learns after the attempt beyond its report, before the policy decides (an
  // srun step: the job's state after a stop, the nodes lost). Nothing on one machine.
  virtual void examine(const JobSituation& /*job*/, const AttemptReport& /*report*/,
                       AttemptFacts& /*facts*/) {}
};

}  // namespace primus::launch
