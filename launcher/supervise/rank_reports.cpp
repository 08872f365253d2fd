// The ranks' reports of one attempt, read once for both runners (rank_reports.hpp).
#include "supervise/rank_reports.hpp"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <utility>

namespace primus::launch {
namespace {

std::string fixed_seconds(double seconds) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(3) << seconds;
  return text.str();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

AttemptContext context_of(const RunnerSettings& settings, const AttemptPlan& plan, bool slurm) {
  AttemptContext context;
  context.attempt = plan.attempt;
  context.world_size = plan.world_size;
  context.node = settings.node;
  context.preempted_status = settings.preempted_status;
  context.slurm = slurm;
  context.control = settings.control;
  context.events = settings.events;
  context.monitor = settings.monitor;
  context.data = plan.data;
  context.resume_point = plan.resume.has_value();
  return context;
}

Rejoin::Settings rejoin_settings(const RunnerSettings& settings, const AttemptPlan& plan) {
  Rejoin::Settings s;
  s.enabled = settings.rejoin && settings.control != nullptr;
  s.world_size = plan.world_size;
  s.limit = plan.rejoins_left;
  s.deadline = settings.rejoin_deadline;
  return s;
}

RankReports::RankReports(const AttemptContext& context)
    : context_(context), started_(Clock::now()), watch_(context.world_size) {}

std::optional<std::string> RankReports::node_of(std::uint32_t rank) const {
  if (!context_.slurm) return context_.node;  // one machine: every rank runs here
  const auto it = report_.nodes.find(rank);
  return it != report_.nodes.end() ? std::optional<std::string>(it->second) : std::nullopt;
}

void RankReports::send_data(const std::vector<DataMessage>& messages) {
  for (const DataMessage& m : messages)
    context_.control->send(m.rank, m.line);
}

std::set<std::uint32_t> RankReports::silent() const {
  std::set<std::uint32_t> silent = reported_;
  silent.insert(wrappers_gone_.begin(), wrappers_gone_.end());
  return silent;
}

void RankReports::on_hello(const Report& r) {
  if (r.attempt && *r.attempt != context_.attempt) return;  // a rank of an earlier attempt
  if (context_.slurm && !r.node.empty()) report_.nodes[r.rank] = r.node;
  if (r.wrapper) {
    wrappers_.insert(r.rank);
    if (report_.step.empty() && !r.step.empty()) report_.step = r.step;
  } else {
    report_.any_rank_connected = true;
    watch_.hello(r.rank, Clock::now());
  }
}

void RankReports::on_event(const Report& r) {
  EventLog& events = *context_.events;
  if (r.event == "rendezvous") {
    if (!r.wrapper) watch_.rendezvous(r.rank);
  } else if (r.event == "ready") {
    if (!r.wrapper) watch_.ready(r.rank);
    if (!r.wrapper && ready_.insert(r.rank).second && ready_.size() == context_.world_size) {
      events.write(
          {"ranks-ready", std::nullopt, context_.node, {{"seconds", seconds_since(started_)}}});
    }
  } else if (r.event == "stop-signal") {
    if (report_.ended_for_failure) return;  // the launcher's SIGTERM after a failure: not a stop
    if (context_.data != nullptr) send_data(context_.data->order_checkpoint(true));
    // On one machine the launcher is the only one to signal the ranks: it has said so already.
    if (!context_.slurm) return;
    if (!report_.ranks_signalled && !report_.stop_forwarded) {
      events.write({"stop-requested",
                    r.rank,
                    node_of(r.rank),
                    {{"source",
                      (r.signal.empty() ? std::string("a signal") : r.signal) + " to the ranks"}}});
    }
    report_.ranks_signalled = true;
  } else if (r.event == "rejoinable" || r.event == "rejoin-waiting") {
    if (!r.wrapper && context_.rejoin != nullptr) on_rejoin_event(r);
  } else if (r.event == "replacement") {
    // Under srun the failed rank's task wrapper says where its replacement came from.
    if (r.wrapper && r.replacement == "standby") replacement_from_standby();
  } else if (r.event == "rejoin-off") {
    if (!r.wrapper && context_.rejoin != nullptr) context_.rejoin->left(r.rank);
  } else if (r.event == "first-step") {
    if (r.wrapper || context_.rejoin == nullptr || !r.generation) return;
    if (const auto first = context_.rejoin->first_step(*r.generation, Clock::now())) {
      if (recovery_ && recovery_->state == "rejoined") {
        recovery_->state = "done";
        recovery_->phase.clear();
        recovery_->first_step_seconds = first->after_rejoin;
        recovery_->recovery_seconds = first->after_failure;
        recovery_changed();
      }
      events.write({"rejoin-first-step",
                    r.rank,
                    node_of(r.rank),
                    {{"generation", std::to_string(*r.generation)},
                     {"after_rejoin_seconds", fixed_seconds(first->after_rejoin)},
                     {"after_failure_seconds", fixed_seconds(first->after_failure)}}});
    }
  } else if (r.event == "checkpoint-started" || r.event == "checkpoint-committed") {
    const bool committed = r.event == "checkpoint-committed";
    if (committed) {
      report_.checkpoint_committed = true;
      report_.checkpoint = r.path;
    }
    std::vector<std::pair<std::string, std::string>> details = {
        {"step", r.steps ? std::to_string(*r.steps) : ""}};
    if (committed || !r.path.empty()) details.emplace_back("path", r.path);
    events.write({r.event, r.rank, node_of(r.rank), details});
  }
}

void RankReports::on_rejoin_event(const Report& r) {
  Rejoin& rejoin = *context_.rejoin;
  const std::uint32_t generation = r.generation.value_or(0);
  if (r.event == "rejoin-waiting") {
    rejoin.waiting(r.rank, generation, Clock::now());
    return;
  }
  const auto failed = rejoin.failed_rank();
  if (failed && r.restore_seconds && generation == rejoin.generation()) {
    restore_slowest_ = std::max(restore_slowest_, *r.restore_seconds);
    ++restore_sources_[r.restore_source.empty() ? std::string("file") : r.restore_source];
  }
  const auto phases = rejoin.rejoinable(r.rank, generation, Clock::now());
  if (!phases || !failed) return;
  std::string sources;
  for (const auto& [source, ranks] : restore_sources_)
    sources += (sources.empty() ? "" : ", ") + source + " " + std::to_string(ranks);
  restore_sources_.clear();
  const double restore = std::exchange(restore_slowest_, 0.0);
  watch_.rejoined(Clock::now());
  ++report_.rejoins;
  replaced_end_.reset();
  const auto fixed = fixed_seconds;
  if (recovery_) {
    recovery_->state = "rejoined";
    recovery_->phase = "first-step";
    recovery_->tear_down_seconds = phases->tear_down;
    recovery_->place_seconds = phases->place;
    recovery_->regroup_seconds = phases->regroup;
    recovery_->restore_seconds = restore;
    recovery_->rejoin_seconds = phases->total();
    recovery_changed();
  }
  context_.events->write(
      {"rejoined",
       *failed,
       node_of(*failed),
       {{"generation", std::to_string(rejoin.generation())},
        {"seconds", fixed(phases->total())},
        {"detect_seconds", fixed(recovery_ ? recovery_->detect_seconds.value_or(0) : 0.0)},
        {"tear_down_seconds", fixed(phases->tear_down)},
        {"place_seconds", fixed(phases->place)},
        {"regroup_seconds", fixed(phases->regroup)},
        {"restore_seconds", fixed(restore)},
        {"restore_sources", sources},
        {"replacement", from_standby_ ? "standby" : "started"}}});
  std::cerr << "primus-launch: the ranks go on in generation " << rejoin.generation()
            << " with a new rank " << *failed << (from_standby_ ? " from the standby" : "")
            << " (rejoined in " << fixed(phases->total()) << " s)\n";
}

RankAction RankReports::rejoin_failed(const std::string& why) {
  if (context_.rejoin == nullptr || !context_.rejoin->under_way()) return RankAction::kNone;
  context_.rejoin->give_up();
  if (replaced_end_) {
    report_.ends.insert(report_.ends.begin(), *replaced_end_);
    replaced_end_.reset();
  }
  context_.events->write({"rejoin-failed", std::nullopt, context_.node, {{"reason", why}}});
  if (recovery_) {
    recovery_->state = "failed";
    recovery_->phase.clear();
    recovery_->reason = why;
    recovery_changed();
  }
  std::cerr << "primus-launch: the rejoin failed: " << why << "; ending the ranks\n";
  report_.ended_for_failure = true;
  return RankAction::kEndForFailure;
}

void RankReports::replacement_started(std::uint32_t rank, bool from_standby) {
  from_standby_ = from_standby;
  watch_.replaced(rank, Clock::now());
  reported_.erase(rank);
  if (recovery_ && recovery_->state == "under-way") {
    recovery_->phase = "regroup";
    recovery_->replacement = from_standby ? "standby" : "started";
    recovery_changed();
  }
}

void RankReports::replacement_from_standby() {
  from_standby_ = true;
  if (recovery_ && (recovery_->state == "under-way" || recovery_->state == "rejoined")) {
    recovery_->replacement = "standby";
    recovery_changed();
  }
}

void RankReports::rejoin_began(std::uint32_t rank, double detect_seconds) {
  RecoveryStatus r;
  r.state = "under-way";
  r.phase = "tear-down";
  r.rank = rank;
  r.detect_seconds = detect_seconds;
  r.generation = context_.rejoin->generation() + 1;
  r.failure_time = unix_now();
  recovery_ = std::move(r);
  recovery_changed();
}

void RankReports::recovery_changed() {
  if (context_.monitor != nullptr && recovery_) context_.monitor->set_recovery(*recovery_);
}

RankAction RankReports::handle(const Report& r) {
  if (context_.monitor != nullptr) context_.monitor->report(r);
  switch (r.kind) {
    case ReportKind::kData:
      if (context_.data != nullptr) {
        send_data(context_.data->receive(r.rank, r.payload));
      } else {
        context_.control->send(r.rank, data_mode_error());
      }
      return RankAction::kNone;
    case ReportKind::kHello:
      on_hello(r);
      return RankAction::kNone;
    case ReportKind::kHeartbeat:
      if (!r.wrapper) watch_.heard(r.rank, Clock::now());
      if (r.steps && (steps_.count(r.rank) == 0 || *r.steps > steps_[r.rank])) {
        steps_[r.rank] = *r.steps;
        watch_.advanced(r.rank, Clock::now());
      }
      return RankAction::kNone;
    case ReportKind::kEvent:
      on_event(r);
      return RankAction::kNone;
    case ReportKind::kException:
      report_.exceptions[r.rank] = r.exception + ": " + r.message;
      if (r.peer && *r.peer != r.rank) report_.lost_peers[r.rank] = *r.peer;
      std::cerr << "primus-launch: rank " << r.rank << " raised " << r.exception << ": "
                << r.message << (r.where.empty() ? "" : " (" + r.where + ")") << "\n";
      return RankAction::kNone;
    case ReportKind::kExit:
      // A wrapper's report of its rank's end (srun step); the first one counts.
      if (!r.wrapper || !reported_.insert(r.rank).second) return RankAction::kNone;
      return rank_ended(r.rank, r.wait_status);
    case ReportKind::kGoodbye:
      if (r.wrapper && wrappers_.count(r.rank) != 0) wrappers_gone_.insert(r.rank);
      if (!r.wrapper) watch_.goodbye(r.rank, Clock::now());  // it must end within the timeout
      if (!r.wrapper && context_.data != nullptr) send_data(context_.data->rank_gone(r.rank));
      return RankAction::kNone;
    case ReportKind::kScalars:
    case ReportKind::kOther:
      return RankAction::kNone;
  }
  return RankAction::kNone;
}

RankAction RankReports::rank_ended(std::uint32_t rank, int wait_status) {
  watch_.ended(rank);
  report_.ends.push_back({static_cast<int>(rank), wait_status, stopping()});
  const int code = exit_code(wait_status);
  const bool preempted = code == context_.preempted_status;
  // Under srun an end with the preempted status is a stop that Slurm sent the ranks.
  const bool as_asked = context_.slurm && preempted;
  if (code != 0 && !as_asked && !stopping()) return rank_failed(rank, wait_status);
  Rejoin* rejoin = context_.rejoin;
  if (rejoin != nullptr && rejoin->under_way() && rejoin->failed_rank() != rank) {
    // A survivor that ends will never rejoin (it had finished its loop when the failure came).
    return rejoin_failed("rank " + std::to_string(rank) + " ended (" + describe(wait_status) +
                         ") while the others waited to rejoin");
  }
  if (as_asked && !report_.ended_for_failure) report_.ranks_signalled = true;
  if (code != 0 && !preempted && stopping() && !report_.ended_for_failure) {
    // Killed by the stop before it was ready, or failed: the others cannot commit a checkpoint
    // without it, and waiting for them would only reach the deadline.
    std::cerr << "primus-launch: rank " << rank << " ended with " << describe(wait_status)
              << " during the stop" << (ready_.count(rank) != 0 ? "" : ", before it was ready")
              << "; ending the other ranks\n";
    return RankAction::kEndNow;
  }
  return RankAction::kNone;
}

RankAction RankReports::rank_failed(std::uint32_t rank, int wait_status) {
  Rejoin* rejoin = context_.rejoin;
  if (rejoin != nullptr && rejoin->under_way() && rejoin->failed_rank() == rank && !replaced_end_) {
    // A hung rank that its rejoin had killed (check_hang).
    replaced_end_ = report_.ends.back();
    report_.ends.pop_back();
    return RankAction::kRejoin;
  }
  context_.events->write({"rank-failed", rank, node_of(rank), {{"status", describe(wait_status)}}});
  if (rejoin != nullptr && rejoin->under_way()) {
    return rejoin_failed("rank " + std::to_string(rank) + " failed too (" + describe(wait_status) +
                         ")");
  }
  std::string why;
  if (rejoin != nullptr &&
      rejoin->begin(rank, context_.resume_point || report_.checkpoint_committed, Clock::now(),
                    why)) {
    replaced_end_ = report_.ends.back();
    report_.ends.pop_back();
    rejoin_began(rank, 0.0);  // its end is seen as it happens
    context_.events->write({"rejoin",
                            rank,
                            node_of(rank),
                            {{"generation", std::to_string(rejoin->generation() + 1)}}});
    std::cerr << "primus-launch: rank " << rank << " ended with " << describe(wait_status)
              << "; the other ranks stay and go on with a new rank " << rank
              << " (--primus-recover=rejoin)\n";
    return RankAction::kRejoin;
  }
  if (rejoin != nullptr && rejoin->enabled()) {
    std::cerr << "primus-launch: rank " << rank << " failed; no rejoin: " << why << "\n";
  }
  report_.ended_for_failure = true;
  return RankAction::kEndForFailure;
}

void RankReports::stop_forwarded(const std::string& source, const std::string& forwarded,
                                 bool user_stop) {
  report_.stop_forwarded = true;
  report_.user_stop = report_.user_stop || user_stop;
  if (context_.monitor != nullptr) context_.monitor->set_state("stopping");
  context_.events->write({"stop-requested",
                          std::nullopt,
                          context_.node,
                          {{"source", source}, {"forwarded", forwarded}}});
}

std::optional<std::uint32_t> RankReports::check_hang(Clock::time_point now,
                                                     std::chrono::milliseconds timeout) {
  // The survivors of a rank's failure make no progress while they rejoin: its deadline holds.
  if (stopping() || (context_.rejoin != nullptr && context_.rejoin->under_way())) {
    return std::nullopt;
  }
  const auto rank = watch_.hung(now, timeout);
  if (!rank) return std::nullopt;
  const auto node = node_of(*rank);
  const std::chrono::duration<double> silent = now - watch_.since(*rank, now);
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(silent).count();
  context_.events->write({"hang",
                          *rank,
                          node,
                          {{"seconds_without_progress", std::to_string(seconds)},
                           {"steps", steps_.count(*rank) ? std::to_string(steps_[*rank]) : "0"}}});
  std::cerr << "primus-launch: rank " << *rank << " on " << node.value_or("?")
            << " made no progress for " << seconds << " s (--primus-hang-timeout)\n";
  std::string why;
  if (context_.rejoin != nullptr &&
      context_.rejoin->begin(*rank, context_.resume_point || report_.checkpoint_committed, now,
                             why)) {
    // The runner kills it (rejoining()), and the others rejoin with a new rank in its place.
    rejoin_began(*rank, silent.count());
    context_.events->write({"rejoin",
                            *rank,
                            node,
                            {{"generation", std::to_string(context_.rejoin->generation() + 1)}}});
    std::cerr << "primus-launch: killing rank " << *rank
              << "; the other ranks stay and go on with a new one (--primus-recover=rejoin)\n";
    return rank;
  }
  if (context_.rejoin != nullptr && context_.rejoin->enabled()) {
    std::cerr << "primus-launch: no rejoin: " << why << "\n";
  }
  report_.hung = rank;
  report_.ended_for_failure = true;
  return rank;
}

bool RankReports::rejoining(std::uint32_t rank) const {
  return context_.rejoin != nullptr && context_.rejoin->under_way() &&
         context_.rejoin->failed_rank() == rank && !replaced_end_;
}

AttemptReport RankReports::finish() {
  for (RankEnd& end : report_.ends)
    end.ready = ready_.count(static_cast<std::uint32_t>(end.rank)) != 0;
  return report_;
}

}  // namespace primus::launch
