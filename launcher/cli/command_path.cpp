#include "cli/command_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "supervise/outcome.hpp"

namespace primus::launch {
namespace {

// 0 when `path` is a file this process may execute, else 126 or 127 with the reason.
int check(const std::string& path, std::string& reason) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    reason = std::strerror(errno);
    return kExitNotFound;
  }
  if (S_ISDIR(st.st_mode)) {
    reason = "is a directory";
    return kExitCannotRun;
  }
  if (::access(path.c_str(), X_OK) != 0) {
    reason = std::string("cannot be executed: ") + std::strerror(errno);
    return kExitCannotRun;
  }
  return 0;
}

}  // namespace

ResolvedCommand resolve_command(const std::string& command, const char* path_variable) {
  ResolvedCommand result;
  if (command.empty()) {
    result.status = kExitNotFound;
    result.reason = "the command is empty";
    return result;
  }
  if (command.find('/') != std::string::npos) {
    result.status = check(command, result.reason);
    if (result.status == 0) result.path = command;
    return result;
  }
  const std::string search =
      path_variable != nullptr && *path_variable != '\0' ? path_variable : "/usr/bin:/bin";
  std::istringstream dirs(search);
  std::string dir;
  std::string blocked;  // a match that cannot be run, as execvp reports it when nothing else is
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + command;
    std::string why;
    const int status = check(candidate, why);
    if (status == 0) {
      result.path = candidate;
      return result;
    }
    if (status == kExitCannotRun && blocked.empty()) {
      blocked = candidate;
      blocked += " ";
      blocked += why;
    }
  }
  if (!blocked.empty()) {
    result.status = kExitCannotRun;
    result.reason = blocked;
  } else {
    result.status = kExitNotFound;
    result.reason = "not found in PATH";
  }
  return result;
}

}  // namespace primus::launch
