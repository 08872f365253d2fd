// The Prometheus text exposition format (version 0.0.4) of a job's status (pure): what
// /metrics serves and --primus-metrics-file writes. Metric names follow Prometheus's
// conventions (base units, _total for counters, _ratio for 0..1); labels: job, and rank and
// node where they apply. User scalars of primus.log(name=...) are primus_user_<name>.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "monitor/monitor.hpp"
#include "monitor/status.hpp"

namespace primus::launch {

std::string prometheus_text(const JobStatus& status, const std::vector<UserScalar>& scalars);

// A label value with \, " and newline escaped as the format requires.
std::string prometheus_label_value(std::string_view value);

}  // namespace primus::launch
