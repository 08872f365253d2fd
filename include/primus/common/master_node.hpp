// MASTER_ADDR is the NodeAddr of the step's first node. srun can ask slurmctld for it once per
// step; the tasks cannot do so cheaply. srun passes it to the tasks as
// PRIMUS_MASTER_NODE="<node>=<address>", and a task uses it only when <node> is its step's first
// node; otherwise (an older srun, PrivateData=nodes) the task resolves the node's name itself.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "primus/common/environment.hpp"

namespace primus {

inline constexpr std::string_view kMasterNodeVariable = "PRIMUS_MASTER_NODE";

// True for an IPv4 or IPv6 literal or a host name: 1-253 characters of [A-Za-z0-9.:_-], not
// starting with '-' (nothing a shell or a URL would read as more than one address).
bool is_node_address(std::string_view address);

// "<node>=<address>"; throws Error when either is not a valid name or address.
std::string format_master_node(std::string_view node, std::string_view address);

// The address in env's PRIMUS_MASTER_NODE when it names `first_node`, else nullopt. A malformed
// value is an Error naming the variable.
std::optional<std::string> master_node_address(const Environment& env, std::string_view first_node);

}  // namespace primus
