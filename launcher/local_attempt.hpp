// One attempt of the ranks on this machine (OS adapter): starts COMMAND once per rank, each in
// a process group of its own with its output merged into a pipe, copies every rank's output to
// its log and (whole lines, with "<rank>: " under --label) to primus-launch's standard output,
// reaps the ranks, and turns what happens into RankEnds: a rank that fails makes the others
// stop (SIGTERM to their groups, SIGKILL after the grace time); a stop signal to the launcher,
// or a stop request in the job directory, is forwarded to every rank's group. When the attempt
// is over, every group is SIGKILLed, so that no child of a rank (a DataLoader worker) is left.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control_server.hpp"
#include "data_tasks.hpp"
#include "events.hpp"
#include "job_dir.hpp"
#include "job_monitor.hpp"
#include "outcome.hpp"
#include "reaper.hpp"

namespace primus::launch {

struct AttemptSetup {
  std::string executable;                      // resolved (command_path.hpp)
  std::vector<std::string> argv;               // argv[0] as given
  std::vector<std::vector<std::string>> envs;  // "NAME=value" per rank
  std::filesystem::path log_dir;               // logs/alloc-<a>/attempt-<k>
  bool label = false;
  std::chrono::milliseconds grace{std::chrono::seconds(10)};  // SIGTERM to SIGKILL
  // After a stop is forwarded, until SIGKILL (--primus-stop-grace).
  std::chrono::milliseconds stop_grace{std::chrono::seconds(120)};
  int preempted_status = kExitDefaultPreempted;  // --primus-exit-preempted
  std::filesystem::path stop_request;            // checked every second; its appearance is a stop
  std::string node;                              // for events
  // The control channel, where the ranks report (nullptr: supervised by exit status only), and
  // --primus-hang-timeout over what they report.
  ControlServer* control = nullptr;
  std::uint32_t attempt = 0;
  std::optional<std::chrono::milliseconds> hang_timeout;
  // The dynamic split's queue (--primus-data-mode=dynamic), reset for each attempt; nullptr in
  // static mode.
  DataTasks* data = nullptr;
  // The monitor (status.json, metrics, stragglers), fed every report; nullptr: none.
  JobMonitor* monitor = nullptr;
};

struct AttemptResult {
  std::vector<RankEnd> ends;  // in the order the ranks ended
  bool stop_requested = false;
  std::optional<std::uint32_t> hung;  // the rank that hung, if the attempt ended for a hang
  std::map<std::uint32_t, std::uint32_t> lost_peers;  // rank -> the peer it lost (its report)
};

// Signals that the caller blocked and that run_attempt reads (through a signalfd): SIGCHLD and
// the stop signals SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2. Call once, before the first
// attempt; the ranks start with an empty mask.
void block_launcher_signals();

AttemptResult run_attempt(const AttemptSetup& setup, Reaper& reaper, EventLog& events);

}  // namespace primus::launch
