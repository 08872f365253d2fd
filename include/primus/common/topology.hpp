// Where every rank of a step runs: the mapping between global ranks and (node, local rank), for
// Slurm's block and cyclic task distributions, and for one-machine runs (`--nproc`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "primus/common/hostlist.hpp"
#include "primus/common/tasks_per_node.hpp"

namespace primus {

enum class Distribution { kBlock, kCyclic };

// Slurm's SLURM_DISTRIBUTION value ("block", "cyclic", "cyclic:block", "block:cyclic,Pack", ...)
// to the node-level distribution. Anything else ("plane", "arbitrary", ...) is an Error that names
// the value. An empty value means block (Slurm's default).
Distribution parse_distribution(std::string_view value);
std::string_view to_string(Distribution distribution);

struct RankPlacement {
  std::uint64_t rank = 0;              // global rank
  std::uint64_t node_index = 0;        // 0-based index of its node in the step
  std::string hostname;                // that node's name
  std::uint32_t local_rank = 0;        // rank among the ranks of its node
  std::uint32_t local_world_size = 0;  // ranks on its node
  std::uint64_t node_count = 0;        // nodes in the step
  std::uint64_t world_size = 0;        // ranks in the step
};

// Immutable; every query costs O(log) or O(runs) where runs is the number of distinct runs in
// the tasks-per-node string (1 for a uniform allocation), never O(world size).
class Topology {
 public:
  // Throws Error when the node list and the task counts disagree or a node has no task.
  Topology(Hostlist nodes, TasksPerNode tasks, Distribution distribution);

  // `nproc` ranks on one machine named `hostname`.
  static Topology one_machine(std::uint32_t nproc, std::string_view hostname);

  std::uint64_t world_size() const noexcept { return tasks_.task_count(); }
  std::uint64_t node_count() const noexcept { return tasks_.node_count(); }
  Distribution distribution() const noexcept { return distribution_; }
  const Hostlist& nodes() const noexcept { return nodes_; }
  const TasksPerNode& tasks_per_node() const noexcept { return tasks_; }

  // Throws std::out_of_range for a rank >= world_size().
  RankPlacement place(std::uint64_t rank) const;

  // The global rank of local rank `local_rank` on node `node_index`. Throws std::out_of_range.
  std::uint64_t global_rank(std::uint64_t node_index, std::uint32_t local_rank) const;

 private:
  std::uint64_t cyclic_tasks_before_round(std::uint32_t round) const;
  std::uint64_t cyclic_nth_node_in_round(std::uint32_t round, std::uint64_t n) const;

  Hostlist nodes_;
  TasksPerNode tasks_;
  Distribution distribution_;
};

}  // namespace primus
