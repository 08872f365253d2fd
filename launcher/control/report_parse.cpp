// parse_report (control_protocol.hpp): one control line into a Report, through nlohmann/json's
// SAX interface. Each field is set as its key and value pass, and no document is built: at
// 1,024 heartbeating ranks the document (a std::map per object, a node and a string per key,
// built, searched 25 times by key, then freed) was four tenths of the launcher's CPU time.
// The rules are those of the document's fields: a count is an unsigned integer, a real any
// number, a text a string, and anything else leaves the field unset; a key given twice keeps
// its last value; fields nested deeper than node_stats and the scalars' values are ignored.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "control/control_protocol.hpp"
#include "primus/common/json_text.hpp"

namespace primus::launch {
namespace {

using nlohmann::json;

// One value as the SAX interface hands it over.
struct Value {
  enum Kind { kNone, kUnsigned, kSigned, kReal, kText } kind = kNone;  // kNone: null, bool, ...
  std::uint64_t count = 0;
  std::int64_t integer = 0;
  double real = 0;
  const std::string* text = nullptr;
};

std::optional<std::uint64_t> as_count(const Value& v) {
  if (v.kind == Value::kUnsigned) return v.count;
  return std::nullopt;
}

std::optional<std::uint32_t> as_count32(const Value& v) {
  const auto n = as_count(v);
  if (n && *n <= UINT32_MAX) return static_cast<std::uint32_t>(*n);
  return std::nullopt;
}

std::optional<double> as_real(const Value& v) {
  if (v.kind == Value::kUnsigned || v.kind == Value::kSigned || v.kind == Value::kReal) {
    return v.real;
  }
  return std::nullopt;
}

std::string as_text(const Value& v) {
  return v.kind == Value::kText ? *v.text : std::string();
}

// A finite number, or one of the names that primus.log gives a non-finite value.
std::optional<double> scalar_value(const Value& v) {
  if (v.kind != Value::kText) return as_real(v);
  if (*v.text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (*v.text == "+Inf") return std::numeric_limits<double>::infinity();
  if (*v.text == "-Inf") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

bool scalar_name_ok(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  if (std::isdigit(static_cast<unsigned char>(name.front())) != 0) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

void set_node_field(NodeReport& node, const std::string& key, const Value& v) {
  if (key == "cpu_usage_ratio") {
    node.cpu_usage_ratio = as_real(v);
  } else if (key == "memory_used_bytes") {
    node.memory_used_bytes = as_count(v);
  } else if (key == "memory_available_bytes") {
    node.memory_available_bytes = as_count(v);
  } else if (key == "network_receive_bytes_total") {
    node.network_receive_bytes_total = as_count(v);
  } else if (key == "network_transmit_bytes_total") {
    node.network_transmit_bytes_total = as_count(v);
  }
}

// The SAX handler: what one line says, field by field.
class ReportBuilder {
 public:
  explicit ReportBuilder(Report& report) : r_(report) {}

  // nlohmann's SAX interface.
  bool null() { return value(Value{}); }
  bool boolean(bool /*v*/) { return value(Value{}); }
  bool number_integer(json::number_integer_t v) {
    Value x;
    x.kind = Value::kSigned;
    x.integer = v;
    x.real = static_cast<double>(v);
    return value(x);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    Value x;
    x.kind = Value::kUnsigned;
    x.count = v;
    x.integer = static_cast<std::int64_t>(v);
    x.real = static_cast<double>(v);
    return value(x);
  }
  bool number_float(json::number_float_t v, const json::string_t& /*text*/) {
    Value x;
    x.kind = Value::kReal;
    x.real = v;
    return value(x);
  }
  bool string(json::string_t& v) {
    Value x;
    x.kind = Value::kText;
    x.text = &v;
    return value(x);
  }
  bool binary(json::binary_t& /*v*/) { return value(Value{}); }
  bool start_object(std::size_t /*elements*/) { return open(true); }
  bool end_object() { return close(); }
  bool start_array(std::size_t /*elements*/) { return open(false); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    if (depth_ == 1) {
      key_ = k;
    } else if (depth_ == 2) {
      inner_key_ = k;
    }
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) {
    error_ = std::string("not JSON: ") + e.what();
    return false;
  }

  const std::string& error() const { return error_; }
  bool object() const { return object_; }
  bool type_given() const { return type_given_; }
  std::optional<std::uint64_t> steps, step;
  std::optional<std::int64_t> wait_status;
  bool values_object = false;  // "values" was an object (the scalars')
  std::map<std::string, std::optional<double>> values;

 private:
  enum class Inside { kNothing, kNodeStats, kValues, kOther };

  bool open(bool is_object) {
    ++depth_;
    if (depth_ == 1) {
      object_ = is_object;
    } else if (depth_ == 2) {
      // A container as a top-level field's value: node_stats and values are read inside.
      inside_ = Inside::kOther;
      if (key_ == "node_stats") {
        r_.node_stats.reset();
        if (is_object) {
          r_.node_stats.emplace();
          inside_ = Inside::kNodeStats;
        }
      } else if (key_ == "values") {
        values.clear();
        values_object = is_object;
        if (is_object) inside_ = Inside::kValues;
      }
    } else if (depth_ == 3 && inside_ == Inside::kValues) {
      values[inner_key_] = std::nullopt;  // a container is no scalar
    }
    return true;
  }

  bool close() {
    if (depth_ == 2) inside_ = Inside::kNothing;
    --depth_;
    return true;
  }

  bool value(const Value& v) {
    if (depth_ == 0) {
      object_ = false;  // a bare value, not an object
    } else if (depth_ == 1) {
      field(v);
    } else if (depth_ == 2 && inside_ == Inside::kNodeStats) {
      set_node_field(*r_.node_stats, inner_key_, v);
    } else if (depth_ == 2 && inside_ == Inside::kValues) {
      values[inner_key_] = scalar_value(v);
    }
    return true;
  }

  // A field of the line itself.
  void field(const Value& v);

  Report& r_;
  int depth_ = 0;
  bool object_ = false;
  bool type_given_ = false;
  Inside inside_ = Inside::kNothing;
  std::string key_, inner_key_;
  std::string error_;
};

void ReportBuilder::field(const Value& v) {
  const std::string& k = key_;
  if (k == "type") {
    type_given_ = true;
    const std::string type = as_text(v);
    r_.kind = ReportKind::kOther;
    static const std::pair<const char*, ReportKind> kKinds[] = {
        {"hello", ReportKind::kHello},     {"heartbeat", ReportKind::kHeartbeat},
        {"event", ReportKind::kEvent},     {"exception", ReportKind::kException},
        {"goodbye", ReportKind::kGoodbye}, {"exit", ReportKind::kExit},
        {"data", ReportKind::kData},       {"scalars", ReportKind::kScalars}};
    for (const auto& [name, kind] : kKinds)
      if (type == name) r_.kind = kind;
  } else if (k == "steps") {
    steps = as_count(v);
  } else if (k == "step") {
    step = as_count(v);
    r_.step = as_text(v);
  } else if (k == "samples") {
    r_.samples = as_count(v);
  } else if (k == "step_seconds") {
    r_.step_seconds = as_real(v);
  } else if (k == "cpu_seconds") {
    r_.cpu_seconds = as_real(v);
  } else if (k == "last_step_time") {
    r_.last_step_time = as_real(v);
  } else if (k == "wait_seconds") {
    r_.wait_seconds = as_real(v);
  } else if (k == "rss_bytes") {
    r_.rss_bytes = as_count(v);
  } else if (k == "rejoin_memory_bytes") {
    r_.rejoin_memory_bytes = as_count(v);
  } else if (k == "restore_seconds") {
    r_.restore_seconds = as_real(v);
  } else if (k == "restore_source") {
    r_.restore_source = as_text(v);
  } else if (k == "replacement") {
    r_.replacement = as_text(v);
  } else if (k == "gpu_memory_bytes") {
    r_.gpu_memory_bytes = as_count(v);
  } else if (k == "gpu_utilization_ratio") {
    r_.gpu_utilization_ratio = as_real(v);
  } else if (k == "total_steps") {
    r_.total_steps = as_count(v);
  } else if (k == "time") {
    r_.time = as_real(v);
  } else if (k == "node") {
    r_.node = as_text(v);
  } else if (k == "event") {
    r_.event = as_text(v);
  } else if (k == "path") {
    r_.path = as_text(v);
  } else if (k == "signal") {
    r_.signal = as_text(v);
  } else if (k == "exception") {
    r_.exception = as_text(v);
  } else if (k == "message") {
    r_.message = as_text(v);
  } else if (k == "where") {
    r_.where = as_text(v);
  } else if (k == "reason") {
    r_.reason = as_text(v);
  } else if (k == "peer") {
    r_.peer = as_count32(v);
  } else if (k == "generation") {
    r_.generation = as_count32(v);
  } else if (k == "attempt") {
    r_.attempt = as_count32(v);
  } else if (k == "pid") {
    r_.pid = v.kind == Value::kSigned || v.kind == Value::kUnsigned ? v.integer : 0;
  } else if (k == "wait_status") {
    wait_status = v.kind == Value::kSigned || v.kind == Value::kUnsigned
                      ? std::optional<std::int64_t>(v.integer)
                      : std::nullopt;
  } else if (k == "node_stats") {
    r_.node_stats.reset();  // not an object
  } else if (k == "values") {
    values.clear();
    values_object = false;
  }
}

// The checks of a whole line, once its fields are in.
bool check(Report& report, const ReportBuilder& line, std::string& error) {
  if (report.kind == ReportKind::kOther && !line.type_given()) {
    error = "no \"type\"";
    return false;
  }
  report.steps = line.steps ? line.steps : line.step;
  if (report.kind == ReportKind::kScalars) {
    if (!line.values_object || line.values.empty() || !report.steps) {
      error = "scalars without \"step\" or \"values\"";
      return false;
    }
    if (line.values.size() > 256) {
      error = "more than 256 scalars in one line";
      return false;
    }
    for (const auto& [name, value] : line.values) {
      if (!scalar_name_ok(name) || !value) {
        error = "scalar " + json_quote(name) +
                ": expected a name of letters, digits and _ and a number (or \"NaN\", "
                "\"+Inf\", \"-Inf\")";
        return false;
      }
      report.values.emplace_back(name, *value);
    }
  }
  if (report.kind == ReportKind::kHello && !report.attempt) {
    error = "a hello without \"attempt\"";
    return false;
  }
  if (report.kind == ReportKind::kEvent && report.event.empty()) {
    error = "an event without \"event\"";
    return false;
  }
  if (report.kind == ReportKind::kExit) {
    if (!line.wait_status) {
      error = "an exit without \"wait_status\"";
      return false;
    }
    report.wait_status = static_cast<int>(*line.wait_status);
  }
  return true;
}

}  // namespace

std::optional<Report> parse_report(std::string_view line, std::uint32_t rank, bool wrapper,
                                   std::string& error) {
  Report report;
  ReportBuilder builder(report);
  if (!json::sax_parse(line.begin(), line.end(), &builder)) {
    error = builder.error().empty() ? "not JSON" : builder.error();
    return std::nullopt;
  }
  if (!builder.object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  report.rank = rank;
  report.wrapper = wrapper;
  if (report.kind == ReportKind::kData) {
    if (wrapper) {
      error = "a data message from a task wrapper";
      return std::nullopt;
    }
    Report data;
    data.kind = ReportKind::kData;
    data.rank = rank;
    data.payload = std::string(line);
    return data;
  }
  if (!check(report, builder, error)) return std::nullopt;
  return report;
}

}  // namespace primus::launch
