// The one supervisor loop of primus-launch, for both modes (docs/architecture.md, "The
// launcher and its control channel"): attempt after attempt, it places the ranks (the
// runner's prepare), chooses the checkpoint to resume from, runs the attempt (the runner), asks
// the policy what comes next (policy.hpp) and carries it out (supervision.hpp): a restart, a
// requeue, or primus-launch's exit status. The runner is this machine's or an srun step's
// (attempt_runner.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "monitor/job_monitor.hpp"
#include "slurm/node_exclusions.hpp"
#include "supervise/attempt_runner.hpp"
#include "supervise/events.hpp"
#include "supervise/job_dir.hpp"
#include "supervise/policy.hpp"

namespace primus::launch {

struct SupervisedJob {
  // Under Slurm or not, the limits, the allocation (requeues so far), whether the ranks are
  // placed by the launcher; `attempt` and `excluded` are the loop's.
  JobSituation situation;
  std::string node;                            // the launcher's, for events
  std::string job_id;                          // PRIMUS_JOB_ID, for messages
  std::string requeue_target;                  // what `scontrol requeue` names (Slurm)
  const NodeExclusions* exclusions = nullptr;  // excluded-nodes.json (Slurm); nullptr: none
  std::uint32_t exclude_after = 1;             // --primus-exclude-after
  std::filesystem::path ckpt_root;             // where the job's checkpoints are
  std::optional<std::string> given_resume;     // PRIMUS_RESUME as the user gave it
  bool dynamic_data = false;                   // --primus-data-mode=dynamic
  // --primus-fresh, for this start: on one machine every run of primus-launch (its restarts
  // happen inside the loop); under Slurm only the job's first allocation (a requeued job
  // resumes from its own checkpoints).
  bool fresh = false;
};

// PRIMUS_RESUME for the next attempt: the newest committed checkpoint under `root` that
// verifies, else the one the user gave, else none (rule 4 of "Preemption and requeue"). Newer
// checkpoints that fail the verification are named; a "resuming" event records the choice.
std::optional<std::string> resolve_resume(const std::filesystem::path& root,
                                          const std::optional<std::string>& given, EventLog& events,
                                          const std::string& node);

// --primus-fresh, before the first start of a job (never after a requeue): moves `root` aside
// (primus-ckpt set-aside), says where, and writes a "set-aside" event. Throws Error when it
// cannot be moved: no rank may start and mix its checkpoints with the earlier run's.
void set_aside_checkpoints(const std::filesystem::path& root, EventLog& events,
                           const std::string& node);

// Runs the job's attempts until the policy says exit; returns primus-launch's exit status.
int supervise(const SupervisedJob& job, const JobDir& job_dir, AttemptRunner& runner,
              EventLog& events, JobMonitor& monitor);

}  // namespace primus::launch
