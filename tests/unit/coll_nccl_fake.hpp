// The NCCL backend's test double and in-process bootstraps, shared by coll_nccl_test.cpp (the
// unique id, the watchdog) and coll_nccl_communicator_test.cpp. FakeNcclApi is a fake because no
// GPU (and so no NCCL call) can run where the unit tests run; it plays NCCL's non-blocking states
// (in progress, asynchronous errors, a stream that never finishes) and records every call so
// that the tests see what the communicator asked for.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nccl/nccl_api.hpp"
#include "nccl/nccl_communicator.hpp"
#include "nccl/watchdog.hpp"
#include "primus/collectives/nccl.hpp"

namespace primus::coll::nccl_fake {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace): test durations
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
inline std::vector<std::exception_ptr> on_threads(int size, const std::function<void(int)>& body) {
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

inline std::string message_of(const std::exception_ptr& error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// 128 bytes, NULs included, different for each seed.
inline std::string id_bytes(int seed) {
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
  std::atomic<int> stream_queries{0};  // read by a test's other thread

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

inline NcclOptions fast(std::chrono::milliseconds timeout = 5s) {
  NcclOptions options;
  options.timeout = timeout;
  options.poll_interval = 1ms;
  return options;
}

inline std::unique_ptr<Communicator> solo(const std::shared_ptr<FakeState>& state,
                                          const NcclOptions& options = fast(), int device = 3) {
  static SoloBootstrap bootstrap;
  return nccl::make_nccl_communicator(std::make_unique<FakeNcclApi>(state), bootstrap, device,
                                      options);
}

}  // namespace primus::coll::nccl_fake
