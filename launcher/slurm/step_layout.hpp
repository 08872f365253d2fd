// The layout of the ranks' step when primus-launch itself runs inside a step (`salloc` then
// `srun --overlap -N1 -n1 primus-launch ...`, so that it runs on a node of the allocation). That
// step's srun overwrote the job's SLURM_NTASKS, SLURM_NPROCS, SLURM_NNODES and
// SLURM_TASKS_PER_NODE with its own (one task), and added SLURM_DISTRIBUTION; srun reads them as
// its defaults, so left alone they would make the ranks' step one task (seen on the testbed).
// Pure.
#pragma once

#include <string>

#include "primus/common/environment.hpp"
#include "slurm/slurm_queries.hpp"

namespace primus::launch {

// Whether `env` is that of a task of a step (SLURM_STEP_ID is set; the batch script and the
// salloc shell have none).
bool inside_a_step(const Environment& env);

// `env` with the job's layout again: SLURM_NNODES and SLURM_NTASKS (and SLURM_NPROCS) from
// scontrol's NumNodes and NumTasks, and without the step's own SLURM_TASKS_PER_NODE,
// SLURM_DISTRIBUTION and SLURM_STEP_* variables. Throws Error when scontrol gave no layout.
Environment job_layout_environment(Environment env, const JobFacts& job);

// A job given fewer nodes while it was pending (`scontrol update JobId=... NumNodes=2
// NumTasks=4` before a requeued job starts again) keeps the SLURM_NTASKS it was submitted with
// (8, say), while SLURM_TASKS_PER_NODE and SLURM_JOB_NUM_NODES describe the allocation it got
// (2(x2)); srun would ask for the old count and fail ("More processors requested than
// permitted"; seen on the testbed). `env` with SLURM_NTASKS and SLURM_NPROCS set to the tasks
// the allocation holds when they are fewer than SLURM_NTASKS says, and `note` saying so; `env`
// unchanged otherwise.
Environment fit_to_allocation(Environment env, std::string& note);

}  // namespace primus::launch
