// The launcher's one policy after an attempt (policy.hpp).
#include "supervise/policy.hpp"

#include <algorithm>

namespace primus::launch {
namespace {

std::string node_of(const AttemptFacts& facts, std::uint32_t rank) {
  const auto it = facts.nodes.find(rank);
  return it != facts.nodes.end() ? it->second : std::string("?");
}

// The rank found hung is the cause, whatever the others did after it.
void blame_the_hung_rank(Outcome& outcome, const std::vector<RankEnd>& ends, std::uint32_t hung) {
  outcome.verdict = Verdict::kFailed;
  const auto it = std::find_if(ends.begin(), ends.end(),
                               [&](const RankEnd& e) { return e.rank == static_cast<int>(hung); });
  outcome.cause = it != ends.end() ? *it : RankEnd{static_cast<int>(hung), 1 << 8, false, false};
}

bool stopped_as_asked(const Outcome& outcome, const AttemptFacts& facts, int preempted) {
  return outcome.verdict == Verdict::kStopped ||
         std::any_of(facts.ends.begin(), facts.ends.end(),
                     [&](const RankEnd& end) { return exit_code(end.wait_status) == preempted; });
}

// Slurm: ranks that stopped as asked end the allocation as decide_stop says.
Action stop_action(const JobSituation& job, const AttemptFacts& facts, Outcome outcome) {
  StopFacts stop;
  stop.user_stop = facts.user_stop;
  stop.job_state = facts.job_state;
  stop.preempted = facts.preempted;
  stop.requeues_so_far = job.allocation;
  stop.max_requeues = job.max_requeues;
  stop.preempted_status = job.preempted_status;
  Action action;
  action.stop = decide_stop(stop);
  action.next = action.stop->requeue ? Next::kRequeue : Next::kExit;
  action.exit_status = action.stop->exit_status;
  action.outcome = std::move(outcome);
  return action;
}

// Slurm: nodes lost during the attempt are excluded; the ranks go on without them where they
// can be placed again and a restart is left.
Action lost_nodes_action(const JobSituation& job, const AttemptFacts& facts, Outcome outcome) {
  Action action;
  action.outcome = std::move(outcome);
  std::string names;
  for (const auto& [lost, reason] : facts.lost_nodes) {
    names += (names.empty() ? "" : ",") + lost;
    action.exclude[lost] = "lost: " + reason;
  }
  const bool restart_left = job.attempt < std::max(job.max_restarts, job.node_restarts);
  if (job.placing && restart_left && facts.placement_after_loss) {
    action.next = Next::kRestart;
    action.restart_reason = "lost " + names;
    return action;
  }
  if (job.placing && restart_left) {
    action.not_going_on = facts.placement_why;
  } else if (job.placing) {
    action.not_going_on =
        "no restart is left (--primus-max-restarts=" + std::to_string(job.max_restarts) + ")";
  } else {
    action.not_going_on =
        "submit with --no-kill and --primus-spare-nodes=K (K nodes more) or "
        "--primus-elastic=MIN_NODES to go on without it";
  }
  action.next = Next::kExit;
  action.exit_status = facts.srun_status != 0 ? exit_code(facts.srun_status) : 1;
  action.lost_nodes_end = true;
  return action;
}

// Nodes to keep out after a failed attempt: a hung rank's, one whose rank reported a hardware
// error, and one where --primus-exclude-after different ranks failed (node-class failures).
std::map<std::string, std::string> nodes_to_exclude(const AttemptFacts& facts,
                                                    RankFailures& failures, int preempted) {
  std::map<std::string, std::string> exclude;
  if (facts.hung && node_of(facts, *facts.hung) != "?") {
    exclude[node_of(facts, *facts.hung)] = "rank " + std::to_string(*facts.hung) + " hung there";
  }
  for (const auto& [rank, text] : facts.exceptions) {
    if (hardware_error(text) && node_of(facts, rank) != "?") {
      exclude[node_of(facts, rank)] =
          "rank " + std::to_string(rank) + " reported a hardware error: " + text.substr(0, 200);
    }
  }
  for (const auto& [where, why] : failures.add(facts.ends, facts.nodes, preempted))
    exclude.emplace(where, why);
  return exclude;
}

}  // namespace

bool ends_as_a_stop(const JobSituation& job, const AttemptFacts& facts) {
  if (!job.slurm || !facts.stop_seen || facts.requeued) return false;
  return stopped_as_asked(judge(facts.ends, true, job.preempted_status), facts,
                          job.preempted_status);
}

Action after_attempt(const JobSituation& job, const AttemptFacts& facts, RankFailures& failures) {
  const int preempted = job.preempted_status;
  if (facts.requeued) {
    Action action;
    action.exit_status = preempted;
    action.requeued_by_runner = true;
    return action;
  }
  Outcome outcome = judge(facts.ends, facts.stop_seen, preempted);
  if (ends_as_a_stop(job, facts)) {
    return stop_action(job, facts, std::move(outcome));
  }
  if (job.slurm && !facts.lost_nodes.empty()) {
    return lost_nodes_action(job, facts, std::move(outcome));
  }
  Action action;
  if (facts.hung) {
    blame_the_hung_rank(outcome, facts.ends, *facts.hung);
  } else {
    action.first_blamed = blame_the_lost_peer(outcome, facts.ends, facts.lost_peers);
  }
  if (outcome.verdict == Verdict::kFinished && facts.ends.size() < facts.world_size &&
      facts.srun_status != 0) {
    // No report from some task wrappers (killed with the step): srun's status is all there is.
    outcome.verdict = Verdict::kFailed;
    outcome.cause = RankEnd{-1, facts.srun_status, false, false};
  }
  Decision decision = decide(outcome, job.attempt, job.max_restarts, preempted);
  if (outcome.verdict == Verdict::kFailed && job.slurm) {  // one machine: no node to exclude
    for (const auto& [where, why] : nodes_to_exclude(facts, failures, preempted)) {
      if (job.excluded.count(where) == 0) action.exclude[where] = why;
    }
  }
  if (decision.restart && !action.exclude.empty() && !job.placing) {
    // The ranks need every node of the allocation, one of which is now excluded: the job
    // ends as a failure with the cause's status, as with no restart left (issue 39: the
    // restart's status, 0, made it COMPLETED without finishing).
    action.not_going_on =
        "they would need the excluded node (--primus-spare-nodes=K, with K nodes more, lets "
        "them go on without it; a requeue by primus-launch keeps it out)";
    decision = decide(outcome, job.attempt, job.attempt, preempted);
  }
  action.outcome = std::move(outcome);
  action.next = decision.restart ? Next::kRestart : Next::kExit;
  action.exit_status = decision.exit_status;
  return action;
}

}  // namespace primus::launch
