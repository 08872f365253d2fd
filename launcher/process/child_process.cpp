// Every child's setup between fork and exec (child_process.hpp).
#include "process/child_process.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "supervise/outcome.hpp"

namespace primus::launch {
namespace {

rlim_t given_open_files = 0;
bool open_files_raised = false;

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out(strings.size() + 1, nullptr);
  std::transform(strings.begin(), strings.end(), out.begin(),
                 [](std::string& s) { return s.data(); });
  return out;
}

}  // namespace

int signal_for_ranks(int received, int warning) {
  return received == SIGTERM || received == warning ? received : SIGTERM;
}

int signal_number(std::string_view name) {
  if (name.substr(0, 3) == "SIG") name.remove_prefix(3);
  const std::pair<std::string_view, int> known[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2},
                                                    {"TERM", SIGTERM}, {"INT", SIGINT},
                                                    {"HUP", SIGHUP},   {"URG", SIGURG}};
  for (const auto& [text, number] : known) {
    if (name == text) return number;
  }
  return SIGUSR2;
}

void setup_child(const ChildSetup& setup) {
  if (setup.own_group) ::setpgid(0, 0);
  if (setup.idle) {
    const sched_param lowest{};
    ::sched_setscheduler(0, SCHED_IDLE, &lowest);
  }
  if (setup.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != setup.parent) ::_exit(1);
  }
  // Dispositions first, then the mask: a signal let through must find its default action, not
  // a handler of the launcher's (a vfork child runs in the launcher's memory).
  for (const int sig : kStopSignals)
    ::signal(sig, SIG_DFL);
  ::signal(SIGPIPE, SIG_DFL);
  if (!setup.keep_signal_mask) {
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  }
  restore_open_file_limit();
  if (setup.input >= 0) {
    ::dup2(setup.input, STDIN_FILENO);
  } else {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
  }
  if (setup.output >= 0) {
    ::dup2(setup.output, STDOUT_FILENO);
    ::dup2(setup.output, STDERR_FILENO);
  }
}

ExecArgs::ExecArgs(std::string path, std::vector<std::string> argv,
                   std::optional<std::vector<std::string>> env)
    : path_(std::move(path)), argv_(std::move(argv)), own_env_(env.has_value()) {
  if (env) env_ = std::move(*env);
  argv_p_ = pointers(argv_);
  env_p_ = pointers(env_);
}

void ExecArgs::exec() const {
  if (own_env_) {
    ::execve(path_.c_str(), argv_p_.data(), env_p_.data());
  } else {
    ::execvp(path_.c_str(), argv_p_.data());
  }
  const int error = errno;
  const char* parts[] = {"primus-launch: cannot execute ", path_.c_str(), ": ",
                         std::strerror(error), "\n"};
  for (const char* part : parts)
    write_all(STDERR_FILENO, part, std::strlen(part));
  ::_exit(error == ENOENT ? kExitNotFound : kExitCannotRun);
}

pid_t spawn_child(const ChildSetup& setup, const ExecArgs& exec) {
  // The clang-analyzer checks flag any call in a vfork child, and the parent's wait until the
  // exec, which is the point.
  const pid_t pid = ::vfork();  // NOLINT(clang-analyzer-security.insecureAPI.vfork)
  if (pid == 0) {
    setup_child(setup);  // NOLINT(clang-analyzer-unix.Vfork)
    exec.exec();
  }
  return pid;
}

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

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace primus::launch
