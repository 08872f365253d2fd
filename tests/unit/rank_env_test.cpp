#include "primus/common/rank_env.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "primus/common/error.hpp"
#include "primus/common/slurm_step.hpp"

namespace primus {
namespace {

std::map<std::string, std::string> as_map(const EnvList& list) {
  std::map<std::string, std::string> map;
  for (const auto& [name, value] : list) {
    EXPECT_TRUE(map.emplace(name, value).second) << "set twice: " << name;
  }
  return map;
}

struct Fixture {
  Topology topology;
  ResolvedOptions options;
  RankEnvInput input;
};

Fixture pytorch_rank(std::uint64_t rank, const std::vector<OptionLayer>& layers = {}) {
  Fixture f{Topology(Hostlist::parse("n[1-4]"), TasksPerNode::parse("2(x4)"), Distribution::kBlock),
            ResolvedOptions::resolve(layers),
            {}};
  f.input.framework = Framework::kPyTorch;
  f.input.self = f.topology.place(rank);
  f.input.master_addr = "127.0.0.11";
  f.input.ports =
      assign_ports(Framework::kPyTorch, 2, {12001, 12002, 12003}, "SLURM_STEP_RESV_PORTS",
                   f.options.value_or("primus-master-port", "auto"));
  f.input.job_id = "77";
  f.input.restart_count = 1;
  f.input.submit_dir = "/home/ada/run";
  f.input.bootstrap = Bootstrap::kTcp;
  f.input.job_secret = "0123456789abcdef";
  f.input.cpus_per_rank = 4;
  return f;
}

EnvList compute(Fixture& f) {
  f.input.topology = &f.topology;
  f.input.options = &f.options;
  return rank_environment(f.input);
}

// Hand-checked: rank 3 of `srun -N4 -n8` (block) is the second task on n2.
TEST(RankEnvironment, PyTorchRankThreeOfEight) {
  Fixture f = pytorch_rank(3);
  const auto env = as_map(compute(f));
  const std::map<std::string, std::string> expected = {
      {"RANK", "3"},
      {"LOCAL_RANK", "1"},
      {"WORLD_SIZE", "8"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"GROUP_RANK", "1"},
      {"NODE_RANK", "1"},
      {"MASTER_ADDR", "127.0.0.11"},
      {"MASTER_PORT", "12001"},
      {"TORCHELASTIC_RESTART_COUNT", "1"},
      {"TORCHELASTIC_RUN_ID", "77"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"GROUP_WORLD_SIZE", "4"},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", "3"},
      {"ROLE_WORLD_SIZE", "8"},
      {"OMP_NUM_THREADS", "4"},
      {"PRIMUS_ENV_VERSION", "2"},
      {"PRIMUS_FRAMEWORK", "pytorch"},
      {"PRIMUS_JOB_ID", "77"},
      {"PRIMUS_JOB_DIR", "/home/ada/run/primus-77"},
      {"PRIMUS_CKPT_DIR", "/home/ada/run/primus-77/ckpt"},
      {"PRIMUS_RESTART_COUNT", "1"},
      {"PRIMUS_PORT", "12002"},
      {"PRIMUS_BOOTSTRAP", "tcp"},
      {"PRIMUS_JOB_SECRET", "0123456789abcdef"},
  };
  EXPECT_EQ(env, expected);
}

TEST(RankEnvironment, OnlyTheSettingsAJobChoseAreExportedNeverADefault) {
  // Issue 39: PRIMUS_DROP_LAST=0, exported as a default, counted as the user's choice.
  const auto srun = parse_command_line_options(
      OptionSource::kSrun, {{"primus-max-restarts", "2"}, {"primus-seed", "0"}});
  OptionLayer site;
  site.source = OptionSource::kSite;
  site.values["primus-hang-timeout"] = "600";
  Fixture f = pytorch_rank(0, {srun, site});
  const auto env = as_map(compute(f));
  EXPECT_EQ(env.at("PRIMUS_MAX_RESTARTS"), "2");
  EXPECT_EQ(env.at("PRIMUS_SEED"), "0") << "chosen, though equal to the default";
  EXPECT_EQ(env.at("PRIMUS_HANG_TIMEOUT"), "600");
  for (const char* defaulted : {"PRIMUS_DROP_LAST", "PRIMUS_SHUFFLE", "PRIMUS_EXIT_PREEMPTED",
                                "PRIMUS_HEARTBEAT_INTERVAL", "PRIMUS_STOP_GRACE"}) {
    EXPECT_EQ(env.count(defaulted), 0U) << defaulted;
  }
}

TEST(RankEnvironment, OptionsShapeDirectoriesPortsAndThreads) {
  const auto srun = parse_command_line_options(
      OptionSource::kSrun, {{"primus-job-dir", "jobs/x"}, {"primus-master-port", "29500"}});
  const auto env_layer = parse_environment_options({{"PRIMUS_CKPT_DIR", "/scratch/ck"}});
  Fixture f = pytorch_rank(0, {srun, env_layer});
  f.input.user_set_omp_num_threads = true;
  f.input.bootstrap = Bootstrap::kPmix;
  f.input.cuda_visible_devices = "2,3";
  const auto env = as_map(compute(f));
  EXPECT_EQ(env.at("PRIMUS_JOB_DIR"), "/home/ada/run/jobs/x");
  EXPECT_EQ(env.at("PRIMUS_CKPT_DIR"), "/scratch/ck");
  EXPECT_EQ(env.at("MASTER_PORT"), "29500");
  EXPECT_EQ(env.at("PRIMUS_PORT"), "12002");
  EXPECT_EQ(env.at("PRIMUS_BOOTSTRAP"), "pmix");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(env.count("OMP_NUM_THREADS"), 0U);
  EXPECT_EQ(env.count("TF_CONFIG"), 0U);
}

TEST(RankEnvironment, SecretIsRedactedWhenPrinted) {
  Fixture f = pytorch_rank(0);
  const std::string printed = format_environment(compute(f));
  EXPECT_NE(printed.find("PRIMUS_JOB_SECRET=<redacted>"), std::string::npos);
  EXPECT_EQ(printed.find("0123456789abcdef"), std::string::npos);
}

// Every worker of a 2-node cyclic TensorFlow step agrees on the cluster, and each has its own
// host:port, which its TF_CONFIG index points at.
TEST(RankEnvironment, TensorFlowConfigsAgreeAndParseAsJson) {
  const Topology topology(Hostlist::parse("n[3-4]"), TasksPerNode::parse("3,2"),
                          Distribution::kCyclic);
  const ResolvedOptions options = ResolvedOptions::resolve({});
  const std::vector<std::uint16_t> block = {20000, 20001, 20002, 20003};
  const StepPorts ports = assign_ports(Framework::kTensorFlow, 3, block, "derived block", "auto");
  EXPECT_EQ(ports.primus_port, 20000);
  EXPECT_EQ(ports.worker_ports, (std::vector<std::uint16_t>{20001, 20002, 20003}));

  nlohmann::json first_cluster;
  std::set<std::string> endpoints;
  for (std::uint64_t rank = 0; rank < topology.world_size(); ++rank) {
    RankEnvInput in;
    in.framework = Framework::kTensorFlow;
    in.topology = &topology;
    in.options = &options;
    in.self = topology.place(rank);
    in.master_addr = "127.0.0.13";
    in.ports = ports;
    in.job_id = "5";
    in.submit_dir = "/tmp";
    const auto env = as_map(rank_environment(in));
    const nlohmann::json config = nlohmann::json::parse(env.at("TF_CONFIG"));
    EXPECT_EQ(config["task"]["type"], "worker");
    EXPECT_EQ(config["task"]["index"], rank);
    if (rank == 0) first_cluster = config["cluster"];
    EXPECT_EQ(config["cluster"], first_cluster);
    const std::string mine = config["cluster"]["worker"][rank];
    EXPECT_TRUE(endpoints.insert(mine).second) << mine;
    EXPECT_EQ(mine,
              in.self.hostname + ":" + std::to_string(ports.worker_ports[in.self.local_rank]));
    EXPECT_EQ(env.at("MASTER_PORT"), "20001");
    EXPECT_EQ(env.at("PRIMUS_FRAMEWORK"), "tensorflow");
  }
  // Cyclic: ranks 0..4 on n3 n4 n3 n4 n3.
  const std::vector<std::string> expected = {"n3:20001", "n4:20001", "n3:20002", "n4:20002",
                                             "n3:20003"};
  EXPECT_EQ(first_cluster["worker"].get<std::vector<std::string>>(), expected);
}

TEST(RankEnvironment, TensorFlowConfigOverTheLinuxLimitIsAClearError) {
  const std::vector<std::uint16_t> ports(8, 20001);
  // 1,000 workers fit easily; 80,000 ("n12345:20001", about 16 bytes each) cannot.
  const Topology small(Hostlist::parse("n[1-125]"), TasksPerNode::parse("8(x125)"),
                       Distribution::kBlock);
  EXPECT_LT(tf_config(small, 0, ports).size(), kMaxEnvStringBytes);
  const Topology big(Hostlist::parse("n[1-10000]"), TasksPerNode::parse("8(x10000)"),
                     Distribution::kBlock);
  try {
    tf_config(big, 0, ports);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("MAX_ARG_STRLEN"), std::string::npos) << message;
    EXPECT_NE(message.find("131072"), std::string::npos) << message;
    EXPECT_NE(message.find("80000 workers"), std::string::npos) << message;
  }
  // The boundary: the largest world that fits produces a string within the limit.
  std::uint64_t lo = 1000;
  std::uint64_t hi = 80000;
  while (lo + 1 < hi) {
    const std::uint64_t mid = (lo + hi) / 2;
    Hostlist nodes;
    nodes.push_host("n1");
    const Topology t(nodes, TasksPerNode::uniform(1, static_cast<std::uint32_t>(mid)),
                     Distribution::kBlock);
    const std::vector<std::uint16_t> many(mid, 20001);
    try {
      const std::string config = tf_config(t, 0, many);
      EXPECT_LE(std::string("TF_CONFIG=").size() + config.size() + 1, kMaxEnvStringBytes);
      lo = mid;
    } catch (const Error&) {
      hi = mid;
    }
  }
  EXPECT_GT(lo, 5000U);
}

TEST(RankEnvironment, PortBlockTooShortNamesItsSource) {
  try {
    assign_ports(Framework::kTensorFlow, 4, {12001, 12002, 12003}, "SLURM_STEP_RESV_PORTS", "auto");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("SLURM_STEP_RESV_PORTS gives 3 ports"), std::string::npos) << message;
    EXPECT_NE(message.find("needs 5"), std::string::npos) << message;
  }
}

