// NcclApi over NCCL and the CUDA runtime (compiled only where configure found them).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "nccl_api.hpp"
#include "primus/collectives/error.hpp"
#include "primus/collectives/nccl.hpp"

static_assert(NCCL_UNIQUE_ID_BYTES == primus::coll::kNcclUniqueIdBytes,
              "kNcclUniqueIdBytes must match this NCCL's NCCL_UNIQUE_ID_BYTES");

namespace primus::coll::nccl {
namespace {

ncclComm_t as_comm(CommHandle comm) {
  return static_cast<ncclComm_t>(comm);
}
cudaStream_t as_stream(StreamHandle stream) {
  return static_cast<cudaStream_t>(stream);
}

std::string cuda_message(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

void check_cuda(cudaError_t error, const std::string& what) {
  if (error != cudaSuccess) throw CollectiveError(what + " failed: " + cuda_message(error));
}

// NCCL's result as a Status; the message adds NCCL's last error for `comm` (may be null).
Status to_status(ncclResult_t result, ncclComm_t comm) {
  if (result == ncclSuccess) return {Result::kSuccess, "", false};
  if (result == ncclInProgress) return {Result::kInProgress, "", false};
  std::string message = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') message += std::string(": ") + last;
  return {Result::kError, message, result == ncclRemoteError};
}

ncclDataType_t to_nccl(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kUInt8:
      return ncclUint8;
  }
  throw CollectiveError("NCCL: dtype " + std::to_string(static_cast<int>(dtype)) +
                        " is not an element type");
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kProd:
      return ncclProd;
  }
  throw CollectiveError("NCCL: reduce op " + std::to_string(static_cast<int>(op)) +
                        " is not an operation");
}

class RealNcclApi final : public NcclApi {
 public:
  void set_device(int device) override {
    check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  }

  StreamHandle create_stream() override {
    cudaStream_t stream = nullptr;
    // Default flags: the stream waits for work on the legacy default stream.
    check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
    return stream;
  }

  void destroy_stream(StreamHandle stream) noexcept override {
    cudaStreamDestroy(as_stream(stream));
  }

  void* device_alloc(std::size_t bytes) override {
    void* pointer = nullptr;
    check_cuda(cudaMalloc(&pointer, bytes), "cudaMalloc(" + std::to_string(bytes) + ")");
    return pointer;
  }

  void device_free(void* pointer) noexcept override { cudaFree(pointer); }

  std::string get_unique_id() override {
    ncclUniqueId id;
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result != ncclSuccess) {
      throw CollectiveError("ncclGetUniqueId failed: " + to_status(result, nullptr).message);
    }
    return std::string(id.internal, sizeof id.internal);
  }

  Status init_rank_nonblocking(int size, const std::string& unique_id, int rank,
                               CommHandle& comm) override {
    ncclUniqueId id;
    if (unique_id.size() != sizeof id.internal) {
      return {Result::kError,
              "an NCCL unique id of " + std::to_string(unique_id.size()) + " bytes; expected " +
                  std::to_string(sizeof id.internal),
              false};
    }
    std::memcpy(id.internal, unique_id.data(), sizeof id.internal);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t created = nullptr;
    const ncclResult_t result = ncclCommInitRankConfig(&created, size, id, rank, &config);
    comm = created;
    return to_status(result, created);
  }

  Status async_error(CommHandle comm) override {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(as_comm(comm), &state);
    if (result != ncclSuccess) return to_status(result, as_comm(comm));
    return to_status(state, as_comm(comm));
  }

  Status finalize(CommHandle comm) override {
    return to_status(ncclCommFinalize(as_comm(comm)), as_comm(comm));
  }

  void destroy(CommHandle comm) noexcept override { ncclCommDestroy(as_comm(comm)); }

  void abort(CommHandle comm) noexcept override { ncclCommAbort(as_comm(comm)); }

  Status allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                   CommHandle comm, StreamHandle stream) override {
    return to_status(ncclAllReduce(send, recv, count, to_nccl(dtype), to_nccl(op), as_comm(comm),
                                   as_stream(stream)),
                     as_comm(comm));
  }

  Status broadcast(const void* send, void* recv, std::size_t count, DType dtype, int root,
                   CommHandle comm, StreamHandle stream) override {
    return to_status(
        ncclBroadcast(send, recv, count, to_nccl(dtype), root, as_comm(comm), as_stream(stream)),
        as_comm(comm));
  }

  Status allgather(const void* send, void* recv, std::size_t count, DType dtype, CommHandle comm,
                   StreamHandle stream) override {
    return to_status(
        ncclAllGather(send, recv, count, to_nccl(dtype), as_comm(comm), as_stream(stream)),
        as_comm(comm));
  }

  Status reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                        CommHandle comm, StreamHandle stream) override {
    return to_status(ncclReduceScatter(send, recv, count, to_nccl(dtype), to_nccl(op),
                                       as_comm(comm), as_stream(stream)),
                     as_comm(comm));
  }

  StreamStatus query_stream(StreamHandle stream) override {
    const cudaError_t error = cudaStreamQuery(as_stream(stream));
    if (error == cudaSuccess) return {StreamState::kDone, ""};
    if (error == cudaErrorNotReady) return {StreamState::kPending, ""};
    return {StreamState::kError, cuda_message(error)};
  }
};

}  // namespace

std::unique_ptr<NcclApi> real_nccl_api() {
  return std::make_unique<RealNcclApi>();
}

}  // namespace primus::coll::nccl
