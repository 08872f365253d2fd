// Running a command (run_command.hpp).
#include "process/run_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <optional>

#include "primus/common/error.hpp"
#include "process/child_process.hpp"
#include "supervise/outcome.hpp"

namespace primus::launch {

CommandOutput run_command(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                          bool shielded, bool idle) {
  CommandOutput result;
  int fds[2];
  if (argv.empty() || ::pipe2(fds, O_CLOEXEC) != 0) return result;
  const ExecArgs exec(argv.front(), argv, std::nullopt);
  ChildSetup child;
  child.keep_signal_mask = shielded;
  child.idle = idle;
  child.output = fds[1];
  const pid_t pid = spawn_child(child, exec);
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  ::close(fds[1]);
  const auto until = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fd{fds[0], POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    result.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = status;
  return result;
}

std::string program_beside_launcher(const std::string& name) {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path beside = self.parent_path() / name;
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  return name;
}

SiblingOutput run_sibling(const std::string& name, const std::vector<std::string>& args,
                          std::chrono::seconds timeout, const std::string& what) {
  const std::string program = program_beside_launcher(name);
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), args.begin(), args.end());
  const CommandOutput out = run_command(argv, timeout, /*shielded=*/true);
  SiblingOutput result;
  result.exit_code = out.status >= 0 && WIFEXITED(out.status) ? WEXITSTATUS(out.status) : -1;
  if (out.status < 0 || result.exit_code == kExitNotFound) {
    throw Error("cannot run " + program + ", which " + what + " (is Primus installed whole?)");
  }
  result.message = out.output;
  while (!result.message.empty() && result.message.back() == '\n')
    result.message.pop_back();
  return result;
}

}  // namespace primus::launch
