#include "monitor/metrics_server.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <new>
#include <optional>
#include <vector>

#include "cli/self_process.hpp"
#include "monitor/metrics_abi.h"
#include "primus/common/error.hpp"
#include "primus/common/parse_number.hpp"

namespace primus::launch {
namespace {

constexpr const char* kModule = "primus-metrics.so";

// The module's functions; loaded once, never unloaded (its thread may outlive a server).
struct MetricsModule {
  decltype(&primus_metrics_abi_version) abi_version = nullptr;
  decltype(&primus_metrics_open) open = nullptr;
  decltype(&primus_metrics_port) port = nullptr;
  decltype(&primus_metrics_publish) publish = nullptr;
  decltype(&primus_metrics_wake_fd) wake_fd = nullptr;
  decltype(&primus_metrics_take_request) take_request = nullptr;
  decltype(&primus_metrics_close) close = nullptr;
};

template <typename Function>
void resolve(void* handle, const char* name, Function& out, const std::string& path) {
  out = reinterpret_cast<Function>(::dlsym(handle, name));
  if (out == nullptr) {
    throw Error("--primus-metrics: " + path + " lacks " + name + "; reinstall Primus");
  }
}

MetricsModule load_module() {
  const std::string path = metrics_module_path();
  void* const handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    throw Error("--primus-metrics: cannot load " + path + ": " + (why ? why : "unknown error") +
                "; reinstall Primus");
  }
  MetricsModule m;
  resolve(handle, "primus_metrics_abi_version", m.abi_version, path);
  if (m.abi_version() != PRIMUS_METRICS_ABI_VERSION) {
    throw Error("--primus-metrics: " + path + " is another version's module (interface " +
                std::to_string(m.abi_version()) + ", expected " +
                std::to_string(PRIMUS_METRICS_ABI_VERSION) + "); reinstall Primus");
  }
  resolve(handle, "primus_metrics_open", m.open, path);
  resolve(handle, "primus_metrics_port", m.port, path);
  resolve(handle, "primus_metrics_publish", m.publish, path);
  resolve(handle, "primus_metrics_wake_fd", m.wake_fd, path);
  resolve(handle, "primus_metrics_take_request", m.take_request, path);
  resolve(handle, "primus_metrics_close", m.close, path);
  return m;
}

const MetricsModule& module() {
  static std::mutex mutex;
  static std::optional<MetricsModule> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!loaded) loaded = load_module();  // a failure is thrown again at the next try
  return *loaded;
}

}  // namespace

std::string metrics_module_path() {
  const std::filesystem::path self = self_executable();
  const std::vector<std::filesystem::path> dirs = {
      self.parent_path() / "launcher" / ".libs",
      self.parent_path().parent_path() / "lib" / "primus", std::filesystem::path(PRIMUS_PKGLIBDIR)};
  if (const auto found = installed_part(dirs, kModule, R_OK)) return found->string();
  throw Error(std::string("--primus-metrics: cannot find ") + kModule + " (looked in " +
              listed_dirs(dirs) + "); reinstall Primus");
}

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

MetricsServer::MetricsServer(const ListenAddress& where) {
  const MetricsModule& m = module();
  char error[256] = {};
  server_ = m.open(where.host.c_str(), where.port, error, sizeof error);
  if (server_ == nullptr) {
    throw Error("--primus-metrics: cannot listen on " + where.host + ":" +
                std::to_string(where.port) +
                " (in use, or not an address of this node; port 0 picks a free one): " + error);
  }
  address_ = (where.host.find(':') != std::string::npos ? "[" + where.host + "]" : where.host) +
             ":" + std::to_string(m.port(server_));
}

MetricsServer::~MetricsServer() {
  module().close(server_);
}

void MetricsServer::publish(const std::string& text) {
  if (module().publish(server_, text.data(), text.size()) != 0) throw std::bad_alloc();
}

int MetricsServer::wake_fd() const {
  return module().wake_fd(server_);
}

bool MetricsServer::take_request() {
  return module().take_request(server_) != 0;
}

}  // namespace primus::launch
