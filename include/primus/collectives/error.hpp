// Errors of libprimus-coll: every one names the operation and, for a peer's failure, the peer.
#pragma once

#include <string>

#include "primus/common/error.hpp"

namespace primus::coll {

// A collective could not complete: bad arguments, a failed bootstrap, a refused connection.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

// A peer died, hung past the deadline, or broke the protocol. peer() is its rank (-1: unknown).
class PeerFailure : public CollectiveError {
 public:
  PeerFailure(const std::string& message, int peer) : CollectiveError(message), peer_(peer) {}
  int peer() const noexcept { return peer_; }

 private:
  int peer_;
};

}  // namespace primus::coll
