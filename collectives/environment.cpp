// The adapter from the process environment to a bootstrap and a communicator.
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "primus/collectives/communicator.hpp"
#include "primus/os/node_address.hpp"

namespace primus::coll {

std::unique_ptr<Bootstrap> make_bootstrap(const BootstrapSettings& settings,
                                          std::chrono::milliseconds timeout) {
  if (settings.method == "tcp") {
    return tcp_store_bootstrap(settings.rank, settings.size, settings.master_addr, settings.port,
                               settings.secret, timeout);
  }
  std::string node = settings.node;
  if (node.empty()) {
    char host[HOST_NAME_MAX + 1] = {};
    if (::gethostname(host, sizeof host - 1) == 0) node = host;
  }
  return pmix_bootstrap(
      os::resolve_node_address(node, "this rank's node (SLURMD_NODENAME or the host name)"));
}

std::unique_ptr<Communicator> connect_from_environment(Options options) {
  const BootstrapSettings settings =
      bootstrap_settings([](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string(value);
      });
  if (!options.timeout) options.timeout = settings.timeout.value_or(kDefaultTimeout);
  const auto bootstrap = make_bootstrap(settings, *options.timeout);
  return tcp_communicator(*bootstrap, settings.secret, options);
}

}  // namespace primus::coll
