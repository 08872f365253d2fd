// The NCCL backend without a GPU: the unique id exchange over an in-process bootstrap and the
// watchdog's decisions and loop (coll_nccl_fake.hpp: the fake and the bootstraps;
// coll_nccl_communicator_test.cpp: the communicator over FakeNcclApi).
#include <gtest/gtest.h>

#include "coll_nccl_fake.hpp"

namespace primus::coll {
namespace {

using namespace nccl_fake;  // NOLINT(google-build-using-namespace): the fake and its helpers

// ---------------------------------------------------------------- the unique id

TEST(NcclUniqueId, RankZerosIdReachesEveryRank) {
  Hub hub(3);
  std::vector<std::string> got(3);
  std::atomic<int> made{0};
  const auto errors = on_threads(3, [&](int rank) {
    HubBootstrap bootstrap(hub, rank);
    got[static_cast<std::size_t>(rank)] = exchange_nccl_unique_id(
        bootstrap,
        [&] {
          ++made;
          return id_bytes(rank + 7);
        },
        5s);
    EXPECT_EQ(bootstrap.calls, 1);
  });
  for (const auto& e : errors)
    EXPECT_EQ(message_of(e), "");
  EXPECT_EQ(made.load(), 1) << "only rank 0 makes the id";
  for (const auto& id : got)
    EXPECT_EQ(id, id_bytes(7));
}

TEST(NcclUniqueId, OneRank) {
  SoloBootstrap bootstrap;
  EXPECT_EQ(exchange_nccl_unique_id(
                bootstrap, [] { return id_bytes(1); }, 1s),
            id_bytes(1));
}

TEST(NcclUniqueId, WrongLengthIsAnErrorOnEveryRank) {
  for (const std::size_t length : {std::size_t{0}, std::size_t{127}, std::size_t{129}}) {
    Hub hub(3);
    const auto errors = on_threads(3, [&](int rank) {
      HubBootstrap bootstrap(hub, rank);
      exchange_nccl_unique_id(
          bootstrap, [&] { return std::string(length, 'a'); }, 5s);
    });
    for (const auto& e : errors) {
      ASSERT_TRUE(e);
      EXPECT_THROW(std::rethrow_exception(e), CollectiveError);
      const std::string message = message_of(e);
      EXPECT_NE(message.find(std::to_string(length) + " bytes"), std::string::npos) << message;
      EXPECT_NE(message.find("expected 128 (NCCL_UNIQUE_ID_BYTES)"), std::string::npos) << message;
    }
  }
}

TEST(NcclUniqueId, MakeIdFailingOnRankZeroFailsEveryRankAtOnce) {
  Hub hub(3);
  const auto started = Clock::now();
  const auto errors = on_threads(3, [&](int rank) {
    HubBootstrap bootstrap(hub, rank);
    exchange_nccl_unique_id(
        bootstrap, []() -> std::string { throw CollectiveError("ncclGetUniqueId failed: boom"); },
        30s);
  });
  EXPECT_LT(Clock::now() - started, 10s) << "the other ranks must not wait for their deadline";
  EXPECT_EQ(message_of(errors[0]), "ncclGetUniqueId failed: boom");
  for (int r = 1; r < 3; ++r) {
    EXPECT_NE(message_of(errors[static_cast<std::size_t>(r)]).find("0 bytes"), std::string::npos)
        << message_of(errors[static_cast<std::size_t>(r)]);
  }
}

TEST(NcclUniqueId, AMissingRankIsTheBootstrapsError) {
  Hub hub(2);
  HubBootstrap bootstrap(hub, 0);  // rank 1 never comes
  EXPECT_THROW(exchange_nccl_unique_id(
                   bootstrap, [] { return id_bytes(0); }, 50ms),
               PeerFailure);
}

// ---------------------------------------------------------------- the watchdog's decisions

constexpr Clock::time_point kStart{};

Observation seen(Result async, StreamState stream) {
  Observation o;
  o.async.result = async;
  if (async == Result::kError) o.async.message = "ncclRemoteError: peer 2 closed its connection";
  o.async.remote = async == Result::kError;
  o.stream.state = stream;
  if (stream == StreamState::kError) o.stream.message = "cudaErrorIllegalAddress: bad address";
  return o;
}

TEST(NcclWatchdog, EveryCombination) {
  const auto timeout = 300s;
  for (const Result async : {Result::kSuccess, Result::kInProgress, Result::kError}) {
    for (const StreamState stream :
         {StreamState::kDone, StreamState::kPending, StreamState::kError}) {
      for (const auto elapsed : {0ms, 299999ms, 300000ms, 400000ms}) {
        const Decision d =
            nccl::decide("allreduce", kStart, kStart + elapsed, timeout, seen(async, stream));
        const bool late = elapsed >= timeout;
        SCOPED_TRACE(std::to_string(static_cast<int>(async)) + "/" +
                     std::to_string(static_cast<int>(stream)) + "/" +
                     std::to_string(elapsed.count()));
        if (async == Result::kError) {
          EXPECT_EQ(d.verdict, Verdict::kAbortError);
          EXPECT_EQ(d.message,
                    "NCCL reported an asynchronous error during allreduce: ncclRemoteError: peer 2 "
                    "closed its connection; the communicator was aborted");
          EXPECT_TRUE(d.peer_failure);
        } else if (stream == StreamState::kError) {
          EXPECT_EQ(d.verdict, Verdict::kAbortError);
          EXPECT_NE(d.message.find("CUDA reported an error on the NCCL stream during allreduce: "
                                   "cudaErrorIllegalAddress: bad address"),
                    std::string::npos)
              << d.message;
          EXPECT_FALSE(d.peer_failure);
        } else if (async == Result::kSuccess && stream == StreamState::kDone) {
          EXPECT_EQ(d.verdict, Verdict::kDone);
          EXPECT_EQ(d.message, "");
        } else if (late) {
          EXPECT_EQ(d.verdict, Verdict::kAbortTimeout);
          EXPECT_EQ(d.message.rfind("NCCL allreduce did not complete within 300 s", 0), 0u)
              << d.message;
          EXPECT_NE(d.message.find("the communicator was aborted"), std::string::npos);
          EXPECT_TRUE(d.peer_failure);
        } else {
          EXPECT_EQ(d.verdict, Verdict::kContinue);
          EXPECT_EQ(d.message, "");
        }
      }
    }
  }
}

TEST(NcclWatchdog, ANonRemoteErrorBlamesNoPeer) {
  Observation o = seen(Result::kError, StreamState::kPending);
  o.async.remote = false;
  o.async.message = "ncclInvalidUsage";
  const Decision d = nccl::decide("broadcast", kStart, kStart, 1s, o);
  EXPECT_EQ(d.verdict, Verdict::kAbortError);
  EXPECT_FALSE(d.peer_failure);
}

TEST(NcclWatchdog, Durations) {
  EXPECT_EQ(nccl::describe_duration(300s), "300 s");
  EXPECT_EQ(nccl::describe_duration(50ms), "50 ms");
  EXPECT_EQ(nccl::describe_duration(1500ms), "1500 ms");
  EXPECT_EQ(nccl::describe_duration(0ms), "0 s");
}

// A clock that moves only when the watchdog sleeps.
struct FakeClock {
  Clock::time_point now{};
  std::vector<std::chrono::milliseconds> sleeps;
  nccl::Watchdog watchdog(std::chrono::milliseconds timeout, std::chrono::milliseconds poll) {
    return nccl::Watchdog(
        timeout, poll, [this] { return now; },
        [this](std::chrono::milliseconds d) {
          if (sleeps.size() > 10000) throw std::runtime_error("the watchdog never stopped");
          sleeps.push_back(d);
          now += d;
        });
  }
};

TEST(NcclWatchdog, LoopTimesOutExactlyAtTheDeadline) {
  FakeClock clock;
  int polls = 0;
  const Decision d = clock.watchdog(10ms, 3ms).wait("allgather", [&] {
    ++polls;
    return seen(Result::kSuccess, StreamState::kPending);
  });
  EXPECT_EQ(d.verdict, Verdict::kAbortTimeout);
  EXPECT_EQ(d.message.rfind("NCCL allgather did not complete within 10 ms", 0), 0u) << d.message;
  EXPECT_EQ(polls, 5);  // at 0, 3, 6, 9, 10 ms
  EXPECT_EQ(clock.sleeps, (std::vector<std::chrono::milliseconds>{3ms, 3ms, 3ms, 1ms}));
  EXPECT_EQ(clock.now, Clock::time_point{} + 10ms);
}

TEST(NcclWatchdog, LoopEndsWhenDoneOrFailed) {
  FakeClock clock;
  int polls = 0;
  Decision d = clock.watchdog(1s, 1ms).wait("init", [&] {
    return seen(++polls < 4 ? Result::kInProgress : Result::kSuccess, StreamState::kDone);
  });
  EXPECT_EQ(d.verdict, Verdict::kDone);
  EXPECT_EQ(polls, 4);
  EXPECT_EQ(clock.sleeps.size(), 3u);

  polls = 0;
  d = clock.watchdog(1s, 1ms).wait("init", [&] {
    return seen(++polls < 3 ? Result::kInProgress : Result::kError, StreamState::kDone);
  });
  EXPECT_EQ(d.verdict, Verdict::kAbortError);
  EXPECT_EQ(polls, 3);
}

TEST(NcclWatchdog, ZeroTimeoutStillPollsOnce) {
  FakeClock clock;
  int polls = 0;
  EXPECT_EQ(clock.watchdog(0ms, 1ms)
                .wait("x",
                      [&] {
                        ++polls;
                        return seen(Result::kSuccess, StreamState::kDone);
                      })
                .verdict,
            Verdict::kDone);
  EXPECT_EQ(polls, 1);
}

}  // namespace
}  // namespace primus::coll
