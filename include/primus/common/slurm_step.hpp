// Reading a Slurm job step's environment (what srun gives every task) into a Topology and the
// task's own place in it, checking that the variables agree with each other.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "primus/common/environment.hpp"
#include "primus/common/topology.hpp"

namespace primus {

struct SlurmStep {
  std::string job_id;                // PRIMUS_JOB_ID: "<jobid>" or "<arrayjobid>_<taskid>"
  std::uint64_t numeric_job_id = 0;  // SLURM_JOB_ID
  std::uint64_t step_id = 0;         // SLURM_STEP_ID
  Topology topology;
  RankPlacement self;               // this task: SLURM_PROCID, SLURM_NODEID, SLURM_LOCALID
  std::uint32_t restart_count = 0;  // SLURM_RESTART_COUNT (0 when unset)
  std::optional<std::string> reserved_ports;   // SLURM_STEP_RESV_PORTS
  std::optional<std::uint32_t> cpus_per_task;  // SLURM_CPUS_PER_TASK
};

// The variables parse_slurm_step reads (for callers that fetch them one by one, such as the
// SPANK plugin with spank_getenv).
const std::vector<std::string_view>& slurm_step_variables();

// "<jobid>" or, in a job array, "<arrayjobid>_<taskid>". Throws Error naming the variable.
std::string primus_job_id(const Environment& env);

// Throws Error naming the variable that is missing, malformed or inconsistent with the others.
SlurmStep parse_slurm_step(const Environment& env);

}  // namespace primus
