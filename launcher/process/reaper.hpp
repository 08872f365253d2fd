// The guard that nothing of a job outlives primus-launch in one-machine mode, even when the
// launcher is SIGKILLed: a small process forked at start that the launcher tells each rank's
// process group; when the launcher's end of the pipe closes (it exited, however), the guard
// kills every group still registered and exits. It ignores the terminal's signals and sits in
// a process group of its own.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "primus/os/unique_fd.hpp"

namespace primus::launch {

class Reaper {
 public:
  Reaper();   // forks the guard; throws primus::Error when it cannot
  ~Reaper();  // closes the pipe (the guard kills what is left) and waits for it
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  void watch(pid_t group);  // a rank's process group to kill should the launcher die
  // Several groups in one write: the guard wakes once. Told after a start's last spawn, so that
  // its waking does not make the launcher's CPU look busy while the next rank is forked (the
  // scheduler then queued that rank behind the first, 1.4 to 2.8 ms late). A rank forked but
  // not yet told still dies with the launcher (PR_SET_PDEATHSIG); only its own children, which
  // it has not had time to start, are the guard's to kill.
  void watch(const std::vector<pid_t>& groups);
  void forget(pid_t group);  // that group is gone
  pid_t pid() const { return pid_; }

 private:
  void send(char what, pid_t group);
  void send(const std::string& lines);
  os::UniqueFd pipe_;
  pid_t pid_ = -1;
};

}  // namespace primus::launch
