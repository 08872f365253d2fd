#include "control/control_protocol.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <limits>

#include "primus/common/json_text.hpp"

namespace primus::launch {
namespace {

using nlohmann::json;

std::string text_field(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

std::optional<std::uint64_t> count_field(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

std::optional<double> real_field(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

ReportKind kind_of(const std::string& type) {
  if (type == "hello") return ReportKind::kHello;
  if (type == "heartbeat") return ReportKind::kHeartbeat;
  if (type == "event") return ReportKind::kEvent;
  if (type == "exception") return ReportKind::kException;
  if (type == "goodbye") return ReportKind::kGoodbye;
  if (type == "exit") return ReportKind::kExit;
  if (type == "data") return ReportKind::kData;
  if (type == "scalars") return ReportKind::kScalars;
  return ReportKind::kOther;
}

// A finite number, or one of the names that primus.log gives a non-finite value.
std::optional<double> scalar_value(const json& value) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  const auto& text = value.get_ref<const std::string&>();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

bool scalar_name_ok(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  if (std::isdigit(static_cast<unsigned char>(name.front())) != 0) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

NodeReport node_report(const json& object) {
  NodeReport node;
  node.cpu_usage_ratio = real_field(object, "cpu_usage_ratio");
  node.memory_used_bytes = count_field(object, "memory_used_bytes");
  node.memory_available_bytes = count_field(object, "memory_available_bytes");
  node.network_receive_bytes_total = count_field(object, "network_receive_bytes_total");
  node.network_transmit_bytes_total = count_field(object, "network_transmit_bytes_total");
  return node;
}

}  // namespace

std::optional<Report> parse_report(std::string_view line, std::uint32_t rank, bool wrapper,
                                   std::string& error) {
  json object;
  try {
    object = json::parse(line.begin(), line.end());
  } catch (const json::exception& e) {
    error = std::string("not JSON: ") + e.what();
    return std::nullopt;
  }
  if (!object.is_object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  Report report;
  report.rank = rank;
  report.wrapper = wrapper;
  report.kind = kind_of(text_field(object, "type"));
  if (report.kind == ReportKind::kOther && !object.contains("type")) {
    error = "no \"type\"";
    return std::nullopt;
  }
  if (report.kind == ReportKind::kData) {
    if (wrapper) {
      error = "a data message from a task wrapper";
      return std::nullopt;
    }
    report.payload = std::string(line);
    return report;
  }
  report.node = text_field(object, "node");
  report.step = text_field(object, "step");
  report.event = text_field(object, "event");
  report.path = text_field(object, "path");
  report.signal = text_field(object, "signal");
  report.exception = text_field(object, "exception");
  report.message = text_field(object, "message");
  report.where = text_field(object, "where");
  if (const auto peer = count_field(object, "peer"); peer && *peer <= UINT32_MAX) {
    report.peer = static_cast<std::uint32_t>(*peer);
  }
  if (const auto generation = count_field(object, "generation");
      generation && *generation <= UINT32_MAX) {
    report.generation = static_cast<std::uint32_t>(*generation);
  }
  report.reason = text_field(object, "reason");
  report.steps = count_field(object, "steps");
  if (!report.steps) report.steps = count_field(object, "step");
  report.step_seconds = real_field(object, "step_seconds");
  report.rss_bytes = count_field(object, "rss_bytes");
  report.cpu_seconds = real_field(object, "cpu_seconds");
  report.samples = count_field(object, "samples");
  report.last_step_time = real_field(object, "last_step_time");
  report.wait_seconds = real_field(object, "wait_seconds");
  report.gpu_memory_bytes = count_field(object, "gpu_memory_bytes");
  report.gpu_utilization_ratio = real_field(object, "gpu_utilization_ratio");
  report.total_steps = count_field(object, "total_steps");
  report.time = real_field(object, "time");
  if (const auto it = object.find("node_stats"); it != object.end() && it->is_object()) {
    report.node_stats = node_report(*it);
  }
  if (report.kind == ReportKind::kScalars) {
    const auto it = object.find("values");
    if (it == object.end() || !it->is_object() || it->empty() || !report.steps) {
      error = "scalars without \"step\" or \"values\"";
      return std::nullopt;
    }
    if (it->size() > 256) {
      error = "more than 256 scalars in one line";
      return std::nullopt;
    }
    for (const auto& [name, value] : it->items()) {
      const auto number = scalar_value(value);
      if (!scalar_name_ok(name) || !number) {
        error = "scalar " + json_quote(name) +
                ": expected a name of letters, digits and _ and a number (or \"NaN\", "
                "\"+Inf\", \"-Inf\")";
        return std::nullopt;
      }
      report.values.emplace_back(name, *number);
    }
  }
  if (const auto attempt = count_field(object, "attempt"); attempt && *attempt <= UINT32_MAX) {
    report.attempt = static_cast<std::uint32_t>(*attempt);
  }
  if (const auto it = object.find("pid"); it != object.end() && it->is_number_integer()) {
    report.pid = it->get<std::int64_t>();
  }
  if (report.kind == ReportKind::kHello && !report.attempt) {
    error = "a hello without \"attempt\"";
    return std::nullopt;
  }
  if (report.kind == ReportKind::kEvent && report.event.empty()) {
    error = "an event without \"event\"";
    return std::nullopt;
  }
  if (report.kind == ReportKind::kExit) {
    const auto it = object.find("wait_status");
    if (it == object.end() || !it->is_number_integer()) {
      error = "an exit without \"wait_status\"";
      return std::nullopt;
    }
    report.wait_status = it->get<int>();
  }
  return report;
}

std::vector<std::string> LineSplitter::feed(std::string_view bytes, bool& ok) {
  ok = true;
  std::vector<std::string> lines;
  partial_.append(bytes);
  std::size_t start = 0;
  for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(partial_.substr(start, nl - start));
  }
  partial_.erase(0, start);
  if (partial_.size() > kMaxControlLine) {
    ok = false;
    partial_.clear();
  }
  return lines;
}

std::string generation_notice(std::uint32_t generation, std::uint16_t master_port,
                              std::uint16_t primus_port, const std::string& resume) {
  return "{\"type\": \"generation\", \"generation\": " + std::to_string(generation) +
         ", \"master_port\": " + std::to_string(master_port) +
         ", \"primus_port\": " + std::to_string(primus_port) +
         ", \"resume\": " + json_quote(resume) + "}";
}

std::string wrapper_hello_line(std::uint32_t attempt, const std::string& node, std::int64_t pid,
                               const std::string& step) {
  return "{\"type\": \"hello\", \"attempt\": " + std::to_string(attempt) +
         ", \"node\": " + json_quote(node) + ", \"pid\": " + std::to_string(pid) +
         ", \"step\": " + json_quote(step) + "}\n";
}

std::string wrapper_signal_line(const std::string& signal) {
  return "{\"type\": \"event\", \"event\": \"stop-signal\", \"signal\": " + json_quote(signal) +
         "}\n";
}

std::string wrapper_exit_line(int wait_status) {
  return "{\"type\": \"exit\", \"wait_status\": " + std::to_string(wait_status) + "}\n";
}

}  // namespace primus::launch
