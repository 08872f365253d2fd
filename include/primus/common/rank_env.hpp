// The rank environment (ARCHITECTURE.md): the one function that computes every variable a rank
// gets. The SPANK plugin (under srun) and primus-launch (one machine) both call it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "primus/common/environment.hpp"
#include "primus/common/options.hpp"
#include "primus/common/topology.hpp"

namespace primus {

// 2: option defaults are no longer exported, only the settings a job chose (issue 39).
inline constexpr int kPrimusEnvVersion = 2;

// Linux limits one "NAME=value" environment string to 32 pages (MAX_ARG_STRLEN), NUL included.
inline constexpr std::size_t kMaxEnvStringBytes = 131072;

enum class Framework { kPyTorch, kTensorFlow, kNone };
Framework parse_framework(std::string_view value);  // validated by the option table first
std::string_view to_string(Framework framework);

enum class Bootstrap { kTcp, kPmix };
std::string_view to_string(Bootstrap bootstrap);

// The ports of a step on each node, the same on every node.
struct StepPorts {
  std::uint16_t master_port = 0;            // MASTER_PORT
  std::uint16_t primus_port = 0;            // PRIMUS_PORT: Primus's store and collectives
  std::vector<std::uint16_t> worker_ports;  // TensorFlow: one per local rank
};

// How many ports a step needs per node: pytorch and none, MASTER_PORT and PRIMUS_PORT;
// tensorflow, PRIMUS_PORT and one per local rank (MASTER_PORT is then local rank 0's port).
std::uint32_t ports_needed(Framework framework, std::uint32_t max_local_ranks);

// Lays out `block` (from SLURM_STEP_RESV_PORTS or derive_port_block). `master_port_option` is
// the resolved --primus-master-port ("auto" or a number). Throws Error when the block is short,
// naming both counts and `block_source`.
StepPorts assign_ports(Framework framework, std::uint32_t max_local_ranks,
                       const std::vector<std::uint16_t>& block, std::string_view block_source,
                       std::string_view master_port_option);

struct RankEnvInput {
  Framework framework = Framework::kPyTorch;
  const Topology* topology = nullptr;  // the step (TF_CONFIG lists every worker)
  RankPlacement self;                  // this rank
  std::string master_addr;             // address of the step's first node (its NodeAddr)
  StepPorts ports;
  std::string job_id;  // PRIMUS_JOB_ID
  std::uint32_t restart_count = 0;
  std::string submit_dir;    // absolute; default job dir lives there
  bool one_machine = false;  // primus-launch --nproc: the default job dir is ./primus-local
  Bootstrap bootstrap = Bootstrap::kTcp;
  std::string job_secret;
  std::optional<std::uint32_t> cpus_per_rank;       // sets OMP_NUM_THREADS ...
  std::optional<std::uint32_t> node_cpus;           // ... else these / the node's ranks (>= 1)
  bool user_set_omp_num_threads = false;            // ... unless the user set it
  std::optional<std::string> cuda_visible_devices;  // nullopt: leave it as it is
  const ResolvedOptions* options = nullptr;         // exported as their PRIMUS_* variables
};

// OMP_NUM_THREADS's value unless the user set it: --cpus-per-task, else the node's CPUs for the
// job divided among its ranks there (at least 1; torchrun sets 1); nullopt when neither is
// known.
std::optional<std::uint32_t> omp_threads(const RankEnvInput& input);

// Every variable to set for the rank, in a stable order. Throws Error when a value cannot be
// formed (TF_CONFIG over kMaxEnvStringBytes, missing input).
EnvList rank_environment(const RankEnvInput& input);

// The job directory's name when none is given (--primus-job-dir, PRIMUS_JOB_DIR): primus-JOBID
// under Slurm, primus-local on one machine, so that the same command in the same directory
// resumes. The one place that says so (python/primus/_env.py's job_directories() says it once
// more for a plain `python script.py`).
std::string default_job_dir_name(const std::string& job_id, bool one_machine);

// PRIMUS_JOB_DIR and PRIMUS_CKPT_DIR from the options (relative paths are taken from
// submit_dir) or their defaults.
std::string resolve_job_dir(const ResolvedOptions& options, const std::string& submit_dir,
                            const std::string& job_id, bool one_machine = false);
std::string resolve_ckpt_dir(const ResolvedOptions& options, const std::string& submit_dir,
                             const std::string& job_dir);

// TF_CONFIG for `rank` of `topology`, every worker at "hostname:port". Throws Error when the
// "TF_CONFIG=..." string would exceed kMaxEnvStringBytes, naming the limit.
std::string tf_config(const Topology& topology, std::uint64_t rank,
                      const std::vector<std::uint16_t>& worker_ports);

}  // namespace primus
