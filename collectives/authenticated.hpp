// Connections that ran the job-secret handshake (handshake.hpp) over a socket (socket.hpp).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "handshake.hpp"
#include "socket.hpp"

namespace primus::coll::net {

// Connects to host:port as `my_rank` and proves the key (a session key) to rank `peer_rank`;
// the peer must prove it too, as that rank. PeerFailure when it cannot, or refuses us.
// integrity: ask for integrity (the socket comes back sealed with the connection's keys); the
// acceptor must run with the same setting, else it refuses.
Socket connect_authenticated(const std::string& host, std::uint16_t port,
                             handshake::Purpose purpose, std::uint32_t my_rank,
                             const std::string& secret, Deadline deadline, const std::string& peer,
                             int peer_rank, bool integrity = false);

// Accepts the connections of a listener and runs their handshakes concurrently: every pending
// handshake has its own short deadline (`handshake_time`), at most kMaxPendingHandshakes run at
// once (a new connection beyond that displaces the oldest pending one), and refused connections
// are logged through `log` (who, and why), the first ones each, then one line per hundred. So
// idle or garbage connections from other users of the node (the port may be known) cannot hold
// up the peers that do know the secret.
class Acceptor {
 public:
  static constexpr std::size_t kMaxPendingHandshakes = 64;

  // my_rank: the rank this listener belongs to (every MAC covers it). integrity: the sockets
  // it returns are sealed (integrity.hpp), and connectors that do not ask for it are refused,
  // like those that ask for it when this is false.
  Acceptor(const Listener& listener, handshake::Purpose purpose, std::uint32_t my_rank,
           std::string secret, std::function<bool(std::uint32_t)> accept_rank,
           std::function<void(const std::string&)> log, std::chrono::milliseconds handshake_time,
           bool integrity = false);

  // Accept a rank again after it was returned once (the control channel, where a rank comes
  // back in the next attempt); by default each rank connects once.
  void allow_reconnects() { once_per_rank_ = false; }
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  // The next connection that proved the secret for `purpose` with a rank that accept_rank
  // allows and that this acceptor has not returned before, with its peer rank set; PeerFailure
  // (peer -1) when none completes before the deadline. wake_fd: a descriptor that, once
  // readable, makes next() return an invalid Socket at once (to stop a thread that accepts).
  Socket next(Deadline deadline, int wake_fd = -1);

 private:
  struct Pending;
  void take_new_connections();
  // Advances one handshake with what has arrived; true when it is finished (accepted or not).
  bool advance(Pending& pending);
  void refuse(Pending& pending, const std::string& why);

  const Listener& listener_;
  handshake::Purpose purpose_;
  std::uint32_t my_rank_;
  std::string secret_;
  std::function<bool(std::uint32_t)> accept_rank_;
  std::function<void(const std::string&)> log_;
  std::chrono::milliseconds handshake_time_;
  bool integrity_;
  bool once_per_rank_ = true;
  std::vector<std::unique_ptr<Pending>> pending_;
  std::deque<Socket> ready_;
  std::set<std::uint32_t> accepted_ranks_;
  std::uint64_t refused_ = 0;
};

// One connection through a one-off Acceptor (see there).
Socket accept_authenticated(const Listener& listener, handshake::Purpose purpose,
                            std::uint32_t my_rank, const std::string& secret, Deadline deadline,
                            const std::function<bool(std::uint32_t)>& accept_rank,
                            const std::function<void(const std::string&)>& log,
                            std::chrono::milliseconds handshake_time, bool integrity = false);

}  // namespace primus::coll::net
