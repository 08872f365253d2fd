// The NCCL backend without a GPU: the unique id exchange over an in-process bootstrap, the
// watchdog's decisions and loop, and the communicator over FakeNcclApi. FakeNcclApi is a fake
// because no GPU (and so no NCCL call) can run where the unit tests run; it plays NCCL's
// non-blocking states (in progress, asynchronous errors, a stream that never finishes) and
// records every call so that the tests see what the communicator asked for.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "nccl/nccl_api.hpp"
#include "nccl/nccl_communicator.hpp"
#include "nccl/watchdog.hpp"
#include "primus/collectives/nccl.hpp"

namespace primus::coll {
namespace {

using namespace std::chrono_literals;
using nccl::Clock;
using nccl::CommHandle;
using nccl::Decision;
using nccl::Observation;
using nccl::Result;
using nccl::Status;
using nccl::StreamHandle;
using nccl::StreamState;
using nccl::StreamStatus;
using nccl::Verdict;

// ---------------------------------------------------------------- in-process bootstraps

// The meeting point of the ranks of one in-process job: allgather rounds under a mutex.
class Hub {
 public:
  explicit Hub(int size) : size_(size) {}
  int size() const { return size_; }

  std::vector<std::string> allgather(int rank, int round, const std::string& mine,
                                     std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto& values = rounds_[round];
    values.resize(static_cast<std::size_t>(size_));
    values[static_cast<std::size_t>(rank)] = mine;
    changed_.notify_all();
    const auto complete = [&] {
      for (const auto& v : values) {
        if (!v) return false;
      }
      return true;
    };
    if (!changed_.wait_for(lock, timeout, complete)) {
      for (std::size_t r = 0; r < values.size(); ++r) {
        if (!values[r]) {
          throw PeerFailure("rank " + std::to_string(r) + " did not join the allgather",
                            static_cast<int>(r));
        }
      }
    }
    std::vector<std::string> all;
    all.reserve(values.size());
    for (const auto& v : values)
      all.push_back(*v);
    return all;
  }

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, std::vector<std::optional<std::string>>> rounds_;
};

class HubBootstrap final : public Bootstrap {
 public:
  HubBootstrap(Hub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  std::vector<std::string> allgather(const std::string& mine,
                                     std::chrono::milliseconds timeout) override {
    ++calls;
    return hub_.allgather(rank_, round_++, mine, timeout);
  }
  std::string local_address() const override { return "127.0.0.1"; }
  int calls = 0;

 private:
  Hub& hub_;
  int rank_;
  int round_ = 0;
};

// A bootstrap of one rank.
class SoloBootstrap final : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> allgather(const std::string& mine,
                                     std::chrono::milliseconds /*timeout*/) override {
    return {mine};
  }
  std::string local_address() const override { return "127.0.0.1"; }
};

// Runs body(rank) on `size` threads, each rank's exception kept.
std::vector<std::exception_ptr> on_threads(int size, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return errors;
}

std::string message_of(const std::exception_ptr& error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// 128 bytes, NULs included, different for each seed.
std::string id_bytes(int seed) {
  std::string id(kNcclUniqueIdBytes, '\0');
  for (std::size_t i = 0; i < id.size(); ++i)
    id[i] = static_cast<char>((i * 37 + static_cast<std::size_t>(seed) * 101) % 256);
  return id;
}

// ---------------------------------------------------------------- the fake NCCL

constexpr int kForever = -1;

// What a FakeNcclApi does (script) and what it was asked (record). Shared with the test, which
// keeps it after the communicator took the fake.
struct FakeState {
  // script
  std::string unique_id = id_bytes(0);
  Status init_result{Result::kInProgress, "", false};
  int init_in_progress_polls = 2;  // async_error says kInProgress this often after init
  int op_in_progress_polls = 0;    // ... and after each collective is enqueued
  int op_pending_polls = 1;        // query_stream says kPending this often per collective
  Status enqueue_result{Result::kSuccess, "", false};
  std::optional<Status> async_error_in_init;   // async_error's answer until a collective
  std::optional<Status> async_error_after_op;  // from the next collective on
  std::optional<StreamStatus> stream_error;    // query_stream's answer from then on
  int finalize_in_progress_polls = 1;

  // record
  int set_device_calls = 0;
  int last_device = -1;
  int unique_id_calls = 0;
  std::string init_id;
  int init_rank = -1;
  int init_size = -1;
  int aborts = 0;
  int finalizes = 0;
  int destroys = 0;
  int streams_created = 0;
  int streams_destroyed = 0;
  int allocs = 0;
  int frees = 0;
  int used_after_release = 0;  // calls on a comm that was aborted or destroyed
  std::vector<std::string> ops;
  const void* last_send = nullptr;
  void* last_recv = nullptr;
  std::size_t last_count = 0;
  std::optional<DType> last_dtype;  // the element type NCCL was given
  std::optional<ReduceOp> last_op;  // and the reduction (none for broadcast and allgather)
  int last_root = -1;
  int stream_queries = 0;

  // state
  int comm_token = 0;
  int stream_token = 0;
  bool released = false;
  int in_progress_left = 0;
  int pending_left = 0;
  bool op_started = false;
};

class FakeNcclApi final : public nccl::NcclApi {
 public:
  explicit FakeNcclApi(std::shared_ptr<FakeState> state) : s_(std::move(state)) {}

  void set_device(int device) override {
    ++s_->set_device_calls;
    s_->last_device = device;
  }
  StreamHandle create_stream() override {
    ++s_->streams_created;
    return &s_->stream_token;
  }
  void destroy_stream(StreamHandle stream) noexcept override {
    if (stream == &s_->stream_token) ++s_->streams_destroyed;
  }
  void* device_alloc(std::size_t bytes) override {
    ++s_->allocs;
    return ::operator new(bytes);
  }
  void device_free(void* pointer) noexcept override {
    ++s_->frees;
    ::operator delete(pointer);
  }
  std::string get_unique_id() override {
    ++s_->unique_id_calls;
    return s_->unique_id;
  }
  Status init_rank_nonblocking(int size, const std::string& unique_id, int rank,
                               CommHandle& comm) override {
    s_->init_id = unique_id;
    s_->init_rank = rank;
    s_->init_size = size;
    comm = &s_->comm_token;
    s_->in_progress_left = s_->init_in_progress_polls;
    return s_->init_result;
  }
  Status async_error(CommHandle comm) override {
    check(comm);
    if (s_->op_started && s_->async_error_after_op) return *s_->async_error_after_op;
    if (!s_->op_started && s_->async_error_in_init) return *s_->async_error_in_init;
    if (s_->in_progress_left == kForever) return {Result::kInProgress, "", false};
    if (s_->in_progress_left > 0) {
      --s_->in_progress_left;
      return {Result::kInProgress, "", false};
    }
    return {};
  }
  Status finalize(CommHandle comm) override {
    check(comm);
    ++s_->finalizes;
    s_->in_progress_left = s_->finalize_in_progress_polls;
    return {Result::kInProgress, "", false};
  }
  void destroy(CommHandle comm) noexcept override {
    check(comm);
    ++s_->destroys;
    s_->released = true;
  }
  void abort(CommHandle comm) noexcept override {
    check(comm);
    ++s_->aborts;
    s_->released = true;
  }
  Status allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                   CommHandle comm, StreamHandle stream) override {
    return enqueue("allreduce", send, recv, count, dtype, op, comm, stream);
  }
  Status broadcast(const void* send, void* recv, std::size_t count, DType dtype, int root,
                   CommHandle comm, StreamHandle stream) override {
    s_->last_root = root;
    return enqueue("broadcast", send, recv, count, dtype, std::nullopt, comm, stream);
  }
  Status allgather(const void* send, void* recv, std::size_t count, DType dtype, CommHandle comm,
                   StreamHandle stream) override {
    Status status = enqueue("allgather", send, recv, count, dtype, std::nullopt, comm, stream);
    // One rank: recv is send.
    if (s_->init_size == 1) std::memcpy(recv, send, count * dtype_size(dtype));
    return status;
  }
  Status reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                        CommHandle comm, StreamHandle stream) override {
    Status status = enqueue("reduce_scatter", send, recv, count, dtype, op, comm, stream);
    if (s_->init_size == 1) std::memcpy(recv, send, count * dtype_size(dtype));
    return status;
  }
  StreamStatus query_stream(StreamHandle stream) override {
    EXPECT_EQ(stream, &s_->stream_token);
    ++s_->stream_queries;
    if (s_->stream_error) return *s_->stream_error;
    if (s_->pending_left == kForever) return {StreamState::kPending, ""};
    if (s_->pending_left > 0) {
      --s_->pending_left;
      return {StreamState::kPending, ""};
    }
    return {};
  }

