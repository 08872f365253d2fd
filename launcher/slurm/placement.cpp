#include "slurm/placement.hpp"

#include <algorithm>
#include <sstream>

namespace primus::launch {
namespace {

std::string joined(const std::vector<std::string>& nodes) {
  std::string text;
  for (const std::string& node : nodes)
    text += (text.empty() ? "" : ",") + node;
  return text;
}

// The words of a State value: "DOWN+NOT_RESPONDING" -> DOWN, NOT_RESPONDING; a trailing '*'
// (sinfo's mark for a node not responding) counts as NOT_RESPONDING.
std::vector<std::string> state_words(std::string state) {
  std::vector<std::string> words;
  if (!state.empty() && state.back() == '*') {
    state.pop_back();
    words.emplace_back("NOT_RESPONDING");
  }
  std::istringstream in(state);
  for (std::string word; std::getline(in, word, '+');)
    if (!word.empty()) words.push_back(word);
  return words;
}

// `count` of `usable` from the `rotation`-th on, cyclically, back in the allocation's order.
std::vector<std::string> window(const std::vector<std::string>& usable, std::size_t count,
                                std::uint32_t rotation) {
  std::vector<std::size_t> taken;
  taken.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    taken.push_back((rotation + i) % usable.size());
  std::sort(taken.begin(), taken.end());
  std::vector<std::string> nodes;
  nodes.reserve(taken.size());
  for (const std::size_t i : taken)
    nodes.push_back(usable[i]);
  return nodes;
}

}  // namespace

bool places_ranks(const NodePolicy& policy) {
  return policy.spare_nodes > 0 || policy.elastic_min.has_value();
}

std::optional<Placement> place(const std::vector<std::string>& allocation,
                               const std::set<std::string>& excluded, std::uint32_t rank_nodes,
                               std::uint32_t tasks_per_node, const NodePolicy& policy,
                               std::uint32_t rotation, std::string& why) {
  std::vector<std::string> usable;
  for (const std::string& node : allocation)
    if (excluded.count(node) == 0) usable.push_back(node);
  if (rank_nodes == 0 || tasks_per_node == 0) {
    why = "no ranks to place";
    return std::nullopt;
  }
  Placement p;
  p.tasks_per_node = tasks_per_node;
  if (usable.size() >= rank_nodes) {
    p.nodes = window(usable, rank_nodes, rotation);
    p.world_size = rank_nodes * tasks_per_node;
    {
      p.note = "the ranks run on " + joined(p.nodes) + " (" +
               std::to_string(usable.size() - rank_nodes) + " spare node" +
               (usable.size() - rank_nodes == 1 ? "" : "s") + " left)";
    }
    return p;
  }
  const std::string healthy = std::to_string(usable.size()) + " usable node" +
                              (usable.size() == 1 ? "" : "s") + " (" +
                              (usable.empty() ? std::string("none") : joined(usable)) + ")";
  if (!policy.elastic_min) {
    why = "the ranks need " + std::to_string(rank_nodes) + " nodes and the job has " + healthy +
          (policy.spare_nodes > 0 ? ": no spare node is left" : "") +
          " (--primus-elastic=MIN_NODES lets them go on with fewer)";
    return std::nullopt;
  }
  for (std::uint32_t n = static_cast<std::uint32_t>(usable.size());
       n >= *policy.elastic_min && n > 0; --n) {
    const std::uint64_t ranks = std::uint64_t{n} * tasks_per_node;
    if (policy.global_batch && *policy.global_batch % ranks != 0) continue;
    p.nodes = window(usable, n, rotation);
    p.world_size = static_cast<std::uint32_t>(ranks);
    p.shrunk = true;
    p.note = "the ranks go on with " + std::to_string(p.world_size) + " ranks on " +
             std::to_string(n) + " node" + (n == 1 ? "" : "s") + " (" + joined(p.nodes) +
             ") instead of " + std::to_string(rank_nodes) +
             " (--primus-elastic=" + std::to_string(*policy.elastic_min) + ")";
    if (n < usable.size()) {
      p.note += "; " + std::to_string(usable.size()) +
                " nodes are usable, and this is the largest count whose rank count divides the "
                "global batch of " +
                std::to_string(*policy.global_batch);
    }
    return p;
  }
  why = "the ranks need at least " + std::to_string(*policy.elastic_min) +
        " nodes (--primus-elastic) and the job has " + healthy;
  if (policy.global_batch && usable.size() >= *policy.elastic_min) {
    why += ", none of whose counts from " + std::to_string(*policy.elastic_min) + " up times " +
           std::to_string(tasks_per_node) + " ranks divides the global batch of " +
           std::to_string(*policy.global_batch);
  }
  return std::nullopt;
}

NodeVerdict judge_node(const std::map<std::string, std::string>& node_record, bool still_in_job) {
  const auto state = node_record.find("State");
  const std::string text = state != node_record.end() ? state->second : std::string();
  for (const std::string& word : state_words(text)) {
    if (word == "DOWN" || word == "FAIL" || word == "NOT_RESPONDING" || word == "POWERED_DOWN" ||
        word == "POWERING_DOWN") {
      std::string reason = "State=" + text;
      if (const auto r = node_record.find("Reason"); r != node_record.end() && !r->second.empty()) {
        reason += " Reason=" + r->second;
      }
      return {true, reason};
    }
  }
  if (!still_in_job) return {true, "slurmctld removed it from the job (State=" + text + ")"};
  return {false, ""};
}

std::set<std::string> suspect_nodes(const std::vector<std::string>& step_nodes,
                                    std::uint32_t tasks_per_node,
                                    const std::map<std::uint32_t, std::string>& rank_nodes,
                                    const std::set<std::uint32_t>& reported) {
  std::map<std::string, std::uint32_t> ends;
  for (const std::uint32_t rank : reported) {
    const auto node = rank_nodes.find(rank);
    if (node != rank_nodes.end()) ++ends[node->second];
  }
  std::set<std::string> suspects;
  for (const std::string& node : step_nodes)
    if (ends[node] < tasks_per_node) suspects.insert(node);
  return suspects;
}

std::map<std::string, std::string> RankFailures::add(
    const std::vector<RankEnd>& ends, const std::map<std::uint32_t, std::string>& nodes,
    int preempted_status) {
  std::map<std::string, std::string> reached;
  for (const RankEnd& end : ends) {
    const int code = exit_code(end.wait_status);
    if (end.after_stop_request || code == 0 || code == preempted_status || end.rank < 0) continue;
    const auto node = nodes.find(static_cast<std::uint32_t>(end.rank));
    if (node == nodes.end()) continue;
    std::set<std::uint32_t>& failed = ranks_[node->second];
    failed.insert(static_cast<std::uint32_t>(end.rank));
    if (failed.size() < threshold_ || reached_.count(node->second) != 0) continue;
    reached_.insert(node->second);
    std::string list;
    std::size_t i = 0;
    for (const std::uint32_t rank : failed) {
      list += i == 0 ? "" : (i + 1 == failed.size() ? " and " : ", ");
      list += std::to_string(rank);
      ++i;
    }
    reached[node->second] = (failed.size() == 1 ? "rank " : "ranks ") + list + " failed there";
  }
  return reached;
}

bool hardware_error(const std::string& exception_text) {
  static const char* const kSigns[] = {"uncorrectable ECC error",
                                       "ECC error encountered",
                                       "fallen off the bus",
                                       "NVRM: Xid",
                                       "Xid error",
                                       "cudaErrorECCUncorrectable",
                                       "cudaErrorHardwareStackError",
                                       "cudaErrorUnknown",
                                       "CUDA error: unknown error",
                                       "CUDA error: uncorrectable",
                                       "NCCL error: unhandled system error",
                                       "unhandled cuda error"};
  for (const char* sign : kSigns)
    if (exception_text.find(sign) != std::string::npos) return true;
  return false;
}

}  // namespace primus::launch
