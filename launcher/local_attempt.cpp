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

#include "primus/common/error.hpp"
#include "primus/os/unique_fd.hpp"

namespace primus::launch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
// A partial line longer than this goes out as it is (a progress bar without newlines).
constexpr std::size_t kMaxPartialLine = 64 << 10;

sigset_t launcher_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (const int sig : kStopSignals)
    sigaddset(&set, sig);
  return set;
}

void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed terminal or a full disk does not stop the job
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

struct Rank {
  std::uint32_t number = 0;
  pid_t pid = -1;  // also its process group
  bool running = true;
  os::UniqueFd output;  // the read end of its stdout and stderr
  os::UniqueFd log;
  std::string partial;  // the start of a line not yet copied to the terminal
};

// Copies what a rank wrote: every byte to its log, whole lines to standard output.
void copy_output(Rank& rank, const char* data, std::size_t size, bool label) {
  write_all(rank.log.get(), data, size);
  rank.partial.append(data, size);
  const std::string prefix = label ? std::to_string(rank.number) + ": " : "";
  std::size_t start = 0;
  for (std::size_t nl; (nl = rank.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = prefix + rank.partial.substr(start, nl + 1 - start);
    write_all(STDOUT_FILENO, line.data(), line.size());
  }
  rank.partial.erase(0, start);
  if (rank.partial.size() > kMaxPartialLine) {
    const std::string line = prefix + rank.partial + "\n";
    write_all(STDOUT_FILENO, line.data(), line.size());
    rank.partial.clear();
  }
}

void end_output(Rank& rank, bool label) {
  if (!rank.partial.empty()) {
    const std::string line =
        (label ? std::to_string(rank.number) + ": " : "") + rank.partial + "\n";
    write_all(STDOUT_FILENO, line.data(), line.size());
    rank.partial.clear();
  }
  rank.output.reset();
}

// Reads what is there; false at the end of the rank's output.
bool pump(Rank& rank, bool label) {
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(rank.output.get(), buffer, sizeof buffer);
    if (n > 0) {
      copy_output(rank, buffer, static_cast<std::size_t>(n), label);
      if (static_cast<std::size_t>(n) < sizeof buffer) return true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    end_output(rank, label);
    return false;
  }
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out(strings.size() + 1, nullptr);
  std::transform(strings.begin(), strings.end(), out.begin(),
                 [](std::string& s) { return s.data(); });
  return out;
}

Rank spawn(const AttemptSetup& setup, std::uint32_t number) {
  Rank rank;
  rank.number = number;
  const std::filesystem::path log_path = setup.log_dir / rank_log_name(number);
  rank.log.reset(::open(log_path.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!rank.log) throw Error("cannot create " + log_path.string() + ": " + std::strerror(errno));
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  rank.output.reset(fds[0]);
  os::UniqueFd write_end(fds[1]);
  std::vector<std::string> argv = setup.argv;
  std::vector<std::string> envp = setup.envs[number];
  std::vector<char*> argv_p = pointers(argv);
  std::vector<char*> envp_p = pointers(envp);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error(std::string("cannot fork rank ") + std::to_string(number) + ": " +
                std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    // Dies with the launcher (its own children are the orphan guard's and the group's).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    for (const int sig : kStopSignals)
      ::signal(sig, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::dup2(write_end.get(), STDOUT_FILENO);
    ::dup2(write_end.get(), STDERR_FILENO);
    ::execve(setup.executable.c_str(), argv_p.data(), envp_p.data());
    const int error = errno;
    const std::string message =
        "primus-launch: cannot execute " + setup.executable + ": " + std::strerror(error) + "\n";
    write_all(STDERR_FILENO, message.data(), message.size());
    ::_exit(error == ENOENT ? kExitNotFound : kExitCannotRun);
  }
  ::setpgid(pid, pid);  // also here, so that the group exists before the first signal
  rank.pid = pid;
  ::fcntl(rank.output.get(), F_SETFL, O_NONBLOCK);
  return rank;
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
  std::vector<Rank> ranks;
  ranks.reserve(setup.envs.size());
  for (std::uint32_t r = 0; r < setup.envs.size(); ++r) {
    ranks.push_back(spawn(setup, r));
    reaper.watch(ranks.back().pid);
  }

  bool stopping_for_failure = false;
  Clock::time_point kill_at = Clock::time_point::max();
  Clock::time_point next_check = Clock::now() + std::chrono::seconds(1);
  auto signal_all = [&](int sig) {
    for (const Rank& rank : ranks) {
      if (rank.running) ::kill(-rank.pid, sig);
    }
  };
  auto forward_stop = [&](int sig, const std::string& source) {
    result.stop_requested = true;
    events.write({"stop-requested",
                  std::nullopt,
                  setup.node,
                  {{"source", source}, {"forwarded", std::string("SIG") + sigabbrev_np(sig)}}});
    signal_all(sig);
  };
  auto reap = [&] {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      const auto it = std::find_if(ranks.begin(), ranks.end(),
                                   [&](const Rank& rank) { return rank.pid == pid; });
      if (it == ranks.end()) continue;  // the orphan guard, or a rank's orphan (subreaper)
      it->running = false;
      result.ends.push_back(
          {static_cast<int>(it->number), status, stopping_for_failure || result.stop_requested});
      if (status != 0 && !stopping_for_failure && !result.stop_requested) {
        events.write({"rank-failed", it->number, setup.node, {{"status", describe(status)}}});
        stopping_for_failure = true;
        signal_all(SIGTERM);
        kill_at = Clock::now() + setup.grace;
      }
    }
  };

  while (std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.running; })) {
    std::vector<pollfd> fds;
    std::vector<Rank*> polled;
    fds.push_back({signals.get(), POLLIN, 0});
    for (Rank& rank : ranks) {
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
      if (fds[i + 1].revents != 0) pump(*polled[i], setup.label);
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
    if (Clock::now() >= next_check) {
      next_check = Clock::now() + std::chrono::seconds(1);
      std::error_code error;
      if (!result.stop_requested && !stopping_for_failure &&
          std::filesystem::exists(setup.stop_request, error)) {
        std::filesystem::remove(setup.stop_request, error);
        forward_stop(SIGTERM, "primus-launch stop");
      }
    }
    if (Clock::now() >= kill_at) {
      signal_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }

  // Nothing of the attempt outlives it: every group is killed (a rank's children), then what
  // is left of the output is copied until every pipe closes.
  for (const Rank& rank : ranks) {
    ::kill(-rank.pid, SIGKILL);
    reaper.forget(rank.pid);
  }
  const auto drain_until = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Rank*> polled;
    for (Rank& rank : ranks) {
      if (!rank.output) continue;
      fds.push_back({rank.output.get(), POLLIN, 0});
      polled.push_back(&rank);
    }
    if (fds.empty()) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(drain_until - Clock::now()).count();
    if (left <= 0) {
      for (Rank* rank : polled)
        end_output(*rank, setup.label);
      break;
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(left)) < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < polled.size(); ++i) {
      if (fds[i].revents != 0) pump(*polled[i], setup.label);
    }
  }
  for (int status = 0; ::waitpid(-1, &status, WNOHANG) > 0;) {
  }
  return result;
}

}  // namespace primus::launch
