#include "authenticated.hpp"

#include <algorithm>

namespace primus::coll::net {

Socket connect_authenticated(const std::string& host, std::uint16_t port,
                             handshake::Purpose purpose, std::uint32_t my_rank,
                             const std::string& secret, Deadline deadline, const std::string& peer,
                             int peer_rank) {
  Socket socket = connect_to(host, port, deadline, peer, peer_rank);
  const handshake::Hello hello = handshake::make_hello(purpose, my_rank, handshake::fresh_nonce());
  socket.send_all(hello.data(), hello.size(), deadline);
  handshake::Challenge challenge{};
  socket.recv_all(challenge.data(), challenge.size(), deadline);
  handshake::Proof proof{};
  if (!handshake::check_challenge(secret, hello, challenge, proof)) {
    throw PeerFailure(socket.peer() + ": it does not know the job secret (PRIMUS_JOB_SECRET)",
                      peer_rank);
  }
  socket.send_all(proof.data(), proof.size(), deadline);
  std::uint8_t verdict = handshake::kRefused;
  socket.recv_all(&verdict, 1, deadline);
  if (verdict != handshake::kAccepted) {
    throw PeerFailure(socket.peer() + ": refused this connection", peer_rank);
  }
  return socket;
}

Socket accept_authenticated(const Listener& listener, handshake::Purpose purpose,
                            const std::string& secret, Deadline deadline,
                            const std::function<bool(std::uint32_t)>& accept_rank,
                            const std::function<void(const std::string&)>& log,
                            std::chrono::milliseconds handshake_time) {
  for (;;) {
    Socket socket = listener.accept(deadline);
    const Deadline until = std::min(deadline, Clock::now() + handshake_time);
    std::string why;
    try {
      handshake::Hello hello{};
      socket.recv_all(hello.data(), hello.size(), until);
      const auto fields = handshake::parse_hello(hello);
      if (!fields || fields->purpose != purpose) {
        why = "not a Primus handshake of this kind";
      } else {
        const handshake::Nonce nonce = handshake::fresh_nonce();
        const handshake::Challenge challenge = handshake::make_challenge(secret, hello, nonce);
        socket.send_all(challenge.data(), challenge.size(), until);
        handshake::Proof proof{};
        socket.recv_all(proof.data(), proof.size(), until);
        if (!handshake::check_proof(secret, hello, nonce, proof)) {
          why = "failed authentication (not this job's secret, or a replayed handshake)";
        } else if (!accept_rank(fields->rank)) {
          why = "claims rank " + std::to_string(fields->rank) + ", which is not expected here";
        } else {
          const std::uint8_t accepted = handshake::kAccepted;
          socket.send_all(&accepted, 1, until);
          socket.set_peer("rank " + std::to_string(fields->rank) + " (" + socket.peer() + ")",
                          static_cast<int>(fields->rank));
          return socket;
        }
        const std::uint8_t refused = handshake::kRefused;
        try {
          socket.send_all(&refused, 1, until);
        } catch (const PeerFailure&) {
        }
      }
    } catch (const PeerFailure& e) {
      why = std::string("handshake failed: ") + e.what();
    }
    if (log) log("refused a connection from " + socket.peer() + ": " + why);
  }
}

}  // namespace primus::coll::net
