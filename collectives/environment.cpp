// The adapter from the process environment to a bootstrap and a communicator.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "handshake.hpp"
#include "primus/collectives/communicator.hpp"
#include "primus/os/cpus.hpp"
#include "primus/os/node_address.hpp"

namespace primus::coll {
namespace {

// The first IPv4 address of an interface that is up, not the loopback one if another exists.
std::string interface_address() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "127.0.0.1";
  std::string loopback;
  std::string found;
  for (const ifaddrs* at = list; at != nullptr && found.empty(); at = at->ifa_next) {
    if (at->ifa_addr == nullptr || at->ifa_addr->sa_family != AF_INET ||
        (at->ifa_flags & IFF_UP) == 0) {
      continue;
    }
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(at->ifa_addr)->sin_addr, text,
                sizeof text);
    if ((at->ifa_flags & IFF_LOOPBACK) != 0) {
      if (loopback.empty()) loopback = text;
    } else {
      found = text;
    }
  }
  ::freeifaddrs(list);
  if (!found.empty()) return found;
  return loopback.empty() ? "127.0.0.1" : loopback;
}

// Where the other ranks reach this one: its Slurm node's address; else its host name's; else,
// when the host name does not resolve (a bare container), an address of an interface.
std::string address_for_peers(const BootstrapSettings& settings) {
  if (!settings.node.empty()) {
    return os::resolve_node_address(settings.node, "SLURMD_NODENAME (this rank's node)");
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) == 0) {
    try {
      return os::resolve_node_address(host, "this host's name");
    } catch (const Error&) {
      // falls through to the interfaces
    }
  }
  return interface_address();
}

}  // namespace

std::unique_ptr<Bootstrap> make_bootstrap(const BootstrapSettings& settings,
                                          std::chrono::milliseconds timeout) {
  if (settings.method == "tcp") {
    // A later generation's ranks are another session: "STEP/gN" (generation 0: the step alone,
    // as before generations existed).
    const std::string step = settings.generation == 0
                                 ? settings.step
                                 : settings.step + "/g" + std::to_string(settings.generation);
    const std::string key = handshake::session_key(
        settings.secret, {settings.job, step, static_cast<std::uint32_t>(settings.size)});
    return tcp_store_bootstrap(settings.rank, settings.size, settings.master_addr, settings.port,
                               key, timeout, settings.integrity);
  }
  return pmix_bootstrap(address_for_peers(settings));
}

std::unique_ptr<Communicator> connect_from_environment(Options options,
                                                       const std::optional<std::string>& secret) {
  const BootstrapSettings settings =
      bootstrap_settings([&](const std::string& name) -> std::optional<std::string> {
        if (name == "PRIMUS_JOB_SECRET" && secret) return *secret;
        const char* value = std::getenv(name.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string(value);
      });
  if (!options.timeout) options.timeout = settings.timeout.value_or(kDefaultTimeout);
  if (!options.integrity) options.integrity = settings.integrity;
  const auto bootstrap = make_bootstrap(settings, *options.timeout);
  if (!options.spin) {
    // This node's ranks: LOCAL_WORLD_SIZE (the rank environment), else at most the world.
    std::uint64_t local = static_cast<std::uint64_t>(bootstrap->size());
    if (const char* value = std::getenv("LOCAL_WORLD_SIZE")) {
      std::uint64_t parsed = 0;
      const char* end = value + std::strlen(value);
      if (std::from_chars(value, end, parsed).ptr == end && parsed > 0) local = parsed;
    }
    // Spinning pays where every rank has a CPU: the node's ranks fit the CPUs this one may use,
    // or this one was bound to CPUs of its own (a mask narrower than the machine: Slurm's or a
    // launcher's binding). The spin yields at every turn, so a rank that shares its CPU
    // anyway lets the other run.
    const std::uint32_t usable = os::usable_cpus();
    const bool own_cpus = local <= usable || usable < os::online_cpus();
    options.spin = std::chrono::microseconds(own_cpus ? kDefaultSpinMicros : 0);
  }
  const std::string key = handshake::session_key(
      settings.secret,
      {settings.job, settings.step, static_cast<std::uint32_t>(bootstrap->size())});
  return tcp_communicator(*bootstrap, key, options);
}

}  // namespace primus::coll
