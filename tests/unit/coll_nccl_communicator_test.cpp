// The NCCL communicator over FakeNcclApi (coll_nccl_fake.hpp; a fake because no GPU can run
// where the unit tests run): initialization, each collective, errors, timeouts and abort().
#include <gtest/gtest.h>

#include "coll_nccl_fake.hpp"

namespace primus::coll {
namespace {

using namespace nccl_fake;  // NOLINT(google-build-using-namespace): the fake and its helpers

// ---------------------------------------------------------------- the communicator

TEST(NcclCommunicator, InitializesAndRunsEachCollective) {
  auto state = std::make_shared<FakeState>();
  state->unique_id = id_bytes(5);
  {
    auto comm = solo(state);
    EXPECT_EQ(comm->backend(), "nccl");
    EXPECT_EQ(comm->rank(), 0);
    EXPECT_EQ(comm->size(), 1);
    EXPECT_EQ(state->last_device, 3);
    EXPECT_EQ(state->unique_id_calls, 1);
    EXPECT_EQ(state->init_id, id_bytes(5));
    EXPECT_EQ(state->init_rank, 0);
    EXPECT_EQ(state->init_size, 1);
    EXPECT_EQ(state->streams_created, 1);

    float data[4] = {1, 2, 3, 4};
    comm->allreduce(data, 4, DType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(state->last_send, data);
    EXPECT_EQ(state->last_recv, data);
    EXPECT_EQ(state->last_count, 4u);
    EXPECT_EQ(state->pending_left, 0) << "the communicator waited for the stream";

    comm->broadcast(data, 4, DType::kFloat32, 0);
    EXPECT_EQ(state->last_root, 0);

    std::int64_t send[2] = {7, 8};
    std::int64_t recv[2] = {0, 0};
    comm->allgather(send, recv, 2, DType::kInt64);
    EXPECT_EQ(recv[1], 8);
    comm->reduce_scatter(send, recv, 2, DType::kInt64, ReduceOp::kMax);
    comm->barrier();
    comm->barrier();
    EXPECT_EQ(state->allocs, 1);
    comm->allreduce(data, 0, DType::kFloat32, ReduceOp::kSum);  // nothing to do
    EXPECT_EQ(state->ops, (std::vector<std::string>{"allreduce", "broadcast", "allgather",
                                                    "reduce_scatter", "allreduce", "allreduce"}));
    EXPECT_EQ(state->aborts, 0);
  }
  EXPECT_EQ(state->finalizes, 1);
  EXPECT_EQ(state->destroys, 1);
  EXPECT_EQ(state->aborts, 0);
  EXPECT_EQ(state->streams_destroyed, 1);
  EXPECT_EQ(state->frees, 1);
  EXPECT_EQ(state->used_after_release, 0);
}

// What the fake was handed, by name ("none": nothing), for readable failures.
template <typename T>
std::string name(const std::optional<T>& value) {
  return value ? std::string(to_string(*value)) : "none";
}

// Each collective hands NCCL the element type and the reduction it was called with, for every
// dtype and op (a float16 taken for bfloat16, or an int32 for a float32, would compute
// garbage on the GPU without any error); the barrier is a one-byte uint8 max.
TEST(NcclCommunicator, EveryDtypeAndOpReachNcclAsGiven) {
  const DType dtypes[] = {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                          DType::kInt32,   DType::kInt64,   DType::kUInt8};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd};
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state);
  std::uint64_t send[4] = {};
  std::uint64_t recv[4] = {};
  for (const DType dtype : dtypes) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    for (const ReduceOp op : ops) {
      SCOPED_TRACE(std::string(to_string(op)));
      state->last_dtype.reset();
      state->last_op.reset();
      comm->allreduce(recv, 3, dtype, op);
      EXPECT_EQ(state->ops.back(), "allreduce");
      EXPECT_EQ(name(state->last_dtype), to_string(dtype));
      EXPECT_EQ(name(state->last_op), to_string(op));
      EXPECT_EQ(state->last_count, 3U);
      state->last_dtype.reset();
      state->last_op.reset();
      comm->reduce_scatter(send, recv, 2, dtype, op);
      EXPECT_EQ(state->ops.back(), "reduce_scatter");
      EXPECT_EQ(name(state->last_dtype), to_string(dtype));
      EXPECT_EQ(name(state->last_op), to_string(op));
      EXPECT_EQ(state->last_count, 2U);
    }
    state->last_dtype.reset();
    comm->broadcast(recv, 4, dtype, 0);
    EXPECT_EQ(state->ops.back(), "broadcast");
    EXPECT_EQ(name(state->last_dtype), to_string(dtype));
    EXPECT_EQ(name(state->last_op), "none");
    state->last_dtype.reset();
    comm->allgather(send, recv, 1, dtype);
    EXPECT_EQ(state->ops.back(), "allgather");
    EXPECT_EQ(name(state->last_dtype), to_string(dtype));
    EXPECT_EQ(name(state->last_op), "none");
  }
  comm->barrier();
  EXPECT_EQ(state->ops.back(), "allreduce");
  EXPECT_EQ(name(state->last_dtype), "uint8");
  EXPECT_EQ(name(state->last_op), "max");
  EXPECT_EQ(state->last_count, 1U);
  EXPECT_EQ(state->aborts, 0);
}

