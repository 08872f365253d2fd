#include "local_attempt.hpp"

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
#include <map>
#include <set>

#include "hang_watch.hpp"
#include "primus/common/error.hpp"
#include "primus/os/unique_fd.hpp"
#include "rank_process.hpp"

namespace primus::launch {
namespace {

using Clock = std::chrono::steady_clock;

sigset_t launcher_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (const int sig : kStopSignals)
    sigaddset(&set, sig);
  return set;
}

}  // namespace

void block_launcher_signals() {
  const sigset_t set = launcher_signals();
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

AttemptResult run_attempt(const AttemptSetup& setup, Reaper& reaper, EventLog& events) {
  const sigset_t set = launcher_signals();
  const os::UniqueFd signals(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals) throw Error(std::string("signalfd: ") + std::strerror(errno));

  AttemptResult result;
  const Clock::time_point started = Clock::now();
  std::vector<RankProcess> ranks;
  ranks.reserve(setup.envs.size());
  for (std::uint32_t r = 0; r < setup.envs.size(); ++r) {
    RankSpawn spawn;
    spawn.number = r;
    spawn.executable = setup.executable;
    spawn.argv = setup.argv;
    spawn.env = setup.envs[r];
    spawn.log = setup.log_dir / rank_log_name(r);
    ranks.push_back(spawn_rank(spawn));
    reaper.watch(ranks.back().pid);
  }

  bool stopping_for_failure = false;
  HangWatch watch(static_cast<std::uint32_t>(ranks.size()));  // --primus-hang-timeout
  std::map<std::uint32_t, std::uint64_t> steps;
  std::set<std::uint32_t> ready_ranks;  // ranks whose primus.init() returned
  Clock::time_point kill_at = Clock::time_point::max();
  Clock::time_point stop_deadline = Clock::time_point::max();
  Clock::time_point next_check = Clock::now() + std::chrono::seconds(1);
  auto signal_all = [&](int sig) {
    for (const RankProcess& rank : ranks) {
      if (rank.running) ::kill(-rank.pid, sig);
    }
  };
  auto forward_stop = [&](int sig, const std::string& source) {
    result.stop_requested = true;
    if (setup.monitor != nullptr) setup.monitor->set_state("stopping");
    events.write({"stop-requested",
                  std::nullopt,
                  setup.node,
                  {{"source", source}, {"forwarded", std::string("SIG") + sigabbrev_np(sig)}}});
    signal_all(sig);
    stop_deadline = Clock::now() + setup.stop_grace;
    kill_at = stop_deadline;
  };
  auto reap = [&] {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      const auto it = std::find_if(ranks.begin(), ranks.end(),
                                   [&](const RankProcess& rank) { return rank.pid == pid; });
      if (it == ranks.end()) continue;  // the orphan guard, or a rank's orphan (subreaper)
      it->running = false;
      watch.ended(it->number);
      if (setup.monitor != nullptr) setup.monitor->rank_ended(it->number, status);
      result.ends.push_back(
          {static_cast<int>(it->number), status, stopping_for_failure || result.stop_requested});
      if (status != 0 && !stopping_for_failure && !result.stop_requested) {
        events.write({"rank-failed", it->number, setup.node, {{"status", describe(status)}}});
        stopping_for_failure = true;
        signal_all(SIGTERM);
        kill_at = Clock::now() + setup.grace;
      } else if (status != 0 && result.stop_requested && !stopping_for_failure &&
                 exit_code(status) != setup.preempted_status) {
        // Killed by the stop before it was ready, or failed: the others cannot commit a
        // checkpoint without it, and waiting for them would only reach the deadline.
        std::cerr << "primus-launch: rank " << it->number << " ended with " << describe(status)
                  << " during the stop"
                  << (ready_ranks.count(it->number) != 0 ? "" : ", before it was ready")
                  << "; ending the other ranks\n";
        kill_at = Clock::now();
      }
    }
  };

  const auto send_data = [&](const std::vector<DataMessage>& messages) {
    for (const DataMessage& m : messages)
      setup.control->send(m.rank, m.line);
  };
  const auto handle = [&](const Report& r) {
    if (setup.monitor != nullptr) setup.monitor->report(r);
    switch (r.kind) {
      case ReportKind::kData:
        if (setup.data != nullptr) {
          send_data(setup.data->receive(r.rank, r.payload));
        } else {
          setup.control->send(r.rank, data_mode_error());
        }
        break;
      case ReportKind::kHello:
        if (r.attempt && *r.attempt == setup.attempt) watch.hello(r.rank, Clock::now());
        break;
      case ReportKind::kHeartbeat:
        if (!r.wrapper) watch.heard(r.rank, Clock::now());
        if (r.steps && (steps.count(r.rank) == 0 || *r.steps > steps[r.rank])) {
          steps[r.rank] = *r.steps;
          watch.advanced(r.rank, Clock::now());
        }
        break;
      case ReportKind::kEvent:
        if (r.event == "ready" && !r.wrapper && ready_ranks.insert(r.rank).second &&
            ready_ranks.size() == ranks.size()) {
          events.write(
              {"ranks-ready", std::nullopt, setup.node, {{"seconds", seconds_since(started)}}});
        }
        if (r.event == "stop-signal" && setup.data != nullptr && !stopping_for_failure) {
          send_data(setup.data->order_checkpoint(true));
        }
        if (r.event == "checkpoint-started" || r.event == "checkpoint-committed") {
          events.write({r.event,
                        r.rank,
                        setup.node,
                        {{"step", r.steps ? std::to_string(*r.steps) : ""}, {"path", r.path}}});
        }
        break;
      case ReportKind::kException:
        if (r.peer && *r.peer != r.rank) result.lost_peers[r.rank] = *r.peer;
        std::cerr << "primus-launch: rank " << r.rank << " raised " << r.exception << ": "
                  << r.message << (r.where.empty() ? "" : " (" + r.where + ")") << "\n";
        break;
      case ReportKind::kGoodbye:
        watch.goodbye(r.rank, Clock::now());  // exiting: it must end within the timeout
        if (setup.data != nullptr && !r.wrapper) send_data(setup.data->rank_gone(r.rank));
        break;
      default:
        break;
    }
  };

  while (std::any_of(ranks.begin(), ranks.end(), [](const RankProcess& r) { return r.running; })) {
    std::vector<pollfd> fds;
    std::vector<RankProcess*> polled;
    fds.push_back({signals.get(), POLLIN, 0});
    if (setup.control != nullptr) fds.push_back({setup.control->fd(), POLLIN, 0});
    const std::size_t first_rank_fd = fds.size();
    for (RankProcess& rank : ranks) {
      if (!rank.output) continue;
      fds.push_back({rank.output.get(), POLLIN, 0});
      polled.push_back(&rank);
    }
    const auto now = Clock::now();
    const auto wake = std::min(next_check, kill_at);
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(0, wait)));
    if (ready < 0 && errno != EINTR) throw Error(std::string("poll: ") + std::strerror(errno));
    for (std::size_t i = 0; ready > 0 && i < polled.size(); ++i) {
      if (fds[i + first_rank_fd].revents != 0) pump_output(*polled[i], setup.label);
    }
    if (setup.control != nullptr) {
      for (const Report& r : setup.control->take())
        handle(r);
    }
    if (ready > 0 && fds[0].revents != 0) {
      signalfd_siginfo info{};
      while (::read(signals.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        const int sig = static_cast<int>(info.ssi_signo);
        if (sig == SIGCHLD) continue;  // reaped below
        if (!result.stop_requested && !stopping_for_failure) {
          forward_stop(sig, std::string("SIG") + sigabbrev_np(sig) + " to primus-launch");
        } else if (sig == SIGINT || sig == SIGTERM) {
          signal_all(SIGKILL);  // asked twice: no more waiting
        }
      }
    }
    reap();
    if (setup.monitor != nullptr) setup.monitor->tick();
    if (Clock::now() >= next_check) {
      next_check = Clock::now() + std::chrono::seconds(1);
      std::error_code error;
      if (!result.stop_requested && !stopping_for_failure &&
          std::filesystem::exists(setup.stop_request, error)) {
        std::filesystem::remove(setup.stop_request, error);
        forward_stop(SIGTERM, "primus-launch stop");
      }
      if (setup.hang_timeout && !result.stop_requested && !stopping_for_failure) {
        if (const auto rank = watch.hung(Clock::now(), *setup.hang_timeout)) {
          result.hung = rank;
          const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                                   Clock::now() - watch.since(*rank, Clock::now()))
                                   .count();
          events.write({"hang",
                        *rank,
                        setup.node,
                        {{"seconds_without_progress", std::to_string(seconds)},
                         {"steps", steps.count(*rank) ? std::to_string(steps[*rank]) : "0"}}});
          std::cerr << "primus-launch: rank " << *rank << " on " << setup.node
                    << " made no progress for " << seconds << " s (--primus-hang-timeout)\n";
          stopping_for_failure = true;
          signal_all(SIGTERM);
          kill_at = Clock::now() + setup.grace;
        }
      }
    }
    if (Clock::now() >= kill_at) {
      const bool late =
          result.stop_requested && !stopping_for_failure && Clock::now() >= stop_deadline;
      if (late &&
          std::any_of(ranks.begin(), ranks.end(), [](const RankProcess& r) { return r.running; })) {
        std::cerr << "primus-launch: the ranks did not stop within "
                  << std::chrono::duration_cast<std::chrono::seconds>(setup.stop_grace).count()
                  << " s of the stop (--primus-stop-grace): killing them\n";
      }
      signal_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }

  // Nothing of the attempt outlives it: every group is killed (a rank's children), then what
  // is left of the output is copied until every pipe closes.
  for (const RankProcess& rank : ranks) {
    ::kill(-rank.pid, SIGKILL);
    reaper.forget(rank.pid);
  }
  const auto drain_until = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<RankProcess*> polled;
    for (RankProcess& rank : ranks) {
      if (!rank.output) continue;
      fds.push_back({rank.output.get(), POLLIN, 0});
      polled.push_back(&rank);
    }
    if (fds.empty()) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(drain_until - Clock::now()).count();
    if (left <= 0) {
      for (RankProcess* rank : polled)
        end_output(*rank, setup.label);
      break;
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(left)) < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < polled.size(); ++i) {
      if (fds[i].revents != 0) pump_output(*polled[i], setup.label);
    }
  }
  for (int status = 0; ::waitpid(-1, &status, WNOHANG) > 0;) {
  }
  if (setup.control != nullptr) {
    for (const Report& r : setup.control->take())
      handle(r);
  }
  for (RankEnd& end : result.ends)
    end.ready = ready_ranks.count(static_cast<std::uint32_t>(end.rank)) != 0;
  return result;
}

}  // namespace primus::launch
