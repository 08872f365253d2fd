// What the ranks of one attempt (and, under srun, their task wrappers) report on the control
// channel, read once for both runners: it keeps the attempt's report and the hang watch, feeds
// the monitor and the dynamic data queue, writes the events, and tells the runner what to do
// about a rank's end. The runner owns the processes: it feeds every report and every end of a
// rank it sees, and starts, signals and kills.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "control/control_protocol.hpp"
#include "control/control_server.hpp"
#include "control/data_tasks.hpp"
#include "monitor/job_monitor.hpp"
#include "supervise/attempt_runner.hpp"
#include "supervise/events.hpp"
#include "supervise/hang_watch.hpp"
#include "supervise/rejoin.hpp"

namespace primus::launch {

// The attempt as the report handling needs it.
struct AttemptContext {
  std::uint32_t attempt = 0;
  std::uint32_t world_size = 0;
  std::string node;  // the launcher's, for events
  int preempted_status = kExitDefaultPreempted;
  // Under srun: a stop signal can reach the ranks from Slurm (a rank's report of one, or an end
  // with the preempted status, is a stop), and the ranks' ends come from their wrappers' reports.
  bool slurm = false;
  ControlServer* control = nullptr;  // nullptr: supervised by exit status only
  EventLog* events = nullptr;
  JobMonitor* monitor = nullptr;  // nullptr: none
  DataTasks* data = nullptr;      // nullptr: static data split
  Rejoin* rejoin = nullptr;       // --primus-recover=rejoin's; nullptr: none
  bool resume_point = false;      // the attempt started from a committed checkpoint
};

// The context of an attempt that a runner with `settings` runs as `plan` says (`slurm`: an srun
// step).
AttemptContext context_of(const RunnerSettings& settings, const AttemptPlan& plan, bool slurm);
// The attempt's rejoin, from --primus-recover and the rejoins left to the plan.
Rejoin::Settings rejoin_settings(const RunnerSettings& settings, const AttemptPlan& plan);

// What the runner must do after a report or a rank's end.
enum class RankAction {
  kNone,
  kEndForFailure,  // a rank failed: stop the others (SIGTERM, SIGKILL after the grace time)
  kEndNow,         // a rank ended otherwise during a stop: the others cannot commit; end them
  kRejoin,         // a rank failed and its rejoin began: kill what is left of it, keep the others
};

class RankReports {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RankReports(const AttemptContext& context);

  RankAction handle(const Report& r);
  RankAction rank_ended(std::uint32_t rank, int wait_status);
  // The launcher forwards a stop (`source` for the event, `forwarded` the signal's name).
  void stop_forwarded(const std::string& source, const std::string& forwarded, bool user_stop);
  // Once a rank made no progress for `timeout` while nothing else is under way: the rank, after
  // writing the hang event and saying so. The attempt then ends for a failure, unless a rejoin
  // began (rejoining(rank)): then the runner kills that rank alone.
  std::optional<std::uint32_t> check_hang(Clock::time_point now, std::chrono::milliseconds timeout);
  // Whether `rank` is the hung rank of a rejoin under way, whose end has not come yet.
  bool rejoining(std::uint32_t rank) const;
  // A failure or a stop is under way.
  bool stopping() const {
    return report_.ended_for_failure || report_.stop_forwarded || report_.ranks_signalled;
  }
  bool stopping_for_failure() const { return report_.ended_for_failure; }
  // Wrappers that reported their rank's end, and those whose connection closed (srun step).
  const std::set<std::uint32_t>& reported() const { return reported_; }
  std::set<std::uint32_t> silent() const;
  AttemptReport& report() { return report_; }
  const AttemptReport& report() const { return report_; }
  // The report once the attempt is over (each end marked ready or not).
  AttemptReport finish();
  // The rejoin under way failed (`why`): its failed rank's end becomes the attempt's first, and
  // the attempt ends for it (kEndForFailure; kNone when no rejoin was under way).
  RankAction rejoin_failed(const std::string& why);
  // The runner started the replacement of `rank` (a rejoin).
  // `from_standby`: the replacement is a standby that became the rank (local/standby.hpp).
  void replacement_started(std::uint32_t rank, bool from_standby = false);
  // Under srun: the replacement's task wrapper says that it came from the node's standby.
  void replacement_from_standby();
  // This attempt's newest rejoin, phase by phase (the monitor's status.json shows it).
  const std::optional<RecoveryStatus>& recovery() const { return recovery_; }

 private:
  std::optional<std::string> node_of(std::uint32_t rank) const;
  void send_data(const std::vector<DataMessage>& messages);
  void on_hello(const Report& r);
  void on_event(const Report& r);
  void on_rejoin_event(const Report& r);
  // A rank's own failure (not during a stop): a rejoin where one can be made, else the end.
  RankAction rank_failed(std::uint32_t rank, int wait_status);
  // The rejoin of `rank` began: its recovery, in the tear-down phase.
  // `detect_seconds`: how long the failure went unseen (RecoveryStatus::detect_seconds).
  void rejoin_began(std::uint32_t rank, double detect_seconds);
  void recovery_changed();

  AttemptContext context_;
  AttemptReport report_;
  Clock::time_point started_;
  HangWatch watch_;
  std::map<std::uint32_t, std::uint64_t> steps_;
  std::set<std::uint32_t> ready_;     // ranks whose primus.init() returned
  std::set<std::uint32_t> reported_;  // wrappers that reported an exit
  // Wrappers of this attempt that said hello, and those of them whose connection has closed.
  std::set<std::uint32_t> wrappers_, wrappers_gone_;
  std::optional<RankEnd> replaced_end_;  // the failed rank's end while its rejoin is under way
  bool from_standby_ = false;            // the rejoin under way's replacement was a standby
  // The ranks' restores in the rejoin under way: the slowest, and how many ranks restored from
  // each source ("memory", "broadcast", "file"), for the "rejoined" event.
  double restore_slowest_ = 0;
  std::map<std::string, int> restore_sources_;
  std::optional<RecoveryStatus> recovery_;
};

}  // namespace primus::launch