TEST(NcclCommunicator, ThreeRanksInitializeWithRankZerosId) {
  Hub hub(3);
  std::vector<std::shared_ptr<FakeState>> states;
  for (int r = 0; r < 3; ++r) {
    states.push_back(std::make_shared<FakeState>());
    states.back()->unique_id = id_bytes(100 + r);
  }
  const auto errors = on_threads(3, [&](int rank) {
    HubBootstrap bootstrap(hub, rank);
    auto comm = nccl::make_nccl_communicator(
        std::make_unique<FakeNcclApi>(states[static_cast<std::size_t>(rank)]), bootstrap, rank,
        fast());
    EXPECT_EQ(comm->rank(), rank);
    EXPECT_EQ(comm->size(), 3);
  });
  for (int r = 0; r < 3; ++r) {
    const auto& s = *states[static_cast<std::size_t>(r)];
    EXPECT_EQ(message_of(errors[static_cast<std::size_t>(r)]), "");
    EXPECT_EQ(s.init_id, id_bytes(100)) << "rank " << r;
    EXPECT_EQ(s.init_rank, r);
    EXPECT_EQ(s.init_size, 3);
    EXPECT_EQ(s.last_device, r);
    EXPECT_EQ(s.unique_id_calls, r == 0 ? 1 : 0);
    EXPECT_EQ(s.destroys, 1);
  }
}

template <typename F>
std::chrono::milliseconds time_of(F&& f) {
  const auto started = Clock::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
}

TEST(NcclCommunicator, InitStuckInProgressIsAbortedAtTheTimeout) {
  auto state = std::make_shared<FakeState>();
  state->init_in_progress_polls = kForever;
  std::string message;
  const auto took = time_of([&] {
    try {
      solo(state, fast(50ms));
      ADD_FAILURE() << "no exception";
    } catch (const PeerFailure& e) {
      message = e.what();
    }
  });
  EXPECT_EQ(message.rfind("NCCL communicator initialization did not complete within 50 ms", 0), 0u)
      << message;
  EXPECT_GE(took, 50ms);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(state->aborts, 1);
  EXPECT_EQ(state->destroys, 0);
  EXPECT_EQ(state->finalizes, 0);
  EXPECT_EQ(state->streams_destroyed, 1);
  EXPECT_EQ(state->used_after_release, 0);
}

