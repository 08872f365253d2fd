// nccl_available() in a library built without NCCL.
#include "primus/collectives/nccl.hpp"

namespace primus::coll {

bool nccl_available() {
  return false;
}

}  // namespace primus::coll
