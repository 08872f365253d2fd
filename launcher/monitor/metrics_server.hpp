// The Prometheus endpoint (socket adapter, cpp-httplib): serves the newest text given to
// publish() at /metrics from a thread of its own. --primus-metrics=[ADDR:]PORT; the address
// defaults to 127.0.0.1 (only this node), port 0 picks a free one.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace primus::launch {

struct ListenAddress {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
};

// [ADDR:]PORT as --primus-metrics takes it; nullopt when it is not that.
std::optional<ListenAddress> parse_listen_address(const std::string& value);

class MetricsServer {
 public:
  // Throws primus::Error naming --primus-metrics when it cannot listen there.
  explicit MetricsServer(const ListenAddress& where);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // "host:port" where it listens.
  const std::string& address() const { return address_; }
  void publish(std::string text);

 private:
  std::unique_ptr<httplib::Server> server_;
  std::string address_;
  std::mutex mutex_;
  std::string text_;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace primus::launch
