#include "monitor/monitor.hpp"

#include <algorithm>

#include "supervise/outcome.hpp"

namespace primus::launch {
namespace {

// A rate needs some time between its two readings, or it is noise: network totals are sampled
// at every heartbeat; samples and CPU time, which move in whole batches and scheduler ticks,
// over two seconds at least.
constexpr double kMinRateSeconds = 0.2;
constexpr double kMinSampleRateSeconds = 1.9;
// Waits a rank must have reported in the window before its lateness is judged.
constexpr std::size_t kMinWaits = 3;
constexpr double kEvaluationsPerWindow = 16;

}  // namespace

Monitor::Monitor(std::string job_id, std::uint32_t allocation, double straggler_window_seconds)
    : job_(std::move(job_id)), allocation_(allocation), window_(straggler_window_seconds) {}

void Monitor::start_attempt(std::uint32_t attempt, std::uint32_t world_size) {
  attempt_ = attempt;
  ranks_.clear();
  for (std::uint32_t r = 0; r < world_size; ++r)
    ranks_[r].status.rank = r;
  median_step_.reset();
}

void Monitor::heartbeat(RankState& rank, const Report& r, double steady) {
  RankStatus& s = rank.status;
  if (r.steps) s.steps = r.steps;
  if (r.total_steps) s.total_steps = r.total_steps;
  if (r.step_seconds) {
    s.step_seconds = r.step_seconds;
    rank.steps.add(steady, *r.step_seconds);
  }
  if (r.wait_seconds) rank.waits.add(steady, *r.wait_seconds);
  if (r.last_step_time) s.last_step_time = r.last_step_time;
  if (r.rss_bytes) s.rss_bytes = r.rss_bytes;
  if (r.rejoin_memory_bytes) s.rejoin_memory_bytes = r.rejoin_memory_bytes;
  if (r.gpu_memory_bytes) s.gpu_memory_bytes = r.gpu_memory_bytes;
  if (r.gpu_utilization_ratio) s.gpu_utilization_ratio = r.gpu_utilization_ratio;
  if (r.samples) {
    if (rank.samples_at && *r.samples >= rank.samples_at->second) {
      const double seconds = steady - rank.samples_at->first;
      if (seconds >= kMinSampleRateSeconds) {
        s.samples_per_second = static_cast<double>(*r.samples - rank.samples_at->second) / seconds;
        rank.samples_at = {steady, *r.samples};
      }
    } else {
      rank.samples_at = {steady, *r.samples};
    }
    s.samples = r.samples;
  }
  if (r.cpu_seconds) {
    if (rank.cpu_at && *r.cpu_seconds >= rank.cpu_at->second) {
      const double seconds = steady - rank.cpu_at->first;
      if (seconds >= kMinSampleRateSeconds) {
        s.cpu_usage_ratio = (*r.cpu_seconds - rank.cpu_at->second) / seconds;
        rank.cpu_at = {steady, *r.cpu_seconds};
      }
    } else {
      rank.cpu_at = {steady, *r.cpu_seconds};
    }
    s.cpu_seconds = r.cpu_seconds;
  }
}

void Monitor::node_report(const std::string& name, const NodeReport& r, double steady) {
  NodeState& node = nodes_[name];
  NodeStatus& s = node.status;
  s.node = name;
  if (r.cpu_usage_ratio) s.cpu_usage_ratio = r.cpu_usage_ratio;
  if (r.memory_used_bytes) s.memory_used_bytes = r.memory_used_bytes;
  if (r.memory_available_bytes) s.memory_available_bytes = r.memory_available_bytes;
  const auto rate = [&](const std::optional<std::uint64_t>& before,
                        const std::optional<std::uint64_t>& now, std::optional<double>& out) {
    if (!before || !now || *now < *before || !node.totals_at) return;
    const double seconds = steady - *node.totals_at;
    if (seconds >= kMinRateSeconds) out = static_cast<double>(*now - *before) / seconds;
  };
  if (!node.totals_at || steady - *node.totals_at >= kMinRateSeconds) {
    rate(s.network_receive_bytes_total, r.network_receive_bytes_total,
         s.network_receive_bytes_per_second);
    rate(s.network_transmit_bytes_total, r.network_transmit_bytes_total,
         s.network_transmit_bytes_per_second);
    if (r.network_receive_bytes_total)
      s.network_receive_bytes_total = r.network_receive_bytes_total;
    if (r.network_transmit_bytes_total) {
      s.network_transmit_bytes_total = r.network_transmit_bytes_total;
    }
    node.totals_at = steady;
  }
}

void Monitor::on_report(const Report& r, double steady, double wall) {
  const auto it = ranks_.find(r.rank);
  if (it == ranks_.end()) return;  // not a rank of this attempt
  RankState& rank = it->second;
  RankStatus& s = rank.status;
  if (r.kind == ReportKind::kHello && r.attempt && *r.attempt != attempt_) return;
  if (!r.node.empty()) s.node = r.node;
  if (!r.wrapper) rank.last_report = steady;
  switch (r.kind) {
    case ReportKind::kHello:
      // Still starting: its first heartbeat (after primus.init(), the imports and the
      // rendezvous) says it runs.
      break;
    case ReportKind::kHeartbeat:
      if (s.state == "starting") s.state = "running";
      heartbeat(rank, r, steady);
      if (r.node_stats && !s.node.empty()) node_report(s.node, *r.node_stats, steady);
      break;
    case ReportKind::kEvent:
      if (r.event == "checkpoint-committed") {
        checkpoint_ = r.path;
        checkpoint_step_ = r.steps;
        checkpoint_wall_ = wall;
        s.last_checkpoint_step = r.steps;
      } else if (r.event == "checkpoint-started") {
        s.last_checkpoint_step = r.steps;
      }
      break;
    case ReportKind::kScalars:
      for (const auto& [name, value] : r.values) {
        scalars_[{r.rank, name}] = {r.rank, s.node, name, value, r.steps.value_or(0)};
      }
      break;
    case ReportKind::kExit:
      if (r.wrapper) {
        s.state = "exited";
        s.ended = describe(r.wait_status);
      }
      break;
    default:
      break;
  }
}

void Monitor::rank_ended(std::uint32_t rank, const std::string& how) {
  const auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  it->second.status.state = "exited";
  it->second.status.ended = how;
}

std::vector<StragglerChange> Monitor::evaluate(double steady) {
  if (window_ <= 0) return {};  // --primus-straggler-window=0: not judged
  // A median over the window moves little in a 16th of it: judged that often (every 3.75 s in
  // the default minute; at every refresh in windows up to 16 s).
  if (steady < last_evaluation_ + window_ / kEvaluationsPerWindow) return {};
  last_evaluation_ = steady;
  std::map<std::uint32_t, RankTiming> timings;
  for (auto& [number, rank] : ranks_) {
    rank.waits.trim(steady, window_);
    rank.steps.trim(steady, window_);
    if (rank.status.state != "running") continue;
    timings[number] = {rank.waits.median(), rank.steps.median(), rank.waits.size()};
  }
  const LatenessVerdict verdict = judge_lateness(timings, kMinWaits);
  median_step_ = verdict.median_step_seconds;
  std::vector<StragglerChange> changes;
  for (auto& [number, rank] : ranks_) {
    // An ended rank keeps what was last judged of it: the final status tells who straggled.
    if (rank.status.state != "running") continue;
    const auto lateness = verdict.lateness.find(number);
    rank.status.lateness_seconds =
        lateness != verdict.lateness.end() ? std::optional<double>(lateness->second) : std::nullopt;
    const bool straggler = verdict.stragglers.count(number) != 0;
    if (straggler == rank.status.straggler) continue;
    rank.status.straggler = straggler;
    changes.push_back({number, rank.status.node, straggler,
                       rank.status.lateness_seconds.value_or(0),
                       verdict.median_step_seconds.value_or(0)});
  }
  return changes;
}

JobStatus Monitor::snapshot(double steady, double wall, const std::string& time) const {
  JobStatus s;
  s.time = time;
  s.job = job_;
  s.excluded_nodes = excluded_nodes_;
  s.recovery = recovery_;
  s.state = state_;
  s.allocation = allocation_;
  s.attempt = attempt_;
  s.restarts = earlier_restarts_ + attempt_;
  s.world_size = static_cast<std::uint32_t>(ranks_.size());
  s.checkpoint = checkpoint_;
  s.checkpoint_step = checkpoint_step_;
  s.checkpoint_time = checkpoint_wall_;
  if (checkpoint_wall_) s.seconds_since_checkpoint = std::max(0.0, wall - *checkpoint_wall_);
  s.median_step_seconds = median_step_;
  s.straggler_window_seconds = window_;
  double total_rate = 0;
  bool any_rate = false;
  for (const auto& [number, rank] : ranks_) {
    RankStatus r = rank.status;
    if (rank.last_report) r.seconds_since_report = std::max(0.0, steady - *rank.last_report);
    // Rank 0 commits for all: a rank that reported no checkpoint of its own has the job's.
    if (!r.last_checkpoint_step) r.last_checkpoint_step = checkpoint_step_;
    if (r.samples_per_second && r.state == "running") {
      total_rate += *r.samples_per_second;
      any_rate = true;
    }
    s.ranks.push_back(std::move(r));
  }
  if (any_rate) s.samples_per_second = total_rate;
  for (const auto& [name, node] : nodes_)
    s.nodes.push_back(node.status);
  return s;
}

std::vector<UserScalar> Monitor::scalars() const {
  std::vector<UserScalar> out;
  out.reserve(scalars_.size());
  for (const auto& [key, scalar] : scalars_)
    out.push_back(scalar);
  return out;
}

Monitor::Progress Monitor::progress() const {
  Progress out;
  for (const auto& [number, rank] : ranks_) {
    const RankStatus& s = rank.status;
    if (s.state != "running" || !s.steps) continue;
    const std::uint64_t step = *s.steps;
    out.step = out.step ? std::min(*out.step, step) : step;
    if (s.total_steps) out.total_steps = std::max(out.total_steps.value_or(0), *s.total_steps);
  }
  // A committed step was reached by every rank: newer than heartbeats an interval old (the
  // first one comes at a rank's first step, the next PRIMUS_HEARTBEAT_INTERVAL later).
  if (out.step && checkpoint_step_ && *checkpoint_step_ > *out.step) out.step = checkpoint_step_;
  if (const auto it = scalars_.find({0, "loss"}); it != scalars_.end()) {
    out.loss = it->second.value;
  }
  return out;
}

}  // namespace primus::launch
