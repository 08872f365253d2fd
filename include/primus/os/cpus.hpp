// OS adapter (not part of the pure libprimus-common): the CPUs this process may run on.
#pragma once

#include <cstdint>

namespace primus::os {

// The CPUs in this process's affinity mask (what a cgroup or taskset leaves it), else the online
// CPUs; at least 1.
std::uint32_t usable_cpus();
// The machine's online CPUs, whatever this process's mask; at least 1.
std::uint32_t online_cpus();

}  // namespace primus::os
