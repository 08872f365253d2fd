// primus-task: what every task of primus-launch's srun step runs (launcher/task_wrapper.hpp).
// A program of its own, apart from primus-launch, so that each of the step's tasks loads as
// little as it can: no Boost, no HDF5, and the C++ runtime linked in (docs/architecture.md,
// "The launcher and its control channel"). Users never run it; primus-launch finds it beside
// itself or in its libexec directory.
#include <netdb.h>

#include <iostream>
#include <string>
#include <vector>

#include "control/task_wrapper.hpp"
#include "supervise/outcome.hpp"

// primus-task is linked statically (launcher/Makefile.inc), where glibc's getaddrinfo cannot be
// (it loads NSS modules at run time). The address primus-task connects to is always numeric
// (primus-launch resolves --primus-control-addr and its node's name before the step starts),
// and a numeric address never reaches a lookup: these stand in for glibc's at link time and
// find no name. Unused where primus-task is linked dynamically (the sanitizer build).
extern "C" int primus_task_getaddrinfo(const char* /*node*/, const char* /*service*/,
                                       const addrinfo* /*hints*/, addrinfo** result) {
  *result = nullptr;
  return EAI_NONAME;
}
extern "C" void primus_task_freeaddrinfo(addrinfo* /*list*/) {}

int main(int argc, char** argv) {
  std::vector<std::string> command(argv + 1, argv + argc);
  try {
    if (command.empty() || command.front() != "--") {
      std::cerr << "primus-task: expected -- COMMAND [ARGS...] (what primus-launch's srun step "
                   "runs in every task; see primus-launch(1))\n";
      return primus::launch::kExitUsage;
    }
    command.erase(command.begin());
    return primus::launch::run_task_wrapper(command);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return primus::launch::kExitUsage;
  }
}
