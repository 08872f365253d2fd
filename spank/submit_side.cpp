#include "submit_side.hpp"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "allowed_roots.hpp"
#include "job_secret.hpp"
#include "plugin_state.hpp"
#include "primus/common/environment.hpp"
#include "primus/common/error.hpp"
#include "primus/common/options.hpp"

extern char** environ;

namespace primus::spank {
namespace {

Environment primus_variables_of_this_process() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::size_t eq = text.find('=');
    if (eq != std::string::npos && text.compare(0, 7, "PRIMUS_") == 0) {
      env.emplace(text.substr(0, eq), text.substr(eq + 1));
    }
  }
  return env;
}

std::string working_directory() {
  std::vector<char> buffer(4096);
  return getcwd(buffer.data(), buffer.size()) != nullptr ? buffer.data() : "/";
}

void set_variable(const std::string& name, const std::string& value) {
  if (setenv(name.c_str(), value.c_str(), 1) != 0) throw Error("cannot set " + name);
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
  if (!secret || !is_job_secret(*secret)) set_variable("PRIMUS_JOB_SECRET", make_job_secret());

  // sbatch and salloc: the steps inside see the job's settings as PRIMUS_* variables, since
  // Slurm does not pass sbatch's plugin options on to them.
  if (allocator) {
    for (const auto& [name, resolved] : options.all()) {
      const OptionSpec* spec = find_option(name);
      if (spec == nullptr || spec->env.empty() || resolved.source <= OptionSource::kSite) continue;
      set_variable(std::string(spec->env), resolved.value);
    }
  }
}

}  // namespace primus::spank
