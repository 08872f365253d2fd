// After an srun step in which some ranks' wrappers never reported (docs/architecture.md, "Node
// failures"): which of the suspect nodes slurmctld says are lost (OS adapter around scontrol
// and a one-task probe step).
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace primus::launch {

// The nodes a hostlist names, in order; empty when it does not parse.
std::vector<std::string> hosts_of(const std::string& list);

// The nodes among `suspects` that are lost, with slurmctld's reason. Asked at once; then the
// suspects whose slurmd does not start a task are waited for, every second up to `wait`, until
// slurmctld marks one lost (it marks a node whose slurmd fell silent DOWN after SlurmdTimeout;
// at once when an admin sets it DOWN). Nodes that still run tasks are not lost: their ranks
// failed (or hung) on their own.
std::map<std::string, std::string> find_lost_nodes(const std::string& srun, const std::string& job,
                                                   const std::set<std::string>& suspects,
                                                   std::chrono::seconds wait);

}  // namespace primus::launch