TEST(NcclCommunicator, InitErrorIsAbortedAndReported) {
  auto state = std::make_shared<FakeState>();
  state->init_result = {Result::kError, "ncclSystemError: no route to rank 0", false};
  try {
    solo(state);
    ADD_FAILURE() << "no exception";
  } catch (const PeerFailure&) {
    ADD_FAILURE() << "not a peer's failure";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("ncclSystemError: no route to rank 0"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(state->aborts, 1);
  EXPECT_EQ(state->streams_destroyed, 1);
}

TEST(NcclCommunicator, AsyncErrorDuringInitAborts) {
  auto state = std::make_shared<FakeState>();
  state->async_error_in_init = Status{Result::kError, "ncclRemoteError: rank 1 died", true};
  const auto took = time_of([&] {
    try {
      solo(state, fast(10s));
      ADD_FAILURE() << "no exception";
    } catch (const PeerFailure& e) {
      EXPECT_NE(std::string(e.what()).find("during communicator initialization: ncclRemoteError: "
                                           "rank 1 died"),
                std::string::npos)
          << e.what();
    }
  });
  EXPECT_LT(took, 5s);
  EXPECT_EQ(state->aborts, 1);
  EXPECT_EQ(state->destroys, 0);
}

TEST(NcclCommunicator, AsyncErrorDuringAllreduceAbortsAndEveryLaterCallThrows) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state, fast(10s));
  state->async_error_after_op =
      Status{Result::kError, "ncclRemoteError: NET/IB: rank 2 closed the connection", true};
  float data[8] = {};
  std::string message;
  const auto took = time_of([&] {
    try {
      comm->allreduce(data, 8, DType::kFloat32, ReduceOp::kSum);
      ADD_FAILURE() << "no exception";
    } catch (const PeerFailure& e) {
      message = e.what();
    }
  });
  EXPECT_LT(took, 5s) << "an error ends the wait before the deadline";
  EXPECT_NE(message.find("NCCL reported an asynchronous error during allreduce: ncclRemoteError: "
                         "NET/IB: rank 2 closed the connection"),
            std::string::npos)
      << message;
  EXPECT_EQ(state->aborts, 1);

  const std::size_t ops = state->ops.size();
  std::int32_t send[1] = {0};
  std::int32_t recv[1] = {0};
  const std::vector<std::function<void()>> later = {
      [&] { comm->allreduce(data, 8, DType::kFloat32, ReduceOp::kSum); },
      [&] { comm->broadcast(data, 8, DType::kFloat32, 0); },
      [&] { comm->allgather(send, recv, 1, DType::kInt32); },
      [&] { comm->reduce_scatter(send, recv, 1, DType::kInt32, ReduceOp::kSum); },
      [&] { comm->barrier(); },
  };
  for (const auto& call : later) {
    try {
      call();
      ADD_FAILURE() << "no exception after the abort";
    } catch (const CollectiveError& e) {
      EXPECT_NE(std::string(e.what()).find("communicator aborted"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 2 closed the connection"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(state->ops.size(), ops) << "nothing reaches NCCL after the abort";
  comm.reset();
  EXPECT_EQ(state->aborts, 1);
  EXPECT_EQ(state->finalizes, 0);
  EXPECT_EQ(state->destroys, 0);
  EXPECT_EQ(state->streams_destroyed, 1);
  EXPECT_EQ(state->used_after_release, 0);
}

TEST(NcclCommunicator, ALocalAsyncErrorIsACollectiveErrorNotAPeerFailure) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state);
  state->async_error_after_op = Status{Result::kError, "ncclInternalError: oops", false};
  double x = 0;
  try {
    comm->broadcast(&x, 1, DType::kFloat64, 0);
    ADD_FAILURE() << "no exception";
  } catch (const PeerFailure&) {
    ADD_FAILURE() << "not a peer's failure";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("ncclInternalError: oops"), std::string::npos);
  }
  EXPECT_EQ(state->aborts, 1);
}

TEST(NcclCommunicator, ACollectiveThatNeverCompletesIsAbortedAtTheTimeout) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state, fast(50ms));
  state->op_pending_polls = kForever;
  float data[4] = {};
  std::string message;
  const auto took = time_of([&] {
    try {
      comm->allreduce(data, 4, DType::kFloat32, ReduceOp::kSum);
      ADD_FAILURE() << "no exception";
    } catch (const PeerFailure& e) {
      message = e.what();
      EXPECT_EQ(e.peer(), -1);
    }
  });
  EXPECT_EQ(message.rfind("NCCL allreduce did not complete within 50 ms", 0), 0u) << message;
  EXPECT_GE(took, 50ms);
  EXPECT_LT(took, 3s);
  EXPECT_GT(state->stream_queries.load(), 1) << "the watchdog polled the stream";
  EXPECT_EQ(state->aborts, 1);
  EXPECT_THROW(comm->barrier(), CollectiveError);
  comm.reset();
  EXPECT_EQ(state->aborts, 1);
  EXPECT_EQ(state->used_after_release, 0);
}

