// TCP sockets for collectives (OS adapter): non-blocking descriptors, every wait a poll() with
// a deadline (never a busy loop), errors that name the peer. A sealed socket (seal()) carries
// every message as frames of integrity::kFrameBytes, each followed by its tag, and checks every
// frame it receives before any of it is handed on.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "integrity.hpp"

#include "primus/collectives/error.hpp"
#include "primus/os/unique_fd.hpp"

namespace primus::coll::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// A connected stream socket and who is at the other end ("rank 3 (127.0.0.12:40123)").
class Socket {
 public:
  Socket();
  Socket(os::UniqueFd fd, std::string peer, int peer_rank);
  ~Socket();
  Socket(Socket&&) noexcept;
  Socket& operator=(Socket&&) noexcept;

  int fd() const { return fd_.get(); }
  bool valid() const { return fd_.valid(); }
  const std::string& peer() const { return peer_; }
  int peer_rank() const { return peer_rank_; }
  void set_peer(std::string peer, int peer_rank);
  // The descriptor, handed over (a plain socket only: the control channel's JSON lines).
  os::UniqueFd release();

  // From now on, messages are authenticated: tags under `send` on what this side sends, checked
  // under `receive` on what it receives (the two ends swap the keys). Sending and receiving
  // stay const operations: the frame counters live behind a pointer.
  void seal(const integrity::Key& send, const integrity::Key& receive);
  bool sealed() const { return sealing_ != nullptr; }
  // The tags of what this side sends, and of what it receives; null when not sealed.
  integrity::Mac* send_mac() const;
  integrity::Mac* receive_mac() const;

  // A whole message; on a sealed socket the receiver checks every frame and throws PeerFailure
  // ("failed the integrity check") at the first one that is not what the peer sent.
  void send_all(const void* data, std::size_t bytes, Deadline deadline) const;
  void recv_all(void* data, std::size_t bytes, Deadline deadline) const;
  // What has arrived, up to `bytes`, without waiting (0 when nothing has); PeerFailure when the
  // peer closed the connection or it failed. Raw bytes: for the handshake, before seal().
  std::size_t recv_some(void* data, std::size_t bytes) const;
  // The same, where the peer's orderly close is expected: it returns 0 and sets `closed`
  // instead of throwing (a throw's first unwinding in a process costs about a millisecond);
  // a connection that failed still throws PeerFailure.
  std::size_t recv_some(void* data, std::size_t bytes, bool& closed) const;
  // The local IPv4 address of this connection ("127.0.0.11").
  std::string local_address() const;

 private:
  struct Sealing;

  os::UniqueFd fd_;
  std::string peer_;
  int peer_rank_ = -1;
  std::unique_ptr<Sealing> sealing_;
};

class Listener {
 public:
  // Binds address:port (port 0: any free port) and listens. Throws CollectiveError naming both.
  Listener(const std::string& address, std::uint16_t port);
  std::uint16_t port() const { return port_; }
  // The next connection; PeerFailure (peer -1) when none came before the deadline.
  Socket accept(Deadline deadline) const;
  // A connection that is already waiting, or an invalid Socket when none is (never waits).
  Socket try_accept() const;
  int fd() const { return fd_.get(); }

 private:
  os::UniqueFd fd_;
  std::uint16_t port_ = 0;
};

// Connects to host:port, retrying while the other side is not listening yet, until the
// deadline. `peer` names it in errors.
Socket connect_to(const std::string& host, std::uint16_t port, Deadline deadline,
                  const std::string& peer, int peer_rank);

// Sends `send` on `out` while receiving `recv` on `in` (they may be one socket), so that two
// peers can exchange in both directions at once without deadlock. on_received(total) runs
// after each receive with the bytes received so far (to reduce what has arrived while the rest
// is in flight); on a sealed socket, with the bytes received and checked so far.
void exchange(const Socket& out, const void* send, std::size_t send_bytes, const Socket& in,
              void* recv, std::size_t recv_bytes, Deadline deadline,
              const std::function<void(std::size_t)>& on_received = {});

// Milliseconds left until the deadline, for poll() (0 when past).
int poll_timeout(Deadline deadline);

// Every connection's send buffer (SO_SNDBUF; Linux doubles it for its bookkeeping), fixed instead
// of the kernel's autotuning, which grows it to tcp_wmem's maximum (4 MiB here) and so keeps
// megabytes per connection in flight, out of the caches the copies and reductions run in
// (autotuned: half the allreduce busbw from 1 to 16 MiB at 2 ranks over loopback). 384 KiB holds
// the whole 512 KiB block of a 2-rank 1 MiB allreduce with its overhead, so one sendmsg hands it
// over: 2 sendmsg per allreduce and rank, against 5 to 10 with 256 KiB, where one send took all
// but 432 bytes of the block and the rest waited for the peer to read and acknowledge. At 1 MiB
// 1.14 to 1.17 x the busbw of 256 KiB in three interleaved sweeps (2026-12-07), the same from
// 128 KiB to 16 MiB otherwise; 512 KiB gave the same at 1 MiB and 0.91 to 0.96 at 256 KiB and
// 4 MiB; 1 MiB 0.59 from 2 MiB up.
constexpr int kSendBufferBytes = 384 << 10;

// How long exchange() keeps retrying a transfer that made no progress before it sleeps in
// poll(), for this process (Options::spin; 0 by default).
void set_wait_spin(std::chrono::microseconds spin);

// Measured at 2 ranks on 2 CPUs with another process starting every 50 ms (2026-12-06): with
// only the 50 us spin the two ranks shared one CPU in 5 to 54 % of the samples and the
// allreduce's busbw at 1 to 4 MiB was 4.1 to 7.9 GB/s; spinning until 2 ms after the last byte
// heard, 0 to 22 % and 7.0 to 8.2 GB/s, as with each rank bound to a CPU of its own (0.5 ms:
// 5 to 30 %, 5.0 to 7.5).
constexpr std::chrono::microseconds kHeardSpin{2000};

// Until when a wait that starts at `now` spins: `spin`, or until kHeardSpin after `heard` if that
// is later (`heard`: when a peer was last heard from in this collective; unset: not yet).
Deadline spin_deadline(Deadline now, std::chrono::nanoseconds spin, Deadline heard);

// One collective on this thread. Once a peer has been heard from in it, a wait without progress
// keeps spinning (where set_wait_spin's spin is on) until kHeardSpin after the last byte heard,
// not only for the spin: the peer is inside the collective and its next bytes are close. A rank
// that sleeps instead is woken by its peer's send, and Linux takes that (a "sync" wake-up) as a
// reason to move it onto the sender's CPU, where the two then take turns.
class CollectiveScope {
 public:
  CollectiveScope();
  ~CollectiveScope();
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;
};

}  // namespace primus::coll::net
