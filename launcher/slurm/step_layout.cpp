#include "slurm/step_layout.hpp"

#include "primus/common/error.hpp"
#include "primus/common/parse_number.hpp"
#include "primus/common/tasks_per_node.hpp"

namespace primus::launch {

bool inside_a_step(const Environment& env) {
  return lookup(env, "SLURM_STEP_ID").has_value();
}

Environment job_layout_environment(Environment env, const JobFacts& job) {
  // A pending job's NumNodes may be a range (2-4); a running one's is its count.
  const auto nodes = parse_unsigned(job.num_nodes.substr(0, job.num_nodes.find('-')), 1U << 30);
  const auto tasks = parse_unsigned(job.num_tasks, 1U << 30);
  if (!nodes || !tasks || *nodes == 0 || *tasks == 0) {
    throw Error(
        "primus-launch runs inside a step (SLURM_STEP_ID is set), whose variables say one "
        "task, and scontrol did not give the job's layout (NumNodes='" +
        job.num_nodes + "', NumTasks='" + job.num_tasks +
        "'); run primus-launch in the batch script or the salloc shell, or give the layout "
        "with SLURM_NTASKS and SLURM_NNODES");
  }
  for (const char* name :
       {"SLURM_TASKS_PER_NODE", "SLURM_DISTRIBUTION", "SLURM_STEP_ID", "SLURM_STEPID",
        "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES", "SLURM_STEP_NUM_TASKS",
        "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_RESV_PORTS", "SLURM_STEP_LAUNCHER_PORT"}) {
    env.erase(name);
  }
  env["SLURM_NNODES"] = std::to_string(*nodes);
  env["SLURM_NTASKS"] = std::to_string(*tasks);
  env["SLURM_NPROCS"] = std::to_string(*tasks);
  return env;
}

Environment fit_to_allocation(Environment env, std::string& note) {
  note.clear();
  const auto given = lookup(env, "SLURM_NTASKS");
  const auto per_node = lookup(env, "SLURM_TASKS_PER_NODE");
  if (!given || !per_node || inside_a_step(env)) return env;
  const auto submitted = parse_unsigned(*given, 1U << 30);
  std::uint64_t held = 0;
  try {
    held = TasksPerNode::parse(*per_node, "SLURM_TASKS_PER_NODE").task_count();
  } catch (const Error&) {
    return env;  // srun will say what is wrong with it
  }
  if (!submitted || held == 0 || held >= *submitted) return env;
  note = "the job was submitted for " + *given +
         " tasks (SLURM_NTASKS) and this allocation holds " + std::to_string(held) +
         " (SLURM_TASKS_PER_NODE=" + *per_node + "): starting " + std::to_string(held) + " ranks";
  env["SLURM_NTASKS"] = std::to_string(held);
  env["SLURM_NPROCS"] = std::to_string(held);
  return env;
}

}  // namespace primus::launch
