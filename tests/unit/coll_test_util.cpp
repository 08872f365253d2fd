#include "coll_test_util.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "../../collectives/socket.hpp"

namespace primus::coll::testing {
namespace {

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Everything in `fd` from its start (a memfd the rank wrote its stderr to).
std::string read_all_from_start(int fd) {
  std::string text;
  char buffer[4096];
  off_t at = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    at += n;
  }
  return text;
}

}  // namespace

std::uint16_t free_port() {
  const net::Listener probe("127.0.0.1", 0);
  return probe.port();
}

std::vector<RankOutcome> run_ranks(
    const Job& job,
    const std::function<void(Communicator&, const std::function<void(const std::string&)>&)>& body,
    const std::function<void(const std::vector<pid_t>&)>& on_started,
    const std::function<void(const std::vector<pid_t>&, const std::vector<bool>&)>& on_ended) {
  const std::uint16_t port = job.port != 0 ? job.port : free_port();
  const auto started_at = std::chrono::steady_clock::now();
  const auto deadline = started_at + job.deadline;
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  std::vector<int> logs;
  for (int rank = 0; rank < job.size; ++rank) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    const int log = ::memfd_create("primus-rank-stderr", MFD_CLOEXEC);
    if (log < 0) throw std::runtime_error("memfd_create");
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
      ::close(fds[0]);
      ::dup2(log, STDERR_FILENO);  // dup2 clears close-on-exec on the copy
      ::close(log);
      const int out = fds[1];
      auto report = [out](const std::string& text) {
        const std::string line = text + "\n";
        ssize_t ignored = ::write(out, line.data(), line.size());
        (void)ignored;
      };
      int code = 0;
      try {
        if (job.before_connect) job.before_connect(rank);
        auto bootstrap = tcp_store_bootstrap(rank, job.size, "127.0.0.1", port, job.secret,
                                             job.timeout, job.options.integrity.value_or(false));
        auto comm = tcp_communicator(*bootstrap, job.secret, job.options);
        body(*comm, report);
      } catch (const PeerFailure& e) {
        report(std::string("PeerFailure(") + std::to_string(e.peer()) + "): " + e.what());
        code = 3;
      } catch (const std::exception& e) {
        report(std::string("error: ") + e.what());
        code = 4;
      }
      ::close(out);
      ::_exit(code);
    }
    ::close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
    logs.push_back(log);
  }
  std::vector<RankOutcome> outcomes(static_cast<std::size_t>(job.size));
  std::vector<bool> open(static_cast<std::size_t>(job.size), true);
  bool started = !on_started;
  std::size_t left = pipes.size();
  auto finish = [&](std::size_t i) {
    open[i] = false;
    ::close(pipes[i]);
    --left;
    outcomes[i].status = wait_for(pids[i]);
    outcomes[i].ended = std::chrono::steady_clock::now();
    outcomes[i].log = read_all_from_start(logs[i]);
    ::close(logs[i]);
    if (!outcomes[i].log.empty()) {
      ssize_t ignored = ::write(STDERR_FILENO, outcomes[i].log.data(), outcomes[i].log.size());
      (void)ignored;
    }
  };
  while (left > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      // The hang guard: kill what is left, keep what it wrote, and fail naming it.
      std::string named;
      for (std::size_t i = 0; i < pipes.size(); ++i) {
        if (!open[i]) continue;
        ::kill(pids[i], SIGKILL);
        char buffer[4096];
        for (;;) {  // the write end closed with the process: read to the end
          const ssize_t n = ::read(pipes[i], buffer, sizeof buffer);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          outcomes[i].output.append(buffer, static_cast<std::size_t>(n));
        }
        outcomes[i].killed_at_deadline = true;
        finish(i);
        named += (named.empty() ? "rank " : ", rank ") + std::to_string(i);
      }
      ADD_FAILURE() << "run_ranks: " << named << " of " << job.size
                    << " did not finish within the deadline of " << job.deadline.count()
                    << " ms (Job::deadline) and "
                    << (named.find(',') == std::string::npos ? "was" : "were")
                    << " killed (SIGKILL)";
      break;
    }
    std::vector<pollfd> entries;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < pipes.size(); ++i) {
      if (open[i]) {
        entries.push_back({pipes[i], POLLIN, 0});
        which.push_back(i);
      }
    }
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    const int timeout_ms = static_cast<int>(std::clamp<long long>(wait_ms.count() + 1, 1, 1000));
    if (::poll(entries.data(), entries.size(), timeout_ms) <= 0) continue;
    bool ended = false;
    for (std::size_t k = 0; k < entries.size(); ++k) {
      if (entries[k].revents == 0) continue;
      const std::size_t i = which[k];
      char buffer[4096];
      const ssize_t n = ::read(pipes[i], buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        finish(i);
        ended = true;
        continue;
      }
      outcomes[i].output.append(buffer, static_cast<std::size_t>(n));
    }
    if (!started) {
      bool all_ready = true;
      for (const auto& outcome : outcomes)
        all_ready = all_ready && outcome.output.find("ready\n") != std::string::npos;
      if (all_ready) {
        started = true;
        on_started(pids);
      }
    }
    if (ended && on_ended && left > 0) on_ended(pids, open);
  }
  return outcomes;
}

}  // namespace primus::coll::testing
