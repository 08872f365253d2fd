#include "rank_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "outcome.hpp"
#include "primus/common/error.hpp"

namespace primus::launch {
namespace {

// A partial line longer than this goes out as it is (a progress bar without newlines).
constexpr std::size_t kMaxPartialLine = 64 << 10;

// Copies what a rank wrote: every byte to its log, whole lines to standard output.
void copy_output(RankProcess& rank, const char* data, std::size_t size, bool label) {
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

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out(strings.size() + 1, nullptr);
  std::transform(strings.begin(), strings.end(), out.begin(),
                 [](std::string& s) { return s.data(); });
  return out;
}

}  // namespace

void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed terminal or a full disk does not stop the job
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void end_output(RankProcess& rank, bool label) {
  if (!rank.partial.empty()) {
    const std::string line =
        (label ? std::to_string(rank.number) + ": " : "") + rank.partial + "\n";
    write_all(STDOUT_FILENO, line.data(), line.size());
    rank.partial.clear();
  }
  rank.output.reset();
}

// Reads what is there; false at the end of the rank's output.
bool pump_output(RankProcess& rank, bool label) {
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

namespace {
rlim_t given_open_files = 0;
bool open_files_raised = false;
}  // namespace

void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  given_open_files = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  open_files_raised = ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

void restore_open_file_limit() {
  rlimit limit{};
  if (!open_files_raised || ::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  limit.rlim_cur = given_open_files;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

RankProcess spawn_rank(const RankSpawn& setup) {
  const std::uint32_t number = setup.number;
  RankProcess rank;
  rank.number = number;
  const std::filesystem::path& log_path = setup.log;
  rank.log.reset(::open(log_path.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!rank.log) throw Error("cannot create " + log_path.string() + ": " + std::strerror(errno));
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  rank.output.reset(fds[0]);
  os::UniqueFd write_end(fds[1]);
  std::vector<std::string> argv = setup.argv;
  std::vector<std::string> envp = setup.env;
  std::vector<char*> argv_p = pointers(argv);
  std::vector<char*> envp_p = pointers(envp);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error(std::string("cannot fork rank ") + std::to_string(number) + ": " +
                std::strerror(errno));
  if (pid == 0) {
    if (setup.own_group) ::setpgid(0, 0);
    // Dies with the launcher (its own children are the orphan guard's and the group's).
    if (setup.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
    }
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    for (const int sig : kStopSignals)
      ::signal(sig, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    restore_open_file_limit();
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
  if (setup.own_group) ::setpgid(pid, pid);  // also here: the group exists before any signal
  rank.pid = pid;
  ::fcntl(rank.output.get(), F_SETFL, O_NONBLOCK);
  return rank;
}

}  // namespace primus::launch
