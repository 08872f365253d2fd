// primus-metrics.so: the Prometheus endpoint with cpp-httplib, behind the C interface of
// metrics_abi.h (primus-launch loads it only for --primus-metrics; metrics_server.cpp).
#include <httplib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#include "monitor/metrics_abi.h"

struct primus_metrics {
  httplib::Server server;
  std::mutex mutex;
  std::condition_variable published;
  std::string text;         // guarded by mutex
  uint64_t generation = 0;  // texts published so far; guarded by mutex
  std::atomic<bool> requested{false};
  int wake = -1;  // eventfd: a GET waits for a text
  std::thread thread;
  uint16_t port = 0;
  ~primus_metrics() {
    if (wake >= 0) ::close(wake);
  }
};

namespace {

// How long a GET waits for the launcher to build a fresh text before it serves the newest one it
// has (the launcher is between attempts, or busy).
constexpr auto kFreshWait = std::chrono::seconds(1);

std::string fresh_text(primus_metrics& self) {
  std::unique_lock<std::mutex> lock(self.mutex);
  const uint64_t seen = self.generation;
  // The descriptor first, then the flag: primus_metrics_take_request() drains the descriptor
  // only once it sees the flag, so a wake-up never stays readable with no flag to clear it.
  const uint64_t one = 1;
  if (::write(self.wake, &one, sizeof one) < 0) {
    // The counter is full or the descriptor gone: the newest text is served at once.
  }
  self.requested.store(true);
  self.published.wait_for(lock, kFreshWait, [&] { return self.generation != seen; });
  return self.text;
}

}  // namespace

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
    m->wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (m->wake < 0) {
      std::snprintf(error, error_size, "eventfd: %s", std::strerror(errno));
      return nullptr;
    }
    primus_metrics* const self = m.get();
    m->server.Get("/metrics", [self](const httplib::Request&, httplib::Response& response) {
      response.set_content(fresh_text(*self), "text/plain; version=0.0.4; charset=utf-8");
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
    {
      const std::lock_guard<std::mutex> lock(server->mutex);
      server->text.swap(copy);
      ++server->generation;
    }
    server->published.notify_all();
    return 0;
  } catch (...) {
    return -1;
  }
}

__attribute__((visibility("default"))) int primus_metrics_wake_fd(const primus_metrics* server) {
  return server->wake;
}

__attribute__((visibility("default"))) int primus_metrics_take_request(primus_metrics* server) {
  if (!server->requested.exchange(false)) return 0;
  uint64_t count = 0;
  while (::read(server->wake, &count, sizeof count) > 0) {
  }
  return 1;
}

__attribute__((visibility("default"))) void primus_metrics_close(primus_metrics* server) {
  if (server == nullptr) return;
  server->server.stop();
  if (server->thread.joinable()) server->thread.join();
  delete server;
}

}  // extern "C"
