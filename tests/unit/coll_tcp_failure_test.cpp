// libprimus-coll's TCP backend when things go wrong, with real processes and sockets on this
// machine: a killed or stopped rank, a forged proof refused by the store, idle and garbage
// connections during the bootstrap, a store that sends the wrong count, and run_ranks' hang
// guard. (coll_tcp_test.cpp: the results of every op.)
#include <arpa/inet.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../../collectives/authenticated.hpp"
#include "coll_test_util.hpp"

namespace primus::coll {
namespace {

using testing::Job;
using testing::run_ranks;
// One rank dies (SIGKILL) or hangs (SIGSTOP) in the middle of allreduces: every other rank
// gets a PeerFailure naming a peer within about one deadline (Options::timeout), never a hang.
// The stopped rank is ended only once every survivor has, so that what ends them is the
// deadline and not its connections closing; were the deadline not kept, they would wait for
// Job::deadline (the hang guard), far past the bound asserted here. The bound leaves room for
// a loaded machine: a call that started just before the signal, the failures spreading from
// rank to rank, and the scheduler.
void survivors_fail_in_time(int signal, std::chrono::microseconds spin = {}) {
  using std::chrono::milliseconds;
  Job job;
  job.size = 4;
  job.options.spin = spin;
  job.options.timeout = milliseconds(2000);
  job.deadline = std::chrono::seconds(120);
  const milliseconds bound = 2 * *job.options.timeout + milliseconds(5000);
  const int victim = 2;
  std::chrono::steady_clock::time_point injected{};
  const auto outcomes = run_ranks(
      job,
      [](Communicator& comm, const auto& report) {
        // 1 MiB: the ring, several steps per call, each call short even on a loaded machine.
        std::vector<float> data(std::size_t{1} << 18, 1.0F);
        comm.allreduce(data.data(), data.size(), DType::kFloat32, ReduceOp::kSum);
        report("ready");
        for (;;)
          comm.allreduce(data.data(), data.size(), DType::kFloat32, ReduceOp::kMax);
      },
      [&](const std::vector<pid_t>& pids) {
        injected = std::chrono::steady_clock::now();
        ::kill(pids[victim], signal);
      },
      [&](const std::vector<pid_t>& pids, const std::vector<bool>& running) {
        bool survivors_running = false;
        for (int r = 0; r < job.size; ++r)
          survivors_running =
              survivors_running || (r != victim && running[static_cast<std::size_t>(r)]);
        if (signal == SIGSTOP && !survivors_running && running[victim]) {
          ::kill(pids[victim], SIGKILL);
        }
      });
  ASSERT_NE(injected, std::chrono::steady_clock::time_point{})
      << "the ranks never all reported ready: " << outcomes[0].output << outcomes[1].output;
  for (int r = 0; r < job.size; ++r) {
    if (r == victim) continue;
    const auto& outcome = outcomes[static_cast<std::size_t>(r)];
    EXPECT_TRUE(WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 3)
        << "rank " << r << ": " << outcome.output;
    EXPECT_NE(outcome.output.find("PeerFailure("), std::string::npos) << outcome.output;
    EXPECT_NE(outcome.output.find("rank "), std::string::npos) << outcome.output;
    const auto took = std::chrono::duration_cast<milliseconds>(outcome.ended - injected);
    EXPECT_LT(took.count(), bound.count())
        << "rank " << r << " took " << took.count() << " ms to give up: " << outcome.output;
  }
}

TEST(CollTcp, AKilledRankMakesEverySurvivorFailWithinTheDeadline) {
  survivors_fail_in_time(SIGKILL);
}
TEST(CollTcp, AStoppedRankMakesEverySurvivorFailWithinTheDeadline) {
  survivors_fail_in_time(SIGSTOP);
}
// Waiting ranks that spin before they sleep (Options::spin) still give up at the deadline.
TEST(CollTcp, SpinningSurvivorsOfAStoppedRankFailWithinTheDeadline) {
  survivors_fail_in_time(SIGSTOP, std::chrono::microseconds(50));
}

// A client that speaks the handshake as far as the proof without the job's secret: it claims
// rank 1 (a rank the store is waiting for), answers the store's challenge with the proof a
// process with another secret computes (HMAC-SHA256 keyed with that secret over the store's
// new nonce), and reads the store's verdict. Writes "ADDRESS verdict V closed|open" to `fd`:
// its own address as the store sees it, the verdict byte, and whether the store then closed
// the connection. Runs in a process of its own.
int forge_a_proof(std::uint16_t port, int fd) {
  using namespace handshake;
  try {
    const auto deadline = net::Clock::now() + std::chrono::seconds(30);
    const net::Socket store = net::connect_to("127.0.0.1", port, deadline, "the store", 0);
    sockaddr_in local{};
    socklen_t length = sizeof local;
    ::getsockname(store.fd(), reinterpret_cast<sockaddr*>(&local), &length);
    const std::string address = "127.0.0.1:" + std::to_string(ntohs(local.sin_port));
    const Hello hello = make_hello(Purpose::kStore, 1, fresh_nonce());
    store.send_all(hello.data(), hello.size(), deadline);
    Challenge challenge{};
    store.recv_all(challenge.data(), challenge.size(), deadline);
    Nonce nonce{};
    std::copy(challenge.begin(), challenge.begin() + kNonceBytes, nonce.begin());
    const std::string wrong = "not-the-secret";
    Proof forged{};
    if (!check_challenge(wrong, hello, make_challenge(wrong, hello, nonce, 0), 0, forged)) return 5;
    store.send_all(forged.data(), forged.size(), deadline);
    std::uint8_t verdict = 0xFF;
    store.recv_all(&verdict, 1, deadline);
    bool closed = false;
    try {
      std::uint8_t more = 0;
      store.recv_all(&more, 1, net::Clock::now() + std::chrono::seconds(20));
    } catch (const PeerFailure&) {
      closed = true;
    }
    const std::string line =
        address + " verdict " + std::to_string(verdict) + (closed ? " closed" : " open") + "\n";
    return ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) ? 0 : 6;
  } catch (const std::exception& e) {
    const std::string line = std::string("error ") + e.what() + "\n";
    ssize_t ignored = ::write(fd, line.data(), line.size());
    (void)ignored;
    return 7;
  }
}

// The store is sent a forged proof while the job starts: it answers with the refused verdict,
// closes the connection, logs it (who, and why), and the rightful ranks form the job as if the
// intruder were not there.
TEST(CollTcp, AForgedProofIsRefusedAndLoggedByTheStoreAndTheJobGoesOn) {
  Job job;
  job.size = 3;
  job.port = testing::free_port();
  int done[2];
  ASSERT_EQ(::pipe(done), 0);
  const pid_t intruder = ::fork();
  ASSERT_GE(intruder, 0);
  if (intruder == 0) {
    ::close(done[0]);
    ::_exit(forge_a_proof(job.port, done[1]));
  }
  ::close(done[1]);
  // The store stops accepting once every rank has joined: ranks 1 and 2 connect only once the
  // intruder has had its verdict (or gave up), so that the store is sure to have served it.
  job.before_connect = [fd = done[0]](int rank) {
    if (rank == 0) return;
    pollfd ready{fd, POLLIN, 0};
    ::poll(&ready, 1, 60000);
  };
  const auto outcomes = run_ranks(job, [](Communicator& comm, const auto& report) {
    std::int64_t value = comm.rank() + 1;
    comm.allreduce(&value, 1, DType::kInt64, ReduceOp::kSum);
    report("sum " + std::to_string(value));
  });
  for (const auto& outcome : outcomes) {
    EXPECT_TRUE(WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 0) << outcome.output;
    EXPECT_NE(outcome.output.find("sum 6"), std::string::npos) << outcome.output;
  }
  int status = 0;
  ::waitpid(intruder, &status, 0);
  std::string said;
  char buffer[256];
  for (ssize_t n; (n = ::read(done[0], buffer, sizeof buffer)) > 0;)
    said.append(buffer, static_cast<std::size_t>(n));
  ::close(done[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "intruder status " << status << ": " << said;
  const std::string address = said.substr(0, said.find(' '));
  EXPECT_EQ(said, address + " verdict 0 closed\n") << "the store did not refuse the forged proof";
  const std::string refusal = "primus: store: refused a connection from " + address +
                              ": failed authentication (not this job's secret, or a replayed "
                              "handshake)\n";
  EXPECT_EQ(outcomes[0].log, refusal) << "rank 0's log";
}

// Another user of the node knocks on the store while the job starts (its port may be known):
// 100 connections that send nothing, and 20 that send garbage, all held open until the test
// kills this process. Writes one byte to `fd` once they are all open. Runs in a process of its
// own.
int flood_the_store(std::uint16_t port, int fd) {
  try {
    const auto deadline = net::Clock::now() + std::chrono::seconds(30);
    std::vector<net::Socket> held;
    for (int i = 0; i < 120; ++i) {
      held.push_back(net::connect_to("127.0.0.1", port, deadline, "the store", 0));
      if (i >= 100) {
        std::array<std::uint8_t, 64> garbage{};
        for (std::size_t b = 0; b < garbage.size(); ++b)
          garbage[b] = static_cast<std::uint8_t>(i * 31 + b * 7);
        held.back().send_all(garbage.data(), garbage.size(), deadline);
      }
    }
    const char ready = 'r';
    if (::write(fd, &ready, 1) != 1) return 6;
    ::close(fd);
    ::pause();
    return 0;
  } catch (const std::exception&) {
    return 7;
  }
}

// The store handshook its connections one at a time with a 10 s wait for the hello, so idle
// connections held the job for 10 s each (100 of them: over 16 minutes, far past the hang guard
// below). Handshakes now run concurrently with a short deadline each: the job forms while the
// intruder still holds every connection, and the refusals are logged at a bounded rate.
TEST(CollTcp, IdleAndGarbageConnectionsDoNotHoldUpTheBootstrap) {
  Job job;
  job.size = 4;
  job.port = testing::free_port();
  job.deadline = std::chrono::seconds(60);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t intruder = ::fork();
  ASSERT_GE(intruder, 0);
  if (intruder == 0) {
    ::close(ready[0]);
    ::_exit(flood_the_store(job.port, ready[1]));
  }
  ::close(ready[1]);
  job.before_connect = [fd = ready[0]](int rank) {
    if (rank == 0) return;
    pollfd readable{fd, POLLIN, 0};
    ::poll(&readable, 1, 60000);
  };
  const auto outcomes = run_ranks(job, [](Communicator& comm, const auto& report) {
    std::int64_t value = comm.rank() + 1;
    comm.allreduce(&value, 1, DType::kInt64, ReduceOp::kSum);
    report("sum " + std::to_string(value));
  });
  ::kill(intruder, SIGKILL);
  int status = 0;
  ::waitpid(intruder, &status, 0);
  ::close(ready[0]);
  for (const auto& outcome : outcomes) {
    EXPECT_FALSE(outcome.killed_at_deadline) << "the job waited on the idle connections";
    EXPECT_TRUE(WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 0) << outcome.output;
    EXPECT_NE(outcome.output.find("sum 10"), std::string::npos) << outcome.output;
  }
  const std::string& log = outcomes[0].log;
  const auto lines = std::count(log.begin(), log.end(), '\n');
  EXPECT_GE(lines, 1) << "rank 0 logged no refusal: " << log;
  EXPECT_LE(lines, 12) << "the refusals are not rate-limited: " << log;
}

// A store (rank 0) that answers an allgather with another number of values than the world has
// ranks is refused by name, before anything is allocated for them.
TEST(CollTcp, AStoreThatSendsTheWrongValueCountIsRefused) {
  const std::string secret = "test-secret-0123456789";
  const std::uint16_t port = testing::free_port();
  const net::Listener listener("127.0.0.1", port);
  std::thread fake_store([&] {
    try {
      const auto deadline = net::Clock::now() + std::chrono::seconds(20);
      net::Acceptor acceptor(
          listener, handshake::Purpose::kStore, 0, secret, [](std::uint32_t r) { return r == 1; },
          {}, std::chrono::seconds(5));
      const net::Socket rank1 = acceptor.next(deadline);
      std::uint8_t header[8];
      rank1.recv_all(header, sizeof header, deadline);
      std::string value(header[0], '\0');
      rank1.recv_all(value.data(), value.size(), deadline);
      const std::uint8_t count[4] = {0xFF, 0xFF, 0xFF, 0x7F};  // 2^31 - 1 values for 2 ranks
      rank1.send_all(count, sizeof count, deadline);
      std::uint8_t more = 0;
      rank1.recv_all(&more, 1, deadline);  // until rank 1 hangs up
    } catch (const std::exception&) {
    }
  });
  try {
    const auto store =
        tcp_store_bootstrap(1, 2, "127.0.0.1", port, secret, std::chrono::seconds(20));
    store->allgather("endpoint", std::chrono::seconds(20));
    ADD_FAILURE() << "the wrong count was accepted";
  } catch (const PeerFailure& e) {
    EXPECT_NE(std::string(e.what()).find("sent 2147483647 values for 2 ranks"), std::string::npos)
        << e.what();
  }
  fake_store.join();
}

// The hang guard of run_ranks: a rank that never finishes is killed at Job::deadline and the
// test fails naming it; the others end as usual.
TEST(CollTcp, ARankThatNeverFinishesIsKilledAtTheDeadlineAndNamed) {
  Job job;
  job.size = 3;
  job.deadline = std::chrono::seconds(5);
  std::vector<testing::RankOutcome> outcomes;
  EXPECT_NONFATAL_FAILURE(outcomes = run_ranks(job,
                                               [](Communicator& comm, const auto& report) {
                                                 report("joined");
                                                 if (comm.rank() == 1) {
                                                   for (;;)
                                                     ::pause();
                                                 }
                                               }),
                          "run_ranks: rank 1 of 3 did not finish within the deadline of 5000 ms "
                          "(Job::deadline) and was killed (SIGKILL)");
  ASSERT_EQ(outcomes.size(), 3U);
  EXPECT_TRUE(outcomes[1].killed_at_deadline);
  EXPECT_TRUE(WIFSIGNALED(outcomes[1].status) && WTERMSIG(outcomes[1].status) == SIGKILL);
  EXPECT_EQ(outcomes[1].output, "joined\n") << "what it reported before it was killed is kept";
  for (const int r : {0, 2}) {
    EXPECT_FALSE(outcomes[static_cast<std::size_t>(r)].killed_at_deadline);
    EXPECT_EQ(outcomes[static_cast<std::size_t>(r)].status, 0);
  }
}

}  // namespace
}  // namespace primus::coll
