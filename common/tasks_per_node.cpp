#include "primus/common/tasks_per_node.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "primus/common/error.hpp"
#include "primus/common/parse_number.hpp"

namespace primus {
namespace {

ParseError syntax_error(std::string_view what, std::string_view text, std::size_t pos,
                        std::string_view expected) {
  return ParseError(std::string(what) + " '" + std::string(text) + "': at position " +
                        std::to_string(pos) + ": expected " + std::string(expected),
                    pos);
}

}  // namespace

TasksPerNode::TasksPerNode(const std::vector<Run>& runs) {
  for (const Run& run : runs) {
    if (run.nodes == 0) continue;
    if (!runs_.empty() && runs_.back().tasks == run.tasks) {
      runs_.back().nodes += run.nodes;
      node_ends_.back() += run.nodes;
      task_ends_.back() += run.nodes * run.tasks;
      continue;
    }
    runs_.push_back(run);
    node_ends_.push_back((node_ends_.empty() ? 0 : node_ends_.back()) + run.nodes);
    task_ends_.push_back((task_ends_.empty() ? 0 : task_ends_.back()) + run.nodes * run.tasks);
  }
}

TasksPerNode TasksPerNode::parse(std::string_view text, std::string_view what) {
  if (text.empty()) throw syntax_error(what, text, 0, "a task count such as '2' or '3(x2)'");
  std::vector<Run> parsed;
  std::size_t pos = 0;
  constexpr std::uint64_t kMaxNodes = std::uint64_t{1} << 40;
  while (true) {
    const std::size_t start = pos;
    const auto tasks = take_unsigned(text, pos, std::numeric_limits<std::uint32_t>::max());
    if (!tasks) throw syntax_error(what, text, start, "a task count (a decimal number)");
    std::uint64_t repeat = 1;
    if (pos < text.size() && text[pos] == '(') {
      if (text.substr(pos, 2) != "(x") throw syntax_error(what, text, pos + 1, "'x'");
      pos += 2;
      const std::size_t count_pos = pos;
      const auto count = take_unsigned(text, pos, kMaxNodes);
      if (!count || *count == 0)
        throw syntax_error(what, text, count_pos, "a positive repeat count");
      if (pos >= text.size() || text[pos] != ')') throw syntax_error(what, text, pos, "')'");
      ++pos;
      repeat = *count;
    }
    parsed.push_back(Run{static_cast<std::uint32_t>(*tasks), repeat});
    if (pos == text.size()) break;
    if (text[pos] != ',') throw syntax_error(what, text, pos, "',' or the end");
    ++pos;
  }
  TasksPerNode result(parsed);
  if (result.node_count() > kMaxNodes) throw syntax_error(what, text, 0, "fewer nodes");
  return result;
}

TasksPerNode TasksPerNode::uniform(std::uint64_t nodes, std::uint32_t tasks) {
  return TasksPerNode({Run{tasks, nodes}});
}

std::uint64_t TasksPerNode::node_count() const noexcept {
  return node_ends_.empty() ? 0 : node_ends_.back();
}

std::uint64_t TasksPerNode::task_count() const noexcept {
  return task_ends_.empty() ? 0 : task_ends_.back();
}

std::uint32_t TasksPerNode::max_tasks() const noexcept {
  std::uint32_t most = 0;
  for (const Run& run : runs_)
    most = std::max(most, run.tasks);
  return most;
}

std::uint32_t TasksPerNode::tasks_on(std::uint64_t node) const {
  const auto it = std::upper_bound(node_ends_.begin(), node_ends_.end(), node);
  if (it == node_ends_.end()) throw std::out_of_range("node index past the last node");
  return runs_[static_cast<std::size_t>(it - node_ends_.begin())].tasks;
}

std::uint64_t TasksPerNode::tasks_before(std::uint64_t node) const {
  if (node > node_count()) throw std::out_of_range("node index past the last node");
  const auto it = std::upper_bound(node_ends_.begin(), node_ends_.end(), node);
  if (it == node_ends_.end()) return task_count();
  const auto k = static_cast<std::size_t>(it - node_ends_.begin());
  const std::uint64_t run_first_node = k == 0 ? 0 : node_ends_[k - 1];
  const std::uint64_t run_first_task = k == 0 ? 0 : task_ends_[k - 1];
  return run_first_task + (node - run_first_node) * runs_[k].tasks;
}

std::uint64_t TasksPerNode::node_of_block_rank(std::uint64_t rank) const {
  const auto it = std::upper_bound(task_ends_.begin(), task_ends_.end(), rank);
  if (it == task_ends_.end()) throw std::out_of_range("rank past the last task");
  const auto k = static_cast<std::size_t>(it - task_ends_.begin());
  const std::uint64_t run_first_node = k == 0 ? 0 : node_ends_[k - 1];
  const std::uint64_t run_first_task = k == 0 ? 0 : task_ends_[k - 1];
  return run_first_node + (rank - run_first_task) / runs_[k].tasks;
}

std::string TasksPerNode::to_string() const {
  std::string out;
  for (const Run& run : runs_) {
    if (!out.empty()) out += ',';
    out += std::to_string(run.tasks);
    if (run.nodes > 1) out += "(x" + std::to_string(run.nodes) + ")";
  }
  return out;
}

}  // namespace primus
