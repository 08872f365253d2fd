// The GPU backend of libprimus-coll: NCCL, its unique id exchanged through a Bootstrap, every
// wait watched by a deadline. Where the library was built without CUDA/NCCL, nccl_available()
// is false and nccl_communicator() throws.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "primus/collectives/bootstrap.hpp"
#include "primus/collectives/communicator.hpp"
#include "primus/collectives/error.hpp"

namespace primus::coll {

// The size of NCCL's ncclUniqueId (NCCL_UNIQUE_ID_BYTES).
constexpr std::size_t kNcclUniqueIdBytes = 128;

struct NcclOptions {
  // The longest the communicator's initialization, each collective and its finalization may
  // take; past it the NCCL communicator is aborted and the call throws PeerFailure.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // How often a wait asks NCCL and CUDA whether the work has finished.
  std::chrono::milliseconds poll_interval{std::chrono::milliseconds(1)};
};

// Whether this library was built with NCCL (configure found CUDA and NCCL).
bool nccl_available();

// Rank 0's NCCL unique id on every rank: rank 0 calls make_id() and the value reaches the other
// ranks through bootstrap.allgather (they contribute an empty string). Throws CollectiveError
// when rank 0's value is not exactly kNcclUniqueIdBytes bytes (on every rank), when make_id()
// throws (rank 0 rethrows it, the others see an empty id), or when the allgather fails.
std::string exchange_nccl_unique_id(Bootstrap& bootstrap,
                                    const std::function<std::string()>& make_id,
                                    std::chrono::milliseconds timeout);

// An NCCL communicator of bootstrap's ranks on CUDA device `cuda_device` (one rank per GPU).
// The buffers passed to its collectives are device pointers on that device; whatever wrote them
// must have finished, or run on the legacy default stream (the communicator's stream waits for
// that one). Every call returns once the GPU work is complete. A collective that fails or does
// not complete within options.timeout aborts the NCCL communicator and throws (PeerFailure
// for a timeout or a remote failure); every later call throws "... communicator aborted ...".
// backend() is "nccl". Throws CollectiveError when built without NCCL.
std::unique_ptr<Communicator> nccl_communicator(Bootstrap& bootstrap, int cuda_device,
                                                const NcclOptions& options = {});

}  // namespace primus::coll
