// What the NCCL communicator needs from NCCL and the CUDA runtime, behind an interface so that
// the communicator and its watchdog are tested without a GPU. No NCCL or CUDA type appears
// here: communicators and streams are opaque handles.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "primus/collectives/dtype.hpp"

namespace primus::coll::nccl {

using CommHandle = void*;    // an ncclComm_t
using StreamHandle = void*;  // a cudaStream_t

// The outcome of an NCCL call or the state of a communicator (ncclCommGetAsyncError).
enum class Result { kSuccess, kInProgress, kError };

struct Status {
  Result result = Result::kSuccess;
  std::string message;  // kError: NCCL's description ("ncclRemoteError: ...")
  bool remote = false;  // kError: NCCL blames a peer or the network (ncclRemoteError)
};

// Whether the work enqueued on a stream has finished (cudaStreamQuery).
enum class StreamState { kDone, kPending, kError };

struct StreamStatus {
  StreamState state = StreamState::kDone;
  std::string message;  // kError: CUDA's description
};

class NcclApi {
 public:
  virtual ~NcclApi() = default;

  // Makes `device` the calling thread's current CUDA device. Throws CollectiveError.
  virtual void set_device(int device) = 0;
  // A new stream on the current device (synchronizing with the legacy default stream), and
  // its release. create_stream throws CollectiveError.
  virtual StreamHandle create_stream() = 0;
  virtual void destroy_stream(StreamHandle stream) noexcept = 0;
  // Device memory on the current device. device_alloc throws CollectiveError.
  virtual void* device_alloc(std::size_t bytes) = 0;
  virtual void device_free(void* pointer) noexcept = 0;

  // A new ncclUniqueId, as its NCCL_UNIQUE_ID_BYTES bytes. Throws CollectiveError.
  virtual std::string get_unique_id() = 0;
  // ncclCommInitRankConfig with config.blocking = 0: starts the initialization and sets `comm`
  // (even on kError, when NCCL returned one: abort it). kInProgress until async_error says
  // otherwise.
  virtual Status init_rank_nonblocking(int size, const std::string& unique_id, int rank,
                                       CommHandle& comm) = 0;
  // The communicator's state: kInProgress while an initialization, a collective's enqueueing
  // or a finalization is under way; kError once it failed (ncclCommGetAsyncError).
  virtual Status async_error(CommHandle comm) = 0;
  // ncclCommFinalize: starts flushing the communicator (kInProgress until async_error says
  // kSuccess); then destroy() releases it.
  virtual Status finalize(CommHandle comm) = 0;
  virtual void destroy(CommHandle comm) noexcept = 0;
  // ncclCommAbort: stops whatever the communicator is doing and releases it.
  virtual void abort(CommHandle comm) noexcept = 0;

  // The collectives, enqueued on `stream` (kInProgress: still being enqueued, see
  // async_error). count: elements per rank as in NCCL (reduce_scatter: recvcount).
  virtual Status allreduce(const void* send, void* recv, std::size_t count, DType dtype,
                           ReduceOp op, CommHandle comm, StreamHandle stream) = 0;
  virtual Status broadcast(const void* send, void* recv, std::size_t count, DType dtype, int root,
                           CommHandle comm, StreamHandle stream) = 0;
  virtual Status allgather(const void* send, void* recv, std::size_t count, DType dtype,
                           CommHandle comm, StreamHandle stream) = 0;
  virtual Status reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                                ReduceOp op, CommHandle comm, StreamHandle stream) = 0;

  // Whether everything enqueued on `stream` has finished (cudaStreamQuery).
  virtual StreamStatus query_stream(StreamHandle stream) = 0;
};

// NCCL and the CUDA runtime (only in a library built with NCCL: nccl_api_real.cpp).
std::unique_ptr<NcclApi> real_nccl_api();

}  // namespace primus::coll::nccl
