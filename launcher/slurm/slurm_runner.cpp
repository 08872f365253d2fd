// The attempt runner under Slurm (slurm_runner.hpp).
#include "slurm/slurm_runner.hpp"

#include <slurm/slurm.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "primus/common/hostlist.hpp"
#include "primus/common/parse_number.hpp"
#include "primus/common/ports.hpp"
#include "primus/common/rank_env.hpp"
#include "slurm/lost_nodes.hpp"
#include "slurm/slurm_attempt.hpp"
#include "slurm/slurm_queries.hpp"

namespace primus::launch {

void SlurmRunner::refresh_current_nodes() {
  // A --no-kill job that lost a node holds fewer now (slurmctld's NodeList).
  if (const auto facts = query_job(job_.job); facts && !hosts_of(facts->node_list).empty()) {
    current_nodes_ = hosts_of(facts->node_list);
  }
}

std::set<std::string> SlurmRunner::kept_out() const {
  std::set<std::string> excluded = job_.exclusions->nodes();
  excluded.insert(lost_nodes_.begin(), lost_nodes_.end());
  return excluded;
}

std::optional<std::uint32_t> SlurmRunner::prepare(std::uint32_t attempt, std::string& why) {
  if (!job_.placing) return job_.world_size;
  if (attempt > 0) refresh_current_nodes();
  placement_ = place(current_nodes_, kept_out(), job_.rank_nodes, job_.tasks_per_node, job_.policy,
                     attempt, why);
  if (!placement_) return std::nullopt;
  if (!placement_->note.empty()) std::cerr << "primus-launch: " << placement_->note << "\n";
  Hostlist list;
  for (const std::string& host : placement_->nodes)
    list.push_host(host);
  settings_.events->write({"placed",
                           std::nullopt,
                           settings_.node,
                           {{"nodes", list.compress()},
                            {"ranks", std::to_string(placement_->world_size)},
                            {"shrunk", placement_->shrunk ? "true" : "false"}}});
  return placement_->world_size;
}

std::vector<std::string> SlurmRunner::step_environment(const AttemptPlan& plan) const {
  Environment env = job_.env;
  for (const auto& [name, resolved] : job_.options.all()) {
    const OptionSpec* spec = find_option(name);
    if (spec != nullptr && !spec->env.empty()) env[std::string(spec->env)] = resolved.value;
  }
  if (!lookup(env, "PRIMUS_FRAMEWORK")) env["PRIMUS_FRAMEWORK"] = "pytorch";
  env["PRIMUS_JOB_SECRET"] = job_.secret;
  env["PRIMUS_LAUNCH_LOG_DIR"] = plan.log_dir.string();
  set_attempt_variables(env, plan, settings_.control);
  if (placement_) {  // the sizes of this step and of the allocation as it is now
    env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = std::to_string(plan.world_size);
    env["SLURM_JOB_NUM_NODES"] = env["SLURM_NNODES"] = std::to_string(current_nodes_.size());
  }
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(22, 5, 0) && \
    SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(23, 2, 0)
  // Slurm 22.05's PMIx direct connections race at step start (docs/collectives.md).
  if (!lookup(env, "SLURM_PMIX_DIRECT_CONN")) env["SLURM_PMIX_DIRECT_CONN"] = "false";
#endif
  return environment_entries(env);
}

AttemptReport SlurmRunner::run(const AttemptPlan& plan) {
  SrunStep step;
  step.srun = job_.srun;
  step.argv = {"--export=ALL", "--kill-on-bad-exit=0"};
  if (placement_) {
    Hostlist list;
    for (const std::string& host : placement_->nodes)
      list.push_host(host);
    // Explicit sizes and nodes: after a lost node the allocation's SLURM_* sizes are stale, and
    // srun would ask for the old task count (TESTBED.md, "Losing a node").
    step.argv.push_back("--nodes=" + std::to_string(placement_->nodes.size()));
    step.argv.push_back("--ntasks=" + std::to_string(plan.world_size));
    step.argv.push_back("--ntasks-per-node=" + std::to_string(job_.tasks_per_node));
    step.argv.push_back("--nodelist=" + list.compress());
  }
  if (settings_.label) step.argv.emplace_back("--label");
  step.argv.push_back(job_.task);
  step.argv.emplace_back("--");
  step.argv.push_back(job_.executable);
  step.argv.insert(step.argv.end(), job_.argv.begin() + 1, job_.argv.end());
  step.env = step_environment(plan);
  step.job = job_.job;
  step.requeue_target = job_.requeue_target;
  step.may_requeue_at_time_limit = job_.allocation < job_.max_requeues;
  for (const std::string& excluded : job_.exclusions->nodes())
    step.excluded_nodes.push_back(excluded);
  step.after_start = job_.after_start;
  step.generation_ports = [this](const std::string& step_text, std::uint32_t generation) {
    return generation_ports(step_text, generation);
  };
  Rejoin rejoin(rejoin_settings(settings_, plan));
  AttemptContext context = context_of(settings_, plan, true);
  context.rejoin = &rejoin;
  return run_srun_step(step, settings_, context);
}

std::optional<std::pair<std::uint16_t, std::uint16_t>> SlurmRunner::generation_ports(
    const std::string& step_text, std::uint32_t generation) const {
  // The step's own derived port slot moved on by the generation: every rank learns the ports
  // from the notice, and rank 0's node (MASTER_ADDR) stays, since the replacement runs in the
  // failed rank's own task. Keyed as the plugin keys the step's slot (common/task_env.cpp).
  const auto dot = step_text.find('.');
  const auto job_id = parse_unsigned(step_text.substr(0, dot), ~std::uint64_t{0} >> 1);
  const auto step_id = dot == std::string::npos
                           ? std::nullopt
                           : parse_unsigned(step_text.substr(dot + 1), ~std::uint64_t{0} >> 1);
  if (!job_id || !step_id) return std::nullopt;
  try {
    const Framework framework = parse_framework(job_.options.value_or("primus", "pytorch"));
    const PortRange range =
        parse_port_range(job_.options.value_or("port-range", "20000-29999"), "port_range");
    const bool job_wide = lookup(job_.env, "PRIMUS_SECRET_SCOPE").value_or("") == "job";
    const std::vector<std::uint16_t> block = derive_port_block(
        *job_id, *step_id + generation, range, ports_needed(framework, job_.tasks_per_node),
        job_wide ? std::optional<std::string_view>(job_.secret) : std::nullopt);
    const StepPorts ports =
        assign_ports(framework, job_.tasks_per_node, block, "the derived port slot", "auto");
    return std::make_pair(ports.master_port, ports.primus_port);
  } catch (const std::exception& e) {
    std::cerr << "primus-launch: no ports for generation " << generation << ": " << e.what()
              << "\n";
    return std::nullopt;
  }
}

void SlurmRunner::examine(const JobSituation& job, const AttemptReport& report,
                          AttemptFacts& facts) {
  if (ends_as_a_stop(job, facts)) {
    if (const auto state = query_job(job_.job)) {
      facts.preempted = state->preempted;
      facts.job_state = state->state;
    }
    return;
  }
  if (facts.requeued || report.ends.size() >= facts.world_size) return;
  // Ranks whose wrappers never reported: was their node lost? (docs/architecture.md, "Node
  // failures": the wrappers report every end of a rank they see.)
  std::set<std::uint32_t> reported;
  for (const RankEnd& end : report.ends)
    reported.insert(static_cast<std::uint32_t>(end.rank));
  const std::vector<std::string>& step_nodes = placement_ ? placement_->nodes : job_.job_nodes;
  const auto suspects = suspect_nodes(step_nodes, job_.tasks_per_node, report.nodes, reported);
  if (!suspects.empty()) {
    static const std::chrono::seconds wait =
        query_slurmd_timeout().value_or(std::chrono::seconds(300)) + std::chrono::seconds(10);
    facts.lost_nodes = find_lost_nodes(job_.srun, job_.job, suspects, wait);
  }
  if (!facts.lost_nodes.empty() && job_.placing &&
      job.attempt < std::max(job.max_restarts, job.node_restarts)) {
    refresh_current_nodes();
    std::set<std::string> excluded = kept_out();
    for (const auto& [lost, reason] : facts.lost_nodes)
      excluded.insert(lost);
    facts.placement_after_loss =
        place(current_nodes_, excluded, job_.rank_nodes, job_.tasks_per_node, job_.policy,
              job.attempt + 1, facts.placement_why)
            .has_value();
  }
  for (const auto& [lost, reason] : facts.lost_nodes)
    lost_nodes_.insert(lost);
}

}  // namespace primus::launch
