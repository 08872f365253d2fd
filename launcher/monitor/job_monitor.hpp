// The monitor's adapter: feeds what the ranks report into Monitor (monitor.hpp) and, every
// status interval, writes status.json, appends throughput.jsonl, serves /metrics
// (--primus-metrics), writes --primus-metrics-file, flags stragglers (an event and a warning
// line), and prints the progress line; appends every primus.log line to metrics.jsonl. One
// per launcher, across attempts. Nothing it fails to write ends the job: it says so once.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "control/control_protocol.hpp"
#include "monitor/metrics_server.hpp"
#include "monitor/monitor.hpp"
#include "monitor/replaced_file.hpp"
#include "primus/os/unique_fd.hpp"
#include "supervise/events.hpp"

namespace primus::launch {

struct JobMonitorSetup {
  std::filesystem::path job_dir;
  std::string job_id;  // PRIMUS_JOB_ID
  std::uint32_t allocation = 0;
  std::string node;  // the launcher's
  std::chrono::milliseconds status_interval{std::chrono::seconds(5)};
  std::chrono::seconds progress_interval{60};  // 0: no progress lines
  double straggler_window_seconds = 60;
  std::optional<ListenAddress> metrics;  // --primus-metrics
  std::filesystem::path metrics_file;    // --primus-metrics-file ("": none)
  // The site's file_sd directory (metrics_sd_dir): <sd_name>.json there while the job runs.
  std::filesystem::path sd_dir;
  std::string sd_name;
  bool terminal = false;  // standard error is a terminal: progress lines more often
};

class JobMonitor {
 public:
  // Throws primus::Error when --primus-metrics cannot listen (before any rank starts).
  JobMonitor(JobMonitorSetup setup, EventLog& events);
  ~JobMonitor();
  JobMonitor(const JobMonitor&) = delete;
  JobMonitor& operator=(const JobMonitor&) = delete;

  void start_attempt(std::uint32_t attempt, std::uint32_t world_size);
  void report(const Report& report);
  void rank_ended(std::uint32_t rank, int wait_status);
  // A new state of the job (running, stopping, restarting, preempted, requeued, finished,
  // failed): written at once.
  void set_state(const std::string& state);
  // The nodes the job keeps out, with reasons (status.json's excluded_nodes); rewrites the status.
  void set_excluded_nodes(std::vector<ExcludedNode> nodes);
  // The newest rejoin, phase by phase (status.json's recovery); rewrites the status.
  void set_recovery(const RecoveryStatus& recovery);
  const std::string& state() const { return monitor_.state(); }
  // Call often (every second at least, and when wake_fd() is readable): what is due is done,
  // and /metrics answered.
  void tick();
  // Readable while a GET of /metrics waits for its text; -1 without --primus-metrics.
  int wake_fd() const;
  // Writes everything now.
  void refresh();
  std::string metrics_address() const { return server_ ? server_->address() : ""; }

 private:
  void append(const os::UniqueFd& fd, const std::string& line, const char* what);
  void write_sd_file();
  void progress_line(const JobStatus& status);
  // The Prometheus text of the job now, for the GET that asked for it.
  void publish_metrics();

  JobMonitorSetup setup_;
  EventLog& events_;
  Monitor monitor_;
  std::unique_ptr<MetricsServer> server_;
  ReplacedFile status_file_;
  std::optional<ReplacedFile> metrics_file_;  // --primus-metrics-file
  os::UniqueFd throughput_;
  os::UniqueFd metrics_;
  std::chrono::steady_clock::time_point next_status_;
  std::chrono::steady_clock::time_point next_progress_;
  std::filesystem::path sd_file_;
  bool warned_ = false;
  std::string metrics_state_;  // the job's state in the text /metrics has
  // The progress line's pace: the job's step and the time it first saw in this attempt.
  std::optional<std::pair<std::uint64_t, double>> pace_from_;
};

}  // namespace primus::launch
