// The Prometheus endpoint: serves /metrics from a thread of its own, the text built when a GET
// asks for it (wake_fd() becomes readable, take_request() says so, the caller publish()es).
// --primus-metrics=[ADDR:]PORT; the address defaults to 127.0.0.1 (only this node), port 0 picks a
// free one. The server itself (cpp-httplib) is a module, primus-metrics.so, loaded here at the
// first MetricsServer (metrics_abi.h says why).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

struct primus_metrics;

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
  void publish(const std::string& text);
  // Readable while a GET waits for a text.
  int wake_fd() const;
  // True when a GET waits for a text since the last call.
  bool take_request();

 private:
  primus_metrics* server_ = nullptr;
  std::string address_;
};

// Where primus-metrics.so is looked for, in order: the build tree beside primus-launch, the
// lib/primus directory beside the bin directory it is installed in (an install moved whole, or
// `make install prefix=...`), where configure put it.
std::string metrics_module_path();

}  // namespace primus::launch
