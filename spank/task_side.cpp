#include "task_side.hpp"

#include <slurm/slurm.h>

#include <vector>

#include "allowed_roots.hpp"
#include "job_secret.hpp"
#include "plugin_state.hpp"
#include "primus/common/environment.hpp"
#include "primus/common/error.hpp"
#include "primus/common/options.hpp"
#include "primus/common/slurm_step.hpp"
#include "primus/common/task_env.hpp"
#include "primus/os/node_address.hpp"

namespace primus::spank {
namespace {

// The variables the task's environment is computed from, besides the PRIMUS_* settings.
const std::vector<std::string_view>& task_inputs() {
  static const std::vector<std::string_view> names = {
      "CUDA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_TASK",
      "SLURM_GPU_BIND",       "OMP_NUM_THREADS",    "PMIX_RANK",
      "SLURM_MPI_TYPE",       "PRIMUS_JOB_SECRET",  "SLURM_SUBMIT_DIR"};
  return names;
}

std::optional<std::string> job_variable(spank_t sp, std::string_view name) {
  std::vector<char> buffer(std::size_t{128} * 1024);
  const std::string key(name);
  if (spank_getenv(sp, key.c_str(), buffer.data(), static_cast<int>(buffer.size())) !=
      ESPANK_SUCCESS) {
    return std::nullopt;
  }
  return std::string(buffer.data());
}

Environment read_task_environment(spank_t sp) {
  Environment env;
  const auto add = [&](std::string_view name) {
    if (auto value = job_variable(sp, name)) env.emplace(std::string(name), std::move(*value));
  };
  for (const std::string_view name : slurm_step_variables())
    add(name);
  for (const std::string_view name : task_inputs())
    add(name);
  for (const OptionSpec& spec : option_table()) {
    if (!spec.env.empty()) add(spec.env);
  }
  // The PMIx plugin may set PMIX_RANK after this hook: srun --mpi=pmix also says so here.
  const auto mpi = lookup(env, "SLURM_MPI_TYPE");
  if (!lookup(env, "PMIX_RANK") && mpi && mpi->compare(0, 4, "pmix") == 0) {
    env["PMIX_RANK"] = lookup(env, "SLURM_PROCID").value_or("0");
  }
  return env;
}

}  // namespace

void set_task_environment(spank_t sp) {
  std::uint32_t step_id = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
    throw Error("cannot read the step id");
  }
  if (step_id == SLURM_BATCH_SCRIPT) return;  // the batch step is not a rank

  const Environment env = read_task_environment(sp);
  const auto requested = requested_options(OptionSource::kSrun, env);
  if (!requested) return;
  const ResolvedOptions& options = *requested;

  const auto secret = lookup(env, "PRIMUS_JOB_SECRET");
  if (!secret || !is_job_secret(*secret)) {
    throw Error(
        "PRIMUS_JOB_SECRET is missing or malformed: submit the job with srun, sbatch or "
        "salloc and --primus, on a cluster whose plugstack loads primus.so everywhere");
  }
  check_directories(options, lookup(env, "SLURM_SUBMIT_DIR").value_or("/"));

  for (const auto& [name, value] : slurm_task_environment(env, options, os::node_address)) {
    if (spank_setenv(sp, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS) {
      throw Error("cannot set " + name + " in the task");
    }
  }
}

}  // namespace primus::spank
