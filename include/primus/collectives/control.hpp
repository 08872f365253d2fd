// The launcher's control channel, as far as libprimus-coll is concerned: who may connect and how
// they prove it (docs/architecture.md, "The launcher and its control channel"). primus-launch
// listens at PRIMUS_CONTROL; every rank, and every task wrapper of srun, connects there with the
// job secret's handshake (the same as the collectives', for purpose "control"); after it, both
// ends exchange JSON lines (launcher/control/control_protocol.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "primus/os/unique_fd.hpp"

namespace primus::coll {

// A task wrapper connects as its rank with this bit set, so that a rank and its wrapper are
// told apart and both are let in.
constexpr std::uint32_t kControlWrapperBit = 0x80000000U;

// "host:port" (PRIMUS_CONTROL) split; primus::Error naming PRIMUS_CONTROL when it is not one.
std::pair<std::string, std::uint16_t> parse_control_address(const std::string& address);

// In every MAC of the handshake the launcher is this "rank".
constexpr std::uint32_t kControlLauncherRank = 0x7FFFFFFFU;

// The key both ends prove: the job secret bound to the channel's address, so that a rank of
// another job, or of an earlier launch (another port), never gets in.
std::string control_session_key(const std::string& secret, const std::string& address);

// Connects to `address` as `connector` (a rank, with kControlWrapperBit for a wrapper), proves
// the secret and checks the launcher's proof; the descriptor comes back blocking. Throws
// CollectiveError (PeerFailure) naming the address when it cannot within `timeout`.
os::UniqueFd connect_control(const std::string& address, const std::string& secret,
                             std::uint32_t connector, std::chrono::milliseconds timeout);

}  // namespace primus::coll
