// The NCCL communicator over any NcclApi (the real one, or a test's fake).
#pragma once

#include <memory>

#include "nccl_api.hpp"
#include "primus/collectives/nccl.hpp"

namespace primus::coll::nccl {

// Exchanges the unique id through `bootstrap`, initializes a non-blocking NCCL communicator on
// `device` and waits for it under the watchdog (options.timeout: abort, PeerFailure).
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<NcclApi> api,
                                                     Bootstrap& bootstrap, int device,
                                                     const NcclOptions& options);

}  // namespace primus::coll::nccl
