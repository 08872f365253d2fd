#include "primus/common/task_env.hpp"

#include <gtest/gtest.h>

#include <map>

#include "primus/common/error.hpp"
#include "primus/common/ports.hpp"

namespace primus {
namespace {

// A job secret of the form the plugin makes (64 lowercase hex digits).
const std::string kSecret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

std::map<std::string, std::string> as_map(const EnvList& list) {
  return {list.begin(), list.end()};
}

// Task 3 of `srun -N2 -n4 --gpus-per-node=4` on n[3-4]: second task on n4.
Environment gpu_task() {
  return {{"SLURM_JOB_ID", "310"},
          {"SLURM_STEP_ID", "2"},
          {"SLURM_STEP_NODELIST", "n[3-4]"},
          {"SLURM_STEP_NUM_NODES", "2"},
          {"SLURM_STEP_NUM_TASKS", "4"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_PROCID", "3"},
          {"SLURM_NODEID", "1"},
          {"SLURM_LOCALID", "1"},
          {"CUDA_VISIBLE_DEVICES", "0,1,2,3"},
          {"SLURM_SUBMIT_DIR", "/home/u"},
          {"PRIMUS_JOB_SECRET", kSecret}};
}

std::string address_of(const std::string& host) {
  return "addr-of-" + host;
}

TEST(SlurmTaskEnvironment, BindsADisjointGpuBlockAndUsesTheFirstNodeAddress) {
  const ResolvedOptions options = ResolvedOptions::resolve({});
  const auto env = as_map(slurm_task_environment(gpu_task(), options, address_of));
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(env.at("MASTER_ADDR"), "addr-of-n3");
  EXPECT_EQ(env.at("RANK"), "3");
  EXPECT_EQ(env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(env.at("PRIMUS_BOOTSTRAP"), "tcp");
  EXPECT_EQ(env.at("PRIMUS_JOB_DIR"), "/home/u/primus-310");
  EXPECT_EQ(env.at("PRIMUS_JOB_SECRET"), kSecret);
}

TEST(SlurmTaskEnvironment, RestartsCountRequeuesPlusTheLaunchersRestarts) {
  const ResolvedOptions options = ResolvedOptions::resolve({});
  Environment task = gpu_task();
  task["SLURM_RESTART_COUNT"] = "2";
  EXPECT_EQ(as_map(slurm_task_environment(task, options, address_of)).at("PRIMUS_RESTART_COUNT"),
            "2");
  task["PRIMUS_LAUNCH_RESTARTS"] = "3";
  const auto env = as_map(slurm_task_environment(task, options, address_of));
  EXPECT_EQ(env.at("PRIMUS_RESTART_COUNT"), "5");
  EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "5");
  task["PRIMUS_LAUNCH_RESTARTS"] = "three";
  try {
    slurm_task_environment(task, options, address_of);
    ADD_FAILURE() << "took PRIMUS_LAUNCH_RESTARTS=three";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PRIMUS_LAUNCH_RESTARTS"), std::string::npos);
  }
}

TEST(SlurmTaskEnvironment, TakesMasterAddrFromSrunsNodeAddrForTheFirstNodeOnly) {
  const ResolvedOptions options = ResolvedOptions::resolve({});
  Environment task = gpu_task();
  task["PRIMUS_MASTER_NODE"] = "n3=10.9.8.7";
  EXPECT_EQ(as_map(slurm_task_environment(task, options, address_of)).at("MASTER_ADDR"),
            "10.9.8.7");
  task["PRIMUS_MASTER_NODE"] = "n1=10.9.8.7";  // an outer step's: not this one's first node
  EXPECT_EQ(as_map(slurm_task_environment(task, options, address_of)).at("MASTER_ADDR"),
            "addr-of-n3");
}

TEST(SlurmTaskEnvironment, LeavesGpusAloneWhenSlurmBoundThemOrTheUserSaidNone) {
  Environment task = gpu_task();
  task["SLURM_GPUS_PER_TASK"] = "2";
  task["CUDA_VISIBLE_DEVICES"] = "0,1";
  const ResolvedOptions defaults = ResolvedOptions::resolve({});
  EXPECT_EQ(
      as_map(slurm_task_environment(task, defaults, address_of)).count("CUDA_VISIBLE_DEVICES"), 0U);
  const ResolvedOptions none = ResolvedOptions::resolve(
      {parse_command_line_options(OptionSource::kSrun, {{"primus-bind-gpus", "none"}})});
  EXPECT_EQ(
      as_map(slurm_task_environment(gpu_task(), none, address_of)).count("CUDA_VISIBLE_DEVICES"),
      0U);
}

TEST(SlurmTaskEnvironment, MoreRanksThanGpusIsAnError) {
  Environment task = gpu_task();
  task["CUDA_VISIBLE_DEVICES"] = "0";
  const ResolvedOptions options = ResolvedOptions::resolve({});
  try {
    slurm_task_environment(task, options, address_of);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 ranks on this node but 1 GPUs"), std::string::npos)
        << e.what();
  }
}

TEST(SlurmTaskEnvironment, PortsFromSlurmReservationOrDerived) {
  const ResolvedOptions options = ResolvedOptions::resolve({});
  Environment task = gpu_task();
  task["SLURM_STEP_RESV_PORTS"] = "12004-12006";
  auto env = as_map(slurm_task_environment(task, options, address_of));
  EXPECT_EQ(env.at("MASTER_PORT"), "12004");
  EXPECT_EQ(env.at("PRIMUS_PORT"), "12005");

  // A secret the steps of the job share (PRIMUS_SECRET_SCOPE=job): the keyed slot.
  task.erase("SLURM_STEP_RESV_PORTS");
  task["PRIMUS_SECRET_SCOPE"] = "job";
  env = as_map(slurm_task_environment(task, options, address_of));
  const auto keyed =
      derive_port_block(310, 2, PortRange{20000, 29999}, 2, task.at("PRIMUS_JOB_SECRET"));
  EXPECT_EQ(env.at("MASTER_PORT"), std::to_string(keyed[0]));
  EXPECT_EQ(env.at("PRIMUS_PORT"), std::to_string(keyed[1]));
  // A secret of this step alone (its srun made it inside a job without one): the public slot,
  // so that the job's steps still take consecutive slots.
  task["PRIMUS_SECRET_SCOPE"] = "step";
  env = as_map(slurm_task_environment(task, options, address_of));
  const auto open = derive_port_block(310, 2, PortRange{20000, 29999}, 2, std::nullopt);
  EXPECT_NE(keyed, open);
  EXPECT_EQ(env.at("MASTER_PORT"), std::to_string(open[0]));
  EXPECT_EQ(env.at("PRIMUS_PORT"), std::to_string(open[1]));
}

TEST(SlurmTaskEnvironment, PmixAndThreads) {
  Environment task = gpu_task();
  task["PMIX_RANK"] = "3";
  task["SLURM_CPUS_PER_TASK"] = "6";
  const ResolvedOptions options = ResolvedOptions::resolve({});
  auto env = as_map(slurm_task_environment(task, options, address_of));
  EXPECT_EQ(env.at("PRIMUS_BOOTSTRAP"), "pmix");
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "6");
  task["OMP_NUM_THREADS"] = "1";
  env = as_map(slurm_task_environment(task, options, address_of));
  EXPECT_EQ(env.count("OMP_NUM_THREADS"), 0U);
  // Without --cpus-per-task, the node's CPUs for the job among its ranks there (issue 41: it
  // was left unset, and every rank's torch took every CPU).
  task.erase("OMP_NUM_THREADS");
  task.erase("SLURM_CPUS_PER_TASK");
  task["SLURM_CPUS_ON_NODE"] = "16";
  env = as_map(slurm_task_environment(task, options, address_of));
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), std::to_string(16 / std::stoi(env.at("LOCAL_WORLD_SIZE"))));
  task["SLURM_CPUS_ON_NODE"] = "1";
  env = as_map(slurm_task_environment(task, options, address_of));
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "1");  // never 0
  // A node that declares more CPUs to Slurm than it has online (the testbed's 8 on 2): the
  // online ones are divided.
  task["SLURM_CPUS_ON_NODE"] = "64";
  env = as_map(slurm_task_environment(task, options, address_of, 8));
  EXPECT_EQ(env.at("OMP_NUM_THREADS"),
            std::to_string(std::max(1, 8 / std::stoi(env.at("LOCAL_WORLD_SIZE")))));
}

