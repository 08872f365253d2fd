#include "submit_side.hpp"

#include <unistd.h>

#include <vector>

#include "allowed_roots.hpp"
#include "job_secret.hpp"
#include "plugin_state.hpp"
#include "primus/common/environment.hpp"
#include "primus/common/error.hpp"
#include "primus/common/options.hpp"
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

  // One secret per job: a step inside a job keeps the job's.
  const auto secret = lookup(env, "PRIMUS_JOB_SECRET");
  if (!secret || !is_job_secret(*secret))
    set_process_variable("PRIMUS_JOB_SECRET", make_job_secret());

  // sbatch and salloc: the steps inside see the job's settings as PRIMUS_* variables, since
  // Slurm does not pass sbatch's plugin options on to them.
  if (allocator) {
    for (const auto& [name, resolved] : options.all()) {
      const OptionSpec* spec = find_option(name);
      if (spec == nullptr || spec->env.empty() || resolved.source <= OptionSource::kSite) continue;
      set_process_variable(std::string(spec->env), resolved.value);
    }
  }
}

}  // namespace primus::spank
