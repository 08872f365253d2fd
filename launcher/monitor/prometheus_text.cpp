#include "monitor/prometheus_text.hpp"

#include <charconv>
#include <cmath>
#include <map>
#include <optional>

namespace primus::launch {
namespace {

// Appends the shortest text that reads back as the same double (std::to_chars): printf's
// "%.17g" took a sixth of the launcher's CPU at 1,024 heartbeating ranks (glibc's
// multi-precision digits).
void append_number(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    char text[64];
    const auto done = std::to_chars(text, text + sizeof text, value);
    out.append(text, done.ptr);
  }
}

// The samples of one metric family, written together under its HELP and TYPE lines.
class Family {
 public:
  Family(std::string name, std::string type, std::string help)
      : name_(std::move(name)), type_(std::move(type)), help_(std::move(help)) {}
  // Appended piece by piece: the temporaries of one `a + b + ...` per sample were half of the
  // text's cost (a megabyte at 1,024 ranks, rebuilt every second).
  void add(const std::string& labels, double value) {
    samples_.append(name_).append(1, '{').append(labels).append("} ", 2);
    append_number(samples_, value);
    samples_.push_back('\n');
  }
  void write(std::string& out) const {
    if (samples_.empty()) return;
    out += "# HELP " + name_ + " " + help_ + "\n# TYPE " + name_ + " " + type_ + "\n" + samples_;
  }

 private:
  std::string name_;
  std::string type_;
  std::string help_;
  std::string samples_;
};

std::string label(const char* name, std::string_view value) {
  return std::string(name) + "=\"" + prometheus_label_value(value) + "\"";
}

template <typename T>
void add_if(Family& family, const std::string& labels, const std::optional<T>& value) {
  if (value) family.add(labels, static_cast<double>(*value));
}

}  // namespace

