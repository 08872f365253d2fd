#include "submit_side.hpp"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "allowed_roots.hpp"
#include "plugin_state.hpp"
#include "primus/common/environment.hpp"
#include "primus/common/error.hpp"
#include "primus/common/options.hpp"
#include "primus/os/job_secret.hpp"
#include "process_environment.hpp"

namespace primus::spank {
namespace {

std::string working_directory() {
  std::vector<char> buffer(4096);
  return getcwd(buffer.data(), buffer.size()) != nullptr ? buffer.data() : "/";
}

}  // namespace

void check_submission(spank_t /*sp*/, bool allocator) {
  const Environment env = primus_variables_of_this_process();
  const auto requested =
      requested_options(allocator ? OptionSource::kSbatch : OptionSource::kSrun, env);
  if (!requested) return;
  const ResolvedOptions& options = *requested;
  check_directories(options, working_directory());

  // One secret per job: sbatch and salloc always make a new one (a job submitted from inside a
  // job must not share the outer job's, or their ranks would accept each other), and so does
  // an srun that makes its own job; a step inside a job keeps the job's.
  const auto secret = lookup(env, "PRIMUS_JOB_SECRET");
  const bool inside_a_job = std::getenv("SLURM_JOB_ID") != nullptr;
  if (allocator || !inside_a_job || !secret || !os::is_job_secret(*secret)) {
    set_process_variable("PRIMUS_JOB_SECRET", os::make_job_secret());
    // A secret made by sbatch, salloc or an srun that makes its own job is the job's: every
    // step has it. One made by an srun inside a job that has none (its sbatch had no --primus)
    // is this step's alone; the derived port slot is keyed only with a job's (task_env.cpp).
    set_process_variable("PRIMUS_SECRET_SCOPE", allocator || !inside_a_job ? "job" : "step");
  }

  // sbatch and salloc: the steps inside see the job's settings as PRIMUS_* variables, since
  // Slurm does not pass sbatch's plugin options on to them.
  if (allocator) {
    for (const auto& [name, resolved] : options.all()) {
      const OptionSpec* spec = find_option(name);
      if (spec == nullptr || spec->env.empty() || resolved.source <= OptionSource::kSite) continue;
      set_process_variable(std::string(spec->env), resolved.value);
    }
    // The site's file_sd directory, for primus-launch in the batch step (a site row has no
    // variable of its own: the user cannot set it, only read where it points).
    if (const auto sd_dir = options.get("metrics-sd-dir")) {
      set_process_variable("PRIMUS_METRICS_SD_DIR", sd_dir->value);
    }
  }
}

}  // namespace primus::spank
