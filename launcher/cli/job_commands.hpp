// primus-launch's commands about a job that runs or ran: status, report and stop
// (docs/man/primus-launch.1). Each takes the arguments after its name and the usage text that
// --help prints, and returns the exit status.
#pragma once

#include <string>
#include <vector>

namespace primus::launch {

int status_command(const std::vector<std::string>& args, const char* usage);
int report_command(const std::vector<std::string>& args, const char* usage);
int stop_command(const std::vector<std::string>& args, const char* usage);

}  // namespace primus::launch
