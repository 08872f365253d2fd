#include "monitor/job_monitor.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>

#include "monitor/json_text.hpp"
#include "monitor/prometheus_text.hpp"
#include "monitor/status.hpp"
#include "monitor/status_view.hpp"
#include "primus/common/json_text.hpp"
#include "supervise/outcome.hpp"

namespace primus::launch {
namespace {

using Clock = std::chrono::steady_clock;

double steady_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

double wall_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// ISO 8601 UTC with milliseconds, like events.jsonl's times.
std::string iso_time(double unix_seconds) {
  const auto whole = static_cast<std::time_t>(std::floor(unix_seconds));
  const int millis = static_cast<int>((unix_seconds - static_cast<double>(whole)) * 1000);
  std::tm utc{};
  ::gmtime_r(&whole, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                std::clamp(millis, 0, 999));
  return text;
}

os::UniqueFd open_append(const std::filesystem::path& path) {
  return os::UniqueFd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
}

nlohmann::json scalar_json(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return value;
}

// The restarts that earlier allocations recorded in events.jsonl.
std::uint32_t restarts_recorded(const std::filesystem::path& events) {
  std::FILE* file = std::fopen(events.c_str(), "re");
  if (file == nullptr) return 0;
  std::uint32_t count = 0;
  char line[4096];
  while (std::fgets(line, sizeof line, file) != nullptr) {
    if (std::strstr(line, "\"event\": \"restarted\"") != nullptr) ++count;
  }
  std::fclose(file);
  return count;
}

}  // namespace

JobMonitor::JobMonitor(JobMonitorSetup setup, EventLog& events)
    : setup_(std::move(setup)),
      events_(events),
      monitor_(setup_.job_id, setup_.allocation, setup_.straggler_window_seconds),
      status_file_(setup_.job_dir / "status.json") {
  if (!setup_.metrics_file.empty()) metrics_file_.emplace(setup_.metrics_file);
  monitor_.set_earlier_restarts(restarts_recorded(setup_.job_dir / "events.jsonl"));
  throughput_ = open_append(setup_.job_dir / "throughput.jsonl");
  metrics_ = open_append(setup_.job_dir / "metrics.jsonl");
  if (setup_.metrics) {
    server_ = std::make_unique<MetricsServer>(*setup_.metrics);
    replace_file(setup_.job_dir / "metrics.addr", server_->address() + "\n");
    std::cerr << "primus-launch: metrics at http://" << server_->address() << "/metrics\n";
    write_sd_file();
  }
  next_status_ = Clock::now();
  next_progress_ =
      Clock::now() + (setup_.terminal ? std::min<std::chrono::seconds>(setup_.progress_interval,
                                                                       std::chrono::seconds(10))
                                      : setup_.progress_interval);
}

JobMonitor::~JobMonitor() {
  if (!sd_file_.empty()) {
    std::error_code error;
    std::filesystem::remove(sd_file_, error);
  }
}

void JobMonitor::write_sd_file() {
  if (setup_.sd_dir.empty() || !server_) return;
  nlohmann::ordered_json target;
  target["targets"] = {server_->address()};
  target["labels"] = {{"primus_job", setup_.job_id}};
  const std::string text = nlohmann::ordered_json::array({target}).dump() + "\n";
  const std::filesystem::path file = setup_.sd_dir / (setup_.sd_name + ".json");
  if (replace_file(file, text)) {
    // Prometheus runs as another user: it must read the file (it names an address only).
    ::chmod(file.c_str(), 0644);
    sd_file_ = file;
  } else {
    std::cerr << "primus-launch: warning: cannot write " << file.string() << " ("
              << std::strerror(errno)
              << "; the site's metrics_sd_dir): Prometheus will not find this job\n";
  }
}

void JobMonitor::append(const os::UniqueFd& fd, const std::string& line, const char* what) {
  if (fd && ::write(fd.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size())) {
    return;
  }
  if (!warned_) {
    warned_ = true;
    std::cerr << "primus-launch: warning: cannot append to " << what << " in "
              << setup_.job_dir.string() << "; the job goes on\n";
  }
}

void JobMonitor::start_attempt(std::uint32_t attempt, std::uint32_t world_size) {
  monitor_.start_attempt(attempt, world_size);
  pace_from_.reset();
  monitor_.set_state("running");
  refresh();
}

void JobMonitor::report(const Report& r) {
  monitor_.on_report(r, steady_seconds(), wall_seconds());
  if (r.kind != ReportKind::kScalars) return;
  nlohmann::ordered_json line;
  line["time"] = iso_time(r.time.value_or(wall_seconds()));
  line["allocation"] = setup_.allocation;
  line["attempt"] = monitor_.attempt();
  line["rank"] = r.rank;
  line["step"] = r.steps.value_or(0);
  nlohmann::ordered_json values = nlohmann::ordered_json::object();
  for (const auto& [name, value] : r.values)
    values[name] = scalar_json(value);
  line["values"] = std::move(values);
  append(metrics_, line.dump() + "\n", "metrics.jsonl");
}

void JobMonitor::rank_ended(std::uint32_t rank, int wait_status) {
  monitor_.rank_ended(rank, describe(wait_status));
}

void JobMonitor::set_state(const std::string& state) {
  if (state == monitor_.state()) return;
  monitor_.set_state(state);
  refresh();
}

void JobMonitor::set_excluded_nodes(std::vector<ExcludedNode> nodes) {
  monitor_.set_excluded_nodes(std::move(nodes));
  refresh();
}

void JobMonitor::set_recovery(const RecoveryStatus& recovery) {
  monitor_.set_recovery(recovery);
  refresh();
}

void JobMonitor::tick() {
  const auto now = Clock::now();
  if (now >= next_status_) refresh();
  if (server_ && server_->take_request()) publish_metrics();
}

int JobMonitor::wake_fd() const {
  return server_ ? server_->wake_fd() : -1;
}

// Built when a scrape asks, not at every refresh: a megabyte of text at 1,024 ranks was a
// seventh of the launcher's CPU, rebuilt every second whether anyone read it or not.
void JobMonitor::publish_metrics() {
  const double wall = wall_seconds();
  server_->publish(prometheus_text(monitor_.snapshot(steady_seconds(), wall, iso_time(wall)),
                                   monitor_.scalars()));
}

void JobMonitor::refresh() {
  const double steady = steady_seconds();
  const double wall = wall_seconds();
  for (const StragglerChange& change : monitor_.evaluate(steady)) {
    char lateness[32];
    char median[32];
    std::snprintf(lateness, sizeof lateness, "%.3f", change.lateness_seconds);
    std::snprintf(median, sizeof median, "%.3f", change.median_step_seconds);
    events_.write({"straggler",
                   change.rank,
                   change.node.empty() ? std::nullopt : std::optional<std::string>(change.node),
                   {{"state", change.straggler ? "flagged" : "cleared"},
                    {"lateness_seconds", lateness},
                    {"median_step_seconds", median}}});
    if (change.straggler) {
      std::cerr << "primus-launch: warning: rank " << change.rank << " on "
                << (change.node.empty() ? "?" : change.node) << " is a straggler: it arrives "
                << lateness << " s later than the median rank at each step (median step " << median
                << " s)\n";
    } else {
      std::cerr << "primus-launch: rank " << change.rank << " is no longer a straggler\n";
    }
  }
  const JobStatus status = monitor_.snapshot(steady, wall, iso_time(wall));
  status_file_.write(status_json(status));
  if (!status.ranks.empty() && (status.state == "running" || status.state == "stopping")) {
    std::string line;
    line.reserve(64 + 48 * status.ranks.size());
    {
      json_text::Object o(line);
      o.field("time", status.time);
      o.field("allocation", status.allocation);
      o.field("attempt", status.attempt);
      // One array per field, a value per rank in the order of "ranks" (null: not reported).
      const auto column = [&](const char* name, const auto& value_of) {
        o.name(name);
        line.push_back('[');
        for (std::size_t i = 0; i < status.ranks.size(); ++i) {
          if (i != 0) line.push_back(',');
          const auto value = value_of(status.ranks[i]);
          if (value) {
            json_text::append_number(line, *value);
          } else {
            line += "null";
          }
        }
        line.push_back(']');
      };
      column("ranks", [](const RankStatus& r) { return std::optional<std::uint64_t>(r.rank); });
      column("steps", [](const RankStatus& r) { return r.steps; });
      column("samples", [](const RankStatus& r) { return r.samples; });
      column("samples_per_second", [](const RankStatus& r) { return r.samples_per_second; });
      column("lateness_seconds", [](const RankStatus& r) { return r.lateness_seconds; });
    }
    append(throughput_, line + "\n", "throughput.jsonl");
  }
  if (server_ && status.state != metrics_state_) {
    // A new state is published at once: a GET between attempts, when no loop builds its text,
    // gets the job's state of now after its wait.
    server_->publish(prometheus_text(status, monitor_.scalars()));
    metrics_state_ = status.state;
  }
  if (metrics_file_) {
    const std::string text = prometheus_text(status, monitor_.scalars());
    if (!metrics_file_->write(text) && !warned_) {
      warned_ = true;
      std::cerr << "primus-launch: warning: cannot write " << setup_.metrics_file.string()
                << " (--primus-metrics-file)\n";
    }
  }
  progress_line(status);
  next_status_ = Clock::now() + setup_.status_interval;
}

void JobMonitor::progress_line(const JobStatus& status) {
  if (setup_.progress_interval.count() == 0 || Clock::now() < next_progress_) return;
  next_progress_ =
      Clock::now() + (setup_.terminal ? std::min<std::chrono::seconds>(setup_.progress_interval,
                                                                       std::chrono::seconds(10))
                                      : setup_.progress_interval);
  if (status.state != "running") return;
  const Monitor::Progress progress = monitor_.progress();
  ProgressFacts facts;
  facts.clock = iso_time(wall_seconds()).substr(11, 8);
  facts.step = progress.step;
  facts.total_steps = progress.total_steps;
  facts.loss = progress.loss;
  facts.samples_per_second = status.samples_per_second;
  facts.seconds_since_checkpoint = status.seconds_since_checkpoint;
  facts.checkpoint_step = status.checkpoint_step;
  for (const RankStatus& r : status.ranks)
    facts.stragglers += r.straggler ? 1 : 0;
  // Time left at this attempt's pace: from the first step the line saw in it.
  const double now = steady_seconds();
  if (progress.step && (!pace_from_ || *progress.step < pace_from_->first)) {
    pace_from_ = {*progress.step, now};
  }
  if (progress.step && progress.total_steps && pace_from_ && *progress.step > pace_from_->first &&
      *progress.total_steps >= *progress.step) {
    facts.seconds_left = static_cast<double>(*progress.total_steps - *progress.step) *
                         (now - pace_from_->second) /
                         static_cast<double>(*progress.step - pace_from_->first);
  }
  std::cerr << "primus-launch: " << progress_text(facts) << "\n";
}

}  // namespace primus::launch
