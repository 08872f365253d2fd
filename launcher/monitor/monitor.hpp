// The monitor's state (pure; docs/architecture.md "The monitor"): what the ranks report over
// the control channel, folded into the status of every rank, node and the job; lateness and
// stragglers; the newest user scalars. Times are passed in (seconds: `steady` on a monotonic
// clock for rates and windows, `wall` as UNIX time for what is shown), so that it is tested
// without a clock. The adapter around it (job_monitor.hpp) writes the files and serves /metrics.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "control/control_protocol.hpp"
#include "monitor/status.hpp"
#include "monitor/stragglers.hpp"

namespace primus::launch {

struct StragglerChange {
  std::uint32_t rank = 0;
  std::string node;
  bool straggler = false;  // flagged now (else: no longer)
  double lateness_seconds = 0;
  double median_step_seconds = 0;
};

struct UserScalar {
  std::uint32_t rank = 0;
  std::string node;
  std::string name;
  double value = 0;
  std::uint64_t step = 0;
};

class Monitor {
 public:
  Monitor(std::string job_id, std::uint32_t allocation, double straggler_window_seconds);

  // A new attempt of `world_size` ranks: every rank starts again ("starting").
  void start_attempt(std::uint32_t attempt, std::uint32_t world_size);
  // Restarts counted before this launcher started (earlier allocations).
  void set_earlier_restarts(std::uint32_t restarts) { earlier_restarts_ = restarts; }
  // The nodes the job keeps out (excluded-nodes.json), for the status.
  void set_excluded_nodes(std::vector<ExcludedNode> nodes) { excluded_nodes_ = std::move(nodes); }
  void set_state(std::string state) { state_ = std::move(state); }
  // The newest rejoin as it passes, for the status (RankReports keeps it).
  void set_recovery(RecoveryStatus recovery) { recovery_ = std::move(recovery); }
  const std::string& state() const { return state_; }
  std::uint32_t attempt() const { return attempt_; }

  void on_report(const Report& report, double steady, double wall);
  // How a rank ended, when no wrapper reported it (one-machine mode).
  void rank_ended(std::uint32_t rank, const std::string& how);

  // Lateness of every rank over the window, and the ranks whose straggler flag changed; judged
  // at most once in every 16th of the window (nothing changes in between).
  std::vector<StragglerChange> evaluate(double steady);

  JobStatus snapshot(double steady, double wall, const std::string& time) const;
  // The newest value of every scalar of every rank, in (rank, name) order.
  std::vector<UserScalar> scalars() const;

  // For the progress line: the step of the slowest running rank (from the job's start), the
  // run's planned steps, and rank 0's newest "loss" (primus.log).
  struct Progress {
    std::optional<std::uint64_t> step;
    std::optional<std::uint64_t> total_steps;
    std::optional<double> loss;
  };
  Progress progress() const;

 private:
  struct RankState {
    RankStatus status;
    WindowSeries waits;
    WindowSeries steps;
    std::optional<std::pair<double, std::uint64_t>> samples_at;  // (steady, samples)
    std::optional<std::pair<double, double>> cpu_at;             // (steady, cpu seconds)
    std::optional<double> last_report;                           // steady
  };
  struct NodeState {
    NodeStatus status;
    std::optional<double> totals_at;  // steady time of the totals in `status`
  };
  void heartbeat(RankState& rank, const Report& report, double steady);
  void node_report(const std::string& node, const NodeReport& report, double steady);

  std::string job_;
  std::uint32_t allocation_;
  double window_;
  double last_evaluation_ = -1e300;  // steady seconds of the last evaluate() that judged
  std::uint32_t attempt_ = 0;
  std::uint32_t earlier_restarts_ = 0;
  std::vector<ExcludedNode> excluded_nodes_;
  std::string state_ = "starting";
  std::optional<RecoveryStatus> recovery_;
  std::map<std::uint32_t, RankState> ranks_;
  std::map<std::string, NodeState> nodes_;
  std::map<std::pair<std::uint32_t, std::string>, UserScalar> scalars_;
  std::string checkpoint_;
  std::optional<std::uint64_t> checkpoint_step_;
  std::optional<double> checkpoint_wall_;
  std::optional<double> median_step_;
};

}  // namespace primus::launch
