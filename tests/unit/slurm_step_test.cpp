#include "primus/common/slurm_step.hpp"

#include <gtest/gtest.h>

#include "primus/common/error.hpp"

namespace primus {
namespace {

// Task 5 of `srun -N4 -n8 -m cyclic` on n[1-4]: node 1 (n2), local rank 1.
Environment cyclic_step() {
  return {{"SLURM_JOB_ID", "42"},
          {"SLURM_STEP_ID", "3"},
          {"SLURM_STEP_NODELIST", "n[1-4]"},
          {"SLURM_STEP_NUM_NODES", "4"},
          {"SLURM_STEP_NUM_TASKS", "8"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x4)"},
          {"SLURM_DISTRIBUTION", "cyclic"},
          {"SLURM_PROCID", "5"},
          {"SLURM_NODEID", "1"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_RESTART_COUNT", "2"},
          {"SLURM_STEP_RESV_PORTS", "12001-12003"},
          {"SLURM_CPUS_PER_TASK", "4"}};
}

std::string error_of(const Environment& env) {
  try {
    parse_slurm_step(env);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SlurmStep, ReadsACyclicStep) {
  const SlurmStep step = parse_slurm_step(cyclic_step());
  EXPECT_EQ(step.job_id, "42");
  EXPECT_EQ(step.numeric_job_id, 42U);
  EXPECT_EQ(step.step_id, 3U);
  EXPECT_EQ(step.topology.world_size(), 8U);
  EXPECT_EQ(step.topology.distribution(), Distribution::kCyclic);
  EXPECT_EQ(step.self.rank, 5U);
  EXPECT_EQ(step.self.hostname, "n2");
  EXPECT_EQ(step.self.local_rank, 1U);
  EXPECT_EQ(step.self.local_world_size, 2U);
  EXPECT_EQ(step.restart_count, 2U);
  EXPECT_EQ(step.reserved_ports.value_or(""), "12001-12003");
  EXPECT_EQ(step.cpus_per_task.value_or(0), 4U);
}

TEST(SlurmStep, ArrayJobId) {
  Environment env = cyclic_step();
  env["SLURM_ARRAY_JOB_ID"] = "40";
  env["SLURM_ARRAY_TASK_ID"] = "7";
  EXPECT_EQ(parse_slurm_step(env).job_id, "40_7");
  env.erase("SLURM_ARRAY_TASK_ID");
  EXPECT_NE(error_of(env).find("SLURM_ARRAY_TASK_ID"), std::string::npos);
}

TEST(SlurmStep, MissingVariablesAreNamed) {
  for (const char* name :
       {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES",
        "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE", "SLURM_PROCID", "SLURM_NODEID",
        "SLURM_LOCALID"}) {
    Environment env = cyclic_step();
    env.erase(name);
    EXPECT_NE(error_of(env).find(name), std::string::npos) << name << ": " << error_of(env);
  }
}

TEST(SlurmStep, InconsistentVariablesAreNamed) {
  struct Case {
    const char* variable;
    const char* value;
    const char* named;
  };
  const Case cases[] = {
      {"SLURM_STEP_NUM_NODES", "3", "SLURM_STEP_NUM_NODES"},
      {"SLURM_STEP_NUM_TASKS", "9", "SLURM_STEP_NUM_TASKS"},
      {"SLURM_STEP_NODELIST", "n[1-5]", "SLURM_STEP_NUM_NODES"},
      {"SLURM_STEP_NODELIST", "n[1-4", "SLURM_STEP_NODELIST"},
      {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1", "SLURM_STEP_NUM_TASKS"},
      {"SLURM_STEP_TASKS_PER_NODE", "2(x4", "SLURM_STEP_TASKS_PER_NODE"},
      {"SLURM_PROCID", "8", "SLURM_PROCID"},
      {"SLURM_PROCID", "-1", "SLURM_PROCID"},
      {"SLURM_NODEID", "0", "SLURM_NODEID"},
      {"SLURM_LOCALID", "0", "SLURM_LOCALID"},
      {"SLURM_DISTRIBUTION", "plane", "SLURM_DISTRIBUTION"},
      {"SLURM_DISTRIBUTION", "block", "SLURM_NODEID"},  // rank 5 is on n3 under block
      {"SLURM_RESTART_COUNT", "x", "SLURM_RESTART_COUNT"},
      {"SLURM_CPUS_PER_TASK", "4k", "SLURM_CPUS_PER_TASK"},
  };
  for (const Case& c : cases) {
    Environment env = cyclic_step();
    env[c.variable] = c.value;
    const std::string message = error_of(env);
    EXPECT_NE(message.find(c.named), std::string::npos)
        << c.variable << "=" << c.value << " gave: '" << message << "'";
  }
}

TEST(SlurmStep, BlockDefaultWhenDistributionUnset) {
  Environment env = cyclic_step();
  env.erase("SLURM_DISTRIBUTION");
  env["SLURM_NODEID"] = "2";
  env["SLURM_LOCALID"] = "1";
  const SlurmStep step = parse_slurm_step(env);
  EXPECT_EQ(step.self.hostname, "n3");
}

}  // namespace
}  // namespace primus
