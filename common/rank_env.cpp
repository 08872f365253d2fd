#include "primus/common/rank_env.hpp"

#include <algorithm>

#include "primus/common/error.hpp"
#include "primus/common/json_text.hpp"

namespace primus {

Framework parse_framework(std::string_view value) {
  if (value == "pytorch") return Framework::kPyTorch;
  if (value == "tensorflow") return Framework::kTensorFlow;
  if (value == "none") return Framework::kNone;
  throw Error("framework: expected one of pytorch, tensorflow, none, got '" + std::string(value) +
              "'");
}

std::string_view to_string(Framework framework) {
  switch (framework) {
    case Framework::kPyTorch:
      return "pytorch";
    case Framework::kTensorFlow:
      return "tensorflow";
    case Framework::kNone:
      break;
  }
  return "none";
}

std::string_view to_string(Bootstrap bootstrap) {
  return bootstrap == Bootstrap::kPmix ? "pmix" : "tcp";
}

std::uint32_t ports_needed(Framework framework, std::uint32_t max_local_ranks) {
  return framework == Framework::kTensorFlow ? 1 + max_local_ranks : 2;
}

StepPorts assign_ports(Framework framework, std::uint32_t max_local_ranks,
                       const std::vector<std::uint16_t>& block, std::string_view block_source,
                       std::string_view master_port_option) {
  const std::uint32_t needed = ports_needed(framework, max_local_ranks);
  if (block.size() < needed) {
    throw Error(std::string(block_source) + " gives " + std::to_string(block.size()) +
                " ports per node, but this step needs " + std::to_string(needed));
  }
  StepPorts ports;
  if (framework == Framework::kTensorFlow) {
    ports.primus_port = block[0];
    ports.worker_ports.assign(block.begin() + 1, block.begin() + 1 + max_local_ranks);
    ports.master_port = ports.worker_ports.front();
  } else {
    ports.master_port = block[0];
    ports.primus_port = block[1];
  }
  if (master_port_option != "auto") {
    ports.master_port = static_cast<std::uint16_t>(std::stoul(std::string(master_port_option)));
  }
  return ports;
}

namespace {

std::string join_path(const std::string& dir, const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  if (dir.empty() || dir.back() == '/') return dir + path;
  return dir + "/" + path;
}

}  // namespace

std::string default_job_dir_name(const std::string& job_id, bool one_machine) {
  return one_machine ? "primus-local" : "primus-" + job_id;
}

std::string resolve_job_dir(const ResolvedOptions& options, const std::string& submit_dir,
                            const std::string& job_id, bool one_machine) {
  return join_path(submit_dir,
                   options.value_or("primus-job-dir", default_job_dir_name(job_id, one_machine)));
}

std::string resolve_ckpt_dir(const ResolvedOptions& options, const std::string& submit_dir,
                             const std::string& job_dir) {
  if (const auto dir = options.get("primus-ckpt-dir")) return join_path(submit_dir, dir->value);
  return join_path(job_dir, "ckpt");
}

std::string tf_config(const Topology& topology, std::uint64_t rank,
                      const std::vector<std::uint16_t>& worker_ports) {
  const std::string prefix = R"({"cluster": {"worker": [)";
  const std::string suffix =
      R"(]}, "task": {"type": "worker", "index": )" + std::to_string(rank) + "}}";
  const std::size_t fixed =
      std::string_view("TF_CONFIG=").size() + prefix.size() + suffix.size() + 1;  // + NUL
  std::string config = prefix;
  for (std::uint64_t worker = 0; worker < topology.world_size(); ++worker) {
    const RankPlacement placement = topology.place(worker);
    if (placement.local_rank >= worker_ports.size()) {
      throw Error("TF_CONFIG: no port for local rank " + std::to_string(placement.local_rank));
    }
    if (worker > 0) config += ", ";
    config +=
        json_quote(placement.hostname + ":" + std::to_string(worker_ports[placement.local_rank]));
    if (config.size() + fixed > kMaxEnvStringBytes) {
      throw Error("TF_CONFIG for " + std::to_string(topology.world_size()) +
                  " workers exceeds Linux's limit of " + std::to_string(kMaxEnvStringBytes) +
                  " bytes for one environment string (MAX_ARG_STRLEN); at this scale use "
                  "--primus=pytorch, or give TensorFlow a cluster resolver of its own");
    }
  }
  return config + suffix;
}

std::optional<std::uint32_t> omp_threads(const RankEnvInput& in) {
  if (in.cpus_per_rank) return in.cpus_per_rank;
  if (!in.node_cpus) return std::nullopt;
  return std::max<std::uint32_t>(
      1, *in.node_cpus / std::max<std::uint32_t>(1, in.self.local_world_size));
}

EnvList rank_environment(const RankEnvInput& in) {
  if (in.topology == nullptr || in.options == nullptr) {
    throw Error("rank environment: topology and options are required");
  }
  const RankPlacement& self = in.self;
  EnvList env;
  const auto set = [&env](std::string name, std::string value) {
    env.emplace_back(std::move(name), std::move(value));
  };

  // torchrun-compatible
  set("RANK", std::to_string(self.rank));
  set("LOCAL_RANK", std::to_string(self.local_rank));
  set("WORLD_SIZE", std::to_string(self.world_size));
  set("LOCAL_WORLD_SIZE", std::to_string(self.local_world_size));
  set("GROUP_RANK", std::to_string(self.node_index));
  set("NODE_RANK", std::to_string(self.node_index));
  set("MASTER_ADDR", in.master_addr);
  set("MASTER_PORT", std::to_string(in.ports.master_port));
  set("TORCHELASTIC_RESTART_COUNT", std::to_string(in.restart_count));
  // The rest of what torchrun gives a worker, one role ("default") of every rank (not
  // TORCHELASTIC_USE_AGENT_STORE: there is no agent's store to join).
  set("TORCHELASTIC_RUN_ID", in.job_id);
  set("TORCHELASTIC_MAX_RESTARTS", in.options->value_or("primus-max-restarts", "0"));
  set("GROUP_WORLD_SIZE", std::to_string(in.topology->nodes().size()));
  set("ROLE_NAME", "default");
  set("ROLE_RANK", std::to_string(self.rank));
  set("ROLE_WORLD_SIZE", std::to_string(self.world_size));

  if (in.framework == Framework::kTensorFlow) {
    set("TF_CONFIG", tf_config(*in.topology, self.rank, in.ports.worker_ports));
  }
  if (in.cuda_visible_devices) set("CUDA_VISIBLE_DEVICES", *in.cuda_visible_devices);
  if (const auto threads = omp_threads(in); threads && !in.user_set_omp_num_threads) {
    set("OMP_NUM_THREADS", std::to_string(*threads));
  }

  // Primus
  const std::string job_dir =
      resolve_job_dir(*in.options, in.submit_dir, in.job_id, in.one_machine);
  set("PRIMUS_ENV_VERSION", std::to_string(kPrimusEnvVersion));
  set("PRIMUS_FRAMEWORK", std::string(to_string(in.framework)));
  set("PRIMUS_JOB_ID", in.job_id);
  set("PRIMUS_JOB_DIR", job_dir);
  set("PRIMUS_CKPT_DIR", resolve_ckpt_dir(*in.options, in.submit_dir, job_dir));
  set("PRIMUS_RESTART_COUNT", std::to_string(in.restart_count));
  set("PRIMUS_PORT", std::to_string(in.ports.primus_port));
  set("PRIMUS_BOOTSTRAP", std::string(to_string(in.bootstrap)));
  set("PRIMUS_JOB_SECRET", in.job_secret);
  // The remaining settings the job chose (a site's plugstack, the environment, sbatch, srun),
  // so that steps and tools see what it asked for. A default is not exported: every reader has
  // the table's default, so a job's defaults are the same however it starts (under the plugin,
  // primus-launch, or a plain `python3 train.py`), and a setting present in the environment is
  // one the user chose (primus.data and primus.train tell chosen from defaulted by it).
  for (const auto& [name, resolved] : in.options->all()) {
    const OptionSpec* spec = find_option(name);
    if (spec == nullptr || spec->env.empty() || spec->env == "PRIMUS_FRAMEWORK" ||
        spec->env == "PRIMUS_CKPT_DIR" || spec->env == "PRIMUS_JOB_DIR" ||
        resolved.source == OptionSource::kDefault) {
      continue;
    }
    set(std::string(spec->env), resolved.value);
  }
  return env;
}

}  // namespace primus
