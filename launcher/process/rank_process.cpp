// One rank as a child process (rank_process.hpp).
#include "process/rank_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "primus/common/error.hpp"
#include "supervise/outcome.hpp"

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

}  // namespace

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

os::UniqueFd open_rank_log(const std::filesystem::path& path) {
  // A log left by an earlier run in the same job directory is removed, not truncated: on ext4 a
  // truncation of a file with data flushes it first (auto_da_alloc), 0.2 ms a log here against
  // 0.01 ms for an unlink and a new file, on every rank's start.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw Error("cannot replace " + path.string() + ": " + std::strerror(errno));
  }
  os::UniqueFd log(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!log) throw Error("cannot create " + path.string() + ": " + std::strerror(errno));
  return log;
}

RankProcess spawn_rank(const RankSpawn& setup) {
  const std::uint32_t number = setup.number;
  RankProcess rank;
  rank.number = number;
  rank.log = open_rank_log(setup.log);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  rank.output.reset(fds[0]);
  os::UniqueFd write_end(fds[1]);
  const ExecArgs exec(setup.executable, setup.argv, setup.env);
  ChildSetup child;
  child.own_group = setup.own_group;
  child.die_with_parent = setup.die_with_parent;
  child.parent = ::getpid();
  child.output = write_end.get();
  child.input = setup.input;
  const pid_t pid = spawn_child(child, exec);
  if (pid < 0)
    throw Error(std::string("cannot fork rank ") + std::to_string(number) + ": " +
                std::strerror(errno));
  if (setup.own_group) ::setpgid(pid, pid);  // also here: the group exists before any signal
  rank.pid = pid;
  ::fcntl(rank.output.get(), F_SETFL, O_NONBLOCK);
  return rank;
}

}  // namespace primus::launch
