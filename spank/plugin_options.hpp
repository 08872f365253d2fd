// Registering the user options of the option table with SPANK.
#pragma once

#include <slurm/spank.h>

namespace primus::spank {

// Registers every user-scope row of the option table (--primus, --primus-ckpt-dir, ...).
// Returns 0 or a negative value; never throws.
int register_options(spank_t sp);

}  // namespace primus::spank
