// The attempt runner on this machine (local_attempt.hpp).
#include "local/local_attempt.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>
#include <iostream>

#include "control/control_protocol.hpp"
#include "local/standby.hpp"
#include "primus/common/error.hpp"
#include "primus/common/parse_number.hpp"
#include "primus/os/unique_fd.hpp"
#include "process/child_process.hpp"
#include "process/rank_process.hpp"
#include "supervise/job_dir.hpp"
#include "supervise/outcome.hpp"
#include "supervise/rank_reports.hpp"
#include "supervise/rejoin.hpp"

namespace primus::launch {
namespace {

using Clock = std::chrono::steady_clock;

// The epoll tags that are not a rank's number.
constexpr std::uint64_t kSignalsTag = ~std::uint64_t{0};
constexpr std::uint64_t kControlTag = kSignalsTag - 1;
constexpr std::uint64_t kStandbyTag = kSignalsTag - 2;

// A standby waits as no rank: its environment is the ranks' less what names one of them.
constexpr std::array<std::string_view, 4> kRankIdentity = {"RANK", "LOCAL_RANK", "GROUP_RANK",
                                                           "ROLE_RANK"};

sigset_t launcher_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (const int sig : kStopSignals)
    sigaddset(&set, sig);
  return set;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// A rank's environment in a generation of the attempt, with its resume point (a rejoin's).
using GenerationEnvironment = std::function<Environment(
    std::uint32_t rank, std::uint32_t generation, const std::optional<std::string>& resume)>;

AttemptContext with_rejoin(AttemptContext context, Rejoin& rejoin) {
  context.rejoin = &rejoin;
  return context;
}

// The port in the variable `name` (0 when unset or not a port).
std::uint16_t port_in(const Environment& env, std::string_view name) {
  const auto value = lookup(env, name);
  return static_cast<std::uint16_t>(value ? parse_unsigned(*value, 65535).value_or(0) : 0);
}

// One attempt's ranks on this machine, from their start to the last byte of their output.
class LocalAttempt {
 public:
  LocalAttempt(const RunnerSettings& settings, const AttemptPlan& plan, Reaper& reaper,
               GenerationEnvironment environment)
      : settings_(settings),
        plan_(plan),
        reaper_(reaper),
        environment_(std::move(environment)),
        rejoin_(rejoin_settings(settings, plan)),
        reports_(with_rejoin(context_of(settings, plan, false), rejoin_)) {}

  void start(const LocalCommand& command, const std::vector<std::vector<std::string>>& envs);
  // Until every rank has ended: output, reports, signals, the hang watch, the deadlines.
  void supervise(int signals);
  // Every group killed, what is left of the output copied, the last reports read.
  AttemptReport finish();

 private:
  bool any_running() const {
    return std::any_of(ranks_.begin(), ranks_.end(),
                       [](const RankProcess& r) { return r.running; });
  }
  void signal_all(int sig) {
    for (const RankProcess& rank : ranks_) {
      if (rank.running) ::kill(-rank.pid, sig);
    }
  }
  void act(RankAction action, std::uint32_t rank = 0);
  // `again`: fd is in the set already, under another tag (a standby's output becoming a rank's).
  void watch(int fd, std::uint64_t tag, bool again = false);
  std::string standby_log_name() const {
    return "standby-" + std::to_string(standbys_started_) + ".log";
  }
  // A rejoin: once every survivor waits, the replacement started and the survivors told.
  void place_replacement();
  // The replacement of `rank`: the standby when there is one that takes the assignment, else a
  // new process; from_standby says which.
  RankProcess replacement(std::uint32_t rank, const RankSpawn& spawn, const Environment& env,
                          bool& from_standby);
  void start_standby();
  // The standby ended, or is ended (`kill`), before it became a rank: no other is started in
  // this attempt (a standby that cannot start must not be started again every second).
  void lose_standby(bool kill);
  void forward_stop(int sig, const std::string& source, bool user_stop);
  // Reads the pending signals and acts on the stop signals; true when SIGCHLD was among them.
  bool read_signals(int signals);
  void reap();
  void every_second();
  void take_reports();

