#include "authenticated.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace primus::coll::net {

Socket connect_authenticated(const std::string& host, std::uint16_t port,
                             handshake::Purpose purpose, std::uint32_t my_rank,
                             const std::string& secret, Deadline deadline, const std::string& peer,
                             int peer_rank, bool integrity) {
  Socket socket = connect_to(host, port, deadline, peer, peer_rank);
  const handshake::Hello hello =
      handshake::make_hello(purpose, my_rank, handshake::fresh_nonce(), integrity);
  socket.send_all(hello.data(), hello.size(), deadline);
  handshake::Challenge challenge{};
  try {
    socket.recv_all(challenge.data(), challenge.size(), deadline);
  } catch (const PeerFailure& e) {
    // An acceptor closes at once on a hello it refuses: another version of Primus, or the
    // other integrity setting.
    throw PeerFailure(std::string(e.what()) +
                          " before the handshake's challenge (it refused our hello: another "
                          "version of Primus, or another --primus-coll-integrity setting?)",
                      peer_rank);
  }
  handshake::Proof proof{};
  if (peer_rank < 0) throw CollectiveError("connect_authenticated: the peer's rank is unknown");
  if (!handshake::check_challenge(secret, hello, challenge, static_cast<std::uint32_t>(peer_rank),
                                  proof)) {
    throw PeerFailure(socket.peer() +
                          ": it does not know the job secret (PRIMUS_JOB_SECRET), or belongs to "
                          "another job, step or world size, or is not rank " +
                          std::to_string(peer_rank),
                      peer_rank);
  }
  socket.send_all(proof.data(), proof.size(), deadline);
  std::uint8_t verdict = handshake::kRefused;
  socket.recv_all(&verdict, 1, deadline);
  if (verdict != handshake::kAccepted) {
    throw PeerFailure(socket.peer() + ": refused this connection", peer_rank);
  }
  if (integrity) {
    handshake::Nonce acceptor_nonce{};
    std::memcpy(acceptor_nonce.data(), challenge.data(), acceptor_nonce.size());
    const auto keys = handshake::connection_keys(secret, hello, acceptor_nonce,
                                                 static_cast<std::uint32_t>(peer_rank));
    socket.seal(keys.to_acceptor, keys.to_connector);
  }
  return socket;
}

namespace {

// Refusals logged one by one before they are only counted.
constexpr std::uint64_t kRefusalsLoggedEach = 10;
constexpr std::uint64_t kRefusalsPerSummary = 100;

}  // namespace

struct Acceptor::Pending {
  Socket socket;
  Deadline until;
  handshake::Hello hello{};
  handshake::Nonce nonce{};
  handshake::Proof proof{};
  std::uint32_t rank = 0;
  std::size_t got = 0;
  bool challenged = false;  // the hello arrived and the challenge went out: reading the proof
};

Acceptor::Acceptor(const Listener& listener, handshake::Purpose purpose, std::uint32_t my_rank,
                   std::string secret, std::function<bool(std::uint32_t)> accept_rank,
                   std::function<void(const std::string&)> log,
                   std::chrono::milliseconds handshake_time, bool integrity)
    : listener_(listener),
      purpose_(purpose),
      my_rank_(my_rank),
      secret_(std::move(secret)),
      accept_rank_(std::move(accept_rank)),
      log_(std::move(log)),
      handshake_time_(handshake_time),
      integrity_(integrity) {}

Acceptor::~Acceptor() = default;

void Acceptor::refuse(Pending& pending, const std::string& why) {
  ++refused_;
  if (!log_) return;
  if (refused_ <= kRefusalsLoggedEach) {
    log_("refused a connection from " + pending.socket.peer() + ": " + why);
  } else if (refused_ % kRefusalsPerSummary == 0) {
    log_(std::to_string(refused_) + " connections refused so far (the latest from " +
         pending.socket.peer() + ": " + why + ")");
  }
}

void Acceptor::take_new_connections() {
  for (;;) {
    Socket socket = listener_.try_accept();
    if (!socket.valid()) return;
    if (pending_.size() >= kMaxPendingHandshakes) {
      refuse(*pending_.front(),
             "dropped: more than " + std::to_string(kMaxPendingHandshakes) + " handshakes at once");
      pending_.erase(pending_.begin());
    }
    auto pending = std::make_unique<Pending>();
    pending->socket = std::move(socket);
    pending->until = Clock::now() + handshake_time_;
    pending_.push_back(std::move(pending));
  }
}

