#include "socket.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

namespace primus::coll::net {
namespace {

[[noreturn]] void peer_failure(const Socket& socket, const std::string& what) {
  throw PeerFailure(socket.peer() + ": " + what, socket.peer_rank());
}

void tune(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small messages go at once
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSendBufferBytes, sizeof kSendBufferBytes);
}

sockaddr_in resolve(const std::string& host, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) == 1) return address;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw CollectiveError("cannot resolve host '" + host + "': " + ::gai_strerror(rc));
  }
  address.sin_addr = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return address;
}

std::string address_text(const sockaddr_in& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(address.sin_port));
}

// Waits for `events` on fd; false on timeout.
bool wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd entry{fd, events, 0};
    const int n = ::poll(&entry, 1, poll_timeout(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) throw CollectiveError(std::string("poll: ") + std::strerror(errno));
  }
}

// The frames of a message: integrity::kFrameBytes each, the last one shorter (a message of 0
// bytes has none).
struct Frames {
  std::size_t bytes;
  std::size_t count() const {
    return (bytes + integrity::kFrameBytes - 1) / integrity::kFrameBytes;
  }
  std::size_t begin(std::size_t f) const { return f * integrity::kFrameBytes; }
  std::size_t size(std::size_t f) const {
    return std::min(integrity::kFrameBytes, bytes - begin(f));
  }
};

// A sealed stream hands the kernel this many frames (each with its tag) per call, so that a
// sealed transfer makes about as few system calls as a plain one; tags are computed as frames
// enter this window.
constexpr std::size_t kFramesPerCall = 4;
constexpr int kMaxPieces = 2 * static_cast<int>(kFramesPerCall);

// Where a transfer of one message stands, in either direction. Plain: a run of bytes. Sealed:
// each frame, then its tag; the data in place, the tags of the frames in the window in tags.
class FrameCursor {
 public:
  FrameCursor(std::uint8_t* data, std::size_t bytes, bool sealed)
      : data_(data), frames_{bytes}, sealed_(sealed) {}

  bool done() const { return sealed_ ? frame_ >= frames_.count() : at_ >= frames_.bytes; }
  // Bytes of whole frames behind the cursor (plain: every byte), from the message's start.
  std::size_t behind() const {
    return sealed_ ? std::min(frames_.begin(frame_), frames_.bytes) : at_;
  }
  std::uint8_t* frame_data(std::size_t f) const { return data_ + frames_.begin(f); }
  std::size_t frame_size(std::size_t f) const { return frames_.size(f); }
  integrity::Tag& tag(std::size_t f) { return tags_[f % kFramesPerCall]; }

  // The next pieces, at most kMaxPieces; prepare(f) runs first for each frame in the window.
  template <typename Prepare>
  int pieces(iovec* out, Prepare&& prepare) {
    if (!sealed_) {
      out[0] = {data_ + at_, frames_.bytes - at_};
      return 1;
    }
    int n = 0;
    std::size_t skip = at_;  // of the first frame's data and tag, already transferred
    for (std::size_t f = frame_; f < frames_.count() && f < frame_ + kFramesPerCall; ++f) {
      prepare(f);
      const std::size_t size = frames_.size(f);
      if (skip < size) out[n++] = {frame_data(f) + skip, size - skip};
      const std::size_t tag_skip = skip > size ? skip - size : 0;
      out[n++] = {tag(f).data() + tag_skip, integrity::kTagBytes - tag_skip};
      skip = 0;
    }
    return n;
  }

  // Moves past `bytes` transferred; complete(f) runs for each frame whose tag is now whole.
  template <typename Complete>
  void advance(std::size_t bytes, Complete&& complete) {
    at_ += bytes;
    if (!sealed_) return;
    while (frame_ < frames_.count() && at_ >= frames_.size(frame_) + integrity::kTagBytes) {
      complete(frame_);
      at_ -= frames_.size(frame_) + integrity::kTagBytes;
      ++frame_;
    }
  }

