#include "slurm_attempt.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <set>

#include "hang_watch.hpp"
#include "primus/common/error.hpp"
#include "primus/os/unique_fd.hpp"
#include "rank_process.hpp"
#include "slurm_queries.hpp"

namespace primus::launch {
namespace {

using Clock = std::chrono::steady_clock;

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

pid_t start_srun(const SlurmAttemptSetup& setup) {
  std::vector<std::string> argv;
  argv.push_back(setup.srun);
  argv.insert(argv.end(), setup.argv.begin(), setup.argv.end());
  std::vector<std::string> env = setup.env;
  std::vector<char*> argv_p;
  std::vector<char*> env_p;
  argv_p.reserve(argv.size() + 1);
  env_p.reserve(env.size() + 1);
  for (std::string& a : argv)
    argv_p.push_back(a.data());
  argv_p.push_back(nullptr);
  for (std::string& e : env)
    env_p.push_back(e.data());
  env_p.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("cannot fork srun: ") + std::strerror(errno));
  if (pid == 0) {
    // Its own group, so that a Ctrl-C on the terminal reaches the launcher alone (which stops
    // the ranks gracefully); and it dies with the launcher, which ends the step.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    for (const int sig : kStopSignals)
      ::signal(sig, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    restore_open_file_limit();
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::execve(setup.srun.c_str(), argv_p.data(), env_p.data());
    const std::string message =
        "primus-launch: cannot execute " + setup.srun + ": " + std::strerror(errno) + "\n";
    write_all(STDERR_FILENO, message.data(), message.size());
    ::_exit(127);
  }
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

SlurmAttemptResult run_slurm_attempt(const SlurmAttemptSetup& setup, ControlServer& control,
                                     EventLog& events) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (const int sig : kStopSignals)
    sigaddset(&set, sig);
  const os::UniqueFd signals(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals) throw Error(std::string("signalfd: ") + std::strerror(errno));

  SlurmAttemptResult result;
  const Clock::time_point started = Clock::now();
  const pid_t srun = start_srun(setup);
  if (setup.after_start) setup.after_start();
  bool srun_running = true;
  bool stopping_for_failure = false;
  bool killed = false;
  Clock::time_point kill_at = Clock::time_point::max();
  Clock::time_point srun_deadline = Clock::time_point::max();  // after srun ends: last reports
  Clock::time_point next_check = Clock::now() + std::chrono::seconds(1);
  HangWatch watch(setup.world_size);  // --primus-hang-timeout
  std::map<std::uint32_t, std::uint64_t> steps;
  std::set<std::uint32_t> reported;     // wrappers that reported an exit
  std::set<std::uint32_t> ready_ranks;  // ranks whose primus.init() returned
  bool launcher_signalled = false;      // a stop signal reached primus-launch itself
  // Wrappers of this attempt that said hello, and those of them whose connection has closed:
  // once srun has ended, a wrapper in neither `reported` nor still connected has nothing more to
  // say (one killed with its node, or by srun after a node failure), and the launcher need not
  // wait the last seconds for it.
  std::set<std::uint32_t> wrappers, wrappers_gone;
  // Once the stop began, the job's end time is asked for; again every second (a few times) while
  // slurmctld shows none: a query made as the signal arrives may see no PreemptTime yet, or fail.
  int deadline_queries_left = 5;
  Clock::time_point next_deadline_query = Clock::time_point::min();
  Clock::time_point requeue_at = Clock::time_point::max();

  const auto target = [&] { return result.step.empty() ? setup.job : result.step; };
  const auto stopping = [&] {
    return stopping_for_failure || result.stop_forwarded || result.ranks_signalled;
  };
  const auto end_the_step = [&](const std::string& why) {
    stopping_for_failure = true;
    std::cerr << "primus-launch: stopping the other ranks (" << why << ")\n";
    signal_job(target(), SIGTERM);
    kill_at = Clock::now() + setup.grace;
  };
  const auto forward_stop = [&](int sig, const std::string& source) {
    result.stop_forwarded = true;
    events.write({"stop-requested",
                  std::nullopt,
                  setup.node,
                  {{"source", source}, {"forwarded", signal_text(sig)}}});
    signal_job(target(), sig);
    // Slurm's deadlines (GraceTime, the time limit) bound a stop that Slurm began; a stop that
    // the user asked for has --primus-stop-grace.
    if (result.user_stop) kill_at = Clock::now() + setup.stop_grace;
  };
  const auto send_data = [&](const std::vector<DataMessage>& messages) {
    for (const DataMessage& m : messages)
      control.send(m.rank, m.line);
  };
  const auto handle = [&](const Report& r) {
    if (r.kind == ReportKind::kData) {
      if (setup.data != nullptr) {
        send_data(setup.data->receive(r.rank, r.payload));
      } else {
        control.send(r.rank, data_mode_error());
      }
      return;
    }
    if (setup.monitor != nullptr) setup.monitor->report(r);
    switch (r.kind) {
      case ReportKind::kHello:
        if (r.attempt && *r.attempt != setup.attempt) return;  // a rank of an earlier attempt
        if (!r.node.empty()) result.nodes[r.rank] = r.node;
        if (r.wrapper) {
          wrappers.insert(r.rank);
          if (result.step.empty() && !r.step.empty()) result.step = r.step;
        } else {
          result.any_rank_connected = true;
          watch.hello(r.rank, Clock::now());
        }
        return;
      case ReportKind::kHeartbeat:
        if (!r.wrapper) watch.heard(r.rank, Clock::now());
        if (r.steps && (steps.count(r.rank) == 0 || *r.steps > steps[r.rank])) {
          steps[r.rank] = *r.steps;
          watch.advanced(r.rank, Clock::now());
        }
        return;
      case ReportKind::kEvent:
        if (r.event == "ready") {
          if (!r.wrapper && ready_ranks.insert(r.rank).second &&
              ready_ranks.size() == setup.world_size) {
            events.write(
                {"ranks-ready", std::nullopt, setup.node, {{"seconds", seconds_since(started)}}});
          }
        } else if (r.event == "stop-signal") {
          if (stopping_for_failure) return;  // our SIGTERM after a failure: not a stop
          if (setup.data != nullptr) send_data(setup.data->order_checkpoint(true));
          if (!result.ranks_signalled && !result.stop_forwarded) {
            events.write(
                {"stop-requested",
                 r.rank,
                 result.nodes.count(r.rank) ? std::optional<std::string>(result.nodes[r.rank])
                                            : std::nullopt,
                 {{"source",
                   (r.signal.empty() ? std::string("a signal") : r.signal) + " to the ranks"}}});
          }
          result.ranks_signalled = true;
        } else if (r.event == "checkpoint-started") {
          events.write({"checkpoint-started",
                        r.rank,
                        std::nullopt,
                        {{"step", r.steps ? std::to_string(*r.steps) : ""}}});
        } else if (r.event == "checkpoint-committed") {
          result.checkpoint_committed = true;
          result.checkpoint = r.path;
          events.write({"checkpoint-committed",
                        r.rank,
                        std::nullopt,
                        {{"step", r.steps ? std::to_string(*r.steps) : ""}, {"path", r.path}}});
        }
        return;
      case ReportKind::kException:
        result.exceptions[r.rank] = r.exception + ": " + r.message;
        if (r.peer && *r.peer != r.rank) result.lost_peers[r.rank] = *r.peer;
        std::cerr << "primus-launch: rank " << r.rank << " raised " << r.exception << ": "
                  << r.message << (r.where.empty() ? "" : " (" + r.where + ")") << "\n";
        return;
      case ReportKind::kExit: {
        if (!r.wrapper || reported.count(r.rank) != 0) return;
        reported.insert(r.rank);
        watch.ended(r.rank);
        result.ends.push_back({static_cast<int>(r.rank), r.wait_status, stopping()});
        const int code = exit_code(r.wait_status);
        const bool as_asked = code == setup.preempted_status;
        if (code != 0 && !as_asked && !stopping()) {
          const auto node = result.nodes.count(r.rank)
                                ? std::optional<std::string>(result.nodes[r.rank])
                                : std::nullopt;
          events.write({"rank-failed", r.rank, node, {{"status", describe(r.wait_status)}}});
          end_the_step("rank " + std::to_string(r.rank) + " failed");
        } else if (code != 0 && !as_asked && !stopping_for_failure && !killed) {
          // A rank that ends otherwise during a stop (killed by the signal before it was ready,
          // or failed) leaves the others unable to commit a checkpoint: end the step now.
          std::cerr << "primus-launch: rank " << r.rank << " ended with " << describe(r.wait_status)
                    << " during the stop"
                    << (ready_ranks.count(r.rank) ? "" : ", before it was ready")
                    << "; ending the step\n";
          killed = true;
          cancel(target());
          kill_at = Clock::now() + setup.grace;
        }
        if (as_asked && !stopping_for_failure) result.ranks_signalled = true;
        return;
      }
      case ReportKind::kGoodbye:
        if (r.wrapper && wrappers.count(r.rank) != 0) wrappers_gone.insert(r.rank);
        if (!r.wrapper) watch.goodbye(r.rank, Clock::now());  // it must end within the timeout
        if (!r.wrapper && setup.data != nullptr) send_data(setup.data->rank_gone(r.rank));
        return;
      case ReportKind::kData:
      case ReportKind::kScalars:
      case ReportKind::kOther:
        return;
    }
  };

  for (;;) {
    if (!srun_running) {
      std::set<std::uint32_t> silent = reported;
      silent.insert(wrappers_gone.begin(), wrappers_gone.end());
      if (reported.size() >= setup.world_size || silent.size() >= setup.world_size ||
          Clock::now() >= srun_deadline) {
        break;
      }
    }
    pollfd fds[2] = {{signals.get(), POLLIN, 0}, {control.fd(), POLLIN, 0}};
    Clock::time_point wake = std::min({next_check, kill_at, srun_deadline});
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
    const int ready = ::poll(fds, 2, static_cast<int>(std::clamp<long>(wait, 0, 1000)));
    if (ready < 0 && errno != EINTR) throw Error(std::string("poll: ") + std::strerror(errno));
    for (const Report& r : control.take())
      handle(r);
    signalfd_siginfo info{};
    while (::read(signals.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;
      const bool first = !launcher_signalled;
      launcher_signalled = true;
      if (!stopping()) {
        forward_stop(sig, signal_text(sig) + " to primus-launch");
      } else if (first && !stopping_for_failure && !result.stop_forwarded) {
        // Slurm signalled the ranks and the launcher alike (a preemption reaches every step):
        // the stop the ranks reported, not a second request.
      } else if ((sig == SIGINT || sig == SIGTERM) && !killed) {
        killed = true;  // asked twice: no more waiting
        cancel(target());
        kill_at = Clock::now() + setup.grace;
      }
    }
    for (int status = 0;;) {
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (pid == srun) {
        srun_running = false;
        result.srun_status = status;
        srun_deadline = Clock::now() + std::chrono::seconds(3);
      }
    }
    const auto now = Clock::now();
    if (setup.monitor != nullptr) {
      if (stopping()) setup.monitor->set_state("stopping");
      setup.monitor->tick();
    }
    if (stopping() && !stopping_for_failure && !result.user_stop && !result.requeued &&
        requeue_at == Clock::time_point::max() && deadline_queries_left > 0 &&
        now >= next_deadline_query && !setup.requeue_target.empty()) {
      --deadline_queries_left;
      next_deadline_query = now + std::chrono::seconds(1);
      if (const auto job = query_job(setup.job)) {
        const auto grace = job->preempted ? query_grace_time(job->partition)
                                          : std::optional<std::chrono::seconds>();
        requeue_at = requeue_deadline(*job, grace, setup.may_requeue_at_time_limit,
                                      setup.requeue_margin, now, std::time(nullptr))
                         .value_or(Clock::time_point::max());
      }
    }
    if (now >= requeue_at && srun_running && !result.requeued) {
      requeue_at = Clock::time_point::max();
      result.requeued = true;
      std::cerr << "primus-launch: the ranks have not stopped and slurmctld ends the job in "
                << std::chrono::duration_cast<std::chrono::seconds>(setup.requeue_margin).count()
                << " s (its grace time or time limit): requeueing job " << setup.requeue_target
                << " now; it resumes from the newest committed checkpoint\n";
      events.write({"requeued",
                    std::nullopt,
                    setup.node,
                    {{"job", setup.requeue_target},
                     {"reason", "the ranks did not stop before the job's end time"}}});
      if (const auto error = requeue_job(setup.requeue_target, setup.excluded_nodes)) {
        std::cerr << "primus-launch: scontrol requeue " << setup.requeue_target
                  << " failed: " << *error;
      }
    }
    if (now >= next_check) {
      next_check = now + std::chrono::seconds(1);
      std::error_code error;
      if (!stopping() && std::filesystem::exists(setup.stop_request, error)) {
        std::filesystem::remove(setup.stop_request, error);
        result.user_stop = true;
        forward_stop(SIGTERM, "primus-launch stop");
      }
      if (setup.hang_timeout && !stopping() && srun_running) {
        if (const auto rank = watch.hung(now, *setup.hang_timeout)) {
          result.hung = rank;
          const auto node = result.nodes.count(*rank)
                                ? std::optional<std::string>(result.nodes[*rank])
                                : std::nullopt;
          const auto seconds =
              std::chrono::duration_cast<std::chrono::seconds>(now - watch.since(*rank, now))
                  .count();
          events.write({"hang",
                        *rank,
                        node,
                        {{"seconds_without_progress", std::to_string(seconds)},
                         {"steps", steps.count(*rank) ? std::to_string(steps[*rank]) : "0"}}});
          std::cerr << "primus-launch: rank " << *rank << " on " << node.value_or("?")
                    << " made no progress for " << seconds << " s (--primus-hang-timeout)\n";
          end_the_step("rank " + std::to_string(*rank) + " hung");
        }
      }
    }
    if (now >= kill_at) {
      // First scancel the step (SIGKILL to its tasks); should srun still be there a grace time
      // later, it goes too.
      kill_at = Clock::time_point::max();
      if (srun_running && !killed) {
        killed = true;
        cancel(target());
        kill_at = now + setup.grace;
      } else if (srun_running) {
        ::kill(srun, SIGKILL);
      }
    }
  }
  control.drop_connections();
  for (RankEnd& end : result.ends)
    end.ready = ready_ranks.count(static_cast<std::uint32_t>(end.rank)) != 0;
  result.ended_for_failure = stopping_for_failure;
  if (setup.monitor != nullptr) setup.monitor->refresh();
  return result;
}

}  // namespace primus::launch
