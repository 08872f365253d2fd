// The launcher's end of the control channel (socket adapter): listens on one TCP port, runs the
// job-secret handshake of every connection in a thread of its own (so that a stranger holding
// a connection open delays no one), and hands the lines that proven ranks and task wrappers send
// to the attempt's loop as Reports (control_protocol.hpp). fd() is readable when take() has
// something, so the loop polls it beside its signals and its children.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "control/control_protocol.hpp"
#include "primus/os/unique_fd.hpp"

namespace primus::coll::net {
class Listener;
class Socket;
}  // namespace primus::coll::net

namespace primus::launch {

class ControlServer {
 public:
  // bind_host: the address to listen on ("127.0.0.11"; port 0 for any free port); the ranks
  // are given "<bind_host>:<port>" as PRIMUS_CONTROL. world_size: ranks 0..world_size-1 and
  // their wrappers may connect. log: refused connections, malformed lines.
  ControlServer(const std::string& bind_host, std::uint16_t port, const std::string& secret,
                std::uint32_t world_size, std::function<void(const std::string&)> log);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  const std::string& address() const { return address_; }
  int fd() const { return epoll_.get(); }
  // Everything that has arrived, without waiting. A connection that closes gives a Report of
  // kind kGoodbye with reason "disconnected" unless it said goodbye itself.
  std::vector<Report> take();
  // Sends one line (a newline is added) to rank `rank` itself (not its wrapper); false when it
  // is not connected or the line cannot be sent within a few seconds (then it is dropped).
  bool send(std::uint32_t rank, const std::string& line) { return send_to(rank, false, line); }
  // The same to the task wrapper of rank `rank` (srun: a rejoin's notice to the wrapper that
  // starts the replacement).
  bool send_to_wrapper(std::uint32_t rank, const std::string& line) {
    return send_to(rank, true, line);
  }
  // Drops every connection (the next attempt's ranks connect again).
  void drop_connections();

 private:
  struct Connection;
  bool send_to(std::uint32_t rank, bool wrapper, const std::string& line);
  void accept_loop(const std::string& secret);
  void adopt_new_connections();
  // events: what epoll reported for its socket.
  void read_connection(Connection& connection, std::uint32_t events, std::vector<Report>& out);

  std::unique_ptr<coll::net::Listener> listener_;
  std::string address_;
  std::uint32_t world_size_;
  std::function<void(const std::string&)> log_;
  os::UniqueFd epoll_;
  os::UniqueFd arrived_;  // eventfd: the accept thread has new connections
  os::UniqueFd stop_;     // eventfd: the accept thread is to end
  std::mutex mutex_;
  std::vector<coll::net::Socket> new_;  // guarded by mutex_
  std::map<int, std::unique_ptr<Connection>> connections_;
  std::uint64_t serial_ = 0;
  std::thread thread_;
};

}  // namespace primus::launch
