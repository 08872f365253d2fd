// OS adapter (not part of the pure libprimus-common): a node's address as its peers reach it.
#pragma once

#include <string>

namespace primus::os {

// The first IPv4 address `host` resolves to, as text ("127.0.0.11"). Throws primus::Error
// naming `role` and the host when it does not resolve.
std::string resolve_node_address(const std::string& host, const std::string& role);
// The same for MASTER_ADDR, the step's first node.
std::string node_address(const std::string& host);

}  // namespace primus::os