  const RunnerSettings& settings_;
  const AttemptPlan& plan_;
  Reaper& reaper_;
  GenerationEnvironment environment_;
  const LocalCommand* command_ = nullptr;
  Rejoin rejoin_;
  RankReports reports_;
  std::vector<RankProcess> ranks_;
  std::optional<std::vector<std::string>> program_;  // the command's, when a standby can run it
  std::optional<Standby> standby_;
  std::uint32_t standbys_started_ = 0;
  bool standby_lost_ = false;
  os::UniqueFd poller_;
  Clock::time_point kill_at_ = Clock::time_point::max();
  Clock::time_point stop_deadline_ = Clock::time_point::max();
  Clock::time_point next_check_ = Clock::now() + std::chrono::seconds(1);
};

void LocalAttempt::start(const LocalCommand& command,
                         const std::vector<std::vector<std::string>>& envs) {
  command_ = &command;
  if (settings_.standby && rejoin_.enabled())
    program_ = python_program(command.executable, command.argv);
  ranks_.reserve(envs.size());
  std::vector<pid_t> groups;
  for (std::uint32_t r = 0; r < envs.size(); ++r) {
    RankSpawn spawn;
    spawn.number = r;
    spawn.executable = command.executable;
    spawn.argv = command.argv;
    spawn.env = envs[r];
    spawn.log = plan_.log_dir / rank_log_name(r);
    ranks_.push_back(spawn_rank(spawn));
    groups.push_back(ranks_.back().pid);
  }
  reaper_.watch(groups);  // once, after the last fork (process/reaper.hpp says why)
}

void LocalAttempt::act(RankAction action, std::uint32_t rank) {
  if (action == RankAction::kRejoin) {
    ::kill(-ranks_[rank].pid, SIGKILL);  // what is left of it: its DataLoader workers
  } else if (action == RankAction::kEndForFailure) {
    signal_all(SIGTERM);
    kill_at_ = Clock::now() + settings_.grace;
  } else if (action == RankAction::kEndNow) {
    kill_at_ = Clock::now();
  }
}

void LocalAttempt::forward_stop(int sig, const std::string& source, bool user_stop) {
  // No replacement starts during a stop: the rejoin ends as a failure would, and the stop is
  // forwarded as after one.
  act(reports_.rejoin_failed("a stop came (" + source + ")"));
  reports_.stop_forwarded(source, signal_name(sig), user_stop);
  signal_all(sig);
  stop_deadline_ = Clock::now() + settings_.stop_grace;
  kill_at_ = stop_deadline_;
}

bool LocalAttempt::read_signals(int signals) {
  bool child = false;
  signalfd_siginfo info{};
  while (::read(signals, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      child = true;  // reaped by the caller
      continue;
    }
    if (!reports_.stopping()) {
      forward_stop(signal_for_ranks(sig, settings_.warning_signal),
                   signal_name(sig) + " to primus-launch", false);
    } else if (sig == SIGINT || sig == SIGTERM) {
      signal_all(SIGKILL);  // asked twice: no more waiting
    }
  }
  return child;
}

void LocalAttempt::reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    if (standby_ && pid == standby_->pid()) {
      std::cerr << "primus-launch: the rejoin's standby (pid " << pid << ") ended before it was "
                << "needed (" << describe(status)
                << "; its log: " << (plan_.log_dir / standby_log_name()).string()
                << "); a replacement will be started afresh\n";
      lose_standby(false);
      continue;
    }
    const auto it = std::find_if(ranks_.begin(), ranks_.end(),
                                 [&](const RankProcess& rank) { return rank.pid == pid; });
    if (it == ranks_.end()) continue;  // the orphan guard, or a rank's orphan (subreaper)
    it->running = false;
    if (settings_.monitor != nullptr) settings_.monitor->rank_ended(it->number, status);
    act(reports_.rank_ended(it->number, status), it->number);
  }
}

void LocalAttempt::every_second() {
  next_check_ = Clock::now() + std::chrono::seconds(1);
  if (program_ && !standby_ && !standby_lost_ && !reports_.stopping() && rejoin_.wants_standby()) {
    start_standby();
  }
  std::error_code error;
  if (!reports_.stopping() && std::filesystem::exists(settings_.stop_request, error)) {
    std::filesystem::remove(settings_.stop_request, error);
    forward_stop(SIGTERM, "primus-launch stop", true);
  }
  if (settings_.hang_timeout) {
    if (const auto hung = reports_.check_hang(Clock::now(), *settings_.hang_timeout)) {
      if (reports_.rejoining(*hung)) {
        ::kill(-ranks_[*hung].pid, SIGKILL);  // its end is the rejoin's
      } else {
        act(RankAction::kEndForFailure);
      }
    }
  }
}

void LocalAttempt::take_reports() {
  if (settings_.control == nullptr) return;
  for (const Report& r : settings_.control->take())
    act(reports_.handle(r));
}

