#include "control/task_wrapper.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

#include "cli/command_path.hpp"
#include "control/control_protocol.hpp"
#include "control/node_standby.hpp"
#include "local/standby_program.hpp"
#include "primus/collectives/control.hpp"
#include "primus/common/error.hpp"
#include "primus/common/parse_number.hpp"
#include "process/rank_process.hpp"
#include "supervise/job_dir.hpp"
#include "supervise/outcome.hpp"

extern char** environ;

namespace primus::launch {
namespace {

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::uint32_t number_variable(const char* name, const char* fallback) {
  std::string text = variable(name);
  if (text.empty() && fallback != nullptr) text = variable(fallback);
  const auto n = parse_unsigned(text, 1U << 30);
  if (!n) {
    throw Error(std::string(name) + ": expected a number in the task's environment, got '" + text +
                "' (is primus.so in the plugstack?)");
  }
  return static_cast<std::uint32_t>(*n);
}

// The children of this process (its rank, and orphans it adopted as a subreaper).
std::set<pid_t> children() {
  std::set<pid_t> out;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return out;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + entry->d_name + "/children");
    for (pid_t pid = 0; in >> pid;)
      out.insert(pid);
  }
  ::closedir(tasks);
  return out;
}

// Kills everything the rank left behind: each child, and the children those leave to us; not
// `spare`, the node's standby, which may be running another task's rank.
void kill_leftovers(pid_t spare) {
  for (int round = 0; round < 200; ++round) {
    for (int status = 0; ::waitpid(-1, &status, WNOHANG) > 0;) {
    }
    std::set<pid_t> left = children();
    left.erase(spare);
    if (left.empty()) return;
    for (const pid_t pid : left)
      ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Ends this process the way the rank ended.
[[noreturn]] void end_like(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
  }
  std::exit(exit_code(wait_status));
}

os::UniqueFd connect_to_launcher(std::uint32_t rank, std::uint32_t attempt) {
  const std::string address = variable("PRIMUS_CONTROL");
  if (address.empty()) return {};
  try {
    os::UniqueFd fd =
        coll::connect_control(address, variable("PRIMUS_JOB_SECRET"),
                              rank | coll::kControlWrapperBit, std::chrono::seconds(30));
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::string node = variable("SLURMD_NODENAME");
    if (node.empty()) node = host;
    const std::string step = variable("SLURM_JOB_ID") + "." + variable("SLURM_STEP_ID");
    const std::string hello = wrapper_hello_line(attempt, node, ::getpid(), step);
    write_all(fd.get(), hello.data(), hello.size());
    return fd;
  } catch (const std::exception& e) {
    std::cerr << "primus-task: rank " << rank << " cannot report to primus-launch (" << e.what()
              << "); it is supervised by its exit status only\n";
    return {};
  }
}

// What the launcher says to this wrapper: a hung rank's kill, a rejoin's notice (rare lines).
struct LauncherLines {
  LineSplitter split;
  bool open = true;
  // Reads what has arrived; the complete lines, none once the connection has closed.
  std::vector<std::string> read(int fd) {
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) open = false;
    if (n <= 0) return {};
    bool ok = true;
    std::vector<std::string> lines =
        split.feed(std::string_view(buffer, static_cast<std::size_t>(n)), ok);
    if (!ok) open = false;
    return lines;
  }
};

// What this task runs and keeps: the rank's command, environment and logs, the node's standby
// that it started (the node's first task), and the connection on which the standby reports a
// replacement it made here.
struct Task {
  RankSpawn spawn;
  std::string log_dir;
  std::optional<std::vector<std::string>> program;  // the command's, when a standby can run it
  std::optional<NodeStandbyProcess> standby;
  os::UniqueFd from_standby;  // the rank now running is the standby's fork: its end comes here

  pid_t standby_pid() const { return standby ? standby->pid : -1; }

  // The launcher's word that every rank is up: the node's first task starts the standby, once.
  void start_standby() {
    if (standby || !program || !starts_node_standby()) return;
    const char* node = std::getenv("SLURMD_NODENAME");
    const std::string log = std::string("standby-") + (node != nullptr ? node : "node") + ".log";
    try {
      standby = start_node_standby(spawn.executable, spawn.argv.front(), spawn.env,
                                   node_standby_name(), std::filesystem::path(log_dir) / log);
    } catch (const std::exception& e) {
      std::cerr << "primus-task: rank " << spawn.number << ": " << e.what() << "\n";
      program.reset();  // not again
    }
  }
};

