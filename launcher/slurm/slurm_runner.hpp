// The attempt runner under Slurm (attempt_runner.hpp): each attempt is one srun step
// (slurm_attempt.hpp) on the job's nodes, or, with --primus-spare-nodes or --primus-elastic, on
// the nodes placement.hpp chooses each time; after a step in which some ranks never reported,
// it asks slurmctld which nodes were lost (lost_nodes.hpp), and after a stop how the job stands.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "primus/common/environment.hpp"
#include "primus/common/options.hpp"
#include "slurm/node_exclusions.hpp"
#include "slurm/placement.hpp"
#include "supervise/attempt_runner.hpp"

namespace primus::launch {

// What every step of the job is started with.
struct SlurmJob {
  std::string job;             // SLURM_JOB_ID
  std::string requeue_target;  // what `scontrol requeue` names ("<array job>_<task>" in an array)
  std::string srun;            // resolved path of srun
  std::string task;            // primus-task, what every task of the step runs
  std::string executable;      // COMMAND, resolved
  std::vector<std::string> argv;  // COMMAND as given
  Environment env;                // the job's layout (SLURM_* as srun reads them)
  ResolvedOptions options;        // with the job directory fixed
  std::string secret;             // PRIMUS_JOB_SECRET
  std::uint32_t allocation = 0;   // SLURM_RESTART_COUNT
  std::uint32_t max_requeues = 0;
  std::uint32_t world_size = 0;  // without placement: the step's ranks
  // --primus-spare-nodes and --primus-elastic: the launcher places the ranks, the same number
  // on each node, on the job's nodes less the spares, the lost and the excluded nodes.
  bool placing = false;
  NodePolicy policy;
  std::uint32_t rank_nodes = 0;
  std::uint32_t tasks_per_node = 1;
  std::vector<std::string> job_nodes;
  const NodeExclusions* exclusions = nullptr;
  // Run once right after the first srun started (slurm_attempt.hpp's after_start).
  std::function<void()> after_start;
};

class SlurmRunner final : public AttemptRunner {
 public:
  SlurmRunner(RunnerSettings settings, SlurmJob job)
      : settings_(std::move(settings)), job_(std::move(job)), current_nodes_(job_.job_nodes) {}

  std::optional<std::uint32_t> prepare(std::uint32_t attempt, std::string& why) override;
  AttemptReport run(const AttemptPlan& plan) override;
  void examine(const JobSituation& job, const AttemptReport& report, AttemptFacts& facts) override;

 private:
  std::vector<std::string> step_environment(const AttemptPlan& plan) const;
  // MASTER_PORT and PRIMUS_PORT of a rejoin's generation of step "<job>.<step>".
  std::optional<std::pair<std::uint16_t, std::uint16_t>> generation_ports(
      const std::string& step_text, std::uint32_t generation) const;
  void refresh_current_nodes();
  std::set<std::string> kept_out() const;

  RunnerSettings settings_;
  SlurmJob job_;
  std::vector<std::string> current_nodes_;  // the job's nodes now (fewer after a loss)
  std::set<std::string> lost_nodes_;        // lost in this allocation (not all excluded yet)
  std::optional<Placement> placement_;      // this attempt's, when placing
};

}  // namespace primus::launch
