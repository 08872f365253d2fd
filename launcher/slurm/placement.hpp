// Where the ranks of an attempt run under Slurm, and which nodes are lost (pure: no process, no
// file). docs/architecture.md, "Node failures": with --primus-spare-nodes=K the ranks use K
// nodes fewer than the job holds, and after a lost node they start again on healthy ones at the
// same world size; with --primus-elastic=MIN they start again on fewer nodes (at least MIN,
// the rank count dividing the global batch); otherwise the job ends.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "supervise/outcome.hpp"

namespace primus::launch {

// What the user asked for (validated by the option table).
struct NodePolicy {
  std::uint32_t spare_nodes = 0;              // --primus-spare-nodes
  std::optional<std::uint32_t> elastic_min;   // --primus-elastic
  std::optional<std::uint64_t> global_batch;  // --primus-global-batch-size, for elastic
};

// Whether the launcher places the ranks itself (explicit --nodes, --ntasks, --nodelist for
// every step) rather than leaving the layout to srun's defaults.
bool places_ranks(const NodePolicy& policy);

struct Placement {
  std::vector<std::string> nodes;  // the step's nodes, in the allocation's order
  std::uint32_t tasks_per_node = 0;
  std::uint32_t world_size = 0;  // nodes.size() * tasks_per_node
  bool shrunk = false;           // fewer nodes than `rank_nodes`: --primus-elastic
  std::string note;              // what was chosen and why, for the user (empty: nothing to say)
};

// The nodes for the ranks of an attempt: `allocation` (the job's nodes now, in Slurm's order)
// less `excluded`, `rank_nodes` of them at full size, else, with an elastic minimum, the
// largest count from that minimum up whose rank count divides the global batch (when one is
// given). The nodes are a window of the usable ones, from the `rotation`-th on (cyclically), in
// the allocation's order (Slurm's, which block-distributes the ranks in it): where spare nodes
// are left, a restart with the next rotation puts other ranks on each node, so that a bad node
// shows with different ranks and a rank's own bug does not make healthy nodes look bad. nullopt
// with `why` set when no placement is possible.
std::optional<Placement> place(const std::vector<std::string>& allocation,
                               const std::set<std::string>& excluded, std::uint32_t rank_nodes,
                               std::uint32_t tasks_per_node, const NodePolicy& policy,
                               std::uint32_t rotation, std::string& why);

// A node as slurmctld reports it (scontrol show node -o): lost when its state is DOWN, FAIL or
// NOT_RESPONDING (slurmctld stopped hearing from its slurmd), or when the job no longer holds
// it (slurmctld removed it from a --no-kill job). `reason` says which, for events and errors.
struct NodeVerdict {
  bool lost = false;
  std::string reason;
};
NodeVerdict judge_node(const std::map<std::string, std::string>& node_record, bool still_in_job);

// Which of the step's nodes to check after a failed attempt: those where fewer ranks' task
// wrappers reported how their rank ended than the node held (a wrapper reports even a rank
// killed by a signal; one that could not was killed with its node, or its node is gone).
// `rank_nodes`: rank -> node, as the wrappers said hello; `reported`: ranks whose wrapper
// reported an end.
std::set<std::string> suspect_nodes(const std::vector<std::string>& step_nodes,
                                    std::uint32_t tasks_per_node,
                                    const std::map<std::uint32_t, std::string>& rank_nodes,
                                    const std::set<std::uint32_t>& reported);

// Failures of ranks by node, over the attempts of an allocation: a node where `threshold`
// different ranks failed on their own (not stopped by the launcher after another's failure) is
// to be excluded (--primus-exclude-after). Pure.
class RankFailures {
 public:
  explicit RankFailures(std::uint32_t threshold) : threshold_(threshold) {}
  // Counts an attempt's ends (`nodes`: rank -> node); returns the nodes that reach the threshold
  // with this attempt, each with its reason ("ranks 0 and 2 failed there").
  std::map<std::string, std::string> add(const std::vector<RankEnd>& ends,
                                         const std::map<std::uint32_t, std::string>& nodes,
                                         int preempted_status);

 private:
  std::uint32_t threshold_;
  std::map<std::string, std::set<std::uint32_t>> ranks_;
  std::set<std::string> reached_;
};

// Whether what a rank raised reads as a failure of its node's hardware (an uncorrectable ECC
// error, a GPU fallen off the bus, an Xid, NCCL's or CUDA's report of a system or device error)
// rather than of the program: a node-class failure that excludes the node at once. Pure.
bool hardware_error(const std::string& exception_text);

}  // namespace primus::launch
