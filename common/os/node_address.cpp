#include "primus/os/node_address.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include "primus/common/error.hpp"

namespace primus::os {

std::string resolve_node_address(const std::string& host, const std::string& role) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    throw Error(role + ": cannot resolve '" + host + "'");
  }
  char text[NI_MAXHOST] = {};
  const int rc =
      getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(found);
  if (rc != 0) throw Error(role + ": cannot format the address of '" + host + "'");
  return text;
}

std::string node_address(const std::string& host) {
  return resolve_node_address(host, "MASTER_ADDR (the step's first node)");
}

}  // namespace primus::os
