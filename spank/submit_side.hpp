// srun, sbatch and salloc (SPANK local and allocator contexts): validate every --primus value
// before the job is queued or the step starts, make the job secret, and hand sbatch's settings to
// the steps inside the batch script.
#pragma once

#include <slurm/spank.h>

namespace primus::spank {

// Throws primus::Error with the message for the user.
void check_submission(spank_t sp, bool allocator);

}  // namespace primus::spank
