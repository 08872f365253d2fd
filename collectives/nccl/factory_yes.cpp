// nccl_communicator() in a library built with NCCL: the communicator over the real NCCL.
#include "nccl_communicator.hpp"

namespace primus::coll {

std::unique_ptr<Communicator> nccl_communicator(Bootstrap& bootstrap, int cuda_device,
                                                const NcclOptions& options) {
  return nccl::make_nccl_communicator(nccl::real_nccl_api(), bootstrap, cuda_device, options);
}

}  // namespace primus::coll
