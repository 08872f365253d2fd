// Running a function as N rank processes on this machine (fork), each with its own TCP store
// bootstrap and communicator, and collecting what each printed and how it ended.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "primus/collectives.hpp"

namespace primus::coll::testing {

struct RankOutcome {
  int status = -1;                              // waitpid status
  std::string output;                           // what the rank wrote to its report pipe
  std::string log;                              // what it wrote to stderr (the library's log)
  std::chrono::steady_clock::time_point ended;  // when its report pipe closed (it exited)
  bool killed_at_deadline = false;              // still running at Job::deadline: killed
};

struct Job {
  int size = 1;
  std::string secret = "test-secret-0123456789";
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // the bootstrap's
  Options options;         // options.integrity also seals the store's connections
  std::uint16_t port = 0;  // of rank 0's store; 0: a free one
  // A hang guard, not a performance bound: the ranks still running this long after they were
  // started are killed (SIGKILL), and the test fails naming them. Generous, so that it holds
  // on a loaded machine; a test that expects a hang sets a short one.
  std::chrono::milliseconds deadline{std::chrono::minutes(5)};
  // Runs in each rank's process before it connects to the store (optional).
  std::function<void(int rank)> before_connect;
};

// A port that was free a moment ago on 127.0.0.1.
std::uint16_t free_port();

// Forks `job.size` ranks; each builds its communicator and runs body(comm, report), where
// report writes to the parent. A rank's exit code: 0 when body returned, 3 on PeerFailure, 4 on
// any other exception (its message reported). on_started(pids) runs in the parent once every
// rank reported "ready" through report() (optional) - for fault injection. on_ended(pids,
// running) runs in the parent each time a rank has ended, with the ranks still running
// (optional). Ranks still running at job.deadline are killed and reported as a test failure
// (ADD_FAILURE) that names them; the outcomes are returned either way. Each rank's stderr is
// kept in its outcome's log (and copied to this process's stderr once the rank has ended).
std::vector<RankOutcome> run_ranks(
    const Job& job,
    const std::function<void(Communicator&, const std::function<void(const std::string&)>&)>& body,
    const std::function<void(const std::vector<pid_t>&)>& on_started = {},
    const std::function<void(const std::vector<pid_t>&, const std::vector<bool>&)>& on_ended = {});

}  // namespace primus::coll::testing