TEST(OneMachineEnvironment, ThreadsAreTheMachinesCpusAmongTheRanks) {
  OneMachineJob job;
  job.nproc = 3;
  job.job_id = "local-1";
  job.submit_dir = "/tmp";
  job.job_secret = std::string(64, 'a');
  job.cpus = 8;
  const ResolvedOptions options = ResolvedOptions::resolve({});
  EXPECT_EQ(as_map(one_machine_environment(job, 0, {}, options)).at("OMP_NUM_THREADS"), "2");
  EXPECT_EQ(as_map(one_machine_environment(job, 0, {{"OMP_NUM_THREADS", "5"}}, options))
                .count("OMP_NUM_THREADS"),
            0U);
  job.cpus = 0;  // unknown: left to the libraries
  EXPECT_EQ(as_map(one_machine_environment(job, 0, {}, options)).count("OMP_NUM_THREADS"), 0U);
}

TEST(OneMachineEnvironment, EveryRankOnLocalhost) {
  OneMachineJob job;
  job.nproc = 3;
  job.hostname = "box";
  job.job_id = "local-1";
  job.submit_dir = "/w";
  job.job_secret = kSecret;
  const ResolvedOptions options = ResolvedOptions::resolve({});
  std::string master_port;
  for (std::uint32_t rank = 0; rank < 3; ++rank) {
    const auto env = as_map(one_machine_environment(job, rank, {}, options));
    EXPECT_EQ(env.at("RANK"), std::to_string(rank));
    EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(rank));
    EXPECT_EQ(env.at("WORLD_SIZE"), "3");
    EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "3");
    EXPECT_EQ(env.at("MASTER_ADDR"), "127.0.0.1");
    if (rank == 0) master_port = env.at("MASTER_PORT");
    EXPECT_EQ(env.at("MASTER_PORT"), master_port);
    // The job directory primus-launch --nproc uses: the same command here resumes.
    EXPECT_EQ(env.at("PRIMUS_JOB_DIR"), "/w/primus-local");
    EXPECT_EQ(env.at("PRIMUS_CKPT_DIR"), "/w/primus-local/ckpt");
  }
}

}  // namespace
}  // namespace primus
