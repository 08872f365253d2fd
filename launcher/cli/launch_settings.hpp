// The command line of a launch (what parse() makes of it, with the options' layers) and the two
// modes that run it: inside a Slurm allocation (slurm_launch.cpp) and on this machine
// (local_launch.cpp). Each mode builds its attempt runner and hands it to the one supervisor
// (supervisor.hpp). The helpers read the options both modes share.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command_path.hpp"
#include "monitor/job_monitor.hpp"
#include "primus/common/environment.hpp"
#include "primus/common/options.hpp"
#include "slurm/placement.hpp"
#include "supervise/events.hpp"

namespace primus::launch {

struct Settings {
  std::uint32_t nproc = 0;
  bool label = false;
  std::vector<std::string> command;
  std::vector<OptionLayer> layers;  // the environment's, then the command line's
  ResolvedOptions options;
};

// The Python that runs a bare script or `-m module` (and `primus-launch report`): PRIMUS_PYTHON
// when set, else the one configure found (the one the primus package is installed for).
std::string python_for_scripts();
// COMMAND as the ranks run it: "train.py ARGS" and "-m pkg ARGS" under python_for_scripts(), as
// torchrun runs its script; anything else as given.
std::vector<std::string> with_python(std::vector<std::string> command);

// Says, as torchrun does of its own default, what OMP_NUM_THREADS every rank gets (omp_threads():
// `cpus` of the node among its `ranks`), unless the user set it or --cpus-per-task decides it.
void say_omp_threads(const Environment& env, std::uint32_t cpus, std::uint32_t ranks);

// Parses primus-launch's arguments (not a subcommand's); --help prints `usage` and exits.
Settings parse(const std::vector<std::string>& args, const Environment& env, const char* usage);

// The options as the ranks get them: the given layers, then the job directory made absolute
// (the ranks' checkpoints go below it unless --primus-ckpt-dir says otherwise).
ResolvedOptions with_job_dir(const Settings& s, const std::filesystem::path& job_dir);
// The command as one line, for the "launched" event.
std::string command_text(const Settings& s);

std::uint32_t option_number(const ResolvedOptions& options, std::string_view name,
                            std::uint64_t max);
bool dynamic_data(const ResolvedOptions& options);
// The dataset, checked and indexed before any rank starts; false (after saying why) when it
// cannot be read.
bool dataset_ready(const ResolvedOptions& options, const std::filesystem::path& job_dir,
                   EventLog& events, const std::string& node);
std::chrono::milliseconds stop_grace_of(const ResolvedOptions& options);
std::optional<std::chrono::milliseconds> hang_timeout_of(const ResolvedOptions& options);
std::chrono::milliseconds rejoin_deadline_of(const ResolvedOptions& options);
std::uint32_t env_number(const Environment& env, std::string_view name, std::uint32_t fallback);
// What the monitor needs from the options: intervals, --primus-metrics, --primus-metrics-file
// and the site's file_sd directory (PRIMUS_METRICS_SD_DIR, set by the plugin at submission).
JobMonitorSetup monitor_setup(const ResolvedOptions& options, const Environment& env,
                              const std::filesystem::path& job_dir, const std::string& job_id,
                              std::uint32_t allocation, const std::string& node);
// What --primus-spare-nodes, --primus-elastic and --primus-global-batch-size ask of the
// placement.
NodePolicy node_policy(const ResolvedOptions& options);

int slurm_launch(const Settings& s, const Environment& given_env, const ResolvedCommand& command);
int local_launch(const Settings& s, const Environment& env, const ResolvedCommand& command);

}  // namespace primus::launch