std::string prometheus_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string prometheus_text(const JobStatus& s, const std::vector<UserScalar>& scalars) {
  const std::string job = label("job", s.job);
  Family state("primus_job_state", "gauge",
               "1 for the job's current state (running, restarting, stopping, preempted, "
               "requeued, finished, failed).");
  state.add(job + "," + label("state", s.state), 1);
  Family restarts("primus_restarts_total", "counter",
                  "Restarts of the ranks in the job's allocations so far.");
  restarts.add(job, s.restarts);
  Family requeues("primus_requeues_total", "counter",
                  "Times the job was requeued (SLURM_RESTART_COUNT).");
  requeues.add(job, s.allocation);
  Family world("primus_world_size", "gauge", "Ranks of the current attempt.");
  world.add(job, s.world_size);
  Family checkpoint("primus_last_checkpoint_timestamp_seconds", "gauge",
                    "UNIX time of the newest committed checkpoint this launcher saw.");
  add_if(checkpoint, job, s.checkpoint_time);
  Family checkpoint_step("primus_last_checkpoint_step", "gauge",
                         "Step of the newest committed checkpoint this launcher saw.");
  add_if(checkpoint_step, job, s.checkpoint_step);
  Family median_step("primus_median_step_seconds", "gauge",
                     "Median step time of the ranks over the straggler window.");
  add_if(median_step, job, s.median_step_seconds);

  Family steps("primus_steps_total", "counter",
               "Training steps of the rank in this attempt (primus.should_stop() calls).");
  Family samples("primus_samples_total", "counter", "Samples the rank consumed in this attempt.");
  Family rate("primus_rank_samples_per_second", "gauge",
              "Samples per second of the rank between its last two heartbeats.");
  Family last_step("primus_last_step_timestamp_seconds", "gauge",
                   "UNIX time of the rank's last step (its own clock).");
  Family step_seconds("primus_rank_step_seconds", "gauge",
                      "Median step time of the rank since its previous heartbeat.");
  Family lateness("primus_rank_lateness_seconds", "gauge",
                  "How much later than the median rank this rank arrives at the step's "
                  "agreement (median over the straggler window).");
  Family straggler("primus_rank_straggler", "gauge",
                   "1 when the rank is a straggler: its lateness exceeds half the median step "
                   "time.");
  Family rss("primus_rank_resident_memory_bytes", "gauge", "Resident memory of the rank.");
  Family rejoin_memory("primus_rank_rejoin_memory_bytes", "gauge",
                       "The rank's newest committed checkpoint kept in memory for a rejoin.");
  Family cpu("primus_rank_cpu_usage_ratio", "gauge",
             "CPU time of the rank per second of wall time (1 is one CPU).");
  Family gpu_memory("primus_rank_gpu_memory_used_bytes", "gauge",
                    "GPU memory in use on the rank's GPU (NVML).");
  Family gpu_use("primus_rank_gpu_utilization_ratio", "gauge",
                 "Utilisation of the rank's GPU (NVML).");
  Family up("primus_rank_up", "gauge", "1 while the rank runs and reports.");
  for (const RankStatus& r : s.ranks) {
    const std::string labels =
        job + "," + label("rank", std::to_string(r.rank)) + "," + label("node", r.node);
    up.add(labels, r.state == "running" ? 1 : 0);
    add_if(steps, labels, r.steps);
    add_if(samples, labels, r.samples);
    add_if(rate, labels, r.samples_per_second);
    add_if(last_step, labels, r.last_step_time);
    add_if(step_seconds, labels, r.step_seconds);
    add_if(lateness, labels, r.lateness_seconds);
    straggler.add(labels, r.straggler ? 1 : 0);
    add_if(rss, labels, r.rss_bytes);
    add_if(rejoin_memory, labels, r.rejoin_memory_bytes);
    add_if(cpu, labels, r.cpu_usage_ratio);
    add_if(gpu_memory, labels, r.gpu_memory_bytes);
    add_if(gpu_use, labels, r.gpu_utilization_ratio);
  }

  Family node_cpu("primus_node_cpu_usage_ratio", "gauge",
                  "CPU use of the node, all its CPUs (1 is every CPU busy).");
  Family node_used("primus_node_memory_used_bytes", "gauge",
                   "Memory in use on the node (MemTotal - MemAvailable).");
  Family node_available("primus_node_memory_available_bytes", "gauge",
                        "Memory available on the node (MemAvailable).");
  Family node_rx("primus_node_network_receive_bytes_total", "counter",
                 "Bytes received by the node's network interfaces (not loopback).");
  Family node_tx("primus_node_network_transmit_bytes_total", "counter",
                 "Bytes sent by the node's network interfaces (not loopback).");
  for (const NodeStatus& n : s.nodes) {
    const std::string labels = job + "," + label("node", n.node);
    add_if(node_cpu, labels, n.cpu_usage_ratio);
    add_if(node_used, labels, n.memory_used_bytes);
    add_if(node_available, labels, n.memory_available_bytes);
    add_if(node_rx, labels, n.network_receive_bytes_total);
    add_if(node_tx, labels, n.network_transmit_bytes_total);
  }

  std::map<std::string, Family> user;
  for (const UserScalar& scalar : scalars) {
    const std::string name = "primus_user_" + scalar.name;
    auto it = user.find(name);
    if (it == user.end()) {
      it = user.emplace(name, Family(name, "gauge",
                                     "primus.log(" + scalar.name + "=...): the newest value."))
               .first;
    }
    it->second.add(
        job + "," + label("rank", std::to_string(scalar.rank)) + "," + label("node", scalar.node),
        scalar.value);
  }

  std::string out;
  for (const Family* family :
       {&state,        &restarts, &requeues,  &world,     &checkpoint,     &checkpoint_step,
        &median_step,  &up,       &steps,     &samples,   &rate,           &last_step,
        &step_seconds, &lateness, &straggler, &rss,       &rejoin_memory,  &cpu,
        &gpu_memory,   &gpu_use,  &node_cpu,  &node_used, &node_available, &node_rx,
        &node_tx}) {
    family->write(out);
  }
  for (const auto& [name, family] : user)
    family.write(out);
  return out;
}

}  // namespace primus::launch
