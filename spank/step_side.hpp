// srun after the step is created and before its tasks start (SPANK local context,
// local_user_init): look up the NodeAddr of the step's first node for MASTER_ADDR, and, with
// --primus-verbose, tell the user what the step gets.
#pragma once

#include <slurm/spank.h>

namespace primus::spank {

// Never throws for a failed lookup: the tasks then resolve the node's name themselves.
void prepare_step(spank_t sp);

}  // namespace primus::spank
