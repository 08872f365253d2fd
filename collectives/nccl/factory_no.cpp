// nccl_communicator() in a library built without NCCL: always an error.
#include "primus/collectives/nccl.hpp"

namespace primus::coll {

std::unique_ptr<Communicator> nccl_communicator(Bootstrap& /*bootstrap*/, int /*cuda_device*/,
                                                const NcclOptions& /*options*/) {
  throw CollectiveError("libprimus-coll was built without NCCL (configure found no CUDA/NCCL)");
}

}  // namespace primus::coll
