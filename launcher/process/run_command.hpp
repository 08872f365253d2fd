// Running a command and reading what it printed and how it ended (OS adapter), in one place:
// scontrol and scancel (slurm_queries.hpp), a probe step, and the Primus programs the launcher
// asks before the ranks start (primus-ckpt for the checkpoint to resume from, primus-data for
// the dataset's check).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace primus::launch {

struct CommandOutput {
  int status = -1;  // as waitpid reports it; -1: could not run
  std::string output;
};
// Runs argv (argv[0] looked up in PATH) with standard input from /dev/null, capturing stdout
// and stderr together; killed after `timeout`. `shielded`: the command keeps the caller's
// blocked signals blocked (the launcher's stop signals), so that Slurm's SIGTERM to every process
// of a job being requeued does not end it halfway (seen on the testbed: an `scontrol release`
// started just after `scontrol requeuehold` died of it, and the job stayed held). `idle`: the
// command runs under SCHED_IDLE, taking only CPU time nothing else wants (a bookkeeping call
// made while a step starts must not slow the step's start on a small node).
CommandOutput run_command(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                          bool shielded = false, bool idle = false);

// A Primus program (primus-ckpt, primus-data) beside primus-launch (the same bin directory, or
// the build tree), else the one in PATH.
std::string program_beside_launcher(const std::string& name);

struct SiblingOutput {
  int exit_code = 0;    // its exit status (a death by signal: -1)
  std::string message;  // what it printed, without the trailing newlines
};
// Runs the Primus program `name` (program_beside_launcher) with `args`, shielded from the stop
// signals (a stop signal to every process of the job, a preemption, must not end it halfway and
// read as a failure; the launcher takes the stop itself once the ranks start). Throws Error
// "cannot run PROGRAM, which WHAT (is Primus installed whole?)" when it cannot be run.
SiblingOutput run_sibling(const std::string& name, const std::vector<std::string>& args,
                          std::chrono::seconds timeout, const std::string& what);

}  // namespace primus::launch
