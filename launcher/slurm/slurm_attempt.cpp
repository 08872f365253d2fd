// One attempt as an srun step (slurm_attempt.hpp).
#include "slurm/slurm_attempt.hpp"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>

#include "primus/common/error.hpp"
#include "primus/os/unique_fd.hpp"
#include "process/child_process.hpp"
#include "slurm/slurm_queries.hpp"

namespace primus::launch {
namespace {

using Clock = std::chrono::steady_clock;

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

pid_t start_srun(const SrunStep& setup) {
  std::vector<std::string> argv = {setup.srun};
  argv.insert(argv.end(), setup.argv.begin(), setup.argv.end());
  const ExecArgs exec(setup.srun, std::move(argv), setup.env);
  // Its own group, so that a Ctrl-C on the terminal reaches the launcher alone (which stops the
  // ranks gracefully); and it dies with the launcher, which ends the step.
  ChildSetup child;
  child.own_group = true;
  child.die_with_parent = true;
  child.parent = ::getpid();
  const pid_t pid = spawn_child(child, exec);
  if (pid < 0) throw Error(std::string("cannot fork srun: ") + std::strerror(errno));
  ::setpgid(pid, pid);
  return pid;
}

}  // namespace

std::optional<std::chrono::steady_clock::time_point> requeue_deadline(
    const JobFacts& job, std::optional<std::chrono::seconds> grace, bool may_requeue_at_time_limit,
    std::chrono::milliseconds margin, std::chrono::steady_clock::time_point now,
    std::time_t wall_now) {
  if (job.state != "RUNNING") return std::nullopt;
  std::optional<std::time_t> end;
  if (job.preempted) {
    if (!job.preempted_at || !grace || *grace <= margin) return std::nullopt;
    end = *job.preempted_at + grace->count();
    if (job.end_time) end = std::min(*end, *job.end_time);
  } else if (may_requeue_at_time_limit) {
    end = job.end_time;
  }
  if (!end) return std::nullopt;
  const auto left = std::chrono::seconds(*end - wall_now) - margin;
  return left.count() > 0 ? now + left : now;
}

namespace {

// One attempt's srun step, from srun's start to the last wrapper's report.
class SrunAttempt {
 public:
  SrunAttempt(const SrunStep& step, const RunnerSettings& settings, const AttemptContext& context)
      : step_(step),
        settings_(settings),
        reports_(context),
        rejoin_(context.rejoin),
        step_world_(context.world_size) {}

  void start() {
    srun_ = start_srun(step_);
    if (step_.after_start) step_.after_start();
  }
  // Until srun has ended and every wrapper has reported (or fallen silent), or a few seconds
  // after srun's end.
  void supervise(int signals);
  AttemptReport finish();

 private:
  std::string target() const {
    return reports_.report().step.empty() ? step_.job : reports_.report().step;
  }
  bool done() const;
  void end_the_step(const std::string& why);
  void kill_the_step();
  void act(RankAction action, std::uint32_t rank);
  void forward_stop(int sig, const std::string& source, bool user_stop);
  void read_signals(int signals);
  void reap();
  void requeue_when_due(Clock::time_point now);
  void every_second(Clock::time_point now);
  void place_replacement();
  void give_up_rejoin(const std::string& why);
  void say_standby();

