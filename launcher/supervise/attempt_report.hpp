// What primus-launch says on standard error about how an attempt ended (OS adapter: it prints
// and reads a rank's log): the root cause once, with the last lines of its log; a rank that failed
// because it lost a peer; a stop that came while the ranks were starting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "supervise/outcome.hpp"

namespace primus::launch {

// The last `count` lines of a file (none when it cannot be read).
std::vector<std::string> last_lines(const std::filesystem::path& path, std::size_t count);

// "primus-launch: rank R on NODE WHAT: STATUS (attempt K); the last lines of LOG:" and them.
void print_root_cause(const RankEnd& cause, const std::string& node,
                      const std::filesystem::path& log_dir, std::uint32_t attempt,
                      const std::string& what);

// When the first failure reported was a rank that lost its connection to a peer that failed.
void explain_lost_peer(int rank, const std::string& node, int peer, const std::string& peer_node);

// When the stop came while ranks were starting (docs/architecture.md, "Preemption and
// requeue", rule 3): nothing was saved in the attempt. Nothing for any other outcome.
void explain_stopped_while_starting(const Outcome& outcome,
                                    const std::optional<std::string>& resume);

}  // namespace primus::launch
