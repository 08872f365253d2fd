// primus-metrics.so: the Prometheus endpoint with cpp-httplib, behind the C interface of
// metrics_abi.h (primus-launch loads it only for --primus-metrics; metrics_server.cpp).
#include <httplib.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#include "monitor/metrics_abi.h"

struct primus_metrics {
  httplib::Server server;
  std::mutex mutex;
  std::string text;  // guarded by mutex
  std::thread thread;
  uint16_t port = 0;
};

extern "C" {

__attribute__((visibility("default"))) int primus_metrics_abi_version(void) {
  return PRIMUS_METRICS_ABI_VERSION;
}

__attribute__((visibility("default"))) primus_metrics* primus_metrics_open(const char* host,
                                                                           uint16_t port,
                                                                           char* error,
                                                                           size_t error_size) {
  try {
    auto m = std::make_unique<primus_metrics>();
    // One thread answers: a scrape every few seconds needs no more.
    m->server.new_task_queue = [] { return new httplib::ThreadPool(1); };
    primus_metrics* const self = m.get();
    m->server.Get("/metrics", [self](const httplib::Request&, httplib::Response& response) {
      std::string text;
      {
        const std::lock_guard<std::mutex> lock(self->mutex);
        text = self->text;
      }
      response.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
    });
    m->server.Get("/", [](const httplib::Request&, httplib::Response& response) {
      response.set_content("primus-launch: metrics at /metrics\n", "text/plain");
    });
    int bound = port;
    if (port == 0) {
      bound = m->server.bind_to_any_port(host);
    } else if (!m->server.bind_to_port(host, port)) {
      bound = -1;
    }
    if (bound <= 0) {
      std::snprintf(error, error_size, "cannot listen on %s:%u", host, unsigned{port});
      return nullptr;
    }
    m->port = static_cast<uint16_t>(bound);
    m->thread = std::thread([self] { self->server.listen_after_bind(); });
    return m.release();
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
  } catch (...) {
    std::snprintf(error, error_size, "an unknown error");
  }
  return nullptr;
}

__attribute__((visibility("default"))) uint16_t primus_metrics_port(const primus_metrics* server) {
  return server->port;
}

__attribute__((visibility("default"))) int primus_metrics_publish(primus_metrics* server,
                                                                  const char* text, size_t size) {
  try {
    std::string copy(text, size);
    const std::lock_guard<std::mutex> lock(server->mutex);
    server->text.swap(copy);
    return 0;
  } catch (...) {
    return -1;
  }
}

__attribute__((visibility("default"))) void primus_metrics_close(primus_metrics* server) {
  if (server == nullptr) return;
  server->server.stop();
  if (server->thread.joinable()) server->thread.join();
  delete server;
}

}  // extern "C"
