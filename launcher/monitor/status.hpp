// status.json (docs/architecture.md, "The launcher and its control channel"; the schema in
// primus-launch(1)): the job as the launcher sees it now, rewritten atomically every heartbeat
// interval; `primus-launch status` reads it. The text and its parsing are pure (status_json,
// parse_status); writing it is an adapter (ReplacedFile, replaced_file.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace primus::launch {

struct RankStatus {
  std::uint32_t rank = 0;
  std::string node;
  std::string state = "starting";  // starting, running, exited (how: `ended`)
  std::optional<std::uint64_t> steps;
  std::optional<std::uint64_t> total_steps;  // a training loop's plan (Report)
  std::optional<std::uint64_t> samples;
  std::optional<double> samples_per_second;
  std::optional<double> step_seconds;      // the rank's median step time, last heartbeat
  std::optional<double> lateness_seconds;  // how much later than the median it arrives
  std::optional<double> last_step_time;    // UNIX time
  std::optional<std::uint64_t> last_checkpoint_step;
  std::optional<std::uint64_t> rss_bytes;
  std::optional<std::uint64_t> rejoin_memory_bytes;  // its committed step kept in memory
  std::optional<double> cpu_seconds;
  std::optional<double> cpu_usage_ratio;  // of one CPU
  std::optional<std::uint64_t> gpu_memory_bytes;
  std::optional<double> gpu_utilization_ratio;
  bool straggler = false;
  std::optional<double> seconds_since_report;  // since its last heartbeat or message
  std::string ended;                           // "exit status 3", ...
};

struct NodeStatus {
  std::string node;
  std::optional<double> cpu_usage_ratio;  // of all its CPUs
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_available_bytes;
  std::optional<std::uint64_t> network_receive_bytes_total;
  std::optional<std::uint64_t> network_transmit_bytes_total;
  std::optional<double> network_receive_bytes_per_second;
  std::optional<double> network_transmit_bytes_per_second;
};

// A node the job keeps its ranks off (excluded-nodes.json), and why.
struct ExcludedNode {
  std::string node;
  std::string reason;
};

// The newest recovery without a restart (--primus-recover=rejoin; docs/architecture.md,
// "Recovery without a restart"), phase by phase as it passes: under-way (phase tear-down, then
// regroup once the replacement is placed), rejoined (phase first-step: every rank is in the new
// generation, rank 0's first step in it is awaited), done, or failed (`reason`).
struct RecoveryStatus {
  std::string path = "rejoin";
  std::string state;
  std::string phase;             // under way and rejoined: the phase now; else ""
  std::uint32_t rank = 0;        // the failed rank
  std::uint32_t generation = 0;  // the generation the rejoin makes
  double failure_time = 0;       // UNIX time the launcher saw the failure
  // Before it: how long the failure went unseen (a hang's silence up to --primus-hang-timeout's
  // verdict; 0 for an end, which the launcher or the task wrapper sees as it happens).
  std::optional<double> detect_seconds;
  std::optional<double> tear_down_seconds;   // the failure to the last survivor waiting
  std::optional<double> place_seconds;       // then to the replacement started
  std::optional<double> regroup_seconds;     // then to every rank's groups up
  std::optional<double> restore_seconds;     // the slowest rank's restore
  std::optional<double> rejoin_seconds;      // the failure to every rank rejoined
  std::optional<double> first_step_seconds;  // then to rank 0's first step
  std::optional<double> recovery_seconds;    // the failure to that first step
  std::string replacement;                   // standby or started, once placed
  std::string reason;                        // why it failed
};

struct JobStatus {
  std::string time;  // ISO 8601 UTC
  std::string job;
  // running, restarting, stopping, preempted, requeued, finished, failed (and "starting")
  std::string state;
  std::uint32_t allocation = 0;  // requeues so far (SLURM_RESTART_COUNT)
  std::uint32_t attempt = 0;     // restarts in this allocation
  std::uint32_t restarts = 0;    // restarts in every allocation recorded
  std::uint32_t world_size = 0;
  std::string checkpoint;  // the newest committed one reported
  std::optional<std::uint64_t> checkpoint_step;
  std::optional<double> checkpoint_time;  // UNIX time of its commit
  std::optional<double> seconds_since_checkpoint;
  std::optional<double> median_step_seconds;
  std::optional<double> samples_per_second;  // every rank together
  double straggler_window_seconds = 0;
  std::vector<RankStatus> ranks;
  std::vector<NodeStatus> nodes;
  std::vector<ExcludedNode> excluded_nodes;
  std::optional<RecoveryStatus> recovery;  // none before the first rejoin
};

std::string status_json(const JobStatus& status);

// The status back from its text; throws primus::Error (naming what is wrong) for text that is
// not a status object. Unknown fields are ignored and missing ones left empty, so that an older
// or newer launcher's file still reads.
JobStatus parse_status(std::string_view text);

}  // namespace primus::launch
