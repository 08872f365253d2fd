// OS adapter (not part of the pure libprimus-common): the CPUs this process may run on.
#pragma once

#include <cstdint>

namespace primus::os {

// The CPUs in this process's affinity mask (what a cgroup or taskset leaves it), else the online
// CPUs; at least 1.
std::uint32_t usable_cpus();

}  // namespace primus::os