 private:
  std::uint8_t* data_;
  Frames frames_;
  bool sealed_;
  std::size_t frame_ = 0;  // sealed: the frame being transferred
  std::size_t at_ = 0;     // plain: bytes transferred; sealed: bytes of frame_ and its tag
  std::array<integrity::Tag, kFramesPerCall> tags_{};
};

// What is left to send of one message; a frame's tag is computed as it enters the window.
class Outgoing {
 public:
  Outgoing(const Socket& socket, const void* data, std::size_t bytes)
      : mac_(socket.send_mac()),
        // sendmsg only reads through the pieces.
        cursor_(const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(data)), bytes,
                mac_ != nullptr) {}

  bool done() const { return cursor_.done(); }
  int pieces(iovec* out) {
    return cursor_.pieces(out, [this](std::size_t f) {
      if (f < tagged_) return;
      cursor_.tag(f) = mac_->tag(cursor_.frame_data(f), cursor_.frame_size(f));
      tagged_ = f + 1;
    });
  }
  void advance(std::size_t sent) {
    cursor_.advance(sent, [](std::size_t) {});
  }

 private:
  integrity::Mac* mac_;
  FrameCursor cursor_;
  std::size_t tagged_ = 0;  // frames whose tags are computed
};

// What is left to receive of one message; each frame is checked as soon as its tag is whole.
class Incoming {
 public:
  Incoming(const Socket& socket, void* data, std::size_t bytes)
      : socket_(socket),
        mac_(socket.receive_mac()),
        cursor_(static_cast<std::uint8_t*>(data), bytes, mac_ != nullptr) {}

  bool done() const { return cursor_.done(); }
  // Bytes of the message received (and, sealed, checked) so far, from its start.
  std::size_t usable() const { return cursor_.behind(); }
  int pieces(iovec* out) {
    return cursor_.pieces(out, [](std::size_t) {});
  }
  void advance(std::size_t received) {
    cursor_.advance(received, [this](std::size_t f) {
      const std::uint64_t number = mac_->frames();
      if (!mac_->check(cursor_.frame_data(f), cursor_.frame_size(f), cursor_.tag(f))) {
        peer_failure(socket_, "data failed the integrity check (frame " + std::to_string(number) +
                                  " of the connection, the first being 0): it was altered in "
                                  "transit, or did not come from the peer that authenticated "
                                  "(--primus-coll-integrity)");
      }
    });
  }

 private:
  const Socket& socket_;
  integrity::Mac* mac_;
  FrameCursor cursor_;
};

std::atomic<std::int64_t> g_spin_ns{0};

