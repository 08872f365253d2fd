// A rejoin's standby on this machine (standby.hpp).
#include "local/standby.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "primus/common/error.hpp"
#include "process/child_process.hpp"

namespace primus::launch {

Standby::Standby(const std::string& executable, const std::string& argv0,
                 const std::vector<std::string>& env, const std::filesystem::path& log) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  const os::UniqueFd read_end(fds[0]);
  input_.reset(fds[1]);
  RankSpawn spawn;
  spawn.executable = executable;
  spawn.argv = {argv0, "-m", "primus._standby"};
  spawn.env = env;
  spawn.log = log;
  spawn.input = read_end.get();
  process_ = spawn_rank(spawn);
}

bool Standby::become(std::uint32_t rank, const std::string& assignment,
                     const std::filesystem::path& log, RankProcess& out) {
  os::UniqueFd rank_log = open_rank_log(log);
  // One line (a standby still importing reads it once it is done); a standby that has ended
  // (EPIPE: SIGPIPE is ignored by the launcher) cannot become the rank.
  if (!write_all(input_.get(), assignment.data(), assignment.size())) {
    ::unlink(log.c_str());
    return false;
  }
  input_.reset();  // its next read is the end: the rank's standard input is /dev/null after
  process_.number = rank;
  process_.log = std::move(rank_log);
  out = std::move(process_);
  return true;
}

}  // namespace primus::launch
