// The environment of the process the plugin runs in (srun, sbatch, salloc), where SPANK offers
// no accessor: read with environ, written with setenv.
#pragma once

#include <string>

#include "primus/common/environment.hpp"

namespace primus::spank {

// Every PRIMUS_* variable of this process.
Environment primus_variables_of_this_process();

// Throws Error when the variable cannot be set.
void set_process_variable(const std::string& name, const std::string& value);

}  // namespace primus::spank
