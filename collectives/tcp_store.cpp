// The TCP store bootstrap: a star around rank 0, every connection authenticated.
// Wire format of an allgather round: each rank sends its value (u64 length + bytes) to rank 0;
// rank 0 sends every rank the values of all ranks in rank order (u32 count, then each value).
#include <cstring>
#include <iostream>
#include <vector>

#include "authenticated.hpp"
#include "primus/collectives/bootstrap.hpp"
#include "primus/collectives/error.hpp"

namespace primus::coll {
namespace {

constexpr std::uint64_t kMaxValueBytes = std::uint64_t{1} << 20;
// What one allgather may hold in all (the values are endpoints and NCCL ids, tens of bytes):
// without it, rank 0 would hold up to world size x 1 MiB on a peer's say.
constexpr std::uint64_t kMaxRoundBytes = std::uint64_t{64} << 20;

// Adds a value's size to a round's total; PeerFailure naming `socket` past kMaxRoundBytes.
void count_round(std::uint64_t& total, const std::string& value, const net::Socket& socket) {
  total += value.size();
  if (total > kMaxRoundBytes) {
    throw PeerFailure(socket.peer() + ": the store round exceeds " +
                          std::to_string(kMaxRoundBytes >> 20) + " MiB",
                      socket.peer_rank());
  }
}
// One handshake takes a round trip; a connection that has not finished its own in this time is
// dropped (others run meanwhile: net::Acceptor).
constexpr auto kHandshakeTime = std::chrono::seconds(3);

net::Deadline deadline_after(std::chrono::milliseconds timeout) {
  return net::Clock::now() + timeout;
}

void send_value(const net::Socket& socket, const std::string& value, net::Deadline deadline) {
  std::uint8_t header[8];
  const std::uint64_t length = value.size();
  for (int i = 0; i < 8; ++i)
    header[i] = static_cast<std::uint8_t>(length >> (8 * i));
  socket.send_all(header, sizeof header, deadline);
  socket.send_all(value.data(), value.size(), deadline);
}

std::string recv_value(const net::Socket& socket, net::Deadline deadline) {
  std::uint8_t header[8];
  socket.recv_all(header, sizeof header, deadline);
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | header[i];
  if (length > kMaxValueBytes) {
    throw PeerFailure(socket.peer() + ": sent a store value of " + std::to_string(length) +
                          " bytes (at most 1 MiB)",
                      socket.peer_rank());
  }
  std::string value(static_cast<std::size_t>(length), '\0');
  socket.recv_all(value.data(), value.size(), deadline);
  return value;
}

class TcpStore final : public Bootstrap {
 public:
  TcpStore(int rank, int size, const std::string& master_addr, std::uint16_t port,
           const std::string& secret, std::chrono::milliseconds timeout, bool integrity)
      : rank_(rank), size_(size) {
    if (size < 1 || rank < 0 || rank >= size) {
      throw CollectiveError("rank " + std::to_string(rank) + " of " + std::to_string(size) +
                            ": expected 0 <= rank < world size");
    }
    if (secret.empty()) {
      throw CollectiveError("PRIMUS_JOB_SECRET is empty: connections cannot be authenticated");
    }
    const net::Deadline deadline = deadline_after(timeout);
    if (rank == 0) {
      local_address_ = master_addr;
      if (size == 1) return;
      listener_ = std::make_unique<net::Listener>(master_addr, port);
      ranks_.resize(static_cast<std::size_t>(size));
      net::Acceptor acceptor(
          *listener_, handshake::Purpose::kStore, 0, secret,
          [this](std::uint32_t r) {
            return r > 0 && r < static_cast<std::uint32_t>(size_) && !ranks_[r].valid();
          },
          [](const std::string& what) { std::cerr << "primus: store: " << what << "\n"; },
          kHandshakeTime, integrity);
      for (int joined = 1; joined < size; ++joined) {
        net::Socket peer = acceptor.next(deadline);
        const auto r = static_cast<std::size_t>(peer.peer_rank());
        ranks_[r] = std::move(peer);
      }
    } else {
      store_ = net::connect_authenticated(master_addr, port, handshake::Purpose::kStore,
                                          static_cast<std::uint32_t>(rank), secret, deadline,
                                          "the store of rank 0", 0, integrity);
      local_address_ = store_.local_address();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string local_address() const override { return local_address_; }

  std::vector<std::string> allgather(const std::string& mine,
                                     std::chrono::milliseconds timeout) override {
    const net::Deadline deadline = deadline_after(timeout);
    if (size_ == 1) return {mine};
    if (rank_ != 0) {
      send_value(store_, mine, deadline);
      std::uint8_t count[4];
      store_.recv_all(count, sizeof count, deadline);
      std::uint32_t values = 0;
      for (int i = 3; i >= 0; --i)
        values = (values << 8) | count[i];
      if (values != static_cast<std::uint32_t>(size_)) {
        throw PeerFailure(store_.peer() + ": sent " + std::to_string(values) + " values for " +
                              std::to_string(size_) + " ranks",
                          store_.peer_rank());
      }
      std::vector<std::string> all(static_cast<std::size_t>(size_));
      std::uint64_t total = 0;
      for (auto& value : all) {
        value = recv_value(store_, deadline);
        count_round(total, value, store_);
      }
      return all;
    }
    std::vector<std::string> all(static_cast<std::size_t>(size_));
    all[0] = mine;
    std::uint64_t total = mine.size();
    for (int r = 1; r < size_; ++r) {
      const net::Socket& peer = ranks_[static_cast<std::size_t>(r)];
      all[static_cast<std::size_t>(r)] = recv_value(peer, deadline);
      count_round(total, all[static_cast<std::size_t>(r)], peer);
    }
    std::uint8_t count[4];
    for (int i = 0; i < 4; ++i)
      count[i] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(size_) >> (8 * i));
    for (int r = 1; r < size_; ++r) {
      const net::Socket& peer = ranks_[static_cast<std::size_t>(r)];
      peer.send_all(count, sizeof count, deadline);
      for (const auto& value : all)
        send_value(peer, value, deadline);
    }
    return all;
  }

 private:
  int rank_;
  int size_;
  std::string local_address_;
  std::unique_ptr<net::Listener> listener_;
  std::vector<net::Socket> ranks_;  // rank 0: the other ranks' store connections
  net::Socket store_;               // other ranks: the connection to rank 0
};

}  // namespace

std::unique_ptr<Bootstrap> tcp_store_bootstrap(int rank, int size, const std::string& master_addr,
                                               std::uint16_t port, const std::string& secret,
                                               std::chrono::milliseconds timeout, bool integrity) {
  return std::make_unique<TcpStore>(rank, size, master_addr, port, secret, timeout, integrity);
}

}  // namespace primus::coll
