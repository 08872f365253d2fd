// A rejoin's standby on this machine (--primus-recover=rejoin; python/primus/_standby.py): a
// Python process started while the ranks train, which imports torch and primus and then waits
// on its standard input (a pipe from the launcher) to become the replacement of a failed rank.
// Its output goes to logs/.../standby-<k>.log until then and to the rank's log after. Only a
// rank command that is a Python interpreter running a script or a module can have one
// (python_program, standby_program.hpp); any other starts its replacement afresh, as does a rejoin
// whose standby has died.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "local/standby_program.hpp"
#include "primus/os/unique_fd.hpp"
#include "process/rank_process.hpp"

namespace primus::launch {

class Standby {
 public:
  // Starts `executable -m primus._standby` (argv[0] as `argv0`) with `env`, in a process group
  // of its own, dying with the launcher, logging to `log`. Throws primus::Error.
  Standby(const std::string& executable, const std::string& argv0,
          const std::vector<std::string>& env, const std::filesystem::path& log);

  RankProcess& process() { return process_; }
  pid_t pid() const { return process_.pid; }

  // Sends `assignment` and hands the process over as rank `rank`, whose output goes to `log`
  // from now on (what it wrote while waiting stays in the standby's log). False, with the
  // standby left as it was, when the assignment cannot be written (it has ended).
  bool become(std::uint32_t rank, const std::string& assignment, const std::filesystem::path& log,
              RankProcess& out);

 private:
  RankProcess process_;
  os::UniqueFd input_;  // the write end of its standard input
};

}  // namespace primus::launch
