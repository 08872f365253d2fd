// How the cost of one rank's topology and environment grows with the world size. Each sample
// parses a Slurm step environment and computes the rank environment, as the SPANK plugin does in
// every task. Prints the time per rank at 8, 8,000 and 800,000 ranks and the ratio to 8 ranks
// measured in the same run: O(1)/O(log n) code shows ratios near 1, O(world) code ~100,000.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "primus/common.hpp"

namespace {

// "node[000001-N]", split into ranges of at most 50,000 hosts (Slurm caps a range at 65,536).
std::string nodelist(std::uint64_t nodes) {
  if (nodes == 1) return "node000001";
  std::string list = "node[";
  for (std::uint64_t first = 1; first <= nodes; first += 50000) {
    const std::uint64_t last = std::min(nodes, first + 49999);
    char range[64];
    std::snprintf(range, sizeof range, "%s%06llu-%06llu", first == 1 ? "" : ",",
                  static_cast<unsigned long long>(first), static_cast<unsigned long long>(last));
    list += range;
  }
  return list + "]";
}

double ns_per_rank(std::uint64_t world, const char* distribution, int samples) {
  const std::uint64_t nodes = world >= 8 ? world / 8 : 1;
  primus::Environment env = {
      {"SLURM_JOB_ID", "1234567"},
      {"SLURM_STEP_ID", "0"},
      {"SLURM_STEP_NODELIST", nodelist(nodes)},
      {"SLURM_STEP_NUM_NODES", std::to_string(nodes)},
      {"SLURM_STEP_NUM_TASKS", std::to_string(world)},
      {"SLURM_STEP_TASKS_PER_NODE", "8(x" + std::to_string(nodes) + ")"},
      {"SLURM_DISTRIBUTION", distribution},
      {"SLURM_STEP_RESV_PORTS", "12001-12009"},
  };
  const primus::ResolvedOptions options = primus::ResolvedOptions::resolve({});
  std::mt19937_64 rng(world);
  std::size_t checksum = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < samples; ++i) {
    const std::uint64_t rank = rng() % world;
    // What Slurm would give that task.
    const std::uint64_t node = std::string(distribution) == "cyclic" ? rank % nodes : rank / 8;
    const std::uint64_t local = std::string(distribution) == "cyclic" ? rank / nodes : rank % 8;
    env["SLURM_PROCID"] = std::to_string(rank);
    env["SLURM_NODEID"] = std::to_string(node);
    env["SLURM_LOCALID"] = std::to_string(local);
    const primus::SlurmStep step = primus::parse_slurm_step(env);
    primus::RankEnvInput in;
    in.topology = &step.topology;
    in.options = &options;
    in.self = step.self;
    in.master_addr = "10.0.0.1";
    in.ports = primus::assign_ports(primus::Framework::kPyTorch, 8,
                                    primus::parse_reserved_ports(*step.reserved_ports),
                                    "SLURM_STEP_RESV_PORTS", "auto");
    in.job_id = step.job_id;
    in.submit_dir = "/home/user/run";
    checksum += primus::rank_environment(in).size();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  if (checksum == 0) std::puts("impossible");
  return std::chrono::duration<double, std::nano>(elapsed).count() / samples;
}

}  // namespace

int main() {
  const int samples = 20000;
  std::printf(
      "primus-bench-scale: parse a Slurm step environment + compute one rank's "
      "environment (%d random ranks each)\n\n",
      samples);
  std::printf("%-8s %10s %14s %16s\n", "dist", "ranks", "ns per rank", "ratio to 8 ranks");
  for (const char* distribution : {"block", "cyclic"}) {
    double baseline = 0;
    for (const std::uint64_t world : {8ULL, 8000ULL, 800000ULL}) {
      ns_per_rank(world, distribution, samples / 10);  // warm up
      const double ns = ns_per_rank(world, distribution, samples);
      if (world == 8) baseline = ns;
      std::printf("%-8s %10llu %14.0f %16.2f\n", distribution,
                  static_cast<unsigned long long>(world), ns, ns / baseline);
    }
  }
  return 0;
}
