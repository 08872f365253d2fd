#include "monitor/status.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>

#include "primus/common/error.hpp"

namespace primus::launch {
namespace {

using nlohmann::ordered_json;

template <typename T>
void put(ordered_json& object, const char* key, const std::optional<T>& value) {
  if (value) object[key] = *value;
}

// Rounded so that the file stays small and diffs read well: 6 significant digits.
std::optional<double> rounded(const std::optional<double>& value) {
  if (!value) return std::nullopt;
  if (!std::isfinite(*value)) return value;
  char text[64];
  const auto done = std::to_chars(text, text + sizeof text, *value, std::chars_format::general, 6);
  double out = *value;
  std::from_chars(text, done.ptr, out);
  return out;
}

template <typename T>
std::optional<T> get(const ordered_json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if constexpr (std::is_same_v<T, std::uint64_t>) {
    if (!it->is_number_unsigned()) return std::nullopt;
  } else if constexpr (std::is_same_v<T, double>) {
    if (!it->is_number()) return std::nullopt;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return std::nullopt;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return std::nullopt;
  }
  return it->get<T>();
}

}  // namespace

std::string status_json(const JobStatus& s) {
  ordered_json out;
  out["time"] = s.time;
  out["job"] = s.job;
  out["state"] = s.state;
  out["allocation"] = s.allocation;
  out["attempt"] = s.attempt;
  out["restarts"] = s.restarts;
  out["world_size"] = s.world_size;
  out["checkpoint"] = s.checkpoint;
  put(out, "checkpoint_step", s.checkpoint_step);
  put(out, "checkpoint_time", s.checkpoint_time);
  put(out, "seconds_since_checkpoint", rounded(s.seconds_since_checkpoint));
  put(out, "median_step_seconds", rounded(s.median_step_seconds));
  put(out, "samples_per_second", rounded(s.samples_per_second));
  out["straggler_window_seconds"] = s.straggler_window_seconds;
  ordered_json ranks = ordered_json::array();
  for (const RankStatus& r : s.ranks) {
    ordered_json o;
    o["rank"] = r.rank;
    o["node"] = r.node;
    o["state"] = r.state;
    put(o, "steps", r.steps);
    put(o, "total_steps", r.total_steps);
    put(o, "samples", r.samples);
    put(o, "samples_per_second", rounded(r.samples_per_second));
    put(o, "step_seconds", rounded(r.step_seconds));
    put(o, "lateness_seconds", rounded(r.lateness_seconds));
    put(o, "last_step_time", r.last_step_time);
    put(o, "last_checkpoint_step", r.last_checkpoint_step);
    put(o, "rss_bytes", r.rss_bytes);
    put(o, "cpu_seconds", rounded(r.cpu_seconds));
    put(o, "cpu_usage_ratio", rounded(r.cpu_usage_ratio));
    put(o, "gpu_memory_bytes", r.gpu_memory_bytes);
    put(o, "gpu_utilization_ratio", rounded(r.gpu_utilization_ratio));
    o["straggler"] = r.straggler;
    put(o, "seconds_since_report", rounded(r.seconds_since_report));
    if (!r.ended.empty()) o["ended"] = r.ended;
    ranks.push_back(std::move(o));
  }
  out["ranks"] = std::move(ranks);
  ordered_json nodes = ordered_json::array();
  for (const NodeStatus& n : s.nodes) {
    ordered_json o;
    o["node"] = n.node;
    put(o, "cpu_usage_ratio", rounded(n.cpu_usage_ratio));
    put(o, "memory_used_bytes", n.memory_used_bytes);
    put(o, "memory_available_bytes", n.memory_available_bytes);
    put(o, "network_receive_bytes_total", n.network_receive_bytes_total);
    put(o, "network_transmit_bytes_total", n.network_transmit_bytes_total);
    put(o, "network_receive_bytes_per_second", rounded(n.network_receive_bytes_per_second));
    put(o, "network_transmit_bytes_per_second", rounded(n.network_transmit_bytes_per_second));
    nodes.push_back(std::move(o));
  }
  out["nodes"] = std::move(nodes);
  if (!s.excluded_nodes.empty()) {  // only where the job keeps nodes out
    ordered_json excluded = ordered_json::array();
    for (const ExcludedNode& e : s.excluded_nodes)
      excluded.push_back(ordered_json{{"node", e.node}, {"reason", e.reason}});
    out["excluded_nodes"] = std::move(excluded);
  }
  // One rank or node per line: readable with less, and small.
  std::string text = "{";
  bool first = true;
  for (const auto& [key, value] : out.items()) {
    text += first ? "" : ", ";
    first = false;
    text += ordered_json(key).dump() + ": ";
    if (value.is_array() && !value.empty()) {
      text += "[";
      for (std::size_t i = 0; i < value.size(); ++i)
        text += (i == 0 ? "\n  " : ",\n  ") + value[i].dump();
      text += "\n]";
    } else {
      text += value.dump();
    }
  }
  return text + "}\n";
}

JobStatus parse_status(std::string_view text) {
  ordered_json in;
  try {
    in = ordered_json::parse(text.begin(), text.end());
  } catch (const ordered_json::exception& e) {
    throw Error(std::string("not JSON (") + e.what() + ")");
  }
  if (!in.is_object() || !in.contains("state")) {
    throw Error("not a primus-launch status (no \"state\")");
  }
  JobStatus s;
  s.time = get<std::string>(in, "time").value_or("");
  s.job = get<std::string>(in, "job").value_or("");
  s.state = get<std::string>(in, "state").value_or("");
  s.allocation = static_cast<std::uint32_t>(get<std::uint64_t>(in, "allocation").value_or(0));
  s.attempt = static_cast<std::uint32_t>(get<std::uint64_t>(in, "attempt").value_or(0));
  s.restarts = static_cast<std::uint32_t>(get<std::uint64_t>(in, "restarts").value_or(0));
  s.world_size = static_cast<std::uint32_t>(get<std::uint64_t>(in, "world_size").value_or(0));
  s.checkpoint = get<std::string>(in, "checkpoint").value_or("");
  s.checkpoint_step = get<std::uint64_t>(in, "checkpoint_step");
  s.checkpoint_time = get<double>(in, "checkpoint_time");
  s.seconds_since_checkpoint = get<double>(in, "seconds_since_checkpoint");
  s.median_step_seconds = get<double>(in, "median_step_seconds");
  s.samples_per_second = get<double>(in, "samples_per_second");
  s.straggler_window_seconds = get<double>(in, "straggler_window_seconds").value_or(0);
  if (const auto it = in.find("ranks"); it != in.end() && it->is_array()) {
    for (const auto& o : *it) {
      if (!o.is_object()) continue;
      RankStatus r;
      r.rank = static_cast<std::uint32_t>(get<std::uint64_t>(o, "rank").value_or(0));
      r.node = get<std::string>(o, "node").value_or("");
      r.state = get<std::string>(o, "state").value_or("");
      r.steps = get<std::uint64_t>(o, "steps");
      r.total_steps = get<std::uint64_t>(o, "total_steps");
      r.samples = get<std::uint64_t>(o, "samples");
      r.samples_per_second = get<double>(o, "samples_per_second");
      r.step_seconds = get<double>(o, "step_seconds");
      r.lateness_seconds = get<double>(o, "lateness_seconds");
      r.last_step_time = get<double>(o, "last_step_time");
      r.last_checkpoint_step = get<std::uint64_t>(o, "last_checkpoint_step");
      r.rss_bytes = get<std::uint64_t>(o, "rss_bytes");
      r.cpu_seconds = get<double>(o, "cpu_seconds");
      r.cpu_usage_ratio = get<double>(o, "cpu_usage_ratio");
      r.gpu_memory_bytes = get<std::uint64_t>(o, "gpu_memory_bytes");
      r.gpu_utilization_ratio = get<double>(o, "gpu_utilization_ratio");
      r.straggler = get<bool>(o, "straggler").value_or(false);
      r.seconds_since_report = get<double>(o, "seconds_since_report");
      r.ended = get<std::string>(o, "ended").value_or("");
      s.ranks.push_back(std::move(r));
    }
  }
  if (const auto it = in.find("nodes"); it != in.end() && it->is_array()) {
    for (const auto& o : *it) {
      if (!o.is_object()) continue;
      NodeStatus n;
      n.node = get<std::string>(o, "node").value_or("");
      n.cpu_usage_ratio = get<double>(o, "cpu_usage_ratio");
      n.memory_used_bytes = get<std::uint64_t>(o, "memory_used_bytes");
      n.memory_available_bytes = get<std::uint64_t>(o, "memory_available_bytes");
      n.network_receive_bytes_total = get<std::uint64_t>(o, "network_receive_bytes_total");
      n.network_transmit_bytes_total = get<std::uint64_t>(o, "network_transmit_bytes_total");
      n.network_receive_bytes_per_second = get<double>(o, "network_receive_bytes_per_second");
      n.network_transmit_bytes_per_second = get<double>(o, "network_transmit_bytes_per_second");
      s.nodes.push_back(std::move(n));
    }
  }
  if (const auto it = in.find("excluded_nodes"); it != in.end() && it->is_array()) {
    for (const auto& o : *it) {
      if (!o.is_object()) continue;
      s.excluded_nodes.push_back(
          {get<std::string>(o, "node").value_or(""), get<std::string>(o, "reason").value_or("")});
    }
  }
  return s;
}

bool write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::string temporary = path.string() + ".tmp";
  const int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    return false;
  }
  return true;
}

}  // namespace primus::launch