bool Acceptor::advance(Pending& p) {
  try {
    if (!p.challenged) {
      p.got += p.socket.recv_some(p.hello.data() + p.got, p.hello.size() - p.got);
      if (p.got < p.hello.size()) return false;
      const auto fields = handshake::parse_hello(p.hello);
      if (!fields || fields->purpose != purpose_) {
        refuse(p, "not a Primus handshake of this kind");
        return true;
      }
      if (fields->integrity != integrity_) {
        refuse(p, fields->integrity
                      ? "asks for --primus-coll-integrity, which this rank runs without"
                      : "runs without --primus-coll-integrity, which this rank runs with");
        return true;
      }
      p.rank = fields->rank;
      p.nonce = handshake::fresh_nonce();
      const handshake::Challenge challenge =
          handshake::make_challenge(secret_, p.hello, p.nonce, my_rank_);
      p.socket.send_all(challenge.data(), challenge.size(), p.until);
      p.challenged = true;
      p.got = 0;
      return false;
    }
    p.got += p.socket.recv_some(p.proof.data() + p.got, p.proof.size() - p.got);
    if (p.got < p.proof.size()) return false;
    std::string why;
    if (!handshake::check_proof(secret_, p.hello, p.nonce, my_rank_, p.proof)) {
      why = "failed authentication (not this job's secret, or a replayed handshake)";
    } else if (!accept_rank_(p.rank) || (once_per_rank_ && accepted_ranks_.count(p.rank) != 0)) {
      why = "claims rank " + std::to_string(p.rank) + ", which is not expected here";
    } else {
      const std::uint8_t accepted = handshake::kAccepted;
      p.socket.send_all(&accepted, 1, p.until);
      p.socket.set_peer("rank " + std::to_string(p.rank) + " (" + p.socket.peer() + ")",
                        static_cast<int>(p.rank));
      if (integrity_) {
        const auto keys = handshake::connection_keys(secret_, p.hello, p.nonce, my_rank_);
        p.socket.seal(keys.to_connector, keys.to_acceptor);
      }
      accepted_ranks_.insert(p.rank);
      ready_.push_back(std::move(p.socket));
      return true;
    }
    const std::uint8_t refused = handshake::kRefused;
    try {
      p.socket.send_all(&refused, 1, p.until);
    } catch (const PeerFailure&) {
    }
    refuse(p, why);
  } catch (const PeerFailure& e) {
    refuse(p, std::string("handshake failed: ") + e.what());
  }
  return true;
}

Socket Acceptor::next(Deadline deadline, int wake_fd) {
  for (;;) {
    if (!ready_.empty()) {
      Socket socket = std::move(ready_.front());
      ready_.pop_front();
      return socket;
    }
    const Deadline now = Clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      if ((*it)->until > now) {
        ++it;
        continue;
      }
      refuse(**it, "sent no complete handshake within " + std::to_string(handshake_time_.count()) +
                       " ms");
      it = pending_.erase(it);
    }
    if (now >= deadline) {
      throw PeerFailure("no connection arrived on port " + std::to_string(listener_.port()) +
                            " before the deadline",
                        -1);
    }
    std::vector<pollfd> fds;
    fds.push_back({listener_.fd(), POLLIN, 0});
    Deadline wake = deadline;
    for (const auto& p : pending_) {
      fds.push_back({p->socket.fd(), POLLIN, 0});
      wake = std::min(wake, p->until);
    }
    if (wake_fd >= 0) fds.push_back({wake_fd, POLLIN, 0});
    const int ready = ::poll(fds.data(), fds.size(), poll_timeout(wake));
    if (ready < 0 && errno != EINTR) {
      throw CollectiveError(std::string("poll: ") + std::strerror(errno));
    }
    if (ready <= 0) continue;
    if (wake_fd >= 0 && fds.back().revents != 0) return Socket();
    // Handshakes first (their indexes match fds), then new connections.
    std::vector<std::unique_ptr<Pending>> still;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      const bool has_news = fds[i + 1].revents != 0;
      if (has_news && advance(*pending_[i])) continue;
      still.push_back(std::move(pending_[i]));
    }
    pending_ = std::move(still);
    if (fds[0].revents != 0) take_new_connections();
  }
}

Socket accept_authenticated(const Listener& listener, handshake::Purpose purpose,
                            std::uint32_t my_rank, const std::string& secret, Deadline deadline,
                            const std::function<bool(std::uint32_t)>& accept_rank,
                            const std::function<void(const std::string&)>& log,
                            std::chrono::milliseconds handshake_time, bool integrity) {
  Acceptor acceptor(listener, purpose, my_rank, secret, accept_rank, log, handshake_time,
                    integrity);
  return acceptor.next(deadline);
}

}  // namespace primus::coll::net
