// Which rank commands a rejoin's standby can become, and the line that tells it to (pure; the
// process is standby.hpp's, the Python side python/primus/_standby.py).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "primus/common/environment.hpp"

namespace primus::launch {

// The rank command's arguments after its interpreter (`SCRIPT ARGS...` or `-m MODULE ARGS...`)
// when `executable` is a Python interpreter (its file name python, python3, python3.11, ...)
// and argv[1] is a script or -m; nullopt otherwise (interpreter options, -c, another program).
std::optional<std::vector<std::string>> python_program(const std::string& executable,
                                                       const std::vector<std::string>& argv);

// The one line a standby reads: {"argv": program, "env": {NAME: value}}, newline-ended.
std::string standby_assignment(const std::vector<std::string>& program, const Environment& env);

}  // namespace primus::launch