  const SrunStep& step_;
  const RunnerSettings& settings_;
  RankReports reports_;
  Rejoin* rejoin_ = nullptr;  // --primus-recover=rejoin's; nullptr: none
  std::uint32_t step_world_ = 0;
  pid_t srun_ = -1;
  bool srun_running_ = true;
  bool standby_said_ = false;  // the wrappers were told to start their nodes' standbys
  bool killed_ = false;
  bool launcher_signalled_ = false;  // a stop signal reached primus-launch itself
  Clock::time_point kill_at_ = Clock::time_point::max();
  Clock::time_point srun_deadline_ = Clock::time_point::max();  // after srun ends: last reports
  Clock::time_point next_check_ = Clock::now() + std::chrono::seconds(1);
  // Once the stop began, the job's end time is asked for; again every second (a few times)
  // while slurmctld shows none: a query made as the signal arrives may see no PreemptTime yet,
  // or fail.
  int deadline_queries_left_ = 5;
  Clock::time_point next_deadline_query_ = Clock::time_point::min();
  Clock::time_point requeue_at_ = Clock::time_point::max();
};

bool SrunAttempt::done() const {
  if (srun_running_) return false;
  // Once srun has ended, a wrapper that neither reported nor is still connected has nothing
  // more to say (one killed with its node, or by srun after a node failure): no need to wait
  // the last seconds for it.
  return reports_.reported().size() >= step_world_ || reports_.silent().size() >= step_world_ ||
         Clock::now() >= srun_deadline_;
}

void SrunAttempt::end_the_step(const std::string& why) {
  std::cerr << "primus-launch: stopping the other ranks (" << why << ")\n";
  signal_job(target(), SIGTERM);
  kill_at_ = Clock::now() + settings_.grace;
}

void SrunAttempt::kill_the_step() {
  if (killed_) return;
  killed_ = true;
  cancel(target());
  kill_at_ = Clock::now() + settings_.grace;
}

void SrunAttempt::act(RankAction action, std::uint32_t rank) {
  if (action == RankAction::kEndForFailure) {
    end_the_step("rank " + std::to_string(rank) + " failed");
  } else if (action == RankAction::kEndNow) {
    kill_the_step();
  }
}

void SrunAttempt::give_up_rejoin(const std::string& why) {
  if (reports_.rejoin_failed(why) == RankAction::kEndForFailure) end_the_step("the rejoin failed");
}

void SrunAttempt::forward_stop(int sig, const std::string& source, bool user_stop) {
  // No replacement starts during a stop: the rejoin ends as a failure would, and the stop is
  // forwarded as after one.
  give_up_rejoin("a stop came (" + source + ")");
  reports_.stop_forwarded(source, signal_text(sig), user_stop);
  signal_job(target(), sig);
  // Slurm's deadlines (GraceTime, the time limit) bound a stop that Slurm began; a stop that
  // the user asked for has --primus-stop-grace.
  if (user_stop) kill_at_ = Clock::now() + settings_.stop_grace;
}

void SrunAttempt::read_signals(int signals) {
  signalfd_siginfo info{};
  while (::read(signals, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;
    const bool first = !launcher_signalled_;
    launcher_signalled_ = true;
    const AttemptReport& report = reports_.report();
    if (!reports_.stopping()) {
      forward_stop(signal_for_ranks(sig, settings_.warning_signal),
                   signal_text(sig) + " to primus-launch", false);
    } else if (first && !report.ended_for_failure && !report.stop_forwarded) {
      // Slurm signalled the ranks and the launcher alike (a preemption reaches every step):
      // the stop the ranks reported, not a second request.
    } else if (sig == SIGINT || sig == SIGTERM) {
      kill_the_step();  // asked twice: no more waiting
    }
  }
}

void SrunAttempt::reap() {
  for (int status = 0;;) {
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    if (pid == srun_) {
      srun_running_ = false;
      reports_.report().srun_status = status;
      srun_deadline_ = Clock::now() + std::chrono::seconds(3);
    }
  }
}

void SrunAttempt::requeue_when_due(Clock::time_point now) {
  AttemptReport& report = reports_.report();
  if (reports_.stopping() && !report.ended_for_failure && !report.user_stop && !report.requeued &&
      requeue_at_ == Clock::time_point::max() && deadline_queries_left_ > 0 &&
      now >= next_deadline_query_ && !step_.requeue_target.empty()) {
    --deadline_queries_left_;
    next_deadline_query_ = now + std::chrono::seconds(1);
    if (const auto job = query_job(step_.job)) {
      const auto grace =
          job->preempted ? query_grace_time(job->partition) : std::optional<std::chrono::seconds>();
      requeue_at_ = requeue_deadline(*job, grace, step_.may_requeue_at_time_limit,
                                     step_.requeue_margin, now, std::time(nullptr))
                        .value_or(Clock::time_point::max());
    }
  }
  if (now < requeue_at_ || !srun_running_ || report.requeued) return;
  requeue_at_ = Clock::time_point::max();
  report.requeued = true;
  std::cerr << "primus-launch: the ranks have not stopped and slurmctld ends the job in "
            << std::chrono::duration_cast<std::chrono::seconds>(step_.requeue_margin).count()
            << " s (its grace time or time limit): requeueing job " << step_.requeue_target
            << " now; it resumes from the newest committed checkpoint\n";
  settings_.events->write({"requeued",
                           std::nullopt,
                           settings_.node,
                           {{"job", step_.requeue_target},
                            {"reason", "the ranks did not stop before the job's end time"}}});
  if (const auto error = requeue_job(step_.requeue_target, step_.excluded_nodes)) {
    std::cerr << "primus-launch: scontrol requeue " << step_.requeue_target
              << " failed: " << *error;
  }
}

void SrunAttempt::every_second(Clock::time_point now) {
  next_check_ = now + std::chrono::seconds(1);
  std::error_code error;
  if (!reports_.stopping() && std::filesystem::exists(settings_.stop_request, error)) {
    std::filesystem::remove(settings_.stop_request, error);
    forward_stop(SIGTERM, "primus-launch stop", true);
  }
  if (settings_.hang_timeout && srun_running_) {
    if (const auto rank = reports_.check_hang(now, *settings_.hang_timeout)) {
      if (reports_.rejoining(*rank)) {
        // Its task wrapper kills it; its end, reported as any, is the rejoin's.
        if (!settings_.control->send_to_wrapper(*rank, kill_rank_line("hung"))) {
          give_up_rejoin("rank " + std::to_string(*rank) +
                         "'s task wrapper cannot be reached to end it");
        }
      } else {
        end_the_step("rank " + std::to_string(*rank) + " hung");
      }
    }
  }
}

// Every survivor waits: the failed rank's task wrapper starts the replacement in its task, and
// every rank learns the new generation (docs/architecture.md, "Recovery without a restart").
void SrunAttempt::place_replacement() {
  const std::uint32_t rank = *rejoin_->failed_rank();
  const std::uint32_t generation = rejoin_->generation() + 1;
  const std::optional<std::string> resume =
      settings_.resolve_resume ? settings_.resolve_resume() : std::nullopt;
  if (!resume) {
    give_up_rejoin("no committed checkpoint verifies");
    return;
  }
  const auto ports = step_.generation_ports
                         ? step_.generation_ports(reports_.report().step, generation)
                         : std::nullopt;
  if (!ports) {
    give_up_rejoin("no ports for generation " + std::to_string(generation) +
                   " (the step is not known: no task wrapper reported it)");
    return;
  }
  const std::string notice = generation_notice(generation, ports->first, ports->second, *resume);
  ControlServer& control = *settings_.control;
  if (!control.send_to_wrapper(rank, notice)) {
    give_up_rejoin("rank " + std::to_string(rank) +
                   "'s task wrapper cannot be reached to start its replacement");
    return;
  }
  reports_.replacement_started(rank, false);
  for (std::uint32_t r = 0; r < step_world_; ++r) {
    if (r != rank) control.send(r, notice);
  }
  rejoin_->placed(Clock::now());
}

// Every rank is up and a rejoin could come: the first task of each node starts the node's
// standby (its wrapper decides; a command that no standby can run has none).
void SrunAttempt::say_standby() {
  standby_said_ = true;
  if (!settings_.standby) return;
  for (std::uint32_t r = 0; r < step_world_; ++r)
    settings_.control->send_to_wrapper(r, standby_line());
}

void SrunAttempt::supervise(int signals) {
  ControlServer& control = *settings_.control;
  while (!done()) {
    // The third: a GET of /metrics waiting for its text (the monitor's tick() answers it).
    pollfd fds[3] = {{signals, POLLIN, 0},
                     {control.fd(), POLLIN, 0},
                     {settings_.monitor != nullptr ? settings_.monitor->wake_fd() : -1, POLLIN, 0}};
    const Clock::time_point wake = std::min({next_check_, kill_at_, srun_deadline_});
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
    const int ready = ::poll(fds, 3, static_cast<int>(std::clamp<long>(wait, 0, 1000)));
    if (ready < 0 && errno != EINTR) throw Error(std::string("poll: ") + std::strerror(errno));
    for (const Report& r : control.take())
      act(reports_.handle(r), r.rank);
    read_signals(signals);
    reap();
    const auto now = Clock::now();
    if (rejoin_ != nullptr && rejoin_->ready_to_place()) place_replacement();
    if (rejoin_ != nullptr && !standby_said_ && rejoin_->wants_standby()) say_standby();
    if (rejoin_ != nullptr && rejoin_->past_deadline(now)) {
      give_up_rejoin("the ranks had not rejoined within --primus-rejoin-deadline");
    }
    if (settings_.monitor != nullptr) {
      if (reports_.stopping()) settings_.monitor->set_state("stopping");
      settings_.monitor->tick();
    }
    requeue_when_due(now);
    if (now >= next_check_) every_second(now);
    if (now >= kill_at_) {
      // First scancel the step (SIGKILL to its tasks); should srun still be there a grace time
      // later, it goes too.
      kill_at_ = Clock::time_point::max();
      if (srun_running_ && !killed_) {
        kill_the_step();
      } else if (srun_running_) {
        ::kill(srun_, SIGKILL);
      }
    }
  }
}

AttemptReport SrunAttempt::finish() {
  settings_.control->drop_connections();
  AttemptReport report = reports_.finish();
  if (settings_.monitor != nullptr) settings_.monitor->refresh();
  return report;
}

}  // namespace

AttemptReport run_srun_step(const SrunStep& step, const RunnerSettings& settings,
                            const AttemptContext& context) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (const int sig : kStopSignals)
    sigaddset(&set, sig);
  const os::UniqueFd signals(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals) throw Error(std::string("signalfd: ") + std::strerror(errno));
  SrunAttempt attempt(step, settings, context);
  attempt.start();
  attempt.supervise(signals.get());
  return attempt.finish();
}

}  // namespace primus::launch
