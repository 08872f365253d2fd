#include "task_side.hpp"

#include <slurm/slurm.h>

#include <cstdio>
#include <vector>

#include "allowed_roots.hpp"
#include "plugin_state.hpp"
#include "primus/common/environment.hpp"
#include "primus/common/error.hpp"
#include "primus/common/options.hpp"
#include "primus/common/slurm_step.hpp"
#include "primus/common/task_env.hpp"
#include "primus/os/cpus.hpp"
#include "primus/os/job_secret.hpp"
#include "primus/os/node_address.hpp"

namespace primus::spank {
namespace {

// The variables the task's environment is computed from, besides the PRIMUS_* settings.
const std::vector<std::string_view>& task_inputs() {
  static const std::vector<std::string_view> names = {
      "CUDA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_TASK",
      "SLURM_GPU_BIND",       "OMP_NUM_THREADS",    "PMIX_RANK",
      "SLURM_MPI_TYPE",       "PRIMUS_JOB_SECRET",  "SLURM_SUBMIT_DIR",
      "PRIMUS_MASTER_NODE",   "SLURMD_NODENAME",    "PRIMUS_LAUNCH_RESTARTS"};
  return names;
}

std::optional<std::string> job_variable(spank_t sp, std::string_view name) {
  const std::string key(name);
  // Most values are short; TF_CONFIG-sized ones (up to the 128 KiB of one argument) get a retry.
  for (const std::size_t size : {std::size_t{4096}, std::size_t{128} * 1024 + 1}) {
    std::vector<char> buffer(size);
    const spank_err_t rc =
        spank_getenv(sp, key.c_str(), buffer.data(), static_cast<int>(buffer.size()));
    if (rc == ESPANK_SUCCESS) return std::string(buffer.data());
    if (rc != ESPANK_NOSPACE) return std::nullopt;
  }
  throw Error(key + " in the task's environment is longer than 128 KiB");
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

// task_init runs in the task's own process, as the user, with its output already connected to
// the job's: what it writes to stderr reaches the user next to the rank's own output.
void report(const EnvList& variables, const std::optional<std::string>& node) {
  const Environment set(variables.begin(), variables.end());
  std::string line = "primus: rank " + lookup(set, "RANK").value_or("?") + "/" +
                     lookup(set, "WORLD_SIZE").value_or("?") + " on " + node.value_or("?") + ":";
  for (const char* name : {"LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PRIMUS_PORT",
                           "PRIMUS_BOOTSTRAP", "CUDA_VISIBLE_DEVICES", "PRIMUS_CKPT_DIR"}) {
    if (const auto value = lookup(set, name)) line += std::string(" ") + name + "=" + *value;
  }
  line += '\n';
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace

void set_task_environment(spank_t sp) {
  std::uint32_t step_id = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
    throw Error("cannot read the step id");
  }
  if (step_id == SLURM_BATCH_SCRIPT) return;  // the batch step is not a rank

  // A step without --primus costs one lookup: PRIMUS_FRAMEWORK is the only variable that can
  // turn Primus on.
  Environment gate;
  if (auto framework = job_variable(sp, "PRIMUS_FRAMEWORK")) {
    gate.emplace("PRIMUS_FRAMEWORK", std::move(*framework));
  }
  if (!requested_options(OptionSource::kSrun, gate)) return;

  const Environment env = read_task_environment(sp);
  const auto requested = requested_options(OptionSource::kSrun, env);
  if (!requested) return;
  const ResolvedOptions& options = *requested;

  const auto secret = lookup(env, "PRIMUS_JOB_SECRET");
  if (!secret || !os::is_job_secret(*secret)) {
    throw Error(
        "PRIMUS_JOB_SECRET is missing or malformed: submit the job with srun, sbatch or "
        "salloc and --primus, on a cluster whose plugstack loads primus.so everywhere");
  }
  check_directories(options, lookup(env, "SLURM_SUBMIT_DIR").value_or("/"));

  const EnvList variables =
      slurm_task_environment(env, options, os::node_address, os::online_cpus());
  for (const auto& [name, value] : variables) {
    if (spank_setenv(sp, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS) {
      throw Error("cannot set " + name + " in the task");
    }
  }
  if (option_enabled(options, "primus-verbose")) report(variables, lookup(env, "SLURMD_NODENAME"));
}

}  // namespace primus::spank
