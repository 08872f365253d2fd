// Connections that ran the job-secret handshake (handshake.hpp) over a socket (socket.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "handshake.hpp"
#include "socket.hpp"

namespace primus::coll::net {

// Connects to host:port as `my_rank` and proves the secret; the peer must prove it too.
// PeerFailure when it cannot, or refuses us.
Socket connect_authenticated(const std::string& host, std::uint16_t port,
                             handshake::Purpose purpose, std::uint32_t my_rank,
                             const std::string& secret, Deadline deadline, const std::string& peer,
                             int peer_rank);

// Accepts connections until one proves the secret for `purpose` with a rank that
// accept_rank(rank) allows; returns it with its peer rank set. Every refused connection is
// reported through log (who, and why) and closed: the caller goes on. Each handshake gets at
// most `handshake_time` (a silent connection cannot hold the listener past it).
Socket accept_authenticated(const Listener& listener, handshake::Purpose purpose,
                            const std::string& secret, Deadline deadline,
                            const std::function<bool(std::uint32_t)>& accept_rank,
                            const std::function<void(const std::string&)>& log,
                            std::chrono::milliseconds handshake_time);

}  // namespace primus::coll::net
