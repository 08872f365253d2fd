// Communicator::abort() on the TCP backend, with real processes and sockets on this machine: a
// rank told from outside that a peer failed ends a collective that the silent peer would hold
// for the whole timeout, and its peers learn at once that it left.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "coll_test_util.hpp"

namespace primus::coll {
namespace {

using namespace std::chrono_literals;
using testing::Job;
using testing::run_ranks;

// Rank 2 goes silent after the first allreduce (as a rank that hangs), with a timeout of 60 s.
// Rank 0 is told on another thread that rank 2 failed and aborts: its waiting allreduce throws
// the abort's PeerFailure. Rank 0 then stays alive for 5 s, and rank 1, whose ring neighbour
// rank 0 has left the communicator (not the process), fails before that, its own communicator
// aborted by the failure. Both end while rank 2 is still silent, far inside the timeout.
TEST(CollTcpAbort, AnAbortOnAnotherThreadEndsACollectiveThatASilentPeerHolds) {
  Job job;
  job.size = 3;
  job.options.timeout = 60s;
  job.deadline = 120s;
  const auto outcomes = run_ranks(job, [](Communicator& comm, const auto& report) {
    std::vector<float> data(std::size_t{1} << 18, 1.0F);  // 1 MiB: the ring
    comm.allreduce(data.data(), data.size(), DType::kFloat32, ReduceOp::kSum);
    report("ready");
    if (comm.rank() == 2) {
      std::this_thread::sleep_for(8s);  // beyond rank 0's 5 s after its abort
      return;
    }
    std::thread aborter;
    if (comm.rank() == 0) {
      aborter = std::thread([&comm] {
        std::this_thread::sleep_for(300ms);
        comm.abort("the launcher says rank 2 failed");
      });
    }
    try {
      for (;;)
        comm.allreduce(data.data(), data.size(), DType::kFloat32, ReduceOp::kSum);
    } catch (...) {
      if (aborter.joinable()) aborter.join();
      report(comm.aborted() ? " aborted()" : " not aborted()");
      if (comm.rank() == 0) std::this_thread::sleep_for(5s);
      throw;
    }
  });
  ASSERT_EQ(outcomes.size(), 3u);
  for (int r = 0; r < 2; ++r) {
    const auto& outcome = outcomes[static_cast<std::size_t>(r)];
    EXPECT_TRUE(WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 3)
        << "rank " << r << ": " << outcome.output;
    EXPECT_LT(outcome.ended, outcomes[2].ended)
        << "rank " << r << " waited for the silent rank: " << outcome.output;
  }
  EXPECT_NE(outcomes[0].output.find(
                "PeerFailure(-1): rank 0: communicator aborted: the launcher says rank 2 failed"),
            std::string::npos)
      << outcomes[0].output;
  EXPECT_NE(outcomes[0].output.find(" aborted()"), std::string::npos) << outcomes[0].output;
  EXPECT_NE(outcomes[1].output.find("PeerFailure(0)"), std::string::npos)
      << "rank 1 names rank 0, which left: " << outcomes[1].output;
  // A peer's failure aborts the communicator too, so that the ranks waiting on rank 1 fail next.
  EXPECT_NE(outcomes[1].output.find(" aborted()"), std::string::npos) << outcomes[1].output;
  EXPECT_EQ(outcomes[1].output.find(" not aborted()"), std::string::npos) << outcomes[1].output;
  EXPECT_LT(outcomes[1].ended, outcomes[0].ended)
      << "rank 1 learned of rank 0's abort only when its process ended";
  EXPECT_TRUE(WIFEXITED(outcomes[2].status) && WEXITSTATUS(outcomes[2].status) == 0)
      << outcomes[2].output;
}

// After abort() every call throws the abort's PeerFailure before it sends anything (the first
// reason kept), and the peer sees the rank leave instead of waiting for its timeout.
TEST(CollTcpAbort, EveryCallAfterAnAbortThrowsItsReason) {
  Job job;
  job.size = 2;
  job.options.timeout = 60s;
  job.deadline = 120s;
  const auto outcomes = run_ranks(job, [](Communicator& comm, const auto& report) {
    std::int32_t value = 1;
    comm.allreduce(&value, 1, DType::kInt32, ReduceOp::kSum);
    if (comm.rank() == 1) {
      comm.allreduce(&value, 1, DType::kInt32, ReduceOp::kSum);  // rank 0 never joins
      return;
    }
    report(comm.aborted() ? "aborted()" : "not aborted()");
    comm.abort("first");
    comm.abort("second");
    std::int32_t gathered[2] = {};
    const std::vector<std::function<void()>> calls = {
        [&] { comm.allreduce(&value, 1, DType::kInt32, ReduceOp::kSum); },
        [&] { comm.broadcast(&value, 1, DType::kInt32, 0); },
        [&] { comm.allgather(&value, gathered, 1, DType::kInt32); },
        [&] { comm.reduce_scatter(gathered, &value, 1, DType::kInt32, ReduceOp::kSum); },
        [&] { comm.barrier(); },
    };
    for (const auto& call : calls) {
      try {
        call();
        report(" returned");
      } catch (const PeerFailure& e) {
        report(std::string(" [") + e.what() + "]");
      }
    }
  });
  ASSERT_EQ(outcomes.size(), 2u);
  const std::string thrown = " [rank 0: communicator aborted: first]\n";
  std::string expected = "not aborted()\n";
  for (int i = 0; i < 5; ++i)
    expected += thrown;
  EXPECT_EQ(outcomes[0].output, expected);
  EXPECT_EQ(outcomes[0].status, 0) << outcomes[0].output;
  EXPECT_TRUE(WIFEXITED(outcomes[1].status) && WEXITSTATUS(outcomes[1].status) == 3)
      << outcomes[1].output;
  EXPECT_NE(outcomes[1].output.find("PeerFailure(0)"), std::string::npos) << outcomes[1].output;
}

}  // namespace
}  // namespace primus::coll
