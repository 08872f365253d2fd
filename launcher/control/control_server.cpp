#include "control/control_server.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstring>

#include "authenticated.hpp"
#include "primus/collectives/control.hpp"
#include "primus/common/error.hpp"

namespace primus::launch {

struct ControlServer::Connection {
  coll::net::Socket socket;
  std::uint32_t rank = 0;
  bool wrapper = false;
  bool said_goodbye = false;
  std::uint64_t serial = 0;  // the order of arrival: a rank's newest connection is its own
  LineSplitter lines;
};

namespace {

// `edge`: a connection, which read_connection() reads until the kernel has no more (a short read
// tells). Edge triggered, a read connection leaves epoll's ready list at once; level triggered,
// each stayed there to be polled again by the next wait, and by the launcher's own wait on this
// epoll set (a tenth of the launcher's CPU at 1,024 heartbeating ranks).
void add_to_epoll(int epoll, int fd, bool edge) {
  epoll_event event{};
  // Edge-triggered connections also ask for EPOLLRDHUP, so that a peer's close that arrived
  // with its last bytes is seen in the same event (read_connection stops at a short read).
  event.events = edge ? EPOLLIN | EPOLLRDHUP | EPOLLET : EPOLLIN;
  event.data.fd = fd;
  if (::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) != 0) {
    throw Error(std::string("epoll_ctl: ") + std::strerror(errno));
  }
}

os::UniqueFd make_eventfd() {
  os::UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd) throw Error(std::string("eventfd: ") + std::strerror(errno));
  return fd;
}

void poke(int fd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
}

void clear(int fd) {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = ::read(fd, &count, sizeof count);
}

}  // namespace

ControlServer::ControlServer(const std::string& bind_host, std::uint16_t port,
                             const std::string& secret, std::uint32_t world_size,
                             std::function<void(const std::string&)> log)
    : listener_(std::make_unique<coll::net::Listener>(bind_host, port)),
      world_size_(world_size),
      log_(std::move(log)) {
  address_ = bind_host + ":" + std::to_string(listener_->port());
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throw Error(std::string("epoll_create1: ") + std::strerror(errno));
  arrived_ = make_eventfd();
  stop_ = make_eventfd();
  add_to_epoll(epoll_.get(), arrived_.get(), false);
  // The session key is derived in the thread, beside the start of the ranks.
  thread_ = std::thread([this, secret] { accept_loop(secret); });
}

ControlServer::~ControlServer() {
  poke(stop_.get());
  if (thread_.joinable()) thread_.join();
}

void ControlServer::accept_loop(const std::string& secret) {
  const std::uint32_t world = world_size_;
  coll::net::Acceptor acceptor(
      *listener_, coll::handshake::Purpose::kControl, coll::kControlLauncherRank,
      coll::control_session_key(secret, address_),
      [world](std::uint32_t rank) { return (rank & ~coll::kControlWrapperBit) < world; }, log_,
      std::chrono::seconds(10));
  acceptor.allow_reconnects();
  for (;;) {
    coll::net::Socket socket;
    try {
      socket = acceptor.next(coll::net::Clock::now() + std::chrono::hours(24), stop_.get());
    } catch (const coll::PeerFailure&) {
      continue;  // a day without a connection
    } catch (const std::exception& e) {
      if (log_) log_(std::string("the control channel stopped accepting: ") + e.what());
      return;
    }
    if (!socket.valid()) return;  // asked to stop
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      new_.push_back(std::move(socket));
    }
    poke(arrived_.get());
  }
}

void ControlServer::adopt_new_connections() {
  clear(arrived_.get());
  std::vector<coll::net::Socket> sockets;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    sockets.swap(new_);
  }
  for (coll::net::Socket& socket : sockets) {
    auto connection = std::make_unique<Connection>();
    const auto who = static_cast<std::uint32_t>(socket.peer_rank());
    connection->rank = who & ~coll::kControlWrapperBit;
    connection->wrapper = (who & coll::kControlWrapperBit) != 0;
    connection->socket = std::move(socket);
    connection->serial = ++serial_;
    const int fd = connection->socket.fd();
    add_to_epoll(epoll_.get(), fd, true);
    connections_[fd] = std::move(connection);
  }
}

void ControlServer::read_connection(Connection& c, std::uint32_t events, std::vector<Report>& out) {
  bool closed = false;
  std::string bytes;
  char buffer[16384];
  // A read shorter than the buffer emptied the socket: what arrives later raises a new edge, so
  // the read that would find nothing (one system call a heartbeat) is skipped, unless the peer
  // has closed (then the loop reads on to the end).
  const bool closing = (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
  for (;;) {
    std::size_t got = 0;
    try {
      got = c.socket.recv_some(buffer, sizeof buffer, closed);
    } catch (const coll::PeerFailure&) {
      closed = true;
    }
    if (got == 0) break;
    bytes.append(buffer, got);
    if (got < sizeof buffer && !closing) break;
  }
  bool ok = true;
  for (const std::string& line : c.lines.feed(bytes, ok)) {
    if (line.empty()) continue;
    std::string error;
    auto report = parse_report(line, c.rank, c.wrapper, error);
    if (!report) {
      if (log_) {
        log_("rank " + std::to_string(c.rank) + (c.wrapper ? " (task wrapper)" : "") +
             " sent a malformed control message (" + error + "); ignored");
      }
      continue;
    }
    if (report->kind == ReportKind::kGoodbye) c.said_goodbye = true;
    out.push_back(std::move(*report));
  }
  if (!ok) {
    if (log_) {
      log_("rank " + std::to_string(c.rank) + " sent a control line longer than " +
           std::to_string(kMaxControlLine) + " bytes; its connection is closed");
    }
    closed = true;
  }
  if (closed) {
    if (!c.said_goodbye) {
      Report gone;
      gone.kind = ReportKind::kGoodbye;
      gone.rank = c.rank;
      gone.wrapper = c.wrapper;
      gone.reason = "disconnected";
      out.push_back(std::move(gone));
    }
    const int fd = c.socket.fd();
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
    connections_.erase(fd);
  }
}

bool ControlServer::send_to(std::uint32_t rank, bool wrapper, const std::string& line) {
  // A rank's newest connection: one of an earlier attempt may not be closed yet.
  Connection* newest = nullptr;
  for (auto& [fd, connection] : connections_) {
    if (connection->rank != rank || connection->wrapper != wrapper) continue;
    if (newest == nullptr || connection->serial > newest->serial) newest = connection.get();
  }
  if (newest == nullptr) return false;
  const std::string text = line + "\n";
  try {
    newest->socket.send_all(text.data(), text.size(),
                            coll::net::Clock::now() + std::chrono::seconds(5));
    return true;
  } catch (const std::exception& e) {
    if (log_) {
      log_("cannot send to rank " + std::to_string(rank) + (wrapper ? "'s task wrapper" : "") +
           ": " + e.what());
    }
    return false;
  }
}

std::vector<Report> ControlServer::take() {
  std::vector<Report> out;
  out.reserve(16);  // a wake-up's reports, mostly; more grow the vector as usual
  epoll_event events[64];
  for (;;) {
    const int n = ::epoll_wait(epoll_.get(), events, 64, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == arrived_.get()) {
        adopt_new_connections();
        continue;
      }
      const auto it = connections_.find(fd);
      if (it != connections_.end()) read_connection(*it->second, events[i].events, out);
    }
    if (n < 64) break;
  }
  return out;
}

void ControlServer::drop_connections() {
  for (auto& [fd, connection] : connections_)
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  connections_.clear();
}

}  // namespace primus::launch