// Until the rank has ended: its output copied, signals passed on or reported, the launcher's
// word to kill it (a hang, for a rejoin) carried out. Returns its wait status; `stopped` says
// whether slurmstepd sent the step a stop signal meanwhile.
int supervise_rank(RankProcess& process, Task& task, int signals, const os::UniqueFd& control,
                   LauncherLines& launcher, bool& stopped) {
  int wait_status = 0;
  while (process.running) {
    pollfd fds[4] = {{signals, POLLIN, 0},
                     {control && launcher.open ? control.get() : -1, POLLIN, 0},
                     {task.from_standby ? task.from_standby.get() : -1, POLLIN, 0},
                     {process.output.get(), POLLIN, 0}};
    const nfds_t count = process.output ? 4 : 3;
    if (::poll(fds, count, -1) < 0 && errno != EINTR) break;
    if (count == 4 && fds[3].revents != 0) pump_output(process, false);
    if (fds[1].revents != 0) {
      for (const std::string& line : launcher.read(control.get())) {
        if (is_kill_line(line)) ::kill(process.pid, SIGKILL);
        if (is_standby_line(line)) task.start_standby();
      }
    }
    if (fds[2].revents != 0 && read_standby_end(task.from_standby.get(), wait_status)) {
      process.running = false;
      task.from_standby.reset();
    }
    signalfd_siginfo info{};
    while (::read(signals, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      // slurmstepd, the parent, signals every process of the step, the rank included. A stop
      // signal from anyone else (kill of this task's pid) was meant for the rank: pass it on.
      if (sig == SIGCHLD) continue;
      if (static_cast<pid_t>(info.ssi_pid) != ::getppid()) {
        ::kill(process.pid, sig);
      } else if (!stopped) {
        stopped = true;
        if (control) {
          const char* abbrev = sigabbrev_np(sig);
          const std::string line = wrapper_signal_line(
              abbrev != nullptr ? std::string("SIG") + abbrev : std::to_string(sig));
          write_all(control.get(), line.data(), line.size());
        }
      }
    }
    for (int status = 0;;) {
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (pid == process.pid) {
        process.running = false;
        wait_status = status;
      }
    }
  }
  // Whatever the rank left running goes; then the rest of its output.
  kill_leftovers(task.standby_pid());
  while (process.output) {
    pollfd fd{process.output.get(), POLLIN, 0};
    if (::poll(&fd, 1, 2000) <= 0) {
      end_output(process, false);
      break;
    }
    pump_output(process, false);
  }
  return wait_status;
}

// --primus-recover=rejoin: whether this rank's end is a failure that primus-launch may answer
// with a replacement in this task (docs/architecture.md, "Recovery without a restart").
bool may_be_replaced(int wait_status, bool stopped, const os::UniqueFd& control) {
  if (!control || stopped || variable("PRIMUS_RECOVER") != "rejoin") return false;
  const int code = exit_code(wait_status);
  const auto preempted = parse_unsigned(variable("PRIMUS_EXIT_PREEMPTED"), 255);
  return code != 0 && (!preempted || code != static_cast<int>(*preempted));
}

// After a failure that may be replaced: primus-launch's generation notice for this rank, or
// nullopt once it is clear that none comes (a stop signal: the launcher ends the step when it
// does not rejoin; its connection closed; the rejoin's deadline, with a margin, passed).
std::optional<GenerationNotice> wait_for_replacement(int signals, const os::UniqueFd& control,
                                                     LauncherLines& launcher) {
  const auto deadline_seconds = parse_unsigned(variable("PRIMUS_REJOIN_DEADLINE"), 1U << 20);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(deadline_seconds.value_or(60) + 10);
  while (launcher.open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return std::nullopt;
    pollfd fds[2] = {{signals, POLLIN, 0}, {control.get(), POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000))) < 0 && errno != EINTR) {
      return std::nullopt;
    }
    signalfd_siginfo info{};
    while (::read(signals, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      if (info.ssi_signo != SIGCHLD) return std::nullopt;
    }
    if (fds[1].revents == 0) continue;
    for (const std::string& line : launcher.read(control.get())) {
      std::string error;
      if (auto notice = parse_generation_notice(line, error)) return notice;
    }
  }
  return std::nullopt;
}

