// What primus-launch does once an attempt of the ranks has ended, in both modes (pure: no
// process, no file, no Slurm query; docs/architecture.md "Preemption and requeue", "Node
// failures" and docs/reliability.md's contract). The supervisor gathers what happened (the
// runner's report, and under Slurm what scontrol says) into AttemptFacts, asks after_attempt()
// for the Action, and carries it out: events, messages, exclusions, a requeue, a restart or the
// exit status. Every case of the fault campaign's contract is a row of
// tests/unit/policy_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "slurm/placement.hpp"
#include "supervise/outcome.hpp"

namespace primus::launch {

// What the supervisor knows of the job when an attempt ends.
struct JobSituation {
  bool slurm = false;            // inside an allocation (else one machine)
  std::uint32_t attempt = 0;     // this attempt (restarts done before it)
  std::uint32_t allocation = 0;  // SLURM_RESTART_COUNT: requeues so far
  std::uint32_t max_restarts = 1000;
  std::uint32_t max_requeues = 1000;
  int preempted_status = kExitDefaultPreempted;
  bool placing = false;             // the launcher places the ranks (spares, elastic)
  std::uint32_t node_restarts = 0;  // restarts a lost node may take beyond max_restarts
  std::set<std::string> excluded;   // nodes excluded before this attempt ended
};

// What happened in the attempt, as the runner reported it (plus scontrol's view under Slurm).
struct AttemptFacts {
  std::vector<RankEnd> ends;  // in the order the ranks ended
  std::uint32_t world_size = 0;
  // A stop reached the ranks (the launcher forwarded it, or Slurm signalled them), not a stop
  // that the launcher sent after a failure.
  bool stop_seen = false;
  bool user_stop = false;                             // primus-launch stop
  std::optional<std::uint32_t> hung;                  // the rank that hung, when one did
  std::map<std::uint32_t, std::uint32_t> lost_peers;  // rank -> the peer it lost (its report)
  std::map<std::uint32_t, std::string> nodes;         // rank -> node (Slurm)
  std::map<std::uint32_t, std::string> exceptions;    // rank -> "Type: message"
  int srun_status = 0;                                // srun's wait status (Slurm)
  bool requeued = false;  // the runner requeued the job itself (a stop past Slurm's deadline)
  // Slurm: nodes found lost after the attempt (node -> why), and, when some were, whether the
  // ranks can be placed again without them (nullopt: they cannot, and `placement_why` says
  // why).
  std::map<std::string, std::string> lost_nodes;
  bool placement_after_loss = false;
  std::string placement_why;
  // Slurm, after a stop: JobState and PreemptTime as scontrol reported them.
  std::string job_state;
  bool preempted = false;
};

enum class Next {
  kRestart,  // start another attempt in this allocation
  kRequeue,  // requeue the job (scontrol requeue), then exit with `exit_status`
  kExit,     // exit with `exit_status`
};

struct Action {
  Next next = Next::kExit;
  int exit_status = 0;
  Outcome outcome;                   // the verdict and the root cause
  std::optional<int> first_blamed;   // the rank blamed before the blame moved to a lost peer
  std::optional<StopDecision> stop;  // Slurm: the attempt stopped as asked, and what that means
  std::map<std::string, std::string> exclude;  // nodes to exclude now (node -> why)
  std::string restart_reason;                  // a restart without lost nodes: "lost n3"
  // Why the ranks do not go on (a lost node with no way on, an excluded node they need);
  // empty otherwise.
  std::string not_going_on;
  bool lost_nodes_end = false;      // ended for lost nodes (the failed event names the node)
  bool requeued_by_runner = false;  // `requeued`: nothing more to do
};

// Whether the attempt ends as a stop under Slurm (the ranks stopped as asked after a stop
// reached them): then the supervisor asks scontrol how the job stands (AttemptFacts' job_state
// and preempted) instead of looking for lost nodes.
bool ends_as_a_stop(const JobSituation& job, const AttemptFacts& facts);

// The next step after an attempt. `failures` counts the ranks' own failures by node over the
// allocation's attempts (--primus-exclude-after): the policy's one state, updated here.
Action after_attempt(const JobSituation& job, const AttemptFacts& facts, RankFailures& failures);

}  // namespace primus::launch
