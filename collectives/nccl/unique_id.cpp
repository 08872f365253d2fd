// The NCCL unique id of rank 0, handed to every rank through the bootstrap's allgather.
#include <exception>
#include <vector>

#include "primus/collectives/nccl.hpp"

namespace primus::coll {

std::string exchange_nccl_unique_id(Bootstrap& bootstrap,
                                    const std::function<std::string()>& make_id,
                                    std::chrono::milliseconds timeout) {
  std::string mine;
  std::exception_ptr failed;
  if (bootstrap.rank() == 0) {
    // Rank 0 takes part in the allgather even when make_id fails, so that the other ranks
    // learn it at once (an empty id) instead of at their deadline.
    try {
      mine = make_id();
    } catch (...) {
      failed = std::current_exception();
    }
  }
  std::vector<std::string> all;
  try {
    all = bootstrap.allgather(mine, timeout);
  } catch (...) {
    if (failed) std::rethrow_exception(failed);
    throw;
  }
  if (failed) std::rethrow_exception(failed);
  if (all.size() != static_cast<std::size_t>(bootstrap.size()) || all.empty()) {
    throw CollectiveError("the NCCL unique id exchange returned " + std::to_string(all.size()) +
                          " values for " + std::to_string(bootstrap.size()) + " ranks");
  }
  const std::string& id = all.front();
  if (id.size() != kNcclUniqueIdBytes) {
    throw CollectiveError("rank 0's NCCL unique id is " + std::to_string(id.size()) +
                          " bytes; expected " + std::to_string(kNcclUniqueIdBytes) +
                          " (NCCL_UNIQUE_ID_BYTES)");
  }
  return id;
}

}  // namespace primus::coll
