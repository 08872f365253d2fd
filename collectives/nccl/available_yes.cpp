// nccl_available() in a library built with NCCL.
#include "primus/collectives/nccl.hpp"

namespace primus::coll {

bool nccl_available() {
  return true;
}

}  // namespace primus::coll
