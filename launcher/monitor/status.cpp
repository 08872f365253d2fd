#include "monitor/status.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>

#include "monitor/json_text.hpp"
#include "primus/common/error.hpp"

namespace primus::launch {
namespace {

using nlohmann::ordered_json;

// Written with 6 significant digits, so that the file stays small and diffs read well.
std::optional<json_text::Rounded> rounded(const std::optional<double>& value) {
  if (!value) return std::nullopt;
  return json_text::Rounded{*value};
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
  using json_text::append_number;
  using json_text::append_string;
  std::string text;
  text.reserve(512 + 400 * s.ranks.size() + 300 * s.nodes.size());
  // The top level spaced, one rank or node per line: readable with less, and small.
  bool first = true;
  const auto key = [&](const char* name) {
    text += first ? "{" : ", ";
    first = false;
    append_string(text, name);
    text += ": ";
  };
  const auto optional_number = [&](const char* name, const auto& value) {
    if (!value) return;
    key(name);
    append_number(text, *value);
  };
  const auto array = [&](const char* name, const auto& items, const auto& write_one) {
    key(name);
    text += "[";
    for (std::size_t i = 0; i < items.size(); ++i) {
      text += i == 0 ? "\n  " : ",\n  ";
      write_one(items[i]);
    }
    text += items.empty() ? "]" : "\n]";
  };
  key("time");
  append_string(text, s.time);
  key("job");
  append_string(text, s.job);
  key("state");
  append_string(text, s.state);
  for (const auto& [name, value] :
       {std::pair<const char*, std::uint32_t>{"allocation", s.allocation},
        {"attempt", s.attempt},
        {"restarts", s.restarts},
        {"world_size", s.world_size}}) {
    key(name);
    append_number(text, std::uint64_t{value});
  }
  key("checkpoint");
  append_string(text, s.checkpoint);
  optional_number("checkpoint_step", s.checkpoint_step);
  optional_number("checkpoint_time", s.checkpoint_time);
  optional_number("seconds_since_checkpoint", rounded(s.seconds_since_checkpoint));
  optional_number("median_step_seconds", rounded(s.median_step_seconds));
  optional_number("samples_per_second", rounded(s.samples_per_second));
  key("straggler_window_seconds");
  append_number(text, s.straggler_window_seconds);
  array("ranks", s.ranks, [&](const RankStatus& r) {
    json_text::Object o(text);
    o.field("rank", r.rank);
    o.field("node", r.node);
    o.field("state", r.state);
    o.field("steps", r.steps);
    o.field("total_steps", r.total_steps);
    o.field("samples", r.samples);
    o.field("samples_per_second", rounded(r.samples_per_second));
    o.field("step_seconds", rounded(r.step_seconds));
    o.field("lateness_seconds", rounded(r.lateness_seconds));
    o.field("last_step_time", r.last_step_time);
    o.field("last_checkpoint_step", r.last_checkpoint_step);
    o.field("rss_bytes", r.rss_bytes);
    o.field("rejoin_memory_bytes", r.rejoin_memory_bytes);
    o.field("cpu_seconds", rounded(r.cpu_seconds));
    o.field("cpu_usage_ratio", rounded(r.cpu_usage_ratio));
    o.field("gpu_memory_bytes", r.gpu_memory_bytes);
    o.field("gpu_utilization_ratio", rounded(r.gpu_utilization_ratio));
    o.field("straggler", r.straggler);
    o.field("seconds_since_report", rounded(r.seconds_since_report));
    if (!r.ended.empty()) o.field("ended", r.ended);
  });
  array("nodes", s.nodes, [&](const NodeStatus& n) {
    json_text::Object o(text);
    o.field("node", n.node);
    o.field("cpu_usage_ratio", rounded(n.cpu_usage_ratio));
    o.field("memory_used_bytes", n.memory_used_bytes);
    o.field("memory_available_bytes", n.memory_available_bytes);
    o.field("network_receive_bytes_total", n.network_receive_bytes_total);
    o.field("network_transmit_bytes_total", n.network_transmit_bytes_total);
    o.field("network_receive_bytes_per_second", rounded(n.network_receive_bytes_per_second));
    o.field("network_transmit_bytes_per_second", rounded(n.network_transmit_bytes_per_second));
  });
  if (!s.excluded_nodes.empty()) {  // only where the job keeps nodes out
    array("excluded_nodes", s.excluded_nodes, [&](const ExcludedNode& e) {
      json_text::Object o(text);
      o.field("node", e.node);
      o.field("reason", e.reason);
    });
  }
  if (s.recovery) {
    const RecoveryStatus& r = *s.recovery;
    key("recovery");
    json_text::Object o(text);
    o.field("path", r.path);
    o.field("state", r.state);
    o.field("phase", r.phase);
    o.field("rank", r.rank);
    o.field("generation", r.generation);
    o.field("failure_time", r.failure_time);
    o.field("detect_seconds", rounded(r.detect_seconds));
    o.field("tear_down_seconds", rounded(r.tear_down_seconds));
    o.field("place_seconds", rounded(r.place_seconds));
    o.field("regroup_seconds", rounded(r.regroup_seconds));
    o.field("restore_seconds", rounded(r.restore_seconds));
    o.field("rejoin_seconds", rounded(r.rejoin_seconds));
    o.field("first_step_seconds", rounded(r.first_step_seconds));
    o.field("recovery_seconds", rounded(r.recovery_seconds));
    if (!r.replacement.empty()) o.field("replacement", r.replacement);
    if (!r.reason.empty()) o.field("reason", r.reason);
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
      r.rejoin_memory_bytes = get<std::uint64_t>(o, "rejoin_memory_bytes");
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
  if (const auto it = in.find("recovery"); it != in.end() && it->is_object()) {
    const auto& o = *it;
    RecoveryStatus r;
    r.path = get<std::string>(o, "path").value_or("");
    r.state = get<std::string>(o, "state").value_or("");
    r.phase = get<std::string>(o, "phase").value_or("");
    r.rank = static_cast<std::uint32_t>(get<std::uint64_t>(o, "rank").value_or(0));
    r.generation = static_cast<std::uint32_t>(get<std::uint64_t>(o, "generation").value_or(0));
    r.failure_time = get<double>(o, "failure_time").value_or(0);
    r.detect_seconds = get<double>(o, "detect_seconds");
    r.tear_down_seconds = get<double>(o, "tear_down_seconds");
    r.place_seconds = get<double>(o, "place_seconds");
    r.regroup_seconds = get<double>(o, "regroup_seconds");
    r.restore_seconds = get<double>(o, "restore_seconds");
    r.rejoin_seconds = get<double>(o, "rejoin_seconds");
    r.first_step_seconds = get<double>(o, "first_step_seconds");
    r.recovery_seconds = get<double>(o, "recovery_seconds");
    r.replacement = get<std::string>(o, "replacement").value_or("");
    r.reason = get<std::string>(o, "reason").value_or("");
    s.recovery = std::move(r);
  }
  return s;
}

}  // namespace primus::launch