TEST(RankEnvironment, FromARealLookingSlurmStep) {
  const Environment slurm = {{"SLURM_JOB_ID", "9"},
                             {"SLURM_STEP_ID", "0"},
                             {"SLURM_STEP_NODELIST", "n[3-4]"},
                             {"SLURM_STEP_NUM_NODES", "2"},
                             {"SLURM_STEP_NUM_TASKS", "4"},
                             {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                             {"SLURM_PROCID", "2"},
                             {"SLURM_NODEID", "1"},
                             {"SLURM_LOCALID", "0"}};
  const SlurmStep step = parse_slurm_step(slurm);
  const ResolvedOptions options = ResolvedOptions::resolve({});
  RankEnvInput in;
  in.topology = &step.topology;
  in.options = &options;
  in.self = step.self;
  in.master_addr = "127.0.0.13";
  in.ports = assign_ports(Framework::kPyTorch, 2, {30000, 30001}, "block", "auto");
  in.job_id = step.job_id;
  in.submit_dir = "/w";
  const auto env = as_map(rank_environment(in));
  EXPECT_EQ(env.at("RANK"), "2");
  EXPECT_EQ(env.at("LOCAL_RANK"), "0");
  EXPECT_EQ(env.at("NODE_RANK"), "1");
  EXPECT_EQ(env.at("PRIMUS_JOB_DIR"), "/w/primus-9");
}

}  // namespace
}  // namespace primus