TEST(NcclCommunicator, EnqueueingThatStaysInProgressIsAbortedAtTheTimeout) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state, fast(50ms));
  state->op_in_progress_polls = kForever;
  std::uint8_t byte = 0;
  EXPECT_THROW(comm->allreduce(&byte, 1, DType::kUInt8, ReduceOp::kMax), PeerFailure);
  EXPECT_EQ(state->stream_queries.load(), 0) << "the stream is asked once NCCL has enqueued";
  EXPECT_EQ(state->aborts, 1);
}

TEST(NcclCommunicator, EnqueueingThatTakesAFewPollsCompletes) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state);
  state->op_in_progress_polls = 3;
  state->op_pending_polls = 3;
  float x = 1;
  comm->allreduce(&x, 1, DType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(state->in_progress_left, 0);
  EXPECT_EQ(state->pending_left, 0);
  EXPECT_EQ(state->aborts, 0);
}

TEST(NcclCommunicator, StreamErrorAborts) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state);
  state->stream_error = StreamStatus{StreamState::kError, "cudaErrorIllegalAddress: bad"};
  float x = 1;
  try {
    comm->allreduce(&x, 1, DType::kFloat32, ReduceOp::kSum);
    ADD_FAILURE() << "no exception";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaErrorIllegalAddress"), std::string::npos);
  }
  EXPECT_EQ(state->aborts, 1);
}

TEST(NcclCommunicator, EnqueueErrorAborts) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state);
  state->enqueue_result = Status{Result::kError, "ncclUnhandledCudaError: launch failed", false};
  float x = 1;
  try {
    comm->allreduce(&x, 1, DType::kFloat32, ReduceOp::kSum);
    ADD_FAILURE() << "no exception";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("launch failed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(state->aborts, 1);
  EXPECT_THROW(comm->allreduce(&x, 1, DType::kFloat32, ReduceOp::kSum), CollectiveError);
}

TEST(NcclCommunicator, BadArgumentsThrowWithoutAborting) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state);
  float x = 0;
  EXPECT_THROW(comm->broadcast(&x, 1, DType::kFloat32, 1), CollectiveError);
  EXPECT_THROW(comm->broadcast(&x, 1, DType::kFloat32, -1), CollectiveError);
  EXPECT_THROW(comm->allreduce(&x, 1, static_cast<DType>(99), ReduceOp::kSum),
               std::invalid_argument);
  EXPECT_EQ(state->aborts, 0);
  comm->allreduce(&x, 1, DType::kFloat32, ReduceOp::kSum);  // still usable
  EXPECT_THROW(solo(std::make_shared<FakeState>(), fast(), -1), CollectiveError);
}

