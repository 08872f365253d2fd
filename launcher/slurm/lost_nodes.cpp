// The nodes lost after a step (lost_nodes.hpp).
#include "slurm/lost_nodes.hpp"

#include <algorithm>
#include <iostream>
#include <thread>

#include "primus/common/hostlist.hpp"
#include "slurm/placement.hpp"
#include "slurm/slurm_queries.hpp"

namespace primus::launch {

// The nodes a hostlist names, in order; empty when it does not parse.
std::vector<std::string> hosts_of(const std::string& list) {
  try {
    return Hostlist::parse(list).expand();
  } catch (const std::exception&) {
    return {};
  }
}

namespace {

// Which of `suspects` slurmctld says are lost (reason by node), asked once.
std::map<std::string, std::string> lost_among(const std::string& job,
                                              const std::set<std::string>& suspects) {
  std::map<std::string, std::string> lost;
  const auto facts = query_job(job);
  const std::vector<std::string> held =
      facts ? hosts_of(facts->node_list) : std::vector<std::string>{};
  for (const std::string& node : suspects) {
    const auto record = query_node(node);
    if (!record) continue;
    const bool in_job =
        !facts || held.empty() || std::find(held.begin(), held.end(), node) != held.end();
    const NodeVerdict verdict = judge_node(*record, in_job);
    if (verdict.lost) lost[node] = verdict.reason;
  }
  return lost;
}

// How many suspect nodes the launcher probes with a one-task step, one after the other.
constexpr std::size_t kMostNodesToProbe = 8;

// Whether `node`'s slurmd still starts a task of the job: a one-task step there (srun --overlap),
// which a live node runs in well under a second and a dead one never does.
bool node_answers(const std::string& srun, const std::string& job, const std::string& node) {
  const CommandOutput out =
      run_command({srun, "--jobid=" + job, "--overlap", "--mpi=none", "--nodes=1", "--ntasks=1",
                   "--nodelist=" + node, "--quiet", "true"},
                  std::chrono::seconds(20));
  return out.status == 0;
}

}  // namespace

std::map<std::string, std::string> find_lost_nodes(const std::string& srun, const std::string& job,
                                                   const std::set<std::string>& suspects,
                                                   std::chrono::seconds wait) {
  std::map<std::string, std::string> lost = lost_among(job, suspects);
  if (!lost.empty()) return lost;
  if (suspects.size() > kMostNodesToProbe) {
    // Most of the step said nothing (a step that never started, say): not one node's loss,
    // and probing them one by one would take minutes on a large job.
    return lost;
  }
  std::set<std::string> silent;
  for (const std::string& node : suspects)
    if (!node_answers(srun, job, node)) silent.insert(node);
  if (silent.empty()) return lost;
  std::string names;
  for (const std::string& node : silent)
    names += (names.empty() ? "" : ",") + node;
  std::cerr << "primus-launch: " << names << " started no task; waiting up to " << wait.count()
            << " s for slurmctld to say whether it is lost (SlurmdTimeout)\n";
  const auto until = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < until) {
    lost = lost_among(job, silent);
    if (!lost.empty()) return lost;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::cerr << "primus-launch: slurmctld did not mark " << names
            << " lost; taking the failure for the ranks' own\n";
  return lost;
}

}  // namespace primus::launch