// The replacement in this task, in the notice's generation: the node's standby's fork where
// there is one that takes it, else the command started afresh. Throws primus::Error.
RankProcess start_replacement(Task& task, const GenerationNotice& notice,
                              const os::UniqueFd& control) {
  RankSpawn replacement = task.spawn;
  replacement.env = replacement_environment(task.spawn.env, notice);
  replacement.log =
      std::filesystem::path(task.log_dir) / rank_log_name(task.spawn.number, notice.generation);
  std::optional<RankProcess> process;
  if (task.program) {
    Environment env;
    for (const std::string& entry : replacement.env) {
      const auto eq = entry.find('=');
      if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    std::string why;
    if (auto made = ask_node_standby(node_standby_name(), standby_assignment(*task.program, env),
                                     task.spawn.number, replacement.log, why)) {
      task.from_standby = std::move(made->connection);
      process = std::move(made->process);
    } else {
      std::cerr << "primus-task: rank " << task.spawn.number << ": " << why
                << "; its replacement starts afresh\n";
    }
  }
  const bool from_standby = process.has_value();
  if (!process) process = spawn_rank(replacement);
  if (control) {
    const std::string line = wrapper_replacement_line(from_standby);
    write_all(control.get(), line.data(), line.size());
  }
  return std::move(*process);
}

}  // namespace

int run_task_wrapper(const std::vector<std::string>& command) {
  if (command.empty()) throw Error("primus-task: no command after --");
  const std::string log_dir = variable("PRIMUS_LAUNCH_LOG_DIR");
  if (log_dir.empty()) {
    throw Error(
        "primus-task: runs as a task of the srun step that primus-launch starts "
        "(PRIMUS_LAUNCH_LOG_DIR is not set)");
  }
  if (variable("PRIMUS_ENV_VERSION").empty()) {
    // Without the plugin every rank would run as a world of one, each training alone.
    throw Error(
        "primus-task: this task has no rank environment (PRIMUS_ENV_VERSION is not set): "
        "the Primus SPANK plugin (primus.so) is not in this cluster's plugstack, or the step ran "
        "with --primus=none; see spank-primus(8)");
  }
  const std::uint32_t rank = number_variable("RANK", "SLURM_PROCID");
  const std::uint32_t attempt = number_variable("PRIMUS_LAUNCH_RESTARTS", nullptr);

  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (const int sig : kStopSignals)
    sigaddset(&set, sig);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  const os::UniqueFd signals(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals) throw Error(std::string("signalfd: ") + std::strerror(errno));

  Task task;
  RankSpawn& spawn = task.spawn;
  spawn.number = rank;
  const ResolvedCommand resolved = resolve_command(command.front(), std::getenv("PATH"));
  spawn.executable = resolved.status == 0 ? resolved.path : command.front();
  spawn.argv = command;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    if (text.rfind("PRIMUS_LAUNCH_LOG_DIR=", 0) == 0) continue;
    spawn.env.push_back(text);
  }
  spawn.log = std::filesystem::path(log_dir) / rank_log_name(rank);
  spawn.own_group = false;
  task.log_dir = log_dir;
  if (variable("PRIMUS_RECOVER") == "rejoin")
    task.program = python_program(spawn.executable, command);
  RankProcess process = spawn_rank(spawn);
  // After the rank has started, so that its start does not wait for the handshake; what it
  // writes meanwhile waits in its pipe.
  os::UniqueFd control = connect_to_launcher(rank, attempt);

  bool stopped = false;
  LauncherLines launcher;
  int wait_status = supervise_rank(process, task, signals.get(), control, launcher, stopped);
  for (;;) {
    if (control) {
      // The kernel delivers it even after this process is gone (the launcher sends nothing on
      // this connection but a rejoin's notice, so the close is an orderly one); the launcher
      // waits a few seconds after srun ends for reports still on their way. Not waiting here
      // for the launcher to read it saves every task a round trip through the launcher's loop
      // at the end of each step.
      const std::string line = wrapper_exit_line(wait_status);
      write_all(control.get(), line.data(), line.size());
    }
    if (!may_be_replaced(wait_status, stopped, control)) break;
    const auto notice = wait_for_replacement(signals.get(), control, launcher);
    if (!notice) break;
    // The replacement: the same command in this task, in the notice's generation.
    try {
      process = start_replacement(task, *notice, control);
    } catch (const std::exception& e) {
      std::cerr << "primus-task: rank " << rank << ": cannot start its replacement: " << e.what()
                << "\n";
      break;
    }
    wait_status = supervise_rank(process, task, signals.get(), control, launcher, stopped);
  }
  if (control) ::shutdown(control.get(), SHUT_WR);
  end_like(wait_status);
}

}  // namespace primus::launch
