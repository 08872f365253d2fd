// The GPU backend: each collective is enqueued on the communicator's stream and waited for by
// polling the stream and NCCL's asynchronous error under the watchdog. A failure or a timeout
// aborts the NCCL communicator (ncclCommAbort) and throws; nothing calls std::terminate.
#include "nccl_communicator.hpp"

#include <atomic>
#include <functional>
#include <mutex>
#include <utility>

#include "watchdog.hpp"

namespace primus::coll::nccl {
namespace {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<NcclApi> api, Bootstrap& bootstrap, int device,
                   const NcclOptions& options)
      : api_(std::move(api)),
        rank_(bootstrap.rank()),
        size_(bootstrap.size()),
        device_(device),
        options_(options),
        watchdog_(Watchdog::real(options.timeout, options.poll_interval)) {
    if (!api_) throw CollectiveError("NCCL communicator: no NCCL API given");
    if (device < 0) {
      throw CollectiveError("NCCL communicator: CUDA device " + std::to_string(device) +
                            ": expected 0 or more");
    }
    try {
      api_->set_device(device_);
      const std::string id = exchange_nccl_unique_id(
          bootstrap, [this] { return api_->get_unique_id(); }, options_.timeout);
      stream_ = api_->create_stream();
      const Status started = api_->init_rank_nonblocking(size_, id, rank_, comm_);
      if (started.result == Result::kError) {
        fail({Verdict::kAbortError,
              "NCCL communicator initialization failed on rank " + std::to_string(rank_) + ": " +
                  started.message,
              started.remote});
      }
      finish("communicator initialization", false);
    } catch (...) {
      release();
      throw;
    }
  }

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  ~NcclCommunicator() override { release(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void allreduce(void* data, std::size_t count, DType dtype, ReduceOp op) override {
    check_usable("allreduce");
    dtype_size(dtype);  // throws for a value outside the enumeration
    if (count == 0) return;
    run("allreduce", [&] { return api_->allreduce(data, data, count, dtype, op, comm_, stream_); });
  }

  void broadcast(void* data, std::size_t count, DType dtype, int root) override {
    check_usable("broadcast");
    if (root < 0 || root >= size_) {
      throw CollectiveError("broadcast root " + std::to_string(root) + ": expected 0 to " +
                            std::to_string(size_ - 1));
    }
    dtype_size(dtype);
    if (count == 0) return;
    run("broadcast",
        [&] { return api_->broadcast(data, data, count, dtype, root, comm_, stream_); });
  }

  void allgather(const void* send, void* recv, std::size_t count, DType dtype) override {
    check_usable("allgather");
    dtype_size(dtype);
    if (count == 0) return;
    run("allgather", [&] { return api_->allgather(send, recv, count, dtype, comm_, stream_); });
  }

  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                      ReduceOp op) override {
    check_usable("reduce_scatter");
    dtype_size(dtype);
    if (count == 0) return;
    run("reduce_scatter",
        [&] { return api_->reduce_scatter(send, recv, count, dtype, op, comm_, stream_); });
  }

  // Only flags the request: NCCL's calls stay on the thread that uses the communicator, whose
  // wait sees the flag at its next poll (options.poll_interval) and aborts the communicator.
  void abort(const std::string& reason) noexcept override {
    try {
      const std::lock_guard<std::mutex> lock(abort_mutex_);
      if (abort_requested_.load()) return;
      requested_reason_ = reason.empty() ? std::string("no reason given") : reason;
    } catch (...) {  // NOLINT(bugprone-empty-catch): the flag below matters more than its reason
    }
    abort_requested_.store(true);
  }

  bool aborted() const noexcept override { return abort_requested_.load(); }

  // A one-byte allreduce on the device: returns once every rank has entered the barrier.
  void barrier() override {
    check_usable("barrier");
    if (scratch_ == nullptr) {
      api_->set_device(device_);
      scratch_ = api_->device_alloc(1);
    }
    run("barrier", [&] {
      return api_->allreduce(scratch_, scratch_, 1, DType::kUInt8, ReduceOp::kMax, comm_, stream_);
    });
  }

 private:
  // Thrown from a wait's poll when abort() was called, so that the wait ends at once.
  struct AbortRequested {};

  std::string requested_reason() const {
    const std::lock_guard<std::mutex> lock(abort_mutex_);
    return requested_reason_;
  }

  void check_usable(const char* what) {
    if (abort_requested_.load() && !aborted_) {
      fail({Verdict::kAbortError,
            std::string("NCCL ") + what + ": communicator aborted: " + requested_reason(), true});
    }
    if (aborted_) {
      throw CollectiveError(std::string("NCCL ") + what +
                            ": the NCCL communicator aborted after an earlier failure (" +
                            abort_reason_ + "); create a new communicator");
    }
  }

  void run(const std::string& what, const std::function<Status()>& enqueue) {
    api_->set_device(device_);
    const Status enqueued = enqueue();
    if (enqueued.result == Result::kError) {
      fail({Verdict::kAbortError,
            "NCCL " + what + " could not be started: " + enqueued.message +
                "; the communicator was aborted",
            enqueued.remote});
    }
    finish(what, true);
  }

  // Waits for the communicator (and, with_stream, its stream); aborts and throws on failure.
  void finish(const std::string& what, bool with_stream) {
    Decision decision;
    try {
      decision = wait_for(what, with_stream);
    } catch (const AbortRequested&) {
      fail({Verdict::kAbortError, "NCCL " + what + ": communicator aborted: " + requested_reason(),
            true});
    }
    if (decision.verdict != Verdict::kDone) fail(decision);
  }

  Decision wait_for(const std::string& what, bool with_stream) {
    return watchdog_.wait(what, [&] {
      if (abort_requested_.load()) throw AbortRequested{};
      Observation observed;
      observed.async = api_->async_error(comm_);
      // The stream is asked only once NCCL has finished enqueueing.
      if (with_stream && observed.async.result == Result::kSuccess) {
        observed.stream = api_->query_stream(stream_);
      } else if (with_stream) {
        observed.stream.state = StreamState::kPending;
      }
      return observed;
    });
  }

  [[noreturn]] void fail(const Decision& decision) {
    if (comm_ != nullptr) api_->abort(comm_);
    comm_ = nullptr;
    aborted_ = true;
    abort_reason_ = decision.message;
    if (decision.peer_failure) throw PeerFailure(decision.message, -1);
    throw CollectiveError(decision.message);
  }

  // Finalizes and destroys the communicator (aborting it when finalization fails or times out)
  // and frees the stream and the scratch byte. Never throws.
  void release() noexcept {
    try {
      api_->set_device(device_);
    } catch (...) {  // NOLINT(bugprone-empty-catch): release what can be released regardless
    }
    if (comm_ != nullptr) {
      bool finalized = false;
      try {
        // An aborted communicator is not finalized: a peer that left would hold the wait.
        if (!abort_requested_.load() && api_->finalize(comm_).result != Result::kError) {
          finalized = watchdog_
                          .wait("communicator finalization",
                                [&] {
                                  return Observation{api_->async_error(comm_), {}};
                                })
                          .verdict == Verdict::kDone;
        }
      } catch (...) {
        finalized = false;
      }
      if (finalized) {
        api_->destroy(comm_);
      } else {
        api_->abort(comm_);
      }
      comm_ = nullptr;
    }
    if (scratch_ != nullptr) api_->device_free(scratch_);
    scratch_ = nullptr;
    if (stream_ != nullptr) api_->destroy_stream(stream_);
    stream_ = nullptr;
  }

  std::unique_ptr<NcclApi> api_;
  int rank_;
  int size_;
  int device_;
  NcclOptions options_;
  Watchdog watchdog_;
  CommHandle comm_ = nullptr;
  StreamHandle stream_ = nullptr;
  void* scratch_ = nullptr;
  bool aborted_ = false;  // the NCCL communicator was aborted (on the thread that uses it)
  std::string abort_reason_;
  std::atomic<bool> abort_requested_{false};  // abort() was called, from any thread
  mutable std::mutex abort_mutex_;
  std::string requested_reason_;  // under abort_mutex_
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<NcclApi> api,
                                                     Bootstrap& bootstrap, int device,
                                                     const NcclOptions& options) {
  return std::make_unique<NcclCommunicator>(std::move(api), bootstrap, device, options);
}

}  // namespace primus::coll::nccl
