// A node's standby under srun, as the task wrappers see it (OS adapter; the standby itself is
// python/primus/_standby_node.py, docs/architecture.md "Under srun"). The wrapper of the node's
// first task starts it when primus-launch says that every rank is up; any wrapper on the node
// asks it for the replacement of its failed rank, which is a fork of the standby that has
// imported torch already, and learns that rank's end from it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "primus/os/unique_fd.hpp"
#include "process/rank_process.hpp"

namespace primus::launch {

// The standby's abstract socket for this task's node: primus-standby.JOB.STEP.NODE, from the
// task's environment (the same in every task of the step on the node).
std::string node_standby_name();

// Whether this task is the one that starts its node's standby: the first on its node
// (SLURM_LOCALID 0).
bool starts_node_standby();

struct NodeStandbyProcess {
  pid_t pid = -1;
  os::UniqueFd owner;  // the write end of its standard input: closed, it takes no more requests
};

// Starts `executable -m primus._standby_node NAME` (argv[0] `argv0`) with `env` in this task's
// process group, its output to `log` (0600). Throws primus::Error.
NodeStandbyProcess start_node_standby(const std::string& executable, const std::string& argv0,
                                      const std::vector<std::string>& env, const std::string& name,
                                      const std::filesystem::path& log);

// A replacement made by the node's standby: the rank (its pid, the read end of the pipe its
// output goes to, its log) and the connection its end is reported on.
struct StandbyRank {
  RankProcess process;
  os::UniqueFd connection;
};

// The request for a replacement: `assignment` (standby_assignment's line) with "cpus", the CPUs
// in `cpus` (this task's binding, which the fork takes instead of the standby's, the first
// task's); none where the set is empty.
std::string standby_request(const std::string& assignment, const std::vector<int>& cpus);

// The CPUs this process may run on (sched_getaffinity), in order; empty when unknown.
std::vector<int> own_cpus();

// Asks the standby listening on `name` for rank `rank` with `assignment` (standby_assignment's
// line) and this task's CPUs, its output logged to `log`. nullopt, with `why`, when none listens,
// the listener is not of this user, or it refuses or does not answer within a few seconds.
std::optional<StandbyRank> ask_node_standby(const std::string& name, const std::string& assignment,
                                            std::uint32_t rank, const std::filesystem::path& log,
                                            std::string& why);

// Reads the standby's word on `connection` once it is readable: true with the rank's wait
// status once it has ended; a connection closed without it counts as the rank killed.
bool read_standby_end(int connection, int& wait_status);

}  // namespace primus::launch
