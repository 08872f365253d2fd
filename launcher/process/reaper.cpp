#include "process/reaper.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "primus/common/error.hpp"
#include "process/child_process.hpp"

namespace primus::launch {
namespace {

[[noreturn]] void guard(int from_launcher) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGPIPE}) {
    ::signal(sig, SIG_IGN);
  }
  ::setpgid(0, 0);
  std::set<pid_t> groups;
  std::string line;
  char buffer[256];
  for (;;) {
    const ssize_t n = ::read(from_launcher, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the launcher is gone (or done)
    for (ssize_t i = 0; i < n; ++i) {
      if (buffer[i] != '\n') {
        line += buffer[i];
        continue;
      }
      if (line.size() > 1) {
        const pid_t group = static_cast<pid_t>(std::atol(line.c_str() + 1));
        if (group > 1 && line[0] == '+') groups.insert(group);
        if (line[0] == '-') groups.erase(group);
      }
      line.clear();
    }
  }
  for (const pid_t group : groups)
    ::kill(-group, SIGKILL);
  ::_exit(0);
}

}  // namespace

Reaper::Reaper() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(std::string("cannot make a pipe for the orphan guard: ") + std::strerror(errno));
  }
  pid_ = ::fork();
  if (pid_ < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(std::string("cannot fork the orphan guard: ") + std::strerror(errno));
  }
  if (pid_ == 0) {
    ::close(fds[1]);
    guard(fds[0]);
  }
  ::close(fds[0]);
  pipe_.reset(fds[1]);
}

Reaper::~Reaper() {
  pipe_.reset();
  if (pid_ > 0) {
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

void Reaper::send(char what, pid_t group) {
  std::string line(1, what);
  line += std::to_string(group);
  line += '\n';
  send(line);
}

void Reaper::send(const std::string& lines) {
  // The guard reads lines, however the pipe splits them; a guard that is gone is not worth
  // failing for (EPIPE: SIGPIPE is ignored by the launcher).
  (void)write_all(pipe_.get(), lines.data(), lines.size());
}

void Reaper::watch(pid_t group) {
  send('+', group);
}

void Reaper::watch(const std::vector<pid_t>& groups) {
  std::string lines;
  for (const pid_t group : groups) {
    lines += '+';
    lines += std::to_string(group);
    lines += '\n';
  }
  if (!lines.empty()) send(lines);
}

void Reaper::forget(pid_t group) {
  send('-', group);
}

}  // namespace primus::launch
