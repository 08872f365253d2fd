// What both runners share (attempt_runner.hpp).
#include "supervise/attempt_runner.hpp"

namespace primus::launch {

AttemptFacts facts_of(const AttemptReport& report, std::uint32_t world_size) {
  AttemptFacts facts;
  facts.ends = report.ends;
  facts.world_size = world_size;
  // A stop that the ranks reported (Slurm signalled them) is a stop as much as one the launcher
  // forwarded; one after a failure is the launcher's own.
  facts.stop_seen = (report.stop_forwarded || report.ranks_signalled) && !report.ended_for_failure;
  facts.user_stop = report.user_stop;
  facts.hung = report.hung;
  facts.lost_peers = report.lost_peers;
  facts.nodes = report.nodes;
  facts.exceptions = report.exceptions;
  facts.srun_status = report.srun_status;
  facts.requeued = report.requeued;
  return facts;
}

void set_attempt_variables(Environment& env, const AttemptPlan& plan,
                           const ControlServer* control) {
  env["PRIMUS_LAUNCH_RESTARTS"] = std::to_string(plan.attempt);
  if (control != nullptr) env["PRIMUS_CONTROL"] = control->address();
  if (plan.resume) {
    env["PRIMUS_RESUME"] = *plan.resume;
  } else {
    env.erase("PRIMUS_RESUME");
  }
}

std::vector<std::string> environment_entries(const Environment& env) {
  std::vector<std::string> list;
  list.reserve(env.size());
  for (const auto& [name, value] : env) {
    std::string entry = name;
    entry += '=';
    entry += value;
    list.push_back(std::move(entry));
  }
  return list;
}

}  // namespace primus::launch
