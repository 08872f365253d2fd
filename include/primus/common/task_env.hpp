// Gathering the inputs of rank_environment() for one task: under srun from the task's Slurm
// environment, or on one machine from --nproc. The SPANK plugin, primus-launch and primus-env
// call these, so that every path computes a rank's variables the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "primus/common/environment.hpp"
#include "primus/common/options.hpp"
#include "primus/common/rank_env.hpp"

namespace primus {

// Resolves a node's host name to the address peers should connect to (its NodeAddr).
using AddressResolver = std::function<std::string(const std::string& hostname)>;

// The variables for the task whose environment is `task_env` (SLURM_*, CUDA_VISIBLE_DEVICES,
// OMP_NUM_THREADS, PMIX_RANK, PRIMUS_JOB_SECRET, SLURM_SUBMIT_DIR as Slurm and the plugin set
// them). Throws Error naming the variable or option at fault. `online_cpus`: this node's online
// CPUs (os::online_cpus(); 0: unknown), which bound SLURM_CPUS_ON_NODE for OMP_NUM_THREADS (a
// node may declare more CPUs to Slurm than it has, as the testbed's do).
EnvList slurm_task_environment(const Environment& task_env, const ResolvedOptions& options,
                               const AddressResolver& resolve_address,
                               std::uint32_t online_cpus = 0);

// The variables for rank `rank` of `nproc` ranks on this machine (no Slurm).
struct OneMachineJob {
  std::uint32_t nproc = 1;
  std::string hostname = "localhost";
  std::string job_id;      // PRIMUS_JOB_ID, e.g. "local-<pid>"
  std::string submit_dir;  // absolute
  std::string job_secret;
  std::uint32_t restart_count = 0;
  std::uint64_t port_seed = 0;   // picks the derived port slot
  std::uint32_t cpus = 0;        // this machine's usable CPUs (os::usable_cpus()); 0: unknown
  std::uint32_t generation = 0;  // a rejoin's generation: its own derived port slot
};
EnvList one_machine_environment(const OneMachineJob& job, std::uint32_t rank,
                                const Environment& process_env, const ResolvedOptions& options);

}  // namespace primus