 private:
  void check(CommHandle comm) {
    EXPECT_EQ(comm, &s_->comm_token);
    if (s_->released) ++s_->used_after_release;
  }
  Status enqueue(const char* what, const void* send, void* recv, std::size_t count, DType dtype,
                 std::optional<ReduceOp> op, CommHandle comm, StreamHandle stream) {
    check(comm);
    EXPECT_EQ(stream, &s_->stream_token);
    // What NCCL would be handed must be a value it has a name for.
    EXPECT_NO_THROW(dtype_size(dtype)) << what << ": dtype " << static_cast<int>(dtype);
    if (op) {
      EXPECT_NO_THROW(to_string(*op)) << what << ": op " << static_cast<int>(*op);
    }
    s_->ops.emplace_back(what);
    s_->last_send = send;
    s_->last_recv = recv;
    s_->last_count = count;
    s_->last_dtype = dtype;
    s_->last_op = op;
    s_->op_started = true;
    s_->in_progress_left = s_->op_in_progress_polls;
    s_->pending_left = s_->op_pending_polls;
    return s_->enqueue_result;
  }

  std::shared_ptr<FakeState> s_;
};

NcclOptions fast(std::chrono::milliseconds timeout = 5s) {
  NcclOptions options;
  options.timeout = timeout;
  options.poll_interval = 1ms;
  return options;
}

std::unique_ptr<Communicator> solo(const std::shared_ptr<FakeState>& state,
                                   const NcclOptions& options = fast(), int device = 3) {
  static SoloBootstrap bootstrap;
  return nccl::make_nccl_communicator(std::make_unique<FakeNcclApi>(state), bootstrap, device,
                                      options);
}

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
  EXPECT_GT(state->stream_queries, 1) << "the watchdog polled the stream";
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
  EXPECT_EQ(state->stream_queries, 0) << "the stream is asked once NCCL has enqueued";
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

}  // namespace
}  // namespace primus::coll
