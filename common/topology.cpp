#include "primus/common/topology.hpp"

#include <algorithm>
#include <stdexcept>

#include "primus/common/error.hpp"

namespace primus {

Distribution parse_distribution(std::string_view value) {
  // Slurm writes "<node level>[:<socket level>[:<core level>]][,Pack|NoPack]".
  const std::string_view node_level = value.substr(0, value.find_first_of(":,"));
  if (node_level.empty() || node_level == "block") return Distribution::kBlock;
  if (node_level == "cyclic") return Distribution::kCyclic;
  throw Error("SLURM_DISTRIBUTION: task distribution '" + std::string(value) +
              "' is not supported: expected block or cyclic (srun -m block|cyclic)");
}

std::string_view to_string(Distribution distribution) {
  return distribution == Distribution::kCyclic ? "cyclic" : "block";
}

Topology::Topology(Hostlist nodes, TasksPerNode tasks, Distribution distribution)
    : nodes_(std::move(nodes)), tasks_(std::move(tasks)), distribution_(distribution) {
  if (nodes_.size() != tasks_.node_count()) {
    throw Error("the node list has " + std::to_string(nodes_.size()) +
                " nodes but the tasks per node '" + tasks_.to_string() + "' describe " +
                std::to_string(tasks_.node_count()));
  }
  if (nodes_.empty()) throw Error("the step has no node");
  const auto& runs = tasks_.runs();
  if (std::any_of(runs.begin(), runs.end(),
                  [](const TasksPerNode::Run& r) { return r.tasks == 0; })) {
    throw Error("tasks per node '" + tasks_.to_string() + "': a node has no task");
  }
}

Topology Topology::one_machine(std::uint32_t nproc, std::string_view hostname) {
  Hostlist host;
  host.push_host(hostname);
  return Topology(std::move(host), TasksPerNode::uniform(1, nproc), Distribution::kBlock);
}

// Under cyclic distribution, round k gives one task to every node holding more than k tasks, in
// node order. Tasks placed before round k: sum over nodes of min(tasks, k).
std::uint64_t Topology::cyclic_tasks_before_round(std::uint32_t round) const {
  std::uint64_t total = 0;
  for (const TasksPerNode::Run& run : tasks_.runs())
    total += run.nodes * std::min(run.tasks, round);
  return total;
}

// The index of the n-th node (0-based) among those that take part in `round`.
std::uint64_t Topology::cyclic_nth_node_in_round(std::uint32_t round, std::uint64_t n) const {
  std::uint64_t first_node = 0;
  for (const TasksPerNode::Run& run : tasks_.runs()) {
    if (run.tasks > round) {
      if (n < run.nodes) return first_node + n;
      n -= run.nodes;
    }
    first_node += run.nodes;
  }
  throw std::out_of_range("cyclic round has fewer nodes");
}

RankPlacement Topology::place(std::uint64_t rank) const {
  if (rank >= world_size()) {
    throw std::out_of_range("rank " + std::to_string(rank) + " is not below the world size " +
                            std::to_string(world_size()));
  }
  RankPlacement placement;
  placement.rank = rank;
  placement.world_size = world_size();
  placement.node_count = node_count();
  if (distribution_ == Distribution::kBlock) {
    placement.node_index = tasks_.node_of_block_rank(rank);
    placement.local_rank =
        static_cast<std::uint32_t>(rank - tasks_.tasks_before(placement.node_index));
  } else {
    // The last round whose first task is at or before `rank`.
    std::uint32_t lo = 0;
    std::uint32_t hi = tasks_.max_tasks() - 1;
    while (lo < hi) {
      const std::uint32_t mid = lo + (hi - lo + 1) / 2;
      if (cyclic_tasks_before_round(mid) <= rank) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    placement.local_rank = lo;
    placement.node_index = cyclic_nth_node_in_round(lo, rank - cyclic_tasks_before_round(lo));
  }
  placement.local_world_size = tasks_.tasks_on(placement.node_index);
  placement.hostname = nodes_.at(placement.node_index);
  return placement;
}

std::uint64_t Topology::global_rank(std::uint64_t node_index, std::uint32_t local_rank) const {
  const std::uint32_t on_node = tasks_.tasks_on(node_index);
  if (local_rank >= on_node) {
    throw std::out_of_range("local rank " + std::to_string(local_rank) + " on node " +
                            std::to_string(node_index) + " holding " + std::to_string(on_node) +
                            " tasks");
  }
  if (distribution_ == Distribution::kBlock) return tasks_.tasks_before(node_index) + local_rank;
  std::uint64_t earlier_nodes_in_round = 0;
  std::uint64_t first_node = 0;
  for (const TasksPerNode::Run& run : tasks_.runs()) {
    if (first_node >= node_index) break;
    if (run.tasks > local_rank)
      earlier_nodes_in_round += std::min(run.nodes, node_index - first_node);
    first_node += run.nodes;
  }
  return cyclic_tasks_before_round(local_rank) + earlier_nodes_in_round;
}

}  // namespace primus
