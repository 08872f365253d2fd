// Carrying out the policy's Action after an attempt (supervision.hpp).
#include "supervise/supervision.hpp"

#include <iostream>

#include "slurm/slurm_queries.hpp"
#include "supervise/attempt_report.hpp"

namespace primus::launch {
namespace {

std::string node_of(const AttemptFacts& facts, const Supervision& s, int rank) {
  if (s.exclusions == nullptr) return s.node;  // one machine: every rank runs here
  const auto it = facts.nodes.find(static_cast<std::uint32_t>(rank));
  return it != facts.nodes.end() ? it->second : std::string("?");
}

void restart(Supervision& s, const std::string& message, const std::string& reason) {
  s.monitor.set_state("restarting");
  std::cerr << "primus-launch: " << message << "\n";
  s.events.set_attempt(s.attempt + 1);
  std::vector<std::pair<std::string, std::string>> details = {
      {"restart", std::to_string(s.attempt + 1)}};
  if (!reason.empty()) details.emplace_back("reason", reason);
  s.events.write({"restarted", std::nullopt, s.node, details});
}

void exclude(Supervision& s, const std::string& where, const std::string& why, bool say) {
  if (s.exclusions == nullptr) return;
  if (say) std::cerr << "primus-launch: excluding " << where << " from this job: " << why << "\n";
  if (s.exclusions->add({where, why, utc_now_ms(), s.allocation, s.attempt})) {
    s.events.write({"node-excluded", std::nullopt, where, {{"reason", why}}});
  }
  s.monitor.set_excluded_nodes(excluded_for_status(*s.exclusions));
}

// "step 48 (DIR)": the checkpoint the ranks committed last in this attempt, else the one it
// started from; nullopt when there is neither.
std::optional<std::string> resumes_from(const Supervision& s) {
  const std::string path = !s.checkpoint.empty() ? s.checkpoint : s.resume.value_or("");
  if (path.empty()) return std::nullopt;
  const std::string name = std::filesystem::path(path).filename().string();
  const auto digits = name.find_first_not_of('0', std::min<std::size_t>(name.size(), 5));
  if (name.rfind("step-", 0) != 0 || name.size() <= 5) return path;
  return "step " + (digits == std::string::npos ? std::string("0") : name.substr(digits)) + " (" +
         path + ")";
}

// Slurm: the ranks stopped as asked; the job is requeued, or primus-launch exits.
void carry_out_stop(const Action& action, const AttemptFacts& facts, Supervision& s) {
  const StopDecision& d = *action.stop;
  explain_stopped_while_starting(action.outcome, s.resume);
  if (!s.checkpoint_committed && s.any_rank_connected &&
      action.outcome.stopped_while_starting.empty()) {
    std::cerr << "primus-launch: the ranks stopped with status " << s.preempted_status
              << " but none reported a committed checkpoint\n";
  }
  s.monitor.set_state(d.requeue                            ? "requeued"
                      : d.reason == StopReason::kUserStop  ? "stopped"
                      : d.reason == StopReason::kCancelled ? "cancelled"
                      : d.reason == StopReason::kPreempted ? "preempted"
                                                           : "failed");
  const std::string checkpoint = s.checkpoint.empty() ? "the newest checkpoint" : s.checkpoint;
  s.events.write({d.event,
                  std::nullopt,
                  s.node,
                  {{"exit_status", std::to_string(d.exit_status)},
                   {"requeues", std::to_string(s.allocation)},
                   {"checkpoint", s.checkpoint}}});
  switch (d.reason) {
    case StopReason::kUserStop:
      std::cerr << "primus-launch: stopped at " << resumes_from(s).value_or("the start")
                << " as asked (primus-launch stop); the job is not requeued: submitting it "
                << "again resumes from there\n";
      break;
    case StopReason::kCancelled:
      std::cerr << "primus-launch: the job is ending (JobState="
                << (facts.job_state.empty() ? "unknown" : facts.job_state)
                << ": cancelled, or scontrol could not say); it is not requeued\n";
      break;
    case StopReason::kPreempted:
    case StopReason::kTimeLimit:
      if (d.requeue) {
        std::cerr << "primus-launch: the ranks stopped ("
                  << (d.reason == StopReason::kPreempted
                          ? "preemption"
                          : "a time limit's warning or a stop signal")
                  << ") after saving " << checkpoint << "; requeueing job " << s.job_id << "\n";
      } else if (facts.job_state == "TIMEOUT") {
        std::cerr << "primus-launch: the job reached its time limit before any warning signal "
                     "and is ending: it is not requeued (submit with --signal=B:USR2@120 "
                     "--requeue, and exec primus-launch in the batch script, to have it "
                     "requeued in time)\n";
      } else {
        std::cerr << "primus-launch: the job stopped at its time limit and was requeued "
                  << s.allocation << " times already (--primus-max-requeues=" << s.max_requeues
                  << "); it is not requeued again\n";
      }
      break;
  }
  if (!d.requeue) return;
  std::vector<std::string> excluded;
  for (const std::string& node : s.exclusions->nodes())
    excluded.push_back(node);
  std::vector<std::pair<std::string, std::string>> details = {{"job", s.requeue_target}};
  if (!excluded.empty()) details.emplace_back("excluded", merged_exclusions("", excluded));
  s.events.write({"requeued", std::nullopt, s.node, details});
  if (const auto error = requeue_job(s.requeue_target, excluded)) {
    std::cerr << "primus-launch: scontrol requeue " << s.requeue_target << " failed: " << *error;
  }
}

// Slurm: nodes were lost; the ranks start again without them, or primus-launch exits.
bool carry_out_lost_nodes(const Action& action, const AttemptFacts& facts, Supervision& s) {
  std::string names;
  for (const auto& [lost, reason] : facts.lost_nodes) {
    names += (names.empty() ? "" : ",") + lost;
    std::cerr << "primus-launch: node " << lost << " was lost (" << reason << ")\n";
    s.events.write({"node-lost", std::nullopt, lost, {{"reason", reason}}});
    exclude(s, lost, action.exclude.at(lost), false);
  }
  if (action.next == Next::kRestart) {
    restart(s,
            "starting the ranks again without " + names +
                ", from the newest committed checkpoint (restart " + std::to_string(s.attempt + 1) +
                ")",
            action.restart_reason);
    return true;
  }
  std::cerr << "primus-launch: the ranks cannot go on after losing " << names << ": "
            << action.not_going_on << "\n";
  s.monitor.set_state("failed");
  s.events.write({"failed",
                  std::nullopt,
                  facts.lost_nodes.begin()->first,
                  {{"exit_status", std::to_string(action.exit_status)},
                   {"reason", "lost " + names + ": " + action.not_going_on}}});
  return false;
}

}  // namespace

std::vector<ExcludedNode> excluded_for_status(const NodeExclusions& exclusions) {
  std::vector<ExcludedNode> nodes;
  for (const Exclusion& e : exclusions.load())
    nodes.push_back({e.node, e.reason});
  return nodes;
}

bool carry_out(const Action& action, const AttemptFacts& facts, Supervision& s) {
  if (action.requeued_by_runner) {  // slurmctld ends this allocation now
    s.monitor.set_state("requeued");
    return false;
  }
  if (action.stop) {
    carry_out_stop(action, facts, s);
    return false;
  }
  if (!facts.lost_nodes.empty() && s.exclusions != nullptr) {
    return carry_out_lost_nodes(action, facts, s);
  }
  const Outcome& outcome = action.outcome;
  if (action.first_blamed) {
    explain_lost_peer(*action.first_blamed, node_of(facts, s, *action.first_blamed),
                      outcome.cause->rank, node_of(facts, s, outcome.cause->rank));
  }
  if (s.exclusions == nullptr) explain_stopped_while_starting(outcome, s.resume);
  if (outcome.verdict == Verdict::kFailed && outcome.cause) {
    if (outcome.cause->rank >= 0) {
      print_root_cause(*outcome.cause, node_of(facts, s, outcome.cause->rank), s.log_dir, s.attempt,
                       facts.hung ? "hung" : "failed first");
    } else {
      std::cerr << "primus-launch: srun ended with " << describe(facts.srun_status)
                << " and not every rank reported how it ended (attempt " << s.attempt << ")\n";
    }
  }
  for (const auto& [where, why] : action.exclude)
    exclude(s, where, why, true);
  if (!action.not_going_on.empty()) {
    std::cerr << "primus-launch: not starting the ranks again: " << action.not_going_on << "\n";
  }
  if (action.next == Next::kRestart) {
    restart(s,
            "starting the ranks again (restart " + std::to_string(s.attempt + 1) + " of " +
                std::to_string(s.max_restarts) + ")",
            "");
    return true;
  }
  s.monitor.set_state(outcome.verdict == Verdict::kFinished  ? "finished"
                      : outcome.verdict == Verdict::kStopped ? "stopped"
                                                             : "failed");
  if (outcome.verdict == Verdict::kFinished) {
    s.events.write({"finished", std::nullopt, s.node, {{"exit_status", "0"}}});
  } else if (outcome.verdict == Verdict::kStopped) {
    if (const auto from = resumes_from(s)) {
      std::cerr << "primus-launch: stopped at " << *from
                << ": the same command resumes from there\n";
    } else {
      std::cerr << "primus-launch: stopped before any checkpoint: the same command starts again\n";
    }
    s.events.write({"finished",
                    std::nullopt,
                    s.node,
                    {{"exit_status", std::to_string(action.exit_status)},
                     {"reason", "the ranks stopped as asked"}}});
  } else {
    const bool ranked = outcome.cause && outcome.cause->rank >= 0;
    const auto rank = ranked ? std::optional<std::uint32_t>(outcome.cause->rank) : std::nullopt;
    s.events.write(
        {"failed",
         rank,
         ranked ? std::optional<std::string>(node_of(facts, s, outcome.cause->rank)) : std::nullopt,
         {{"exit_status", std::to_string(action.exit_status)},
          {"status", outcome.cause ? describe(outcome.cause->wait_status) : ""}}});
  }
  return false;
}

}  // namespace primus::launch