// Whether this thread is in a collective, and when a peer was last heard from in it (the
// clock's count since its epoch; 0: not yet).
thread_local bool t_in_collective = false;
thread_local Clock::rep t_heard = 0;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Sends `outgoing` on `out` and receives `incoming` on `in` (either may be absent) until both
// are done; on_received(usable bytes) after each receive that made some usable. A wait without
// progress retries for the spin (set_wait_spin) before it sleeps in poll().
void transfer(const Socket* out, Outgoing* outgoing, const Socket* in, Incoming* incoming,
              Deadline deadline, const std::function<void(std::size_t)>& on_received) {
  auto sending = [&] { return outgoing != nullptr && !outgoing->done(); };
  auto receiving = [&] { return incoming != nullptr && !incoming->done(); };
  iovec pieces[kMaxPieces];
  const std::chrono::nanoseconds spin(g_spin_ns.load(std::memory_order_relaxed));
  Deadline spin_until{};  // of the wait under way; unset while transfers make progress
  while (sending() || receiving()) {
    bool progress = false;
    if (sending()) {
      msghdr message{};
      message.msg_iov = pieces;
      message.msg_iovlen = static_cast<std::size_t>(outgoing->pieces(pieces));
      const ssize_t n = ::sendmsg(out->fd(), &message, MSG_NOSIGNAL);
      if (n > 0) {
        outgoing->advance(static_cast<std::size_t>(n));
        progress = true;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        peer_failure(*out, std::string("connection lost: ") + std::strerror(errno));
      }
    }
    if (receiving()) {
      msghdr message{};
      message.msg_iov = pieces;
      message.msg_iovlen = static_cast<std::size_t>(incoming->pieces(pieces));
      const ssize_t n = ::recvmsg(in->fd(), &message, 0);
      if (n > 0) {
        if (t_in_collective) t_heard = Clock::now().time_since_epoch().count();
        const std::size_t before = incoming->usable();
        incoming->advance(static_cast<std::size_t>(n));
        progress = true;
        if (on_received && incoming->usable() > before) on_received(incoming->usable());
      } else if (n == 0) {
        peer_failure(*in, "closed the connection");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        peer_failure(*in, std::string("connection lost: ") + std::strerror(errno));
      }
    }
    if (progress) {
      spin_until = Deadline{};
      continue;
    }
    if (spin.count() > 0) {
      const Deadline now = Clock::now();
      if (spin_until == Deadline{}) {
        spin_until = spin_deadline(now, spin,
                                   t_heard == 0 ? Deadline{} : Deadline(Clock::duration(t_heard)));
      }
      if (now < spin_until) {
        // Yielding lets a peer that shares this CPU run (two ranks spinning on one CPU waited
        // out each other's spin: 12 to 44 us for an 8-byte allreduce instead of 3 to 4).
        cpu_relax();
        std::this_thread::yield();
        continue;
      }
    }
    pollfd entries[2] = {};
    nfds_t count = 0;
    if (sending()) entries[count++] = {out->fd(), POLLOUT, 0};
    if (receiving()) entries[count++] = {in->fd(), POLLIN, 0};
    const int n = ::poll(entries, count, poll_timeout(deadline));
    if (n < 0 && errno != EINTR) {
      throw CollectiveError(std::string("poll: ") + std::strerror(errno));
    }
    if (n == 0) {
      if (receiving())
        peer_failure(*in, "timed out receiving (nothing arrived before the deadline)");
      peer_failure(*out, "timed out sending (it took no data before the deadline)");
    }
  }
}

}  // namespace

Deadline spin_deadline(Deadline now, std::chrono::nanoseconds spin, Deadline heard) {
  return heard == Deadline{} ? now + spin : std::max(now + spin, heard + kHeardSpin);
}

CollectiveScope::CollectiveScope() {
  t_in_collective = true;
  t_heard = 0;
}

CollectiveScope::~CollectiveScope() {
  t_in_collective = false;
  t_heard = 0;
}

void set_wait_spin(std::chrono::microseconds spin) {
  g_spin_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(spin).count(),
                  std::memory_order_relaxed);
}

int poll_timeout(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<std::chrono::milliseconds::rep>(left.count(), 1 << 30));
}

struct Socket::Sealing {
  integrity::Mac send;
  integrity::Mac receive;
};

Socket::Socket(os::UniqueFd fd, std::string peer, int peer_rank)
    : fd_(std::move(fd)), peer_(std::move(peer)), peer_rank_(peer_rank) {}
Socket::Socket() = default;
Socket::~Socket() = default;
Socket::Socket(Socket&&) noexcept = default;
Socket& Socket::operator=(Socket&&) noexcept = default;

void Socket::seal(const integrity::Key& send, const integrity::Key& receive) {
  sealing_ = std::make_unique<Sealing>(Sealing{integrity::Mac(send), integrity::Mac(receive)});
}

integrity::Mac* Socket::send_mac() const {
  return sealing_ ? &sealing_->send : nullptr;
}

integrity::Mac* Socket::receive_mac() const {
  return sealing_ ? &sealing_->receive : nullptr;
}

os::UniqueFd Socket::release() {
  if (sealing_) throw CollectiveError("a sealed socket cannot be handed over");
  return std::move(fd_);
}

void Socket::set_peer(std::string peer, int peer_rank) {
  peer_ = std::move(peer);
  peer_rank_ = peer_rank;
}

void Socket::send_all(const void* data, std::size_t bytes, Deadline deadline) const {
  Outgoing outgoing(*this, data, bytes);
  transfer(this, &outgoing, nullptr, nullptr, deadline, {});
}

