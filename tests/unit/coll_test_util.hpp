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
  std::chrono::steady_clock::time_point ended;  // when its report pipe closed (it exited)
};

struct Job {
  int size = 1;
  std::string secret = "test-secret-0123456789";
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  Options options;
  std::uint16_t port = 0;  // of rank 0's store; 0: a free one
};

// A port that was free a moment ago on 127.0.0.1.
std::uint16_t free_port();

// Forks `job.size` ranks; each builds its communicator and runs body(comm, report), where
// report writes to the parent. A rank's exit code: 0 when body returned, 3 on PeerFailure, 4 on
// any other exception (its message reported). on_started(pids) runs in the parent once every
// rank reported "ready" through ready() (optional) - for fault injection.
std::vector<RankOutcome> run_ranks(
    const Job& job,
    const std::function<void(Communicator&, const std::function<void(const std::string&)>&)>& body,
    const std::function<void(const std::vector<pid_t>&)>& on_started = {});

}  // namespace primus::coll::testing
