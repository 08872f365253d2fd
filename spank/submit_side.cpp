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
  const OptionSource source = allocator ? OptionSource::kSbatch : OptionSource::kSrun;
  const OptionLayer command_line = parse_command_line_options(source, state().given);
  const Environment env = primus_variables_of_this_process();
  // Environment values matter only for a job that uses Primus: check them then.
  OptionLayer environment;
  const ResolvedOptions peek = ResolvedOptions::resolve({state().site, command_line});
  const bool asked_on_command_line = primus_requested(peek);
  if (asked_on_command_line || lookup(env, "PRIMUS_FRAMEWORK")) {
    environment = parse_environment_options(env);
  }
  const ResolvedOptions options =
      ResolvedOptions::resolve({state().site, environment, command_line});
  if (!primus_requested(options)) return;

  const std::string roots = options.value_or("ckpt-roots", "");
  const std::string cwd = working_directory();
  for (const char* name : {"primus-ckpt-dir", "primus-job-dir"}) {
    if (const auto dir = options.get(name)) {
      check_under_roots(option_display_name(*find_option(name), dir->source), dir->value, cwd,
                        roots);
    }
  }

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
