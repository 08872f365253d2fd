// What the Primus SPANK plugin holds between hooks, within one process (srun, sbatch, salloc or
// slurmstepd): the --primus options the user gave and the plugstack arguments.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "primus/common/environment.hpp"
#include "primus/common/options.hpp"

namespace primus::spank {

struct PluginState {
  // Options as given on the command line (or forwarded to slurmstepd), in order.
  std::vector<std::pair<std::string, std::optional<std::string>>> given;
  // Plugstack arguments, validated in slurm_spank_init.
  OptionLayer site;
};

PluginState& state();

// The settings in force when the user asked for Primus (on `source`'s command line or through
// PRIMUS_FRAMEWORK), else nullopt. Environment values are read, and validated, only then: a job
// that does not use Primus is never refused for a stray PRIMUS_* variable.
std::optional<ResolvedOptions> requested_options(OptionSource source, const Environment& env);

}  // namespace primus::spank
