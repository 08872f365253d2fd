// slurmstepd (SPANK remote context), in each task after privileges are dropped: set the rank
// environment computed by libprimus-common.
#pragma once

#include <slurm/spank.h>

namespace primus::spank {

// Throws primus::Error with the message for the user.
void set_task_environment(spank_t sp);

}  // namespace primus::spank
