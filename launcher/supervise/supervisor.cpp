// The one supervisor loop (supervisor.hpp).
#include "supervise/supervisor.hpp"

#include <iostream>

#include "primus/common/error.hpp"
#include "supervise/resume.hpp"
#include "supervise/supervision.hpp"

namespace primus::launch {

std::optional<std::string> resolve_resume(const std::filesystem::path& root,
                                          const std::optional<std::string>& given, EventLog& events,
                                          const std::string& node) {
  const NewestCheckpoint newest = find_newest_checkpoint(root, std::chrono::minutes(10));
  for (const std::string& why : newest.skipped)
    std::cerr << "primus-launch: not resuming from " << why << "\n";
  std::optional<std::string> point = resume_point(newest, given);
  if (newest.path) {
    std::cerr << "primus-launch: resuming from step " << *newest.step << " (" << *newest.path
              << ")\n";
  } else if (point) {
    std::cerr << "primus-launch: starting from " << *point << " (PRIMUS_RESUME)\n";
  }
  if (point) {
    events.write({"resuming",
                  std::nullopt,
                  node,
                  {{"checkpoint", *point},
                   {"step", newest.step ? std::to_string(*newest.step) : ""},
                   {"source", newest.path ? "the newest valid checkpoint" : "PRIMUS_RESUME"}}});
  }
  return point;
}

void set_aside_checkpoints(const std::filesystem::path& root, EventLog& events,
                           const std::string& node) {
  const std::optional<std::string> moved = set_aside_root(root, std::chrono::minutes(10));
  if (!moved) return;
  std::cerr << "primus-launch: --primus-fresh: moved the earlier checkpoints aside to " << *moved
            << "\n";
  events.write({"set-aside", std::nullopt, node, {{"checkpoints", root.string()}, {"to", *moved}}});
}

int supervise(const SupervisedJob& job, const JobDir& job_dir, AttemptRunner& runner,
              EventLog& events, JobMonitor& monitor) {
  if (job.fresh) {
    try {
      set_aside_checkpoints(job.ckpt_root, events, job.node);
    } catch (const Error& e) {
      std::cerr << "primus-launch: " << e.what() << "; no rank was started\n";
      events.write(
          {"failed", std::nullopt, job.node, {{"exit_status", "1"}, {"reason", e.what()}}});
      monitor.set_state("failed");
      return 1;
    }
  }
  // The policy's one state: the ranks' own failures by node over the allocation's attempts.
  RankFailures failures(std::max<std::uint32_t>(1, job.exclude_after));
  const std::uint32_t allocation = job.situation.allocation;
  std::uint32_t rejoins = 0;  // each counts as a restart against --primus-max-restarts
  for (std::uint32_t attempt = 0;; ++attempt) {
    events.set_attempt(attempt);
    std::string why;
    const std::optional<std::uint32_t> world = runner.prepare(attempt, why);
    if (!world) {
      std::cerr << "primus-launch: cannot start the ranks: " << why << "\n";
      events.write({"failed", std::nullopt, job.node, {{"exit_status", "1"}, {"reason", why}}});
      monitor.set_state("failed");
      return 1;
    }
    AttemptPlan plan;
    plan.attempt = attempt;
    plan.world_size = *world;
    plan.resume = resolve_resume(job.ckpt_root, job.given_resume, events, job.node);
    plan.log_dir = job_dir.attempt_logs(allocation, attempt);
    const std::uint32_t restarts = attempt + rejoins;
    plan.rejoins_left =
        job.situation.max_restarts > restarts ? job.situation.max_restarts - restarts : 0;
    DataTasks data(*world);  // every attempt opens the queue again, from its checkpoint
    if (job.dynamic_data) plan.data = &data;
    monitor.start_attempt(attempt, *world);

    const AttemptReport report = runner.run(plan);
    AttemptFacts facts = facts_of(report, *world);
    rejoins += report.rejoins;
    JobSituation situation = job.situation;
    situation.attempt = attempt + rejoins;
    runner.examine(situation, report, facts);
    if (job.exclusions != nullptr) situation.excluded = job.exclusions->nodes();
    const Action action = after_attempt(situation, facts, failures);

    Supervision supervision(events, monitor, job.exclusions);
    supervision.node = job.node;
    supervision.job_id = job.job_id;
    supervision.requeue_target = job.requeue_target;
    supervision.allocation = allocation;
    supervision.attempt = attempt;
    supervision.max_restarts = job.situation.max_restarts;
    supervision.max_requeues = job.situation.max_requeues;
    supervision.preempted_status = job.situation.preempted_status;
    supervision.log_dir = plan.log_dir;
    supervision.resume = plan.resume;
    supervision.checkpoint = report.checkpoint;
    supervision.checkpoint_committed = report.checkpoint_committed;
    supervision.any_rank_connected = report.any_rank_connected;
    if (carry_out(action, facts, supervision)) continue;
    return action.exit_status;
  }
}

}  // namespace primus::launch
