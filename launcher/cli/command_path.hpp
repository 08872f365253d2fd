// Finding the command primus-launch runs, before anything starts: 127 when it does not exist,
// 126 when it cannot be run, as a shell says.
#pragma once

#include <string>

namespace primus::launch {

struct ResolvedCommand {
  std::string path;    // what to execute; empty when not runnable
  int status = 0;      // 0, or 126 / 127
  std::string reason;  // why not
};

// `command` as execvp would find it: a name with a '/' as it is, else through `path_variable`
// (PATH; empty or unset: the default search path).
ResolvedCommand resolve_command(const std::string& command, const char* path_variable);

}  // namespace primus::launch
