// The guard that nothing of a job outlives primus-launch in one-machine mode, even when the
// launcher is SIGKILLed: a small process forked at start that the launcher tells each rank's
// process group; when the launcher's end of the pipe closes (it exited, however), the guard
// kills every group still registered and exits. It ignores the terminal's signals and sits in
// a process group of its own.
#pragma once

#include <sys/types.h>

#include "primus/os/unique_fd.hpp"

namespace primus::launch {

class Reaper {
 public:
  Reaper();   // forks the guard; throws primus::Error when it cannot
  ~Reaper();  // closes the pipe (the guard kills what is left) and waits for it
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  void watch(pid_t group);   // a rank's process group to kill should the launcher die
  void forget(pid_t group);  // that group is gone
  pid_t pid() const { return pid_; }

 private:
  void send(char what, pid_t group);
  os::UniqueFd pipe_;
  pid_t pid_ = -1;
};

}  // namespace primus::launch
