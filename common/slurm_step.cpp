#include "primus/common/slurm_step.hpp"

#include <limits>
#include <stdexcept>

#include "primus/common/error.hpp"
#include "primus/common/parse_number.hpp"

namespace primus {
namespace {

std::string required(const Environment& env, std::string_view name) {
  auto value = lookup(env, name);
  if (!value || value->empty()) {
    throw Error(std::string(name) +
                " is not set: expected the environment of a Slurm job step "
                "(run the command under srun)");
  }
  return *value;
}

std::uint64_t number(std::string_view name, const std::string& value, std::uint64_t max) {
  const auto parsed = parse_unsigned(value, max);
  if (!parsed) {
    throw Error(std::string(name) + ": expected a number no larger than " + std::to_string(max) +
                ", got '" + value + "'");
  }
  return *parsed;
}

std::uint64_t required_number(const Environment& env, std::string_view name, std::uint64_t max) {
  return number(name, required(env, name), max);
}

std::optional<std::uint64_t> optional_number(const Environment& env, std::string_view name,
                                             std::uint64_t max) {
  const auto value = lookup(env, name);
  if (!value || value->empty()) return std::nullopt;
  return number(name, *value, max);
}

void expect_equal(std::string_view name, std::uint64_t given, std::string_view derived_from,
                  std::uint64_t derived) {
  if (given != derived) {
    throw Error(std::string(name) + "=" + std::to_string(given) + " disagrees with " +
                std::string(derived_from) + ", which gives " + std::to_string(derived));
  }
}

constexpr std::uint64_t kMaxId = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 40;

}  // namespace

const std::vector<std::string_view>& slurm_step_variables() {
  static const std::vector<std::string_view> names = {
      "SLURM_JOB_ID",         "SLURM_ARRAY_JOB_ID",
      "SLURM_ARRAY_TASK_ID",  "SLURM_STEP_ID",
      "SLURM_STEP_NODELIST",  "SLURM_STEP_NUM_NODES",
      "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE",
      "SLURM_DISTRIBUTION",   "SLURM_PROCID",
      "SLURM_NODEID",         "SLURM_LOCALID",
      "SLURM_RESTART_COUNT",  "SLURM_STEP_RESV_PORTS",
      "SLURM_CPUS_PER_TASK"};
  return names;
}

std::string primus_job_id(const Environment& env) {
  const std::uint64_t job = required_number(env, "SLURM_JOB_ID", kMaxId);
  const auto array_job = optional_number(env, "SLURM_ARRAY_JOB_ID", kMaxId);
  const auto array_task = optional_number(env, "SLURM_ARRAY_TASK_ID", kMaxId);
  if (array_job.has_value() != array_task.has_value()) {
    throw Error(std::string(array_job ? "SLURM_ARRAY_TASK_ID" : "SLURM_ARRAY_JOB_ID") +
                " is not set although " +
                (array_job ? "SLURM_ARRAY_JOB_ID" : "SLURM_ARRAY_TASK_ID") + " is");
  }
  if (array_job) return std::to_string(*array_job) + "_" + std::to_string(*array_task);
  return std::to_string(job);
}

SlurmStep parse_slurm_step(const Environment& env) {
  const std::string nodelist = required(env, "SLURM_STEP_NODELIST");
  Hostlist nodes;
  try {
    nodes = Hostlist::parse(nodelist);
  } catch (const Error& e) {
    throw Error(std::string("SLURM_STEP_NODELIST: ") + e.what());
  }
  const std::uint64_t num_nodes = required_number(env, "SLURM_STEP_NUM_NODES", kMaxCount);
  const std::uint64_t num_tasks = required_number(env, "SLURM_STEP_NUM_TASKS", kMaxCount);
  const TasksPerNode tasks =
      TasksPerNode::parse(required(env, "SLURM_STEP_TASKS_PER_NODE"), "SLURM_STEP_TASKS_PER_NODE");
  const Distribution distribution =
      parse_distribution(lookup(env, "SLURM_DISTRIBUTION").value_or(""));

  expect_equal("SLURM_STEP_NUM_NODES", num_nodes, "SLURM_STEP_NODELIST", nodes.size());
  expect_equal("SLURM_STEP_NUM_NODES", num_nodes, "SLURM_STEP_TASKS_PER_NODE", tasks.node_count());
  expect_equal("SLURM_STEP_NUM_TASKS", num_tasks, "SLURM_STEP_TASKS_PER_NODE", tasks.task_count());

  SlurmStep step{primus_job_id(env),
                 required_number(env, "SLURM_JOB_ID", kMaxId),
                 required_number(env, "SLURM_STEP_ID", kMaxId),
                 Topology(std::move(nodes), tasks, distribution),
                 {},
                 0,
                 lookup(env, "SLURM_STEP_RESV_PORTS"),
                 {}};

  const std::uint64_t rank = required_number(env, "SLURM_PROCID", kMaxCount);
  if (rank >= num_tasks) {
    throw Error("SLURM_PROCID=" + std::to_string(rank) +
                " is not below SLURM_STEP_NUM_TASKS=" + std::to_string(num_tasks));
  }
  step.self = step.topology.place(rank);
  const std::string derivation = "SLURM_PROCID under " + std::string(to_string(distribution)) +
                                 " distribution (SLURM_DISTRIBUTION)";
  expect_equal("SLURM_NODEID", required_number(env, "SLURM_NODEID", kMaxCount), derivation,
               step.self.node_index);
  expect_equal("SLURM_LOCALID", required_number(env, "SLURM_LOCALID", kMaxCount), derivation,
               step.self.local_rank);

  step.restart_count =
      static_cast<std::uint32_t>(optional_number(env, "SLURM_RESTART_COUNT", kMaxId).value_or(0));
  if (const auto cpus = optional_number(env, "SLURM_CPUS_PER_TASK", kMaxId)) {
    step.cpus_per_task = static_cast<std::uint32_t>(*cpus);
  }
  return step;
}

}  // namespace primus
