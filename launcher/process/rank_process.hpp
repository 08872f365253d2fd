// One rank as a child process (OS adapter): started in a process group of its own with its
// stdout and stderr merged into a pipe, its output copied to its log (every byte) and to our
// standard output (whole lines, "<rank>: " in front under --label). Used by the one-machine
// attempt for each rank and by the task wrapper under srun for its one rank.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "primus/os/unique_fd.hpp"
#include "process/child_process.hpp"

namespace primus::launch {

struct RankSpawn {
  std::uint32_t number = 0;
  std::string executable;         // resolved (command_path.hpp)
  std::vector<std::string> argv;  // argv[0] as given
  std::vector<std::string> env;   // "NAME=value"
  std::filesystem::path log;      // created 0600, truncated
  bool die_with_parent = true;    // PR_SET_PDEATHSIG SIGKILL
  // A process group of its own (one machine: the launcher signals and kills each rank's group).
  // The task wrapper keeps its rank in the task's group, where Slurm's signals find it.
  bool own_group = true;
  int input = -1;  // its standard input (a standby's assignment pipe); -1: /dev/null
};

struct RankProcess {
  std::uint32_t number = 0;
  pid_t pid = -1;  // also its process group, with own_group
  bool running = true;
  os::UniqueFd output;  // the read end of its stdout and stderr (non-blocking)
  os::UniqueFd log;
  std::string partial;  // the start of a line not yet copied to standard output
};

// Throws primus::Error naming the log or the rank when it cannot start; a command that cannot
// be executed ends the child with 126 or 127 and a line saying why.
RankProcess spawn_rank(const RankSpawn& spawn);

// Creates a rank's log (0600; one left by an earlier run is replaced); throws primus::Error.
os::UniqueFd open_rank_log(const std::filesystem::path& path);

// Copies what has arrived; false at the end of the rank's output.
bool pump_output(RankProcess& rank, bool label);
// Copies a last partial line and closes the pipe.
void end_output(RankProcess& rank, bool label);

}  // namespace primus::launch