TEST(NcclCommunicator, MalformedUniqueIdFailsTheConstructor) {
  auto state = std::make_shared<FakeState>();
  state->unique_id = "short";
  EXPECT_THROW(solo(state), CollectiveError);
  EXPECT_EQ(state->init_rank, -1) << "NCCL was not initialized with a bad id";
}

TEST(NcclCommunicator, FinalizationStuckIsAbortedAndTheDestructorReturns) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state, fast(50ms));
  state->finalize_in_progress_polls = kForever;
  const auto took = time_of([&] { comm.reset(); });
  EXPECT_LT(took, 3s);
  EXPECT_EQ(state->finalizes, 1);
  EXPECT_EQ(state->destroys, 0);
  EXPECT_EQ(state->aborts, 1);
  EXPECT_EQ(state->streams_destroyed, 1);
}

// The public factory: without NCCL it says so; with NCCL, a CUDA device that exists on no
// machine (this one has no GPU at all) is a clear CollectiveError naming the call, not a crash.
TEST(NcclCommunicator, ThePublicFactoryFailsCleanlyWithoutAUsableDevice) {
  SoloBootstrap bootstrap;
  try {
    nccl_communicator(bootstrap, 9999);
    ADD_FAILURE() << "no exception";
  } catch (const CollectiveError& e) {
    if (nccl_available()) {
      EXPECT_NE(std::string(e.what()).find("cudaSetDevice(9999)"), std::string::npos) << e.what();
    } else {
      EXPECT_STREQ(e.what(),
                   "libprimus-coll was built without NCCL (configure found no CUDA/NCCL)");
    }
  }
}

// abort() from another thread ends a collective that would otherwise wait for its whole timeout
// (a peer that left without a word): the waiting thread aborts the NCCL communicator itself,
// since NCCL's calls stay on it, and throws PeerFailure with the reason. Every later call
// throws, a second abort keeps the first reason, and the communicator is never finalized (a
// finalize waits on the peers).
TEST(NcclCommunicator, AbortFromAnotherThreadEndsAWaitingCollective) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state, fast(60s));
  state->op_pending_polls = kForever;
  EXPECT_FALSE(comm->aborted());
  std::thread aborter([&] {
    while (state->stream_queries.load() < 3)
      std::this_thread::sleep_for(1ms);
    comm->abort("the launcher says rank 5 failed");
    comm->abort("a second reason");
  });
  float data[4] = {};
  std::string message;
  try {
    comm->allreduce(data, 4, DType::kFloat32, ReduceOp::kSum);
    ADD_FAILURE() << "no exception";
  } catch (const PeerFailure& e) {
    message = e.what();
  }
  aborter.join();
  EXPECT_EQ(message, "NCCL allreduce: communicator aborted: the launcher says rank 5 failed");
  EXPECT_TRUE(comm->aborted());
  EXPECT_EQ(state->aborts, 1);
  try {
    comm->barrier();
    ADD_FAILURE() << "no exception after the abort";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 5 failed"), std::string::npos) << e.what();
  }
  comm.reset();
  EXPECT_EQ(state->aborts, 1);
  EXPECT_EQ(state->finalizes, 0);
  EXPECT_EQ(state->used_after_release, 0);
}

// Called between collectives, abort() ends the next one before it reaches NCCL.
TEST(NcclCommunicator, AbortBetweenCollectivesStopsTheNextBeforeNccl) {
  auto state = std::make_shared<FakeState>();
  auto comm = solo(state);
  double x = 1;
  comm->broadcast(&x, 1, DType::kFloat64, 0);
  const std::size_t ops = state->ops.size();
  comm->abort("");
  EXPECT_THROW(comm->broadcast(&x, 1, DType::kFloat64, 0), PeerFailure);
  EXPECT_EQ(state->ops.size(), ops);
  EXPECT_EQ(state->aborts, 1);
  try {
    comm->allreduce(&x, 1, DType::kFloat64, ReduceOp::kSum);
    ADD_FAILURE() << "no exception";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("no reason given"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace primus::coll
