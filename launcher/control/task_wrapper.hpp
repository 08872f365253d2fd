// `primus-task -- COMMAND [ARGS...]` (launcher/task_main.cpp): what each task of primus-launch's
// srun step runs (docs/architecture.md, "The launcher and its control channel"). It runs the
// rank as its child and makes itself a child subreaper, so that nothing the rank started
// (DataLoader workers) outlives it; it copies the rank's output to logs/.../rank-<r>.log and to
// srun; it reports the rank's end (exit status or signal) to primus-launch over the control
// channel, then ends the same way. It kills its rank on the launcher's word (a hung rank, for a
// rejoin). With --primus-recover=rejoin (PRIMUS_RECOVER), after a
// failure it first waits for the launcher's generation notice and, when one comes, starts the
// replacement in this task and supervises it the same way (docs/architecture.md, "Recovery
// without a restart", "Under srun"). Slurm's signals reach the rank directly (slurmstepd signals
// every process of the step); the wrapper itself ignores them, so that it is always there to
// report, and passes on to the rank the stop signals that anyone but slurmstepd sends to it.
#pragma once

#include <string>
#include <vector>

namespace primus::launch {

// Returns the exit status the task ends with (or raises the rank's signal).
int run_task_wrapper(const std::vector<std::string>& command);

}  // namespace primus::launch