void Socket::recv_all(void* data, std::size_t bytes, Deadline deadline) const {
  Incoming incoming(*this, data, bytes);
  transfer(nullptr, nullptr, this, &incoming, deadline, {});
}

std::size_t Socket::recv_some(void* data, std::size_t bytes) const {
  bool closed = false;
  const std::size_t got = recv_some(data, bytes, closed);
  if (closed) peer_failure(*this, "closed the connection");
  return got;
}

std::size_t Socket::recv_some(void* data, std::size_t bytes, bool& closed) const {
  for (;;) {
    const ssize_t n = ::recv(fd(), data, bytes, 0);
    if (n > 0) return static_cast<std::size_t>(n);
    if (n == 0) {
      closed = true;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    peer_failure(*this, std::string("connection lost: ") + std::strerror(errno));
  }
}

std::string Socket::local_address() const {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw CollectiveError(std::string("getsockname: ") + std::strerror(errno));
  }
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
  return text;
}

Listener::Listener(const std::string& address, std::uint16_t port) {
  const std::string where = address + ":" + std::to_string(port);
  const sockaddr_in bind_to = resolve(address, port);
  fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd_) throw CollectiveError(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&bind_to), sizeof bind_to) != 0) {
    throw CollectiveError("cannot listen on " + where + ": " + std::strerror(errno));
  }
  if (::listen(fd_.get(), 1024) != 0) {
    throw CollectiveError("cannot listen on " + where + ": " + std::strerror(errno));
  }
  sockaddr_in bound{};
  socklen_t length = sizeof bound;
  ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.sin_port);
}

Socket Listener::try_accept() const {
  for (;;) {
    sockaddr_in from{};
    socklen_t length = sizeof from;
    const int fd = ::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&from), &length,
                             SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      tune(fd);
      return Socket(os::UniqueFd(fd), address_text(from), -1);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Socket();
    throw CollectiveError(std::string("accept: ") + std::strerror(errno));
  }
}

Socket Listener::accept(Deadline deadline) const {
  for (;;) {
    Socket socket = try_accept();
    if (socket.valid()) return socket;
    if (!wait_for(fd_.get(), POLLIN, deadline)) {
      throw PeerFailure(
          "no connection arrived on port " + std::to_string(port_) + " before the deadline", -1);
    }
  }
}

Socket connect_to(const std::string& host, std::uint16_t port, Deadline deadline,
                  const std::string& peer, int peer_rank) {
  const sockaddr_in address = resolve(host, port);
  const std::string name = peer + " (" + host + ":" + std::to_string(port) + ")";
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    os::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) throw CollectiveError(std::string("socket: ") + std::strerror(errno));
    int error = 0;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
      error = 0;
    } else if (errno == EINPROGRESS) {
      if (!wait_for(fd.get(), POLLOUT, deadline)) {
        throw PeerFailure(name + ": timed out connecting", peer_rank);
      }
      socklen_t length = sizeof error;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    } else {
      error = errno;
    }
    if (error == 0) {
      tune(fd.get());
      return Socket(std::move(fd), name, peer_rank);
    }
    // Not listening yet (or its backlog is full): try again until the deadline.
    if (error != ECONNREFUSED && error != ETIMEDOUT && error != EAGAIN && error != ECONNRESET) {
      throw PeerFailure(name + ": cannot connect: " + std::strerror(error), peer_rank);
    }
    if (Clock::now() + pause >= deadline) {
      throw PeerFailure(name + ": cannot connect before the deadline: " + std::strerror(error),
                        peer_rank);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

void exchange(const Socket& out, const void* send, std::size_t send_bytes, const Socket& in,
              void* recv, std::size_t recv_bytes, Deadline deadline,
              const std::function<void(std::size_t)>& on_received) {
  Outgoing outgoing(out, send, send_bytes);
  Incoming incoming(in, recv, recv_bytes);
  transfer(&out, &outgoing, &in, &incoming, deadline, on_received);
}

}  // namespace primus::coll::net
