// Carrying out the policy's Action after an attempt (adapter: it writes events, the monitor's
// state, excluded-nodes.json and standard error, and under Slurm asks for the requeue), the
// same for both modes: what primus-launch says and records about an attempt's end is written
// once here, its decision once in policy.cpp.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "monitor/job_monitor.hpp"
#include "monitor/status.hpp"
#include "slurm/node_exclusions.hpp"
#include "supervise/events.hpp"
#include "supervise/policy.hpp"

namespace primus::launch {

struct Supervision {
  Supervision(EventLog& events_, JobMonitor& monitor_, const NodeExclusions* exclusions_)
      : events(events_), monitor(monitor_), exclusions(exclusions_) {}

  EventLog& events;
  JobMonitor& monitor;
  const NodeExclusions* exclusions;  // nullptr on one machine
  std::string node;                  // the launcher's, for events
  std::string job_id;                // PRIMUS_JOB_ID, for messages
  std::string requeue_target;        // what `scontrol requeue` names (Slurm)
  std::uint32_t allocation = 0;
  std::uint32_t attempt = 0;
  std::uint32_t max_restarts = 0;
  std::uint32_t max_requeues = 0;
  int preempted_status = 75;          // --primus-exit-preempted
  std::filesystem::path log_dir;      // this attempt's logs
  std::optional<std::string> resume;  // the checkpoint the attempt started from
  // Slurm: what the ranks reported of their checkpoints, and whether any rank reported at all.
  std::string checkpoint;
  bool checkpoint_committed = false;
  bool any_rank_connected = false;
};

// The exclusions as status.json lists them.
std::vector<ExcludedNode> excluded_for_status(const NodeExclusions& exclusions);

// Carries out `action` for the attempt `facts` describe; true when the ranks start again
// (the caller's next attempt), else the caller exits with action.exit_status.
bool carry_out(const Action& action, const AttemptFacts& facts, Supervision& s);

}  // namespace primus::launch
