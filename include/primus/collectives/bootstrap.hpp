// How the ranks of a job find each other before they connect: an allgather of small strings
// (endpoints, an NCCL unique id). Through PMIx under `srun --mpi=pmix`, or through a TCP store
// that rank 0 serves at MASTER_ADDR:PRIMUS_PORT.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace primus::coll {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's `mine`, in rank order; every rank calls it with its own value. Throws
  // CollectiveError (PeerFailure naming the rank when one is missing) after `timeout`.
  virtual std::vector<std::string> allgather(const std::string& mine,
                                             std::chrono::milliseconds timeout) = 0;
  // The address peers reach this rank at (for its own listener).
  virtual std::string local_address() const = 0;
};

// The TCP store: rank 0 listens on master_addr:port and every other rank connects to it,
// each connection authenticated with `key` (handshake::session_key of the job secret: see
// connect_from_environment). Waits for all ranks up to `timeout`. integrity: every message on
// those connections is authenticated too (Options::integrity); all ranks must agree.
std::unique_ptr<Bootstrap> tcp_store_bootstrap(int rank, int size, const std::string& master_addr,
                                               std::uint16_t port, const std::string& secret,
                                               std::chrono::milliseconds timeout,
                                               bool integrity = false);

// PMIx (srun --mpi=pmix, mpirun): rank and size from the PMIx server; peers reach this rank at
// local_address.
std::unique_ptr<Bootstrap> pmix_bootstrap(const std::string& local_address);

// What the environment asks for (the variables the SPANK plugin and primus-launch set).
struct BootstrapSettings {
  std::string method;       // "pmix" or "tcp"
  int rank = 0;             // tcp: RANK
  int size = 1;             // tcp: WORLD_SIZE
  std::string master_addr;  // tcp: MASTER_ADDR
  std::uint16_t port = 0;   // tcp: PRIMUS_PORT (MASTER_PORT is PyTorch's)
  std::string secret;       // PRIMUS_JOB_SECRET (64 lowercase hex)
  std::string job;          // PRIMUS_JOB_ID ("" when unset)
  std::string step;         // SLURM_STEP_ID ("" when unset)
  // PRIMUS_GENERATION: the ranks' generation within an attempt (primus-launch counts a rejoin
  // after a rank's failure as a new one; 0 when unset). Bound into the session key, so that a
  // rank of an earlier generation is refused by the ranks of a later one.
  std::uint32_t generation = 0;
  std::optional<std::chrono::milliseconds> timeout;  // PRIMUS_COLL_TIMEOUT, seconds
  bool integrity = false;                            // PRIMUS_COLL_INTEGRITY (0 or 1)
  std::string node;  // this rank's node: SLURMD_NODENAME, else the host name
};

// Reads the settings through `get` (a variable's value, or nothing when unset). Throws
// CollectiveError naming the variable and what was expected. PRIMUS_BOOTSTRAP picks the method;
// without it, pmix when PMIX_RANK is set, else tcp.
BootstrapSettings bootstrap_settings(
    const std::function<std::optional<std::string>(const std::string&)>& get);

// The bootstrap those settings describe, waiting up to `timeout` for the other ranks.
std::unique_ptr<Bootstrap> make_bootstrap(const BootstrapSettings& settings,
                                          std::chrono::milliseconds timeout);

}  // namespace primus::coll