void LocalAttempt::watch(int fd, std::uint64_t tag, bool again) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = tag;
  if (::epoll_ctl(poller_.get(), again ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event) != 0) {
    throw Error(std::string("epoll_ctl: ") + std::strerror(errno));
  }
}

void LocalAttempt::start_standby() {
  Environment env = environment_(0, rejoin_.generation(), std::nullopt);
  for (const std::string_view name : kRankIdentity) {
    if (const auto it = env.find(name); it != env.end()) env.erase(it);
  }
  ++standbys_started_;
  try {
    standby_.emplace(command_->executable, command_->argv.front(), environment_entries(env),
                     plan_.log_dir / standby_log_name());
  } catch (const Error& e) {
    std::cerr << "primus-launch: cannot start the rejoin's standby: " << e.what()
              << "; a replacement will be started afresh\n";
    standby_lost_ = true;
    return;
  }
  reaper_.watch(standby_->pid());
  if (standby_->process().output) watch(standby_->process().output.get(), kStandbyTag);
}

void LocalAttempt::lose_standby(bool kill) {
  if (kill) ::kill(-standby_->pid(), SIGKILL);
  reaper_.forget(standby_->pid());
  if (standby_->process().output) end_output(standby_->process(), settings_.label);
  standby_.reset();
  standby_lost_ = true;
}

RankProcess LocalAttempt::replacement(std::uint32_t rank, const RankSpawn& spawn,
                                      const Environment& env, bool& from_standby) {
  RankProcess process;
  from_standby = false;
  if (standby_) {
    from_standby = standby_->become(rank, standby_assignment(*program_, env), spawn.log, process);
    if (from_standby) {
      standby_.reset();  // the next one starts once every rank is up in the new generation
      return process;
    }
    std::cerr << "primus-launch: the rejoin's standby could not become rank " << rank
              << " (it has ended); starting the replacement afresh\n";
    lose_standby(true);
  }
  process = spawn_rank(spawn);
  reaper_.watch(process.pid);
  return process;
}

void LocalAttempt::place_replacement() {
  const std::uint32_t rank = *rejoin_.failed_rank();
  const std::uint32_t generation = rejoin_.generation() + 1;
  const std::optional<std::string> resume =
      settings_.resolve_resume ? settings_.resolve_resume() : std::nullopt;
  if (!resume) {
    act(reports_.rejoin_failed("no committed checkpoint verifies"));
    return;
  }
  RankSpawn spawn;
  spawn.number = rank;
  spawn.executable = command_->executable;
  spawn.argv = command_->argv;
  const Environment env = environment_(rank, generation, resume);
  spawn.env = environment_entries(env);
  spawn.log = plan_.log_dir / rank_log_name(rank, generation);
  if (ranks_[rank].output) end_output(ranks_[rank], settings_.label);  // the failed one's last
  bool from_standby = false;
  ranks_[rank] = replacement(rank, spawn, env, from_standby);
  if (ranks_[rank].output) watch(ranks_[rank].output.get(), rank, from_standby);
  reports_.replacement_started(rank, from_standby);
  const std::string notice = generation_notice(generation, port_in(env, "MASTER_PORT"),
                                               port_in(env, "PRIMUS_PORT"), *resume);
  for (std::uint32_t r = 0; r < ranks_.size(); ++r) {
    if (r != rank) settings_.control->send(r, notice);
  }
  rejoin_.placed(Clock::now());
}

