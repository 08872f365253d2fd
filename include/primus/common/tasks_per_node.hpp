// Slurm's tasks-per-node syntax (SLURM_TASKS_PER_NODE, SLURM_STEP_TASKS_PER_NODE): "3(x2),2,1"
// means 3 tasks on each of the first two nodes, then 2, then 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace primus {

// A run-length encoded count per node. Lookups cost O(log runs), never O(nodes).
class TasksPerNode {
 public:
  struct Run {
    std::uint32_t tasks = 0;  // tasks on each node of the run
    std::uint64_t nodes = 0;  // how many consecutive nodes
  };

  TasksPerNode() = default;
  explicit TasksPerNode(const std::vector<Run>& runs);

  // Parses "3(x2),2,1". `what` names the source (a variable) in error messages.
  static TasksPerNode parse(std::string_view text, std::string_view what = "tasks per node");

  // Every node holds `tasks` tasks.
  static TasksPerNode uniform(std::uint64_t nodes, std::uint32_t tasks);

  const std::vector<Run>& runs() const noexcept { return runs_; }
  std::uint64_t node_count() const noexcept;
  std::uint64_t task_count() const noexcept;
  std::uint32_t max_tasks() const noexcept;

  // Tasks on node `node` (0-based). Throws std::out_of_range past the last node.
  std::uint32_t tasks_on(std::uint64_t node) const;

  // Tasks on nodes [0, node): the first global rank of `node` under block distribution.
  std::uint64_t tasks_before(std::uint64_t node) const;

  // The node holding block-distributed global rank `rank`. Throws std::out_of_range.
  std::uint64_t node_of_block_rank(std::uint64_t rank) const;

  // Back to Slurm's syntax.
  std::string to_string() const;

 private:
  std::vector<Run> runs_;
  std::vector<std::uint64_t> node_ends_;  // nodes in runs_[0..k]
  std::vector<std::uint64_t> task_ends_;  // tasks in runs_[0..k]
};

}  // namespace primus
