// `primus-launch status` as text (pure): the job's line, its newest checkpoint, a table of the
// ranks and one of the nodes, from a parsed status.json. `now` (UNIX time) turns the times in it
// into ages.
#pragma once

#include <string>

#include "monitor/status.hpp"

namespace primus::launch {

std::string status_view(const JobStatus& status, double now);

}  // namespace primus::launch