void LocalAttempt::supervise(int signals) {
  // One epoll set for the whole attempt: a poll() over every rank's output pipe at each wake-up
  // was an eighth of the launcher's CPU at 1,024 heartbeating ranks, and waitpid() at each
  // wake-up another 3 % (the kernel walks every child): children are reaped after a SIGCHLD.
  poller_ = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!poller_) throw Error(std::string("epoll_create1: ") + std::strerror(errno));
  watch(signals, kSignalsTag);
  if (settings_.control != nullptr) watch(settings_.control->fd(), kControlTag);
  // A GET of /metrics waiting for its text: the monitor's tick() below answers it.
  if (settings_.monitor != nullptr && settings_.monitor->wake_fd() >= 0) {
    watch(settings_.monitor->wake_fd(), kControlTag);
  }
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i].output) watch(ranks_[i].output.get(), i);  // a closed pipe leaves the set
  }
  std::array<epoll_event, 64> events{};
  bool child_ended = true;  // one may have ended before the first wait
  while (any_running() || rejoin_.under_way()) {
    const auto wake = std::min(next_check_, kill_at_);
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
    const int ready = ::epoll_wait(poller_.get(), events.data(), static_cast<int>(events.size()),
                                   static_cast<int>(std::clamp<long>(wait, 0, 1000)));
    if (ready < 0 && errno != EINTR)
      throw Error(std::string("epoll_wait: ") + std::strerror(errno));
    bool signalled = false;
    for (int i = 0; i < ready; ++i) {
      const std::uint64_t tag = events[static_cast<std::size_t>(i)].data.u64;
      if (tag == kSignalsTag) {
        signalled = true;
      } else if (tag < ranks_.size() && ranks_[tag].output) {
        pump_output(ranks_[tag], settings_.label);
      } else if (tag == kStandbyTag && standby_ && standby_->process().output) {
        pump_output(standby_->process(), settings_.label);
      }
    }
    take_reports();
    if (signalled && read_signals(signals)) child_ended = true;
    if (child_ended) {
      child_ended = false;
      reap();
    }
    if (rejoin_.ready_to_place()) place_replacement();
    if (rejoin_.past_deadline(Clock::now())) {
      act(reports_.rejoin_failed("the ranks had not rejoined within --primus-rejoin-deadline"));
    }
    if (settings_.monitor != nullptr) settings_.monitor->tick();
    if (Clock::now() >= next_check_) every_second();
    if (Clock::now() >= kill_at_) {
      const bool late = reports_.report().stop_forwarded && !reports_.stopping_for_failure() &&
                        Clock::now() >= stop_deadline_;
      if (late && any_running()) {
        std::cerr << "primus-launch: the ranks did not stop within "
                  << std::chrono::duration_cast<std::chrono::seconds>(settings_.stop_grace).count()
                  << " s of the stop (--primus-stop-grace): killing them\n";
      }
      signal_all(SIGKILL);
      kill_at_ = Clock::time_point::max();
    }
  }
}

AttemptReport LocalAttempt::finish() {
  if (standby_) lose_standby(true);
  for (const RankProcess& rank : ranks_) {
    ::kill(-rank.pid, SIGKILL);
    reaper_.forget(rank.pid);
  }
  const auto drain_until = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<RankProcess*> polled;
    for (RankProcess& rank : ranks_) {
      if (!rank.output) continue;
      fds.push_back({rank.output.get(), POLLIN, 0});
      polled.push_back(&rank);
    }
    if (fds.empty()) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(drain_until - Clock::now()).count();
    if (left <= 0) {
      for (RankProcess* rank : polled)
        end_output(*rank, settings_.label);
      break;
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(left)) < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < polled.size(); ++i) {
      if (fds[i].revents != 0) pump_output(*polled[i], settings_.label);
    }
  }
  for (int status = 0; ::waitpid(-1, &status, WNOHANG) > 0;) {
  }
  take_reports();
  return reports_.finish();
}

}  // namespace

void block_launcher_signals() {
  const sigset_t set = launcher_signals();
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

Environment LocalRunner::rank_environment(const AttemptPlan& plan, std::uint32_t rank,
                                          std::uint32_t generation) {
  Environment env = command_.env;
  env.erase("PRIMUS_JOB_SECRET");
  OneMachineJob job = command_.job;
  job.generation = generation;  // the generation's own ports
  for (const auto& [name, value] :
       one_machine_environment(job, rank, command_.env, command_.options))
    env[name] = value;
  set_attempt_variables(env, plan, settings_.control);
  if (generation > 0) env["PRIMUS_GENERATION"] = std::to_string(generation);
  return env;
}

AttemptReport LocalRunner::run(const AttemptPlan& plan) {
  const sigset_t set = launcher_signals();
  const os::UniqueFd signals(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals) throw Error(std::string("signalfd: ") + std::strerror(errno));
  command_.job.restart_count = plan.attempt;
  std::vector<std::vector<std::string>> envs;
  for (std::uint32_t rank = 0; rank < command_.job.nproc; ++rank)
    envs.push_back(environment_entries(rank_environment(plan, rank)));

  LocalAttempt attempt(settings_, plan, reaper_,
                       [this, &plan](std::uint32_t rank, std::uint32_t generation,
                                     const std::optional<std::string>& resume) {
                         AttemptPlan replaced = plan;
                         replaced.resume = resume;
                         return rank_environment(replaced, rank, generation);
                       });
  attempt.start(command_, envs);
  attempt.supervise(signals.get());
  return attempt.finish();
}

}  // namespace primus::launch
