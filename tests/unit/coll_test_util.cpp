#include "coll_test_util.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "../../collectives/socket.hpp"

namespace primus::coll::testing {

std::uint16_t free_port() {
  const net::Listener probe("127.0.0.1", 0);
  return probe.port();
}

std::vector<RankOutcome> run_ranks(
    const Job& job,
    const std::function<void(Communicator&, const std::function<void(const std::string&)>&)>& body,
    const std::function<void(const std::vector<pid_t>&)>& on_started) {
  const std::uint16_t port = job.port != 0 ? job.port : free_port();
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int rank = 0; rank < job.size; ++rank) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
      ::close(fds[0]);
      const int out = fds[1];
      auto report = [out](const std::string& text) {
        const std::string line = text + "\n";
        ssize_t ignored = ::write(out, line.data(), line.size());
        (void)ignored;
      };
      int code = 0;
      try {
        auto bootstrap =
            tcp_store_bootstrap(rank, job.size, "127.0.0.1", port, job.secret, job.timeout);
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
  }
  std::vector<RankOutcome> outcomes(static_cast<std::size_t>(job.size));
  std::vector<bool> open(static_cast<std::size_t>(job.size), true);
  bool started = !on_started;
  std::size_t left = pipes.size();
  while (left > 0) {
    std::vector<pollfd> entries;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < pipes.size(); ++i) {
      if (open[i]) {
        entries.push_back({pipes[i], POLLIN, 0});
        which.push_back(i);
      }
    }
    if (::poll(entries.data(), entries.size(), 1000) <= 0) continue;
    for (std::size_t k = 0; k < entries.size(); ++k) {
      if (entries[k].revents == 0) continue;
      const std::size_t i = which[k];
      char buffer[4096];
      const ssize_t n = ::read(pipes[i], buffer, sizeof buffer);
      if (n <= 0) {
        open[i] = false;
        ::close(pipes[i]);
        --left;
        int status = 0;
        ::waitpid(pids[i], &status, 0);
        outcomes[i].status = status;
        outcomes[i].ended = std::chrono::steady_clock::now();
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
  }
  return outcomes;
}

}  // namespace primus::coll::testing
