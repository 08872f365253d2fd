#include "monitor/status_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

namespace primus::launch {
namespace {

template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char text[512];
  std::snprintf(text, sizeof text, pattern, args...);
  return text;
}

template <typename T>
std::string cell(const std::optional<T>& value, double scale, const char* pattern) {
  if (!value) return "-";
  return format(pattern, static_cast<double>(*value) / scale);
}

std::string age(std::optional<double> when, double now) {
  if (!when) return "-";
  const double seconds = std::max(0.0, now - *when);
  if (seconds < 100) return format("%.1fs ago", seconds);
  if (seconds < 6000) return format("%.0fm ago", seconds / 60);
  return format("%.1fh ago", seconds / 3600);
}

// "recovery: rejoin of rank 2 (generation 1), done; detect 0.000 s, tear down 0.000 s, ..., in all
// 0.310 s; the replacement was the standby; the failure 12.0s ago" (status.json's recovery).
std::string recovery_line(const RecoveryStatus& r, double now) {
  std::string out = format("recovery: %s of rank %u (generation %u), %s", r.path.c_str(), r.rank,
                           r.generation, r.state.c_str());
  if (!r.phase.empty()) out += " (now: " + r.phase + ")";
  if (!r.reason.empty()) out += ": " + r.reason;
  std::string phases;
  const auto add = [&](const char* name, const std::optional<double>& seconds) {
    if (seconds) phases += format("%s%s %.3f s", phases.empty() ? "" : ", ", name, *seconds);
  };
  add("detect", r.detect_seconds);
  add("tear down", r.tear_down_seconds);
  add("place", r.place_seconds);
  add("regroup", r.regroup_seconds);
  add("restore", r.restore_seconds);
  add("first step", r.first_step_seconds);
  add("in all", r.recovery_seconds ? r.recovery_seconds : r.rejoin_seconds);
  if (!phases.empty()) out += "; " + phases;
  if (!r.replacement.empty()) {
    out += r.replacement == "standby" ? "; the replacement was the standby"
                                      : "; the replacement was started afresh";
  }
  return out + "; the failure " + age(r.failure_time, now) + "\n";
}

}  // namespace

std::string duration_text(double seconds) {
  const auto whole = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  if (whole >= 3600) return format("%lldh%02lldm", whole / 3600, whole % 3600 / 60);
  if (whole >= 60) return format("%lldm%02llds", whole / 60, whole % 60);
  return format("%llds", whole);
}

std::string progress_text(const ProgressFacts& f) {
  std::string line = f.clock + " step ";
  line += f.step ? std::to_string(*f.step) : std::string("-");
  if (f.total_steps) line += "/" + std::to_string(*f.total_steps);
  if (f.loss) line += format(", loss %.4g", *f.loss);
  if (f.samples_per_second) line += format(", %.1f samples/s", *f.samples_per_second);
  if (f.seconds_left) line += ", " + duration_text(*f.seconds_left) + " left";
  if (f.seconds_since_checkpoint) {
    line += format(", checkpoint %.0f s ago", *f.seconds_since_checkpoint);
    if (f.checkpoint_step) {
      line += format(" (step %llu)", static_cast<unsigned long long>(*f.checkpoint_step));
    }
  } else {
    line += ", no checkpoint yet";
  }
  if (f.stragglers > 0) line += format(", %zu straggler(s)", f.stragglers);
  return line;
}

std::string status_view(const JobStatus& s, double now) {
  std::string out =
      format("job %s: %s (allocation %u, attempt %u, restarts %u), %u ranks", s.job.c_str(),
             s.state.c_str(), s.allocation, s.attempt, s.restarts, s.world_size);
  if (s.samples_per_second) out += format(", %.1f samples/s", *s.samples_per_second);
  if (s.median_step_seconds) out += format(", median step %.3f s", *s.median_step_seconds);
  out += "; as of " + s.time + "\n";
  if (!s.checkpoint.empty()) {
    out += "newest checkpoint:";
    if (s.checkpoint_step)
      out += format(" step %llu,", static_cast<unsigned long long>(*s.checkpoint_step));
    out += " " + age(s.checkpoint_time, now) + ": " + s.checkpoint + "\n";
  }
  if (s.recovery) out += recovery_line(*s.recovery, now);
  std::string stragglers;
  for (const RankStatus& r : s.ranks) {
    if (!r.straggler) continue;
    stragglers += format("%s rank %u on %s (%.3f s late)", stragglers.empty() ? "" : ",", r.rank,
                         r.node.c_str(), r.lateness_seconds.value_or(0));
  }
  if (!stragglers.empty()) out += "stragglers:" + stragglers + "\n";
  out += format("%5s  %-12s %-8s %9s %10s %8s %11s %9s %8s %5s %9s  %s\n", "RANK", "NODE", "STATE",
                "STEP", "SAMPLES/S", "LATE_S", "LAST_STEP", "LAST_CKPT", "RSS_MB", "CPU%",
                "STRAGGLER", "ENDED");
  for (const RankStatus& r : s.ranks) {
    out += format(
        "%5u  %-12s %-8s %9s %10s %8s %11s %9s %8s %5s %9s  %s\n", r.rank, r.node.c_str(),
        r.state.c_str(), cell(r.steps, 1, "%.0f").c_str(),
        cell(r.samples_per_second, 1, "%.1f").c_str(), cell(r.lateness_seconds, 1, "%.3f").c_str(),
        age(r.last_step_time, now).c_str(), cell(r.last_checkpoint_step, 1, "%.0f").c_str(),
        cell(r.rss_bytes, 1 << 20, "%.0f").c_str(), cell(r.cpu_usage_ratio, 0.01, "%.0f").c_str(),
        r.straggler ? "yes" : "-", r.ended.c_str());
  }
  if (!s.nodes.empty()) {
    out += format("\n%-12s %6s %12s %12s %10s %10s\n", "NODE", "CPU%", "MEM_USED_GB",
                  "MEM_AVAIL_GB", "RX_MB/S", "TX_MB/S");
    for (const NodeStatus& n : s.nodes) {
      out += format("%-12s %6s %12s %12s %10s %10s\n", n.node.c_str(),
                    cell(n.cpu_usage_ratio, 0.01, "%.0f").c_str(),
                    cell(n.memory_used_bytes, 1e9, "%.2f").c_str(),
                    cell(n.memory_available_bytes, 1e9, "%.2f").c_str(),
                    cell(n.network_receive_bytes_per_second, 1e6, "%.2f").c_str(),
                    cell(n.network_transmit_bytes_per_second, 1e6, "%.2f").c_str());
    }
  }
  if (!s.excluded_nodes.empty()) {
    out += format("\n%-12s %s\n", "EXCLUDED", "REASON");
    for (const ExcludedNode& e : s.excluded_nodes)
      out += format("%-12s ", e.node.c_str()) + e.reason + "\n";
  }
  return out;
}

}  // namespace primus::launch
