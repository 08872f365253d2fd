// What a backend without point-to-point messages says when asked for one.
#include <string>

#include "primus/collectives.hpp"

namespace primus::coll {

void Communicator::send(const void* /*data*/, std::size_t /*count*/, DType /*dtype*/,
                        int /*peer*/) {
  throw CollectiveError("send: the " + backend() + " backend has no point-to-point messages");
}

void Communicator::recv(void* /*data*/, std::size_t /*count*/, DType /*dtype*/, int /*peer*/) {
  throw CollectiveError("recv: the " + backend() + " backend has no point-to-point messages");
}

}  // namespace primus::coll
