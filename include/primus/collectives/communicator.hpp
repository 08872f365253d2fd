// A communicator: rank, size, and collectives whose results are bitwise identical on every rank
// and from run to run for the same inputs and rank count (a fixed reduction order).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "primus/collectives/bootstrap.hpp"
#include "primus/collectives/dtype.hpp"
#include "primus/collectives/error.hpp"

namespace primus::coll {

constexpr std::chrono::seconds kDefaultTimeout{300};
constexpr int kDefaultSpinMicros = 50;  // Options::spin where every rank of a node has a CPU

struct Options {
  // Every blocking operation ends within this (a dead or hung peer: PeerFailure naming it).
  // Unset: PRIMUS_COLL_TIMEOUT (connect_from_environment), else kDefaultTimeout.
  std::optional<std::chrono::milliseconds> timeout;
  // Allreduce of at most this many bytes takes the latency-optimal algorithm (recursive
  // doubling); larger ones the bandwidth-optimal ring (reduce-scatter, then allgather).
  std::size_t small_bytes = std::size_t{64} << 10;
  // The ring reduces what has arrived while the rest is in flight, this much at a time.
  std::size_t segment_bytes = std::size_t{256} << 10;
  // The ring's reduce-scatter receives a block this much at a time (whole segments, at least
  // one) into a working buffer that stays in the caches: receiving a whole block at once into
  // a buffer of its size (32 MiB for a 64 MiB allreduce at 2 ranks) cost 7 to 15 % of the busbw
  // from 16 to 128 MiB at 2 ranks (1 and 2 MiB did as well as each other, 4 MiB less).
  std::size_t chunk_bytes = std::size_t{2} << 20;
  // Authenticate every message after the handshake, not only the connection (a tag per 64 KiB
  // frame under a key of that connection and direction; docs/collectives.md): data altered in
  // transit, or injected by someone who took over a connection, is refused (PeerFailure)
  // instead of reduced. Every rank must agree: a rank of the other setting is refused at the
  // handshake. Unset: PRIMUS_COLL_INTEGRITY (connect_from_environment), else off.
  std::optional<bool> integrity;
  // How long a rank waiting for a peer keeps trying before it sleeps in poll(): a wake-up from
  // poll() costs about 20 us on a VM, four times a small allreduce's exchange. Spinning only
  // pays where every rank of the node has a CPU of its own. Unset: 50 us when this node's ranks
  // (LOCAL_WORLD_SIZE, else the world) are no more than the CPUs this process may run on
  // (connect_from_environment), else 0 (sleep at once).
  std::optional<std::chrono::microseconds> spin;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;
  // Whether every message is authenticated (Options::integrity), not only the connections.
  virtual bool integrity() const { return false; }

  // In place: data holds count elements on every rank, and the reduction of all ranks' after.
  virtual void allreduce(void* data, std::size_t count, DType dtype, ReduceOp op) = 0;
  // root's count elements into every rank's data.
  virtual void broadcast(void* data, std::size_t count, DType dtype, int root) = 0;
  // send: count elements per rank; recv: size() * count, rank i's at i * count.
  virtual void allgather(const void* send, void* recv, std::size_t count, DType dtype) = 0;
  // send: size() * count elements; recv: count, the reduction of every rank's block rank().
  virtual void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                              ReduceOp op) = 0;
  virtual void barrier() = 0;
  // Point to point: count elements of data to rank `peer`, which calls recv() with the same
  // count from this rank (messages between two ranks arrive in the order they were sent). For
  // one rank's data to a few others, where a broadcast would send it to every rank. The TCP
  // backend has them; another backend throws CollectiveError naming itself.
  virtual void send(const void* data, std::size_t count, DType dtype, int peer);
  virtual void recv(void* data, std::size_t count, DType dtype, int peer);

  // Ends this communicator's use, from any thread: a call blocked in it, on another thread,
  // returns within milliseconds with PeerFailure ("communicator aborted: <reason>"), and so does
  // every later call. For a rank told from outside (the launcher) that a peer failed: a silent
  // peer would otherwise hold the call until the timeout. Never throws; a second abort keeps the
  // first reason. A new communicator is the only way on.
  virtual void abort(const std::string& reason) noexcept = 0;
  // Whether abort() was called.
  virtual bool aborted() const noexcept = 0;
};

// The CPU backend over TCP: every rank listens on its bootstrap address, connections are
// authenticated with `key` (never sent; a session key of the job secret), ranks found through
// `bootstrap`.
std::unique_ptr<Communicator> tcp_communicator(Bootstrap& bootstrap, const std::string& key,
                                               const Options& options = {});

// A TCP communicator for this process, from the environment (bootstrap_settings(): the
// variables a rank gets under srun --primus or primus-launch). An unset options.timeout comes
// from PRIMUS_COLL_TIMEOUT. `secret`, when given, is the job secret instead of
// PRIMUS_JOB_SECRET (the Python package takes the variable out of the environment once read).
// Every connection proves handshake::session_key(secret, {PRIMUS_JOB_ID, SLURM_STEP_ID, world
// size}): ranks of another job, array task, step or world size are refused.
std::unique_ptr<Communicator> connect_from_environment(
    Options options = {}, const std::optional<std::string>& secret = std::nullopt);

}  // namespace primus::coll
