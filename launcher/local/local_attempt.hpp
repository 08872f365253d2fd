// The attempt runner on this machine (OS adapter; attempt_runner.hpp): starts COMMAND once per
// rank with the rank environment of primus(7), each in a process group of its own with its
// output merged into a pipe, copies every rank's output to its log and (whole lines, with
// "<rank>: " under --label) to primus-launch's standard output, and reaps the ranks: a rank
// that fails makes the others stop (SIGTERM to their groups, SIGKILL after the grace time); a
// stop signal to the launcher, or a stop request in the job directory, is forwarded to every
// rank's group. When the attempt is over every group is SIGKILLed, so that no child of a rank
// (a DataLoader worker) is left.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "primus/common/environment.hpp"
#include "primus/common/options.hpp"
#include "primus/common/task_env.hpp"
#include "process/reaper.hpp"
#include "supervise/attempt_runner.hpp"

namespace primus::launch {

// The command and the rank environment's inputs, the same for every attempt.
struct LocalCommand {
  std::string executable;         // resolved (command_path.hpp)
  std::vector<std::string> argv;  // argv[0] as given
  Environment env;                // primus-launch's own
  OneMachineJob job;              // nproc, job id, secret, ports (restart_count set per attempt)
  ResolvedOptions options;
};

// Signals that the caller blocked and that the runners read (through a signalfd): SIGCHLD and
// the stop signals SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2. Call once, before any thread
// starts; the ranks start with an empty mask.
void block_launcher_signals();

class LocalRunner final : public AttemptRunner {
 public:
  LocalRunner(RunnerSettings settings, LocalCommand command, Reaper& reaper)
      : settings_(std::move(settings)), command_(std::move(command)), reaper_(reaper) {}

  std::optional<std::uint32_t> prepare(std::uint32_t /*attempt*/, std::string& /*why*/) override {
    return command_.job.nproc;
  }
  AttemptReport run(const AttemptPlan& plan) override;

 private:
  // `generation` above 0: a rejoin's replacement, on that generation's ports.
  Environment rank_environment(const AttemptPlan& plan, std::uint32_t rank,
                               std::uint32_t generation = 0);

  RunnerSettings settings_;
  LocalCommand command_;
  Reaper& reaper_;
};

}  // namespace primus::launch
