#include "primus/common/task_env.hpp"

#include <algorithm>

#include "primus/common/error.hpp"
#include "primus/common/gpu_binding.hpp"
#include "primus/common/master_node.hpp"
#include "primus/common/parse_number.hpp"
#include "primus/common/ports.hpp"
#include "primus/common/slurm_step.hpp"

namespace primus {
namespace {

// Slurm binds GPUs per task for --gpus-per-task and --gpu-bind: each task then sees fewer GPUs
// than the step holds on its node (SLURM_GPUS_ON_NODE), and Primus keeps Slurm's choice.
bool slurm_bound_gpus_per_task(const Environment& env, std::size_t visible) {
  if (lookup(env, "SLURM_GPUS_PER_TASK") || lookup(env, "SLURM_GPU_BIND")) return true;
  const auto on_node = lookup(env, "SLURM_GPUS_ON_NODE");
  if (!on_node) return false;
  const auto count = parse_unsigned(*on_node, 1U << 20);
  if (!count) throw Error("SLURM_GPUS_ON_NODE: expected a number, got '" + *on_node + "'");
  return visible < *count;
}

std::optional<std::string> bound_gpus(const Environment& env, const ResolvedOptions& options,
                                      const RankPlacement& self) {
  if (options.value_or("primus-bind-gpus", "auto") == "none") return std::nullopt;
  const auto visible = lookup(env, "CUDA_VISIBLE_DEVICES");
  if (!visible || visible->empty() || self.local_world_size == 1) return std::nullopt;
  const std::vector<std::string> devices = split_device_list(*visible);
  if (slurm_bound_gpus_per_task(env, devices.size())) return std::nullopt;
  return join_device_list(gpu_block(devices, self.local_rank, self.local_world_size));
}

std::vector<std::uint16_t> port_block(const SlurmStep& step, Framework framework,
                                      const ResolvedOptions& options,
                                      std::optional<std::string_view> job_secret,
                                      std::string& source) {
  if (step.reserved_ports) {
    source = "SLURM_STEP_RESV_PORTS";
    return parse_reserved_ports(*step.reserved_ports);
  }
  source = "the derived port slot";
  const PortRange range =
      parse_port_range(options.value_or("port-range", "20000-29999"), "port_range");
  return derive_port_block(step.numeric_job_id, step.step_id, range,
                           ports_needed(framework, step.topology.tasks_per_node().max_tasks()),
                           job_secret);
}

Framework framework_of(const ResolvedOptions& options) {
  return parse_framework(options.value_or("primus", "pytorch"));
}

}  // namespace

EnvList slurm_task_environment(const Environment& env, const ResolvedOptions& options,
                               const AddressResolver& resolve_address, std::uint32_t online_cpus) {
  const SlurmStep step = parse_slurm_step(env);
  const Framework framework = framework_of(options);
  std::string block_source;
  const std::string job_secret = lookup(env, "PRIMUS_JOB_SECRET").value_or("");
  // The derived slot is keyed with the secret only where every step of the job has the same one
  // (the plugin says so in PRIMUS_SECRET_SCOPE): a secret each srun made for itself would put
  // the steps of one job in unrelated slots.
  const bool job_wide = lookup(env, "PRIMUS_SECRET_SCOPE").value_or("") == "job";
  const std::vector<std::uint16_t> block = port_block(
      step, framework, options,
      job_wide ? std::optional<std::string_view>(job_secret) : std::nullopt, block_source);

  RankEnvInput in;
  in.framework = framework;
  in.topology = &step.topology;
  in.options = &options;
  in.self = step.self;
  const std::string& first_node = step.topology.nodes().at(0);
  in.master_addr = master_node_address(env, first_node).value_or("");
  if (in.master_addr.empty()) in.master_addr = resolve_address(first_node);
  in.ports = assign_ports(framework, step.topology.tasks_per_node().max_tasks(), block,
                          block_source, options.value_or("primus-master-port", "auto"));
  in.job_id = step.job_id;
  // Requeues (SLURM_RESTART_COUNT) plus the restarts primus-launch made in this allocation.
  const auto launch_restarts = lookup(env, "PRIMUS_LAUNCH_RESTARTS");
  const auto restarts = launch_restarts ? parse_unsigned(*launch_restarts, 1U << 20) : 0;
  if (!restarts) {
    throw Error("PRIMUS_LAUNCH_RESTARTS: expected a number of restarts, got '" + *launch_restarts +
                "'");
  }
  in.restart_count = step.restart_count + static_cast<std::uint32_t>(*restarts);
  in.submit_dir = lookup(env, "SLURM_SUBMIT_DIR").value_or(lookup(env, "PWD").value_or("/"));
  in.bootstrap = lookup(env, "PMIX_RANK") ? Bootstrap::kPmix : Bootstrap::kTcp;
  in.job_secret = job_secret;
  in.cpus_per_rank = step.cpus_per_task;
  if (const auto cpus = lookup(env, "SLURM_CPUS_ON_NODE")) {
    if (const auto n = parse_unsigned(*cpus, 1U << 20); n && *n > 0) {
      in.node_cpus = static_cast<std::uint32_t>(*n);
    }
  }
  if (online_cpus > 0) in.node_cpus = std::min(in.node_cpus.value_or(online_cpus), online_cpus);
  in.user_set_omp_num_threads = lookup(env, "OMP_NUM_THREADS").has_value();
  in.cuda_visible_devices = bound_gpus(env, options, step.self);
  return rank_environment(in);
}

EnvList one_machine_environment(const OneMachineJob& job, std::uint32_t rank,
                                const Environment& process_env, const ResolvedOptions& options) {
  const Topology topology = Topology::one_machine(job.nproc, job.hostname);
  const Framework framework = framework_of(options);
  const PortRange range =
      parse_port_range(options.value_or("port-range", "20000-29999"), "port_range");
  const std::vector<std::uint16_t> block = derive_port_block(
      job.port_seed, job.generation, range, ports_needed(framework, job.nproc), job.job_secret);

  RankEnvInput in;
  in.framework = framework;
  in.topology = &topology;
  in.options = &options;
  in.self = topology.place(rank);
  in.master_addr = "127.0.0.1";
  in.ports = assign_ports(framework, job.nproc, block, "the derived port slot",
                          options.value_or("primus-master-port", "auto"));
  in.job_id = job.job_id;
  in.restart_count = job.restart_count;
  in.submit_dir = job.submit_dir;
  in.one_machine = true;
  in.bootstrap = Bootstrap::kTcp;
  in.job_secret = job.job_secret;
  if (job.cpus > 0) in.node_cpus = job.cpus;
  in.user_set_omp_num_threads = lookup(process_env, "OMP_NUM_THREADS").has_value();
  in.cuda_visible_devices = bound_gpus(process_env, options, in.self);
  return rank_environment(in);
}

}  // namespace primus
