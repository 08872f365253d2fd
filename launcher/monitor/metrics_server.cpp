#include "monitor/metrics_server.hpp"

#include <httplib.h>

#include "primus/common/error.hpp"
#include "primus/common/parse_number.hpp"

namespace primus::launch {

std::optional<ListenAddress> parse_listen_address(const std::string& value) {
  ListenAddress where;
  const auto colon = value.rfind(':');
  const std::string port = colon == std::string::npos ? value : value.substr(colon + 1);
  if (colon != std::string::npos) where.host = value.substr(0, colon);
  if (where.host.empty() || port.empty()) return std::nullopt;
  const auto number = parse_unsigned(port, 65535);
  if (!number) return std::nullopt;
  where.port = static_cast<std::uint16_t>(*number);
  return where;
}

MetricsServer::MetricsServer(const ListenAddress& where) : server_(new httplib::Server) {
  // One thread answers: a scrape every few seconds needs no more.
  server_->new_task_queue = [] { return new httplib::ThreadPool(1); };
  server_->Get("/metrics",
               [this](const httplib::Request& /*request*/, httplib::Response& response) {
                 std::string text;
                 {
                   const std::lock_guard<std::mutex> lock(mutex_);
                   text = text_;
                 }
                 response.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
               });
  server_->Get("/", [](const httplib::Request& /*request*/, httplib::Response& response) {
    response.set_content("primus-launch: metrics at /metrics\n", "text/plain");
  });
  int port = where.port;
  if (where.port == 0) {
    port = server_->bind_to_any_port(where.host);
  } else if (!server_->bind_to_port(where.host, where.port)) {
    port = -1;
  }
  if (port <= 0) {
    throw Error("--primus-metrics: cannot listen on " + where.host + ":" +
                std::to_string(where.port) +
                " (in use, or not an address of this node; port 0 picks a free one)");
  }
  address_ = (where.host.find(':') != std::string::npos ? "[" + where.host + "]" : where.host) +
             ":" + std::to_string(port);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

MetricsServer::~MetricsServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void MetricsServer::publish(std::string text) {
  const std::lock_guard<std::mutex> lock(mutex_);
  text_ = std::move(text);
}

}  // namespace primus::launch
